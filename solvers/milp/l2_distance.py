"""Sound node bounds for the l2 radius MIQP (min s subject to ||y||^2 <= s over a MILP polytope).

The proof of the sound-solve policy (`solvers.bab.prove_bound`) relaxes the quadratic constraint
by tangent cuts, which approach a ball only slowly; it accepts a `node_bound(col_lo, col_hi)` for
such models. At a node, min ||y||^2 over the node's LP polytope P is a convex QP; for any point
y* the tangent inequality ||y||^2 >= 2 y*.y - ||y*||^2 (i.e. ||y - y*||^2 >= 0) gives

    min_P ||y||^2  >=  min_P (2 y*.y) - ||y*||^2,

an LP bounded soundly by safe weak duality (`solvers.lp.SafeLp`), exact when y* is the QP's
optimum. y* is only a hint: it comes from Gurobi's QP solve of the node (simplex, tight
tolerances), refined by a few exact line searches toward the tangent LP's minimiser (Frank-Wolfe
steps), and every bound is recomputed from it with directed rounding.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from ..lp import MilpModel, SafeLp
from ..rounding import round_down

FW_STEPS = 3


class L2NodeBound:
    """`node_bound` for a model whose objective variable `s` satisfies ||y||^2 <= s (y: `y_idx`)."""

    def __init__(self, model: MilpModel, y_idx: np.ndarray, s_idx: int) -> None:
        n = model.num_vars
        self.y, self.s, self.n = np.asarray(y_idx, dtype=np.int64), int(s_idx), n
        self.relaxed = replace(model, integer=np.zeros(n, dtype=bool), q_constraints=(), q_obj=None,
                               obj=np.zeros(n), obj_offset=0.0, sense="min")
        self.lp = SafeLp(self.relaxed)
        self.columns = np.arange(n)
        self.calls = 0

    def __call__(self, col_lo: np.ndarray, col_hi: np.ndarray) -> float:
        """A sound lower bound of s over the node's solutions (+inf: the node holds none)."""
        self.calls += 1
        s_lo, s_hi = float(col_lo[self.s]), float(col_hi[self.s])
        hint = self._qp_hint(col_lo, col_hi)
        if hint is None:
            return s_lo
        self.lp.set_col_bounds(self.columns, col_lo, col_hi)
        best, y_star = -math.inf, hint
        for _ in range(FW_STEPS):
            bound, y_lp = self._tangent(y_star)
            if bound == math.inf:
                return math.inf
            best = max(best, bound)
            if y_lp is None:
                break
            d = y_lp - y_star  # exact line search of ||y* + g d||^2 over g in [0, 1]
            dd = float(d @ d)
            if dd == 0.0:
                break
            y_star = y_star + min(max(-float(y_star @ d) / dd, 0.0), 1.0) * d
        return math.inf if best > s_hi else max(s_lo, best)

    def _tangent(self, y_star: np.ndarray) -> tuple[float, np.ndarray | None]:
        c = np.zeros(self.n)
        c[self.y] = -2.0 * y_star
        out = self.lp.maximize(c)
        if out.infeasible:
            return math.inf, None
        yy = float(y_star @ y_star)
        value = round_down(-out.bound - yy, abs(out.bound) + yy, y_star.size + 4)
        return value, None if out.x is None else out.x[self.y]

    def _qp_hint(self, col_lo: np.ndarray, col_hi: np.ndarray) -> np.ndarray | None:
        """min ||y||^2 over the node's LP polytope by Gurobi (None when it gives no point)."""
        import gurobipy as gp
        from gurobipy import GRB

        from .gurobi import _env

        m = gp.Model(env=_env())
        m.Params.OutputFlag = 0
        m.Params.Threads = 1
        m.Params.Method = 1  # dual simplex: a vertex-accurate optimum of the QP
        m.Params.FeasibilityTol = 1e-9
        m.Params.OptimalityTol = 1e-9
        model = self.relaxed
        v = m.addMVar(self.n, lb=np.where(np.isfinite(col_lo), col_lo, -GRB.INFINITY),
                      ub=np.where(np.isfinite(col_hi), col_hi, GRB.INFINITY))
        for mask, sense, rhs in ((np.isfinite(model.row_hi), "<", model.row_hi), (np.isfinite(model.row_lo), ">", model.row_lo)):
            if np.any(mask):
                m.addMConstr(model.A[mask], v, sense, rhs[mask])
        Q = sp.csr_matrix((np.ones(self.y.size), (self.y, self.y)), shape=(self.n, self.n))
        m.setObjective(v @ Q @ v, GRB.MINIMIZE)
        try:
            m.optimize()
        except gp.GurobiError:
            return None
        if m.SolCount == 0:
            return None
        return np.asarray(v.X, dtype=np.float64)[self.y]


__all__ = ["L2NodeBound"]
