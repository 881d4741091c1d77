"""Objectives maximising a norm of an expression vector y with known bounds lo <= y <= hi.

- "l1":   sum_j |y_j|. Coordinates of known sign are linear; the others are split y = p - q with
          p in [0, hi] s, q in [0, -lo] (1 - s), s binary, and contribute p + q.
- "linf": max_j |y_j| = max over the 2n literals +-y_j. Literals whose upper bound is below some
          literal's lower bound can never be the maximum and are dropped; for the rest a one-hot
          selection s_k with t <= lit_k + (T - lo_k)(1 - s_k), T = max_k hi_k, bounds t by the
          selected literal. (LipMIP's l1-input objective compared an index with a bound here and
          could drop coordinates.)
- "l2sq": sum_j y_j^2 (a nonconvex quadratic objective; Gurobi only).
- "linear": y itself (a single row), when the maximisation over directions already covers signs.

`naive_upper` is the objective's bound from lo/hi alone (used to size tolerances).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from ..lp import Expr, MilpBuilder

ObjectiveNorm = Literal["l1", "linf", "l2sq", "linear"]


@dataclass
class NormObjective:
    norm: str
    expr: Expr
    naive_upper: float
    quadratic: sp.csr_matrix | None = None


def encode_norm_objective(builder: MilpBuilder, y: Expr, lo: np.ndarray, hi: np.ndarray, norm: ObjectiveNorm) -> NormObjective:
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    n = y.size
    if norm == "linear":
        if n != 1:
            raise ValueError("a linear objective needs a single row")
        return NormObjective(norm, y, float(max(abs(lo[0]), abs(hi[0]))))
    if norm == "l1":
        pos, neg = lo >= 0, hi <= 0
        mixed = np.flatnonzero(~pos & ~neg)
        total = Expr.constant(np.zeros(1), builder.num_vars)
        sign = np.where(pos, 1.0, np.where(neg, -1.0, 0.0))
        total = total + y.affine(sign[None, :])
        if mixed.size:
            lm, hm = lo[mixed], hi[mixed]
            p = builder.add_vars(mixed.size, 0.0, hm, group="abs/p")
            q = builder.add_vars(mixed.size, 0.0, -lm, group="abs/q")
            s = builder.add_binaries(mixed.size, group="abs/sign")
            pe, qe, se = builder.var_expr(p), builder.var_expr(q), builder.var_expr(s)
            builder.constrain(pe - qe - y[mixed], lo=0.0, hi=0.0, group="abs/split")
            builder.constrain(pe - se.scale(hm), hi=0.0, group="abs/p<=hs")
            builder.constrain(qe + se.scale(-lm), hi=-lm, group="abs/q<=-l(1-s)")
            total = total + (pe + qe).affine(np.ones((1, mixed.size)))
        naive = float(np.sum(np.maximum(np.abs(lo), np.abs(hi))))
        return NormObjective(norm, total, naive)
    if norm == "linf":
        lits = Expr.stack([y, -y])
        lit_lo = np.r_[lo, -hi]
        lit_hi = np.r_[hi, -lo]
        floor = max(0.0, float(np.max(lit_lo)))
        keep = np.flatnonzero(lit_hi >= floor)
        top = float(np.max(lit_hi[keep]))
        if keep.size == 1:
            return NormObjective(norm, lits[keep], top)
        t = builder.add_vars(1, floor, top, group="max/t")
        s = builder.add_binaries(keep.size, group="max/select")
        te, se = builder.var_expr(t), builder.var_expr(s)
        builder.constrain(se.affine(np.ones((1, keep.size))), lo=1.0, hi=1.0, group="max/one")
        big = np.nextafter(top - lit_lo[keep], np.inf)  # rounded up: the row stays a relaxation
        # t - lit_k + big_k s_k <= big_k
        tk = te.affine(np.ones((keep.size, 1)))
        builder.constrain(tk - lits[keep] + se.scale(big), hi=big, group="max/t<=lit")
        return NormObjective(norm, te, top)
    if norm == "l2sq":
        yv = builder.add_vars(n, lo, hi, group="l2/y")
        ye = builder.var_expr(yv)
        builder.constrain(ye - y, lo=0.0, hi=0.0, group="l2/y=grad")
        Q = sp.coo_matrix((np.ones(n), (yv, yv)), shape=(builder.num_vars, builder.num_vars))
        builder.add_quadratic_objective(Q)
        naive = float(np.sum(np.maximum(lo**2, hi**2)))
        return NormObjective(norm, Expr.constant(np.zeros(1), builder.num_vars), naive, sp.csr_matrix(Q))
    raise ValueError(f"unknown objective norm {norm!r}")
