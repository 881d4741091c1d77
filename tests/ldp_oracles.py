"""Independent oracles for the LDP tests (mpmath, 40 digits), written from the paper's definitions.

Nothing here imports certify. Densities on [0, 1] (Zheng & Hu Defs. 4, 11-14, Thm 4).
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 40


def pm_density(t, x, eps):
    """Normalised PM (Def. 11): e^{eps/2} on [l, l + 2C], e^{-eps/2} elsewhere on [0, 1]."""
    t, x, eps = mp.mpf(t), mp.mpf(x), mp.mpf(eps)
    if t < 0 or t > 1:
        return mp.mpf(0)
    c = (mp.exp(eps / 2) - 1) / (2 * mp.exp(eps) - 2)
    if x < c:
        l, r = mp.mpf(0), 2 * c
    elif x <= 1 - c:
        l, r = x - c, x + c
    else:
        l, r = 1 - 2 * c, mp.mpf(1)
    p = mp.exp(eps / 2)
    return p if l <= t <= r else p / mp.exp(eps)


def pm_breaks(x, eps):
    x, eps = mp.mpf(x), mp.mpf(eps)
    c = (mp.exp(eps / 2) - 1) / (2 * mp.exp(eps) - 2)
    l = min(max(x - c, 0), 1 - 2 * c)
    return [l, l + 2 * c]


def sw_density(t, x, eps):
    """Normalised SW (Def. 12): p = (e^eps - 1)/eps on [(1-2C)x, (1-2C)x + 2C], p/e^eps elsewhere."""
    t, x, eps = mp.mpf(t), mp.mpf(x), mp.mpf(eps)
    if t < 0 or t > 1:
        return mp.mpf(0)
    c = (mp.exp(eps) * (eps - 1) + 1) / (2 * (mp.exp(eps) - 1) ** 2)
    l = (1 - 2 * c) * x
    p = (mp.exp(eps) - 1) / eps
    return p if l <= t <= l + 2 * c else p / mp.exp(eps)


def sw_breaks(x, eps):
    x, eps = mp.mpf(x), mp.mpf(eps)
    c = (mp.exp(eps) * (eps - 1) + 1) / (2 * (mp.exp(eps) - 1) ** 2)
    l = (1 - 2 * c) * x
    return [l, l + 2 * c]


def interval_mass(density, breaks, a, b, x, eps):
    """Quadrature of a piecewise-constant density over [a, b] (split at its breakpoints)."""
    a, b = max(mp.mpf(a), 0), min(mp.mpf(b), 1)
    if a >= b:
        return mp.mpf(0)
    pts = sorted({a, b, *[p for p in breaks(x, eps) if a < p < b]})
    return mp.quad(lambda t: density(t, x, eps), pts)


def laplace_cdf(z, scale):
    z, s = mp.mpf(z), mp.mpf(scale)
    return mp.exp(z / s) / 2 if z < 0 else 1 - mp.exp(-z / s) / 2


def gaussian_cdf(z, sigma):
    return mp.ncdf(mp.mpf(z) / mp.mpf(sigma))


def exponential_pmf(x, eps, k):
    """Def. 13 with score -|x - y| (sensitivity 1) on the grid j/(k-1): weights exp(-eps |x - y| / 2)."""
    x, eps = mp.mpf(x), mp.mpf(eps)
    w = [mp.exp(-eps * abs(x - mp.mpf(j) / (k - 1)) / 2) for j in range(k)]
    z = mp.fsum(w)
    return [v / z for v in w]


def krr_pmf(i, eps, k):
    """Def. 14: e^eps/(k - 1 + e^eps) at the input index i, 1/(k - 1 + e^eps) elsewhere."""
    e = mp.exp(mp.mpf(eps))
    return [(e if j == i else 1) / (k - 1 + e) for j in range(k)]


def pac_sigma_formula(eps, delta):
    """Thm 4 as stated: sqrt(2)/2 (sqrt(ln(2/delta)) + sqrt(ln(2/delta) + eps)) / eps."""
    eps, delta = mp.mpf(eps), mp.mpf(delta)
    ln = mp.log(2 / delta)
    return mp.sqrt(2) / 2 * (mp.sqrt(ln) + mp.sqrt(ln + eps)) / eps


def laplace_density(z, scale):
    """Density of Lap(scale) at z (Def. 4): exp(-|z| / scale) / (2 scale)."""
    z, s = mp.mpf(z), mp.mpf(scale)
    return mp.exp(-abs(z) / s) / (2 * s)


def gaussian_density(z, sigma):
    """Density of N(0, sigma^2) at z."""
    z, s = mp.mpf(z), mp.mpf(sigma)
    return mp.exp(-(z / s) ** 2 / 2) / (s * mp.sqrt(2 * mp.pi))


def kept_probability_1d(density, breaks, bad, a, b, x, eps):
    """P(a <= M(x) <= b and M(x) not in the union of intervals `bad`) for a piecewise-constant density on [0, 1]."""
    total = interval_mass(density, breaks, a, b, x, eps)
    for lo, hi in bad:
        total -= interval_mass(density, breaks, max(lo, a), min(hi, b), x, eps)
    return total
