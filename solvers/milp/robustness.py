"""The MILPs of robustness questions: the closest input that flips a classifier, or the first one
along one side of a box.

A *flip* is an input where rows C of class margins say the decision changed:

- untargeted, predicted class c: some margin f_c - f_j <= 0 (j != c)   -> `FlipRows(C, "any")`;
- targeted to class k: every margin f_j - f_k <= 0 (j != k)            -> `FlipRows(C, "all")`.

Ties count as flips (<= 0), so the flip set is closed and every minimum below is attained.

Objectives over the flips inside the box of a `Bounds` (every stage shares that box):

- `build_radius_milp`: minimise t with ||x - x0|| <= t: linf rows -t <= x_i - x0_i <= t; l1 rows
  s_i >= |x_i - x0_i|, t >= sum s_i; l2 a convex quadratic constraint sum y_i^2 <= s on
  y = x - x0, minimising s = t^2 (Gurobi only);
- `build_side_milp`: minimise or maximise one input x_i (sides of robustness hyperrectangles).

The forward pass is the one ReLU encoding (`solvers.lp.encode_relu_network`, big-M over sound
bounds). Rows are pruned with sound bounds of C f over the box (`solvers.bounds.rows`): an "any"
disjunction keeps the rows that can reach 0 and gives each a binary s_j with
C_j f <= M_j (1 - s_j), sum s >= 1, M_j a sound upper bound of C_j f; an "all" conjunction drops
rows proven <= 0. When the bounds already prove that no flip exists in the box the builders
return None (the box is proven).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from models.ir import Network

from ..bounds.rows import output_row_bounds
from ..choices import NORMS
from ..bounds.types import Bounds, relu_blocks
from ..lp import Expr, ForwardEncoding, MilpBuilder, MilpModel, encode_relu_network
from ..rounding import down, mul_up, up

FlipMode = Literal["any", "all"]


@dataclass(frozen=True)
class FlipRows:
    """Class-margin rows C (k, m) over the outputs: a flip is where any / all rows are <= 0."""

    C: np.ndarray
    mode: FlipMode

    def margin(self, y: np.ndarray) -> np.ndarray:
        """min (any) or max (all) of the rows at outputs y (m,) or (B, m): a flip iff <= 0."""
        v = np.asarray(y, dtype=np.float64) @ self.C.T
        return v.min(axis=-1) if self.mode == "any" else v.max(axis=-1)

    def proven_kept(self, lower: np.ndarray) -> bool:
        """From sound lower bounds of the rows over a set: no point of it flips."""
        return bool(np.all(lower > 0) if self.mode == "any" else np.any(lower > 0))


@dataclass
class FlipMilp:
    """A flip MILP and the handles to read its solutions.

    `objective`: "linf", "l1", "l2sq" (t^2) or "side"; `rows`: indices of the rows of C kept;
    `disjunction`: binaries of the "any" rows (empty when a single row or none is needed);
    `t`: the objective variable (radius models); `y`: the variables x - x0 (l2 models)."""

    model: MilpModel
    forward: ForwardEncoding
    objective: str
    rows: np.ndarray
    disjunction: np.ndarray
    t: int | None = None
    y: np.ndarray | None = None

    @property
    def num_binaries(self) -> int:
        return self.model.num_integers

    def point(self, v: np.ndarray) -> np.ndarray:
        """The network input of a model solution."""
        return np.asarray(v, dtype=np.float64)[self.forward.x].copy()

    def leaves_bounds(self, net: Network, nb: Bounds, v: np.ndarray) -> str | None:
        """Why a solver point cannot be trusted as a hint (it leaves the sound bounds), or None."""
        x = np.clip(self.point(v), nb.lo, nb.hi)
        for j, z in enumerate(net.preactivations(x)):
            slack = 1e-9 * (1.0 + np.maximum(np.abs(nb.pre_lo[j]), np.abs(nb.pre_hi[j])))
            if np.any((z < nb.pre_lo[j] - slack) | (z > nb.pre_hi[j] + slack)):
                return f"ReLU layer {j}"
        return None

    def node_bound(self):
        """The proof's `node_bound` for the l2 model (tangent bounds of ||y||^2), else None."""
        if self.objective != "l2sq":
            return None
        from .l2_distance import L2NodeBound

        return L2NodeBound(self.model, self.y, self.t)


