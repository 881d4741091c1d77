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
