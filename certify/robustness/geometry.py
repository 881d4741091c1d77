"""Norm-ball geometry with directed rounding: distances of counterexamples (rounded up) and boxes
proven to lie strictly inside a certified ball (checked in exact arithmetic); and the closest
point of a polyhedron to x0 in a norm (`closest_point`, float64 LP / least-distance QP), which the
boundary push (`replay.FlipReplay.push`) uses as a *guide* only: its points are replayed before
they count."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from models.box import Box
from solvers.norms import vector_norm
from solvers.rounding import round_up



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


def closest_point(G: np.ndarray, h: np.ndarray, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  norm: str) -> np.ndarray | None:
    """argmin ||x - x0|| over {G x <= h, lo <= x <= hi} (inputs with lo == hi are fixed there), or
    None when the solver finds none. linf and l1: one LP (HiGHS, tight tolerances); l2: least
    distance programming by non-negative least squares (Lawson & Hanson, ch. 23). A float64
    solution, accurate to the solvers' tolerances, never a proof."""
    from scipy.optimize import linprog, nnls

    x0 = np.asarray(x0, dtype=np.float64).reshape(-1)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if np.any(lo > hi):
        return None
    free = lo < hi
    out = np.where(free, x0, lo)
    G = np.asarray(G, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64) - G[:, ~free] @ lo[~free]
    G = G[:, free]
    scale = np.max(np.abs(G), axis=1) if G.shape[1] else np.zeros(len(h))
    if np.any((scale == 0) & (h < 0)) or not np.all(np.isfinite(h)):
        return None  # a constant row violated: empty
    keep = scale > 0
    G, h = G[keep] / scale[keep, None], h[keep] / scale[keep]  # unit rows (the solvers' tolerances are absolute)
    c, a, b = x0[free], lo[free], hi[free]
    k = int(free.sum())
    if k == 0:
        return out if np.all(h >= 0) else None
    if norm in ("linf", "l1"):
        extra = 1 if norm == "linf" else k  # t, or s_i >= |x_i - x0_i|
        spread = np.ones((k, 1)) if norm == "linf" else np.eye(k)
        A = np.vstack([np.hstack([G, np.zeros((len(h), extra))]), np.hstack([np.eye(k), -spread]),
                       np.hstack([-np.eye(k), -spread])])
        rhs = np.concatenate([h, c, -c])
        cost = np.r_[np.zeros(k), np.ones(extra)]
        bounds = [(float(u) if np.isfinite(u) else None, float(v) if np.isfinite(v) else None) for u, v in zip(a, b)]
        res = linprog(cost, A_ub=A, b_ub=rhs, bounds=bounds + [(0.0, None)] * extra, method="highs",
                      options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
        if res.status != 0 or res.x is None:
            return None
        out[free] = np.clip(res.x[:k], a, b)
        return out
    # l2: min ||u|| s.t. A u >= r with u = x - x0 (region rows and the finite bounds as rows); the
    # NNLS of E = [A^T; r^T], f = e_{k+1} gives u = -res[:k] / res[k] (res = E w - f), and a zero
    # residual means the set is empty
    rows, rhs = [-G], [-(h - G @ c)]
    for sign, bound in ((1.0, a), (-1.0, b)):
        fin = np.isfinite(bound)
        rows.append(sign * np.eye(k)[fin])
        rhs.append(sign * (bound - c)[fin])
    A, r = np.vstack(rows), np.concatenate(rhs)
    E = np.vstack([A.T, r[None, :]])
    f = np.zeros(k + 1)
    f[-1] = 1.0
    try:
        w, _ = nnls(E, f, maxiter=50 * (k + 1 + len(r)))
    except RuntimeError:  # (no convergence)
        return None
    res = E @ w - f
    if not abs(res[-1]) > 1e-12:
        return None
    out[free] = np.clip(c - res[:k] / res[-1], a, b)
    return out


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


__all__ = ["closest_point", "cover_radius", "distance_up", "inner_box"]
