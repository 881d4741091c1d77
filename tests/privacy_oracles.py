"""Independent oracles for the privacy tests (mpmath, 50 digits): nothing here imports certify."""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 50


def exact_delta(sigma, eps, sens=1):
    """Balle & Wang (2018) Thm 8: exact delta of N(0, sigma^2) noise for l2 sensitivity `sens`."""
    sigma, eps, sens = mp.mpf(sigma), mp.mpf(eps), mp.mpf(sens)
    phi = lambda x: mp.erfc(-x / mp.sqrt(2)) / 2  # noqa: E731
    a, b = sens / (2 * sigma), eps * sigma / sens
    return phi(a - b) - mp.e**eps * phi(-a - b)


def bisect_sigma(eps, delta, sens=1.0):
    """Smallest sigma with exact_delta <= delta, by bisection (200 halvings)."""
    lo, hi = mp.mpf("1e-6"), mp.mpf(1)
    while exact_delta(hi, eps, sens) > delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if exact_delta(mid, eps, sens) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def cks_min_log_delta(rho, eps, dps=60):
    """min over a > 1 of the CKS20 Cor. 13 bound (rho-zCDP -> (eps, delta)-DP) as log delta:
    bisection on its derivative in a at `dps` digits (raise dps when a is huge: a log(1 - 1/a)
    needs about log10(a) more digits)."""
    with mp.workdps(dps):
        rho, eps = mp.mpf(rho), mp.mpf(eps)
        slope = lambda a: (2 * a - 1) * rho - eps + mp.log(1 - 1 / a)  # noqa: E731
        lo, hi = mp.mpf(1) + mp.mpf(10) ** -40, mp.mpf(2)
        while slope(hi) < 0:
            hi *= 2
        for _ in range(int(3.4 * dps) + 100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
        a = (lo + hi) / 2
        return (a - 1) * (a * rho - eps) - mp.log(a - 1) + a * mp.log(1 - 1 / a)