def _encode_flip(builder: MilpBuilder, net: Network, nb: Bounds, flip: FlipRows
                 ) -> tuple[ForwardEncoding, np.ndarray, np.ndarray] | None:
    """The forward pass over nb's box and the flip constraints; None when no flip is possible."""
    blocks = relu_blocks(net)
    lower, upper = output_row_bounds(blocks, nb, flip.C)
    if flip.mode == "any":
        keep = np.flatnonzero(lower <= 0)
        if keep.size == 0:
            return None
    else:
        if np.any(lower > 0):
            return None
        keep = np.flatnonzero(upper > 0)
    fwd = encode_relu_network(builder, blocks, nb.lo, nb.hi, nb.pre_lo, nb.pre_hi, "bigm")
    margins = fwd.output.affine(flip.C[keep]) if keep.size else None
    binaries = np.zeros(0, dtype=np.int64)
    if flip.mode == "all" and keep.size:
        builder.constrain(margins, hi=0.0, group="flip/all")
    elif flip.mode == "any" and not np.any(upper[keep] <= 0):  # (a row <= 0 on the whole box: every point flips)
        if keep.size == 1:
            builder.constrain(margins, hi=0.0, group="flip/any")
        else:
            big_m = np.array([up(u) for u in upper[keep]])
            binaries = builder.add_binaries(keep.size, group="flip/choice")
            s = builder.var_expr(binaries)
            # C_j f + M_j s_j <= M_j: the row must hold where s_j = 1, and always holds where s_j = 0
            builder.constrain(margins + s.scale(big_m), hi=big_m, group="flip/any")
            builder.constrain(s.affine(np.ones((1, keep.size))), lo=1.0, group="flip/one")
    return fwd, keep, binaries


def build_radius_milp(net: Network, nb: Bounds, center: np.ndarray, norm: str, flip: FlipRows,
                      t_lo: float = 0.0, t_hi: float = math.inf) -> FlipMilp | None:
    """min ||x - center|| over the flips in nb's box with t_lo <= ||x - center|| <= t_hi (see the
    module doc); the objective is t for linf/l1 and t^2 for l2. None: no flip in the box."""
    if norm not in NORMS:
        raise ValueError(f"unknown radius norm {norm!r}")
    builder = MilpBuilder()
    encoded = _encode_flip(builder, net, nb, flip)
    if encoded is None:
        return None
    fwd, keep, binaries = encoded
    x0 = np.asarray(center, dtype=np.float64)
    free = np.flatnonzero(nb.hi > nb.lo)
    x = builder.var_expr(fwd.x[free])
    # |x_i - x0_i| on the box, rounded up (the bounds of the distance variables)
    reach = np.nextafter(np.nextafter(np.maximum(x0[free] - nb.lo[free], nb.hi[free] - x0[free]), np.inf), np.inf)
    if norm == "l2":
        s_lo = max(down(t_lo * t_lo), 0.0)
        t = builder.add_vars(1, s_lo, mul_up(t_hi, t_hi) if math.isfinite(t_hi) else math.inf, group="t^2")
        y_idx = builder.add_vars(free.size, -reach, reach, group="y")
        builder.constrain(builder.var_expr(y_idx) - x + x0[free], lo=0.0, hi=0.0, group="y=x-x0")
        n = builder.num_vars
        Q = sp.csr_matrix((np.ones(free.size), (y_idx, y_idx)), shape=(n, n))
        builder.add_quadratic_constraint(Q, Expr.variables(t, n).scale(-1.0), 0.0)
        objective = "l2sq"
    else:
        t = builder.add_vars(1, t_lo, t_hi, group="t")
        if norm == "linf":
            tt = Expr.variables(np.full(free.size, t[0]), builder.num_vars)
            builder.constrain(tt - x + x0[free], lo=0.0, group="t>=x-x0")
            builder.constrain(tt + x - x0[free], lo=0.0, group="t>=x0-x")
        else:
            s_idx = builder.add_vars(free.size, 0.0, reach, group="s")
            s = builder.var_expr(s_idx)
            builder.constrain(s - x + x0[free], lo=0.0, group="s>=x-x0")
            builder.constrain(s + x - x0[free], lo=0.0, group="s>=x0-x")
            builder.constrain(builder.var_expr(t) - s.affine(np.ones((1, free.size))), lo=0.0, group="t>=sum s")
        objective = norm
    builder.set_objective(builder.var_expr(t), "min")
    return FlipMilp(builder.build(), fwd, objective, keep, binaries, int(t[0]), y_idx if norm == "l2" else None)


def build_side_milp(net: Network, nb: Bounds, feature: int, sense: Literal["min", "max"], flip: FlipRows
                    ) -> FlipMilp | None:
    """min or max of input `feature` over the flips in nb's box; None: no flip in the box."""
    builder = MilpBuilder()
    encoded = _encode_flip(builder, net, nb, flip)
    if encoded is None:
        return None
    fwd, keep, binaries = encoded
    builder.set_objective(builder.var_expr(fwd.x[[feature]]), sense)
    return FlipMilp(builder.build(), fwd, "side", keep, binaries)


__all__ = ["FlipMilp", "FlipRows", "build_radius_milp", "build_side_milp"]
