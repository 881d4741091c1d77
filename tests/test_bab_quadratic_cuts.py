"""Regression: the proof's tangent cuts can make a node's LP infeasible; the next cut round used to
read the missing primal point (TypeError). Found by the per-class l2 radius MIQPs, whose classes
without a flip inside the ball are exactly such nodes."""

from __future__ import annotations

import math

import scipy.sparse as sp

from solvers.bab import prove_bound
from solvers.lp import Expr, MilpBuilder


def test_cuts_that_close_a_node_prove_it_infeasible():
    # min s  s.t.  y >= 0.9, y^2 <= s <= 0.25: the LP point (0.9, 0.25) gets the cut 1.8 y - s <= 0.81,
    # after which the LP is infeasible (s >= 0.81 > 0.25)
    b = MilpBuilder()
    y, s = b.add_vars(1, -1.0, 1.0), b.add_vars(1, 0.0, 0.25)
    b.constrain(b.var_expr(y), lo=0.9)
    n = b.num_vars
    b.add_quadratic_constraint(sp.csr_matrix(([1.0], ([int(y[0])], [int(y[0])])), shape=(n, n)),
                               Expr.variables(s, n).scale(-1.0), 0.0)
    b.set_objective(b.var_expr(s), "min")
    proof = prove_bound(b.build())
    assert proof.complete and proof.bound == math.inf  # proven infeasible: no point, so +inf for a minimum
