"""The exact rational simplex (`solvers.exact_lp`) against brute-force vertex enumeration in
rationals, and the region proofs it backs (`solvers.regions`, `solvers.exact_witness`) on regions
whose depth is exactly zero or a hair above it (closed-form oracles)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from models.ir import sequential
from solvers.exact_lp import exact_max
from solvers.exact_witness import exact_region_point
from solvers.rational import solve_square
from solvers.regions import has_no_interior


def _brute_force(A, b, c):
    """max c^T v over every feasible basic solution (exact; the LPs here are bounded)."""
    best = None
    k = len(c)
    for rows in itertools.combinations(range(len(A)), k):
        v = solve_square([A[i] for i in rows], [b[i] for i in rows])
        if v is None or any(sum(a * x for a, x in zip(A[i], v)) > b[i] for i in range(len(A))):
            continue
        val = sum(a * x for a, x in zip(c, v))
        best = val if best is None else max(best, val)
    return best


def _box_rows(k):
    rows, rhs = [], []
    for j in range(k):
        for s in (1, -1):
            rows.append([Fraction(s * int(i == j)) for i in range(k)])
            rhs.append(Fraction(1))
    return rows, rhs


@pytest.mark.parametrize("seed", range(30))
def test_exact_simplex_matches_vertex_enumeration(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 4))
    A, b = _box_rows(k)
    for _ in range(int(rng.integers(2, 7))):
        # small integers: many ties and degenerate vertices (several rows through one point)
        A.append([Fraction(int(v)) for v in rng.integers(-3, 4, k)])
        b.append(Fraction(int(rng.integers(0, 3))))
    c = [Fraction(int(v)) for v in rng.integers(-2, 3, k)]
    start = [Fraction(0)] * k  # feasible: every b >= 0
    res = exact_max(A, b, c, start)
    assert res is not None
    assert res.value == _brute_force(A, b, c)
    # the certificate: y >= 0 on the active rows, A_B^T y = c, y^T b_B = value
    assert all(y >= 0 for y in res.duals)
    for j in range(k):
        assert sum(y * A[i][j] for y, i in zip(res.duals, res.basis)) == c[j]
    assert sum(y * b[i] for y, i in zip(res.duals, res.basis)) == res.value


def test_exact_simplex_refuses_an_infeasible_start():
    A, b = _box_rows(2)
    assert exact_max(A, b, [Fraction(1), Fraction(0)], [Fraction(2), Fraction(0)]) is None


def _fan_net(eps: float):
    """Three first-layer neurons z1 = x1, z2 = x2, z3 = eps - x1 - x2 (s = 1e7 scaling of the
    third row keeps the geometry): the all-active region {x1, x2 > 0, x1 + x2 < eps} is a triangle
    of depth ~eps near the origin, and for eps = 0 a single point (no interior)."""
    s = 1e7
    W1 = np.array([[1.0, 0.0], [0.0, 1.0], [-s, -s]])
    b1 = np.array([0.0, 0.0, s * eps])
    W2 = np.array([[1.0, 2.0, 3.0]])
    return sequential([(W1, b1), (W2, np.zeros(1))])


def test_a_point_region_is_proven_empty_and_a_thin_one_is_not():
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    pattern = [np.array([1.0, 1.0, 1.0])]
    # oracle (closed form): eps = 0 leaves only x = 0, where all three hyperplanes meet
    assert has_no_interior(_fan_net(0.0), pattern, lo, hi)
    eps = 2.0**-45  # a triangle with legs 2^-45: an interior, never "proven" empty
    assert not has_no_interior(_fan_net(eps), pattern, lo, hi)
    found = exact_region_point(_fan_net(eps), pattern, lo, hi)
    assert found is not None
    x, J = found
    # the Jacobian of the all-active pattern, by hand: W2 W1
    assert np.array_equal(J, np.array([[1.0 - 3e7, 2.0 - 3e7]]))
    assert exact_region_point(_fan_net(0.0), pattern, lo, hi) is None


def _fuzz_question(seed: int, index: int):
    from tests.degenerate_nets import fuzz_net
    rng = np.random.default_rng(seed)
    for _ in range(index + 1):
        w = fuzz_net(rng)
        center = rng.uniform(-1, 1, w[0][0].shape[1])
        radius = float(rng.uniform(0.05, 1.0))
    return w, center - radius, center + radius


def test_an_empty_region_the_float_lp_calls_deep_is_decided_exactly():
    """Fuzz net 109 of seed 1 (x 1e7-scaled first layer): HiGHS reports this pattern's region
    2.6e-9 deep (within its 1e-7 feasibility tolerance), but it has no interior; before the exact
    LP no certificate was tried (the float depth looked positive) and the question stayed open.
    Oracle: sympy's rational simplex on the region (`tests.degenerate_nets`)."""
    from solvers.exact_witness import decide_region
    from solvers.regions import _region_lp, _solve
    from tests.degenerate_nets import _affine_maps, _has_interior_exactly
    w, lo, hi = _fuzz_question(1, 109)
    pattern = [np.array([0, 0, 1, 1, 1.0]), np.array([1, 0, 0, 1, 0.0])]
    assert _solve(_region_lp(sequential(w), pattern, lo, hi)).x[-1] > 1e-9  # the float LP's claim
    maps = _affine_maps(w, pattern[:1])
    assert not _has_interior_exactly(maps, [[bool(v) for v in s] for s in pattern], lo, hi)
    assert decide_region(sequential(w), pattern, lo, hi) == ("empty", None)
