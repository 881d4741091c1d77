"""Witnesses inside activation regions thinner than float64 can resolve, in exact arithmetic.

Two neurons whose weight rows are proportional up to float rounding (a duplicate scaled by a
non-power of two) bound a genuine sliver region: the network's weights, read as the rationals they
are, put a region of relative width ~1e-16 between the two hyperplanes, and its Jacobian counts in
the local Lipschitz constant (a sound upper bound must include it). No float64 point can be
certified inside it, so the witness is found and replayed in rationals instead:

1. the float region LP (max depth t, `solvers.regions`) suggests a basis: the n + 1 tightest
   linearly independent rows at its optimum;
2. that square system is solved exactly (`fractions.Fraction`), giving a rational point and its
   exact depth t*; every row is then checked exactly: with t* > 0 the point lies strictly inside
   the pattern's region, so every non-flat neuron has the pattern's sign there (flat neurons, zero
   rows under the pattern, have a zero gradient: their slope does not change the Jacobian); when
   the float basis is wrong, the region LP is solved exactly instead (`solvers.exact_lp`);
3. the Jacobian of the pattern is multiplied out in rationals and rounded to float64 entrywise
   (relative error <= 2^-53 per entry, covered by the replay's rounding allowance).

Small nets only (the rational work grows with width x depth x inputs); any doubt returns None.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from models.ir import Network

from .bounds.types import relu_blocks
from .rational import solve_square
from .regions import _exact_region_rows, _region_lp, _solve, exact_depth

MAX_EXACT_WORK = 200_000  # rational multiply-adds (the Jacobian and the rows)


def exact_region_point(net: Network, pattern: list[np.ndarray], lo: np.ndarray,
                       hi: np.ndarray, deadline: float | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(x rounded to float64, the pattern's Jacobian rounded to float64 entrywise) for a rational
    point x strictly inside the pattern's region in [lo, hi], or None."""
    kind, found = decide_region(net, pattern, lo, hi, deadline)
    return found if kind == "interior" else None


def decide_region(net: Network, pattern: list[np.ndarray], lo: np.ndarray, hi: np.ndarray,
                  deadline: float | None = None) -> tuple[str, tuple[np.ndarray, np.ndarray] | None]:
    """Whether the pattern's region has an interior, decided in exact arithmetic:
    ("interior", (x, J)) as `exact_region_point`; ("empty", None) with the exact LP's dual
    certificate of max depth <= 0 (a proof: every feasible point's depth is at most y^T b <= 0);
    ("unknown", None) when the work or the deadline does not allow it (or the float LP fails)."""
    blocks = relu_blocks(net)
    n = lo.size
    if sum(b.weight.size for b in blocks) * (n + 1) > MAX_EXACT_WORK:
        return "unknown", None
    lp = _region_lp(net, pattern, lo, hi)
    if lp.empty:
        return "unknown", None  # (a constant neuron of the wrong sign: `has_no_interior` proves it)
    res = _solve(lp)
    if res.status != 0 or not np.all(np.isfinite(res.x)):
        return "unknown", None
    data = _exact_region_rows(net, pattern, lo, hi)
    if data is None or data[0].shape[0] != lp.A_ub.shape[0]:
        return "unknown", None
    A, b = data
    sol = _vertex(lp.A_ub, lp.b_ub, res.x, A, b)
    if sol is None or not _strictly_inside(A, b, sol):
        # the float LP's active set was wrong (HiGHS's optimum may violate rows by its 1e-7
        # feasibility tolerance: depths of 1e-9 that are not there): solve the LP exactly
        opt = exact_depth(A, b, res.x, deadline)
        if opt is None:
            return "unknown", None
        if opt.value <= 0:
            return "empty", None
        sol = opt.point
    xi = sol[:n]
    x = [Fraction(float(lo[k])) + (Fraction(float(hi[k])) - Fraction(float(lo[k]))) * xi[k] for k in range(n)]
    x_float = np.clip(np.array([float(v) for v in x]), lo, hi)
    return "interior", (x_float, _exact_jacobian(blocks, pattern))


def _strictly_inside(A: np.ndarray, b: np.ndarray, sol: list[Fraction]) -> bool:
    """The exact point [xi; t] has t > 0 and satisfies every row exactly."""
    return sol[-1] > 0 and all(sum((r * v for r, v in zip(row, sol)), Fraction(0)) <= rhs for row, rhs in zip(A, b))


def _vertex(A_f: np.ndarray, b_f: np.ndarray, z: np.ndarray, A: np.ndarray, b: np.ndarray) -> list[Fraction] | None:
    """The exact solution of the n + 1 tightest independent rows at the float optimum z."""
    k = A_f.shape[1]
    slack = b_f - A_f @ z
    chosen: list[int] = []
    for i in np.argsort(slack):
        trial = A_f[chosen + [int(i)]]
        if np.linalg.matrix_rank(trial, tol=1e-10 * max(1.0, float(np.abs(trial).max()))) == len(chosen) + 1:
            chosen.append(int(i))
            if len(chosen) == k:
                break
    if len(chosen) < k:
        return None
    return solve_square([list(A[i]) for i in chosen], [b[i] for i in chosen])


def _exact_jacobian(blocks, pattern) -> np.ndarray:
    """W_L D_{L-1} ... D_0 W_0 in rationals, rounded to float64 entrywise."""
    F = np.vectorize(Fraction, otypes=[object])
    J = F(blocks[0].weight)
    for blk, s in zip(blocks[1:], pattern):
        keep = np.array([Fraction(int(v > 0.5)) for v in s], dtype=object)
        J = F(blk.weight).dot(keep[:, None] * J)
    return np.vectorize(float, otypes=[np.float64])(J)


__all__ = ["decide_region", "exact_region_point"]
