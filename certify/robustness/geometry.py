"""Norm-ball geometry with directed rounding: distances of counterexamples (rounded up) and boxes
proven to lie strictly inside a certified ball (checked in exact arithmetic)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from models.box import Box
from solvers.norms import vector_norm
from solvers.rounding import round_up

RADIUS_NORMS = ("linf", "l1", "l2")


def distance_up(x: np.ndarray, x0: np.ndarray, norm: str) -> float:
    """An upper bound of ||x - x0|| (float64 differences and sums, widened for their rounding)."""
    d = np.abs(np.asarray(x, dtype=np.float64) - np.asarray(x0, dtype=np.float64))
    v = vector_norm(d, norm)
    return round_up(v, v, d.size + 4) if v > 0 else 0.0


def cover_radius(x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, norm: str) -> float:
    """The distance from x0 to the farthest point of the box [lo, hi] (inf when unbounded)."""
    reach = np.maximum(x0 - lo, hi - x0)
    if not np.all(np.isfinite(reach)):
        return math.inf
    v = vector_norm(reach, norm)
    return round_up(v, v, reach.size + 4)


def inner_box(x0: np.ndarray, radius: float, norm: str, movable: np.ndarray, lo: np.ndarray,
              hi: np.ndarray) -> Box:
    """A box around x0 inside the open ball ||x - x0|| < radius (within [lo, hi], fixed inputs at
    x0): the largest l_inf box of the ball (half-width r, r/n or r/sqrt(n) over the n movable
    inputs), each side moved toward x0 until it is strictly inside, checked with fractions."""
    n = max(int(np.sum(movable)), 1)
    r = float(radius)
    side = {"linf": r, "l1": r / n, "l2": r / math.sqrt(n)}[norm] if r > 0 else 0.0
    side = float(np.nextafter(side, 0.0)) if side > 0 else 0.0
    bound = Fraction(r)
    while side > 0 and not _corner_inside(Fraction(side), n, norm, bound):
        side = float(np.nextafter(side, 0.0))
    out_lo, out_hi = x0.copy(), x0.copy()
    for i in np.flatnonzero(movable):
        out_lo[i] = max(_toward(x0[i] - side, x0[i], side), lo[i])
        out_hi[i] = min(_toward(x0[i] + side, x0[i], side), hi[i])
    return Box.from_bounds(out_lo, out_hi)


def _corner_inside(side: Fraction, n: int, norm: str, radius: Fraction) -> bool:
    if norm == "linf":
        return side < radius
    if norm == "l1":
        return n * side < radius
    return n * side * side < radius * radius


def _toward(v: float, x0: float, side: float) -> float:
    """v moved toward x0 until |v - x0| <= side exactly."""
    while abs(Fraction(v) - Fraction(x0)) > Fraction(side):
        v = float(np.nextafter(v, x0))
    return v


__all__ = ["RADIUS_NORMS", "cover_radius", "distance_up", "inner_box"]
