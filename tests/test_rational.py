"""Exact elimination of the region proofs (solvers/rational.py), checked by substitution."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, strategies as st

from solvers.rational import rref, solve_square

small = st.integers(-4, 4)


@given(st.integers(1, 5).flatmap(lambda k: st.tuples(
    st.lists(st.lists(small, min_size=k, max_size=k), min_size=k, max_size=k), st.lists(small, min_size=k, max_size=k))))
def test_solve_square_solves_exactly_or_reports_singular(system):
    M, r = ([[Fraction(v) for v in row] for row in system[0]], [Fraction(v) for v in system[1]])
    v = solve_square(M, r)
    rank = np.linalg.matrix_rank(np.array(system[0], dtype=float))
    if rank < len(M):
        assert v is None
    else:
        assert v is not None and all(sum(a * x for a, x in zip(row, v)) == b for row, b in zip(M, r))


@given(st.lists(st.lists(small, min_size=4, max_size=4), min_size=1, max_size=5))
def test_rref_pivots_are_unit_columns_and_rank(rows):
    aug, pivots = rref([[Fraction(v) for v in row] for row in rows], 3)  # 3 columns, then the right side
    assert len(pivots) == np.linalg.matrix_rank(np.array(rows, dtype=float)[:, :3])
    for i, col in enumerate(pivots):
        assert [aug[j][col] for j in range(len(aug))] == [Fraction(int(j == i)) for j in range(len(aug))]
