"""An exact (rational) simplex for the small region LPs that floating point cannot decide.

A region LP asks max t s.t. A [xi; t] <= b (`solvers.regions`). When its float optimum is within
the solver's tolerance of 0 (a depth of -4e-13, say), neither a float Farkas check nor exact
multipliers on the float support may prove the region empty, and no float point may replay inside
it. This module solves the LP itself in `fractions.Fraction`, warm-started from the float optimum:

1. a feasible point: the float xi with t lowered to the smallest exact slack (every row of a region
   LP has a positive t coefficient, so that is feasible);
2. purification to a vertex: move along the null space of the tight rows (never decreasing the
   objective) until n + 1 independent rows are tight;
3. the primal simplex over vertices (an active set of n + 1 rows), Bland's rule (no cycling):
   leave a row whose multiplier is negative, enter the first blocking row.

It ends with an exact optimal vertex v and multipliers y >= 0 of its active rows with
A_B^T y = c, so y^T b = c^T v is an exact certificate of the optimum (weak duality: every feasible
point has c^T x = y^T A_B x <= y^T b_B). Work grows with rows x columns^2 per pivot; the callers
use it on tiny nets only, with a pivot budget and a deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from .rational import rref

Vec = list[Fraction]


@dataclass
class ExactLp:
    """The exact optimum of max c^T v s.t. A v <= b: value, vertex and dual certificate."""

    value: Fraction
    point: Vec
    basis: list[int]   # the active rows of the vertex
    duals: Vec         # y >= 0 on `basis`, A_B^T y = c exactly


def _dot(a, v) -> Fraction:
    return sum((x * y for x, y in zip(a, v) if x and y), Fraction(0))


def _solve(M: list[Vec], rhs: Vec) -> Vec | None:
    k = len(M)
    aug, piv = rref([list(r) + [v] for r, v in zip(M, rhs)], k)
    if len(piv) < k:
        return None
    return [aug[i][k] for i in range(k)]


def _null_direction(rows: list[Vec], k: int) -> Vec | None:
    """A nonzero d with r^T d = 0 for every row given (None when they span the space)."""
    if not rows:
        return [Fraction(int(j == k - 1)) for j in range(k)]
    aug, piv = rref([list(r) + [Fraction(0)] for r in rows], k)
    free = next((j for j in range(k) if j not in piv), None)
    if free is None:
        return None
    d = [Fraction(0)] * k
    d[free] = Fraction(1)
    for i, col in enumerate(piv):
        d[col] = -aug[i][free]
    return d


def _independent(rows: list[Vec], new: Vec, k: int) -> bool:
    return len(rref([list(r) for r in rows + [new]], k)[1]) == len(rows) + 1


def exact_max(A: list[Vec], b: Vec, c: Vec, start: Vec | Callable[[], Vec], deadline: float | None = None,
              max_pivots: int = 200, hint: list[int] | None = None) -> ExactLp | None:
    """Exact max c^T v over {A v <= b} from a feasible `start`, or None (unbounded, degenerate
    trouble, or out of budget). The LP must have a vertex (A of full column rank). `hint`: rows
    of a likely optimal basis (a float LP's): when they give a feasible vertex the simplex
    starts there (usually optimal already: one exact solve for the multipliers); `start` may then
    be a function, called only when the hint fails."""
    m, k = len(A), len(c)
    if hint is not None and len(hint) == k:
        v = _solve([A[i] for i in hint], [b[i] for i in hint])
        if v is not None:
            slack = [b[i] - _dot(A[i], v) for i in range(m)]
            if all(s >= 0 for s in slack):
                return _simplex(A, b, c, v, slack, list(hint), deadline, max_pivots)
    v = list(start() if callable(start) else start)
    slack = [b[i] - _dot(A[i], v) for i in range(m)]
    if any(s < 0 for s in slack):
        return None
    # purification: a vertex no worse than `start`
    active: list[int] = []
    for i in range(m):
        if slack[i] == 0 and _independent([A[j] for j in active], A[i], k):
            active.append(i)
    while len(active) < k:
        if deadline is not None and time.perf_counter() > deadline:
            return None
        d = _null_direction([A[j] for j in active], k)
        if d is None:
            return None
        if _dot(c, d) < 0:
            d = [-x for x in d]
        step, enter = _ratio(A, slack, d, active)
        if enter is None:
            if _dot(c, d) != 0:
                return None  # unbounded
            d = [-x for x in d]
            step, enter = _ratio(A, slack, d, active)
            if enter is None:
                return None  # a line in the feasible set: no vertex
        v = [x + step * y for x, y in zip(v, d)]
        slack = [b[i] - _dot(A[i], v) for i in range(m)]
        active.append(enter)
    return _simplex(A, b, c, v, slack, active, deadline, max_pivots)


def _simplex(A: list[Vec], b: Vec, c: Vec, v: Vec, slack: Vec, active: list[int], deadline: float | None,
             max_pivots: int) -> ExactLp | None:
    """The primal simplex over vertices from the feasible vertex v with active rows `active`."""
    m, k = len(A), len(c)
    for _ in range(max_pivots):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        AB = [A[i] for i in active]
        # multipliers: A_B^T y = c
        y = _solve([[AB[r][j] for r in range(k)] for j in range(k)], list(c))
        if y is None:
            return None
        leave = min((active[r], r) for r in range(k) if y[r] < 0) if any(x < 0 for x in y) else None
        if leave is None:
            return ExactLp(_dot(c, v), v, list(active), y)
        r = leave[1]
        # move off row `r`, keeping the other active rows tight: A_B d = -e_r
        d = _solve(AB, [Fraction(-int(i == r)) for i in range(k)])
        if d is None:
            return None
        rest = [i for i in active if i != active[r]]
        step, enter = _ratio(A, slack, d, rest + [active[r]])
        if enter is None:
            return None  # unbounded
        v = [x + step * y_ for x, y_ in zip(v, d)]
        slack = [b[i] - _dot(A[i], v) for i in range(m)]
        active[r] = enter
    return None


def _ratio(A: list[Vec], slack: Vec, d: Vec, skip: list[int]) -> tuple[Fraction, int | None]:
    """The longest step along d keeping A v <= b, and the first row (smallest index: Bland) to block."""
    best, enter = None, None
    skip_set = set(skip)
    for i, row in enumerate(A):
        if i in skip_set:
            continue
        rate = _dot(row, d)
        if rate > 0:
            s = slack[i] / rate
            if best is None or s < best:
                best, enter = s, i
    return (best if best is not None else Fraction(0)), enter


__all__ = ["ExactLp", "exact_max"]
