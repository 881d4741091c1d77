"""Directed rounding in float64: the one module every sound computation rounds with.

Two kinds of helpers, both standard error analysis (Higham, *Accuracy and Stability of Numerical
Algorithms*, ch. 3; no underflow assumed beyond the tiny absolute terms added):

- single correctly rounded operations moved one step outward: `up`, `down`, `mul_up`, `add_up`,
  `sqrt_up`, `ldexp_up`, `frobenius_up`;
- results of longer float64 computations widened by a bound on their error: a dot product of
  length n differs from the exact value by at most gamma(n) times the same sum over absolute
  values (any summation order, with or without FMA). Callers pass that absolute-value sum (`mag`)
  and the length of the longest chain of roundings (`n`): `widen`, `round_up`, `round_down`
  widen by twice gamma(n + 2) * mag plus a tiny absolute term for underflow.
"""

from __future__ import annotations

import math

import numpy as np

U = 2.0**-53  # unit roundoff of float64 (round to nearest)
UNIT_ROUNDOFF = U
_TINY = 1e-300


def gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u), the classical bound for n accumulated roundings (Higham 3.4)."""
    nu = n * U
    if nu >= 0.5:
        raise ValueError("rounding-error bound requested for too many operations")
    return nu / (1.0 - nu)


def up(x: float) -> float:
    """The next float above x: an upper bound of the exact value of one correctly rounded operation."""
    return float(np.nextafter(x, np.inf))


def ldexp_up(x: float, e: int) -> float:
    """Upper bound of x * 2^e for x >= 0 (exact unless the result is subnormal or overflows,
    where ldexp rounds to nearest: then one step up)."""
    y = float(np.ldexp(x, e))
    return y if float(np.ldexp(y, -e)) >= x else up(y)


def mul_up(*factors: float) -> float:
    """Upper bound of the exact product of non-negative numbers."""
    out = 1.0
    for f in factors:
        f = float(f)
        if f < 0:
            raise ValueError("mul_up takes non-negative factors")
        if f == 0.0:
            return 0.0
        if f != 1.0:  # multiplying by one is exact
            out = up(out * f)
    return out


def add_up(*terms: float) -> float:
    """Upper bound of the exact sum (any signs)."""
    out = 0.0
    for t in terms:
        out = up(out + float(t))
    return out


def sqrt_up(x: float) -> float:
    """Upper bound of sqrt(x) for x >= 0 (sqrt is correctly rounded, so one step up suffices)."""
    return up(math.sqrt(max(float(x), 0.0)))


def frobenius_up(M: np.ndarray) -> float:
    """Upper bound of ||M||_F for a real or complex array (any shape)."""
    a = np.abs(np.asarray(M)).reshape(-1)
    if a.size == 0:
        return 0.0
    # scale by a power of two (exact) to avoid overflow / underflow in the squares
    amax = float(a.max())
    if amax == 0.0:
        return 0.0
    e = math.frexp(amax)[1]
    s = np.ldexp(a, -e)
    sq = float(np.dot(s, s))  # sum of n non-negative products: relative error <= gamma_n
    bound = sq * (1.0 + 2.0 * gamma(s.size + 2))
    return ldexp_up(up(sqrt_up(bound) * (1.0 + 4.0 * U)), e)


def down(x: float) -> float:
    """The next float below x."""
    return float(np.nextafter(x, -np.inf))


def widen(lo: np.ndarray, hi: np.ndarray, mag: np.ndarray, n: int, factor: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] widened by factor * gamma(n + 2) * mag (+ a tiny absolute term)."""
    err = factor * gamma(n + 2) * np.asarray(mag, dtype=np.float64) + _TINY
    return np.asarray(lo) - err, np.asarray(hi) + err


def round_down(value: float, mag: float, n: int) -> float:
    """A float64 value computed with n roundings, moved down so that it is <= the exact value."""
    return float(value - 2.0 * gamma(n + 2) * abs(mag) - _TINY)


def round_up(value: float, mag: float, n: int) -> float:
    """A float64 value computed with n roundings, moved up so that it is >= the exact value."""
    return float(value + 2.0 * gamma(n + 2) * abs(mag) + _TINY)
