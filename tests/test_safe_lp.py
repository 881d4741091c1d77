"""The safe-LP layer against exact rational arithmetic, and the branch-and-bound proof of MILPs."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.bab import prove_bound
from solvers.lp import MilpModel, SafeLp


def _exact_max(A, row_lo, row_hi, col_lo, col_hi, c) -> Fraction | None:
    """max c x over the polytope by vertex enumeration in exact rationals (None if infeasible)."""
    n = len(c)
    F = lambda v: Fraction(float(v))  # noqa: E731  the float data, exactly
    cons = []  # a . x <= b
    for i in range(A.shape[0]):
        a = [F(v) for v in A[i]]
        if np.isfinite(row_hi[i]):
            cons.append((a, F(row_hi[i])))
        if np.isfinite(row_lo[i]):
            cons.append(([-v for v in a], -F(row_lo[i])))
    for k in range(n):
        e = [Fraction(int(j == k)) for j in range(n)]
        cons.append((e, F(col_hi[k])))
        cons.append(([-v for v in e], -F(col_lo[k])))
    best = None
    for rows in itertools.combinations(cons, n):
        M = [list(r[0]) + [r[1]] for r in rows]
        x = _solve(M, n)
        if x is None or any(sum(a * xi for a, xi in zip(ac, x)) > b for ac, b in cons):
            continue
        val = sum(Fraction(float(ci)) * xi for ci, xi in zip(c, x))
        best = val if best is None or val > best else best
    return best


def _solve(M, n):
    """Gauss-Jordan on an n x (n+1) rational system; None when singular."""
    M = [row[:] for row in M]
    for col in range(n):
        piv = next((r for r in range(col, n) if M[r][col] != 0), None)
        if piv is None:
            return None
        M[col], M[piv] = M[piv], M[col]
        inv = 1 / M[col][col]
        M[col] = [v * inv for v in M[col]]
        for r in range(n):
            if r != col and M[r][col] != 0:
                f = M[r][col]
                M[r] = [a - f * b for a, b in zip(M[r], M[col])]
    return [M[r][n] for r in range(n)]


@st.composite
def small_lps(draw):
    n, m = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    vals = st.floats(-10, 10, allow_nan=False).map(lambda v: round(v, 3) if draw(st.booleans()) else v)
    A = np.array([[draw(vals) for _ in range(n)] for _ in range(m)])
    row_hi = np.array([draw(st.floats(-5, 20)) for _ in range(m)])
    row_lo = np.where([draw(st.booleans()) for _ in range(m)], row_hi - np.array([draw(st.floats(0, 30)) for _ in range(m)]), -np.inf)
    col_lo = np.array([draw(st.floats(-5, 0)) for _ in range(n)])
    col_hi = col_lo + np.array([draw(st.floats(0, 10)) for _ in range(n)])
    c = np.array([draw(vals) for _ in range(n)])
    return A, row_lo, row_hi, col_lo, col_hi, c


def _model(A, row_lo, row_hi, col_lo, col_hi, c, integer=None):
    n = len(c)
    return MilpModel(c, "max", sp.csr_matrix(A), row_lo, row_hi, col_lo, col_hi,
                     np.zeros(n, bool) if integer is None else integer)


@settings(max_examples=150, deadline=None)
@given(small_lps())
def test_safe_bound_is_never_below_the_exact_rational_optimum(lp):
    A, row_lo, row_hi, col_lo, col_hi, c = lp
    exact = _exact_max(A, row_lo, row_hi, col_lo, col_hi, c)
    safe = SafeLp(_model(*lp)).maximize(c)
    if exact is None:  # infeasible: "infeasible" needs a Farkas proof; any finite bound is also sound
        assert safe.infeasible or safe.bound >= -np.inf
        return
    assert not safe.infeasible
    assert Fraction(safe.bound) >= exact
    tiny = np.any((A != 0) & (np.abs(A) < 1e-6))  # HiGHS drops such coefficients: sound but loose
    if safe.status == "optimal" and not tiny:  # and tight: within rounding of the optimum
        assert safe.bound - float(exact) <= 1e-9 * (1 + abs(float(exact))) + 1e-9 * float(np.abs(A).sum() + 1)


@settings(max_examples=60, deadline=None)
@given(small_lps(), st.data())
def test_milp_proof_bounds_the_exact_integer_optimum(lp, data):
    """prove_bound on a MILP over {0,1} binaries: >= the exact optimum (enumerating the binaries,
    each an exact rational LP), whatever target it is given (a wrong one included)."""
    A, row_lo, row_hi, col_lo, col_hi, c = lp
    n = len(c)
    integer = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    col_lo, col_hi = col_lo.copy(), col_hi.copy()
    col_lo[integer], col_hi[integer] = 0.0, 1.0
    best = None
    for bits in itertools.product((0.0, 1.0), repeat=int(integer.sum())):
        lo, hi = col_lo.copy(), col_hi.copy()
        lo[integer] = hi[integer] = bits
        v = _exact_max(A, row_lo, row_hi, lo, hi, c)
        if v is not None and (best is None or v > best):
            best = v
    target = data.draw(st.sampled_from([None, -1e3, 0.0, 5.0]))
    res = prove_bound(_model(A, row_lo, row_hi, col_lo, col_hi, c, integer), target)
    assert res.complete
    if best is None:
        return
    assert Fraction(res.bound) >= best
    tiny = np.any((A != 0) & (np.abs(A) < 1e-6))
    if (target is None or target < float(best)) and not tiny:
        assert res.bound <= float(best) + 1e-7 * (1 + abs(float(best)) + float(np.abs(A).sum()))


def test_incremental_changes_keep_bounds_sound():
    """Column bounds and rows changed between warm re-solves: each answer matches the exact optimum."""
    A = np.array([[1.0, 2.0], [3.0, -1.0]])
    lp = SafeLp(_model(A, np.array([-np.inf, -np.inf]), np.array([4.0, 3.0]), np.zeros(2), np.full(2, 5.0), np.ones(2)))
    c = np.ones(2)
    exact = lambda A_, hi_, clo, chi: _exact_max(A_, np.full(len(hi_), -np.inf), hi_, clo, chi, c)  # noqa: E731
    assert Fraction(lp.upper(c)) >= exact(A, np.array([4.0, 3.0]), np.zeros(2), np.full(2, 5.0))
    lp.set_col_bounds(np.array([0]), np.array([1.0]), np.array([1.0]))
    assert Fraction(lp.upper(c)) >= exact(A, np.array([4.0, 3.0]), np.array([1.0, 0.0]), np.array([1.0, 5.0]))
    rows = lp.add_rows(sp.csr_matrix([[0.0, 1.0]]), np.array([-np.inf]), np.array([0.7]))
    A2 = np.vstack([A, [[0.0, 1.0]]])
    v = lp.upper(c)
    assert Fraction(v) >= exact(A2, np.array([4.0, 3.0, 0.7]), np.array([1.0, 0.0]), np.array([1.0, 5.0]))
    assert v <= 1.7 + 1e-9
    lp.delete_rows(rows)
    assert lp.upper(c) >= 2.5 - 1e-12
    # an infeasible restriction is proven infeasible by a Farkas ray
    lp.set_col_bounds(np.array([1]), np.array([4.5]), np.array([5.0]))
    assert lp.maximize(c).infeasible
