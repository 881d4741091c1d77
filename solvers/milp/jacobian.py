"""MILP encoding of Jacobian-vector products of a ReLU network (the Clarke Jacobian).

With the forward encoding's binary d per unstable ReLU, a product with J is a switched linear
pass (see `solvers.bounds.jacobian`):

    t_0 = M_0 w,   s_j = d_j * t_j,   t_{j+1} = M_{j+1} s_j,

where d_j is 1 on active neurons, 0 on inactive ones and the *same* binary as the forward pass on
unstable ones (LipMIP's "switch"). d = 1 and d = 0 are both feasible at z = 0 in the forward
encoding, so both choices of ReLU'(0) at ties are covered. The product d * t of a binary and a
bounded t in [L, U] is linearised exactly:

    s <= t - L (1 - d),  s >= t - U (1 - d),  L d <= s <= U d.

When t is a known number (a fixed vector w through stable layers) s = t d needs no variable.

The vector w ranges over the extreme points of a norm ball (`encode_vector_set`, encoded by their
convex hull): "fixed" (a given vector, e.g. a class margin), "signs" ({-1, 1}^k: unit linf ball;
"all_signs" without the symmetry breaking, for objectives linear in w), "onehot" ({e_i}: unit l1
ball, up to sign) or "ball" (the l2 unit ball; quadratic, Gurobi only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from ..bounds.jacobian import SwitchedPassBounds
from ..lp import Expr, MilpBuilder
from ..phases import ACTIVE, UNSTABLE

VectorSet = Literal["fixed", "signs", "all_signs", "onehot", "ball"]
VECTOR_SETS: tuple[str, ...] = ("fixed", "signs", "all_signs", "onehot", "ball")


@dataclass
class VectorSetEncoding:
    """A vector w of one of the `VECTOR_SETS` as an expression with box bounds [lo, hi].

    "signs", "onehot" and "ball" are used where the objective is even in w (a norm of a linear
    image), so the first sign is fixed to +1 (symmetry breaking) and one-hot vectors need no sign.
    """

    kind: str
    expr: Expr
    lo: np.ndarray
    hi: np.ndarray
    fixed: np.ndarray | None = None
    vars: np.ndarray | None = None  # the model variables behind the vector (None when constant)

    def assignment(self, w: np.ndarray) -> dict[int, float]:
        """Values of `vars` that represent the member w of the set (up to the symmetry w -> -w)."""
        if self.vars is None:
            return {}
        w = np.asarray(w, dtype=np.float64)
        if self.kind == "all_signs":
            return dict(zip(self.vars.tolist(), np.where(w >= 0, 1.0, -1.0).tolist()))
        if self.kind == "onehot":
            onehot = np.zeros(w.size)
            onehot[int(np.argmax(np.abs(w)))] = 1.0
            return dict(zip(self.vars.tolist(), onehot.tolist()))
        u = w * (1.0 if w[0] >= 0 else -1.0)
        if self.kind == "signs":
            u = np.where(u >= 0, 1.0, -1.0)
        else:
            u = u / max(float(np.linalg.norm(u)), 1e-300)
        return dict(zip(self.vars.tolist(), u.tolist()))

    def value(self, v: np.ndarray) -> np.ndarray:
        """w at a solution, snapped to an exact member of its set (so that replay is exact)."""
        if self.kind == "fixed":
            return np.array(self.fixed, dtype=np.float64)
        w = self.expr.value(v)
        if self.kind in ("signs", "all_signs"):
            return np.where(w >= 0, 1.0, -1.0)
        if self.kind == "onehot":
            out = np.zeros_like(w)
            out[int(np.argmax(w))] = 1.0
            return out
        norm = float(np.linalg.norm(w))
        return w / norm if norm > 0 else w


def encode_vector_set(builder: MilpBuilder, kind: VectorSet, k: int, fixed: np.ndarray | None = None) -> VectorSetEncoding:
    """The vector w as continuous variables over the convex hull of its set.

    Every objective built on w is convex in w once the ReLU phases are fixed (a norm, a square or
    a linear function of the product J w), so its maximum over the hull is attained at an extreme
    point and needs no binary: {-1, 1}^k becomes [-1, 1]^k, {e_i} the simplex. Solvers then branch
    only on ReLU phases and objective signs. The even sets fix w_0 >= 0 (||J w|| = ||J (-w)||).
    """
    if kind == "fixed":
        if fixed is None or np.asarray(fixed).shape != (k,):
            raise ValueError(f"a fixed vector needs {k} values")
        w = np.asarray(fixed, dtype=np.float64)
        return VectorSetEncoding(kind, Expr.constant(w, builder.num_vars), w.copy(), w.copy(), w)
    if kind == "all_signs":
        wv = builder.add_vars(k, -1.0, 1.0, group="w_box")
        return VectorSetEncoding(kind, builder.var_expr(wv), -np.ones(k), np.ones(k), vars=wv)
    if k == 1 and kind in ("signs", "onehot", "ball"):
        one = np.ones(1)
        return VectorSetEncoding(kind, Expr.constant(one, builder.num_vars), one, one.copy())
    if kind == "signs":
        lo = np.r_[0.0, -np.ones(k - 1)]
        wv = builder.add_vars(k, lo, 1.0, group="w_box")
        return VectorSetEncoding(kind, builder.var_expr(wv), lo, np.ones(k), vars=wv)
    if kind == "onehot":
        wv = builder.add_vars(k, 0.0, 1.0, group="w_simplex")
        e = builder.var_expr(wv)
        builder.constrain(e.affine(np.ones((1, k))), lo=1.0, hi=1.0, group="w_simplex/sum")
        return VectorSetEncoding(kind, e, np.zeros(k), np.ones(k), vars=wv)
    if kind == "ball":
        lo = np.r_[0.0, -np.ones(k - 1)]
        wv = builder.add_vars(k, lo, 1.0, group="w_ball")
        Q = sp.coo_matrix((np.ones(k), (wv, wv)), shape=(builder.num_vars, builder.num_vars))
        builder.add_quadratic_constraint(Q, Expr.constant(np.zeros(1), builder.num_vars), 1.0)
        return VectorSetEncoding(kind, builder.var_expr(wv), lo, np.ones(k), vars=wv)
    raise ValueError(f"unknown vector set {kind!r}")


def encode_switched_pass(
    builder: MilpBuilder,
    maps: list[np.ndarray],
    deltas: list[np.ndarray],
    phases: list[np.ndarray],
    start: Expr,
    bounds: SwitchedPassBounds,
    signals: list[Expr] | None = None,
) -> Expr:
    """maps[k] D_{k-1} ... D_0 maps[0] start, with D_j switched by the binaries `deltas[j]`.

    `bounds` must hold for the given start set (`switched_pass_bounds`); with `signals` the
    expressions t_j entering each switch layer are appended to it.
    """
    t = start.affine(maps[0])
    for j, (ph, d) in enumerate(zip(phases, deltas)):
        if signals is not None:
            signals.append(t)
        active = np.flatnonzero(ph == ACTIVE)
        unstable = np.flatnonzero(ph == UNSTABLE)
        parts: list[tuple[np.ndarray, Expr]] = [(active, t[active])]
        const_rows = t.row_is_constant()
        known = unstable[const_rows[unstable]]
        if known.size:
            parts.append((known, builder.var_expr(d[known]).scale(t.const[known])))
        var = unstable[~const_rows[unstable]]
        if var.size:
            L, U = bounds.t_lo[j][var], bounds.t_hi[j][var]
            sv = builder.add_vars(var.size, np.minimum(L, 0.0), np.maximum(U, 0.0), group=f"switch{j}")
            se, de, te = builder.var_expr(sv), builder.var_expr(d[var]), t[var]
            builder.constrain(se - te - de.scale(L), hi=-L, group=f"switch{j}/s<=t-L(1-d)")
            builder.constrain(se - te - de.scale(U), lo=-U, group=f"switch{j}/s>=t-U(1-d)")
            builder.constrain(se - de.scale(U), hi=0.0, group=f"switch{j}/s<=Ud")
            builder.constrain(se - de.scale(L), lo=0.0, group=f"switch{j}/s>=Ld")
            parts.append((var, se))
        t = Expr.scatter(ph.size, parts).affine(maps[j + 1])
    return t
