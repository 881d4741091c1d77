"""Outward widening of float64 results so that bounds stay sound despite rounding.

A dot product of length n computed in float64 (any summation order, with or without FMA) differs
from the exact value by at most gamma(n) * (the same sum over absolute values), with
gamma(n) = n u / (1 - n u) and u = 2^-53 (Higham, Accuracy and Stability, sec. 3.1). Callers
pass that absolute-value sum (`mag`) and the longest chain of roundings (`n`); we widen by twice
the bound plus a tiny absolute term for underflow.
"""

from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = 2.0**-53
_TINY = 1e-300


def gamma(n: int) -> float:
    """Higham's gamma_n for n roundings in float64."""
    nu = (n + 2) * UNIT_ROUNDOFF
    if nu >= 0.5:
        raise ValueError(f"rounding chain of length {n} is too long for a meaningful error bound")
    return nu / (1.0 - nu)


def widen(lo: np.ndarray, hi: np.ndarray, mag: np.ndarray, n: int, factor: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] widened by factor * gamma(n) * mag (+ a tiny absolute term)."""
    err = factor * gamma(n) * np.asarray(mag, dtype=np.float64) + _TINY
    return np.asarray(lo) - err, np.asarray(hi) + err


def round_down(value: float, mag: float, n: int) -> float:
    """A float64 value computed with n roundings, moved down so that it is <= the exact value."""
    return float(value - 2.0 * gamma(n) * abs(mag) - _TINY)


def round_up(value: float, mag: float, n: int) -> float:
    return float(value + 2.0 * gamma(n) * abs(mag) + _TINY)
