"""The local Lipschitz MILP: one encoder for every back-end.

    maximise ||J(x) w||_q  (forward)   or   ||J(x)^T c||_{p*}  (backward, LipMIP's formulation)

over x in the box and w (resp. c) in the extreme points of the unit p-ball (resp. q*-ball), using
||J||_{p->q} = max_{w in ext B_p} ||J w||_q = max_{c in ext B_q*} ||J^T c||_{p*}. The forward ReLU
encoding (`relu`) supplies one binary per unstable neuron; the Jacobian-vector product
(`jacobian.encode_switched_pass`) reuses them; `norm_objective` maximises the norm.

                     forward (tangent) pass J w        backward (adjoint) pass J^T c
    input  linf      w in {-1,1}^n ("signs")           objective l1
           l1        w in {e_k} ("onehot")             objective linf
           l2        w in the l2 ball (Gurobi)         objective l2 squared (Gurobi)
    output l1        objective l1                      c in {-1,1}^m
           linf      objective linf                    c in {e_i}
           l2        objective l2 squared (Gurobi)     c in the l2 ball (Gurobi)
    target c^T f     objective c^T J w (all signs w),  c fixed
                     |c^T J w| (l1), (c^T J w)^2 (l2)

w and c are continuous over the convex hull of their set (`jacobian.encode_vector_set`): only
ReLU phases and objective signs are binaries. Both formulations have the same optimum; the forward one puts the switch products in the same
order as the forward ReLU constraints, which branch-and-bound solvers exploit far better (see
docs/lipschitz.md for measurements), so it is the default.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from models.ir import Affine, Network

from ..bounds.interval import affine_interval
from ..bounds.jacobian import SwitchedPassBounds, jacobian_maps, switched_pass_bounds
from ..bounds.types import NetworkBounds, relu_blocks
from ..lp import Expr, ForwardEncoding, MilpBuilder, MilpModel, SafeLp, encode_relu_network
from ..phases import UNSTABLE
from .jacobian import VectorSetEncoding, encode_switched_pass, encode_vector_set
from .norm_objective import NormObjective, encode_norm_objective
from .scaling import scale_hidden_neurons

FORMULATIONS: tuple[str, ...] = ("forward", "backward")
BALL_EXTREMES = {"linf": "signs", "l1": "onehot", "l2": "ball"}  # extreme points of the unit ball
NORM_OBJECTIVE = {"l1": "l1", "linf": "linf", "l2": "l2sq"}
DUAL = {"l1": "linf", "linf": "l1", "l2": "l2"}


@dataclass
class LipschitzMilp:
    model: MilpModel
    formulation: str
    blocks: list[Affine]
    forward: ForwardEncoding
    vector: VectorSetEncoding
    product: Expr
    pass_bounds: SwitchedPassBounds
    objective: NormObjective
    maps: list[np.ndarray]
    phases: list[np.ndarray]
    signals: list[Expr]

    @property
    def num_binaries(self) -> int:
        return self.model.num_integers

    def point(self, v: np.ndarray) -> np.ndarray:
        return np.asarray(v)[self.forward.x]

    def pattern(self, v: np.ndarray) -> list[np.ndarray]:
        return self.forward.pattern(np.asarray(v))

    def direction(self, v: np.ndarray) -> np.ndarray:
        """The maximising w (forward) or c (backward), snapped to an exact member of its set."""
        return self.vector.value(np.asarray(v))

    def without_pattern(self, v: np.ndarray) -> "LipschitzMilp":
        """This MILP with the activation pattern of solution v cut off (a no-good cut on the
        unstable ReLUs' binaries): only valid when that pattern's region has no interior."""
        d = np.concatenate([dl[dl >= 0] for dl in self.forward.delta]) if self.forward.delta else np.zeros(0, int)
        if d.size == 0:
            raise ValueError("no binaries to cut")
        on = np.round(np.asarray(v)[d]) > 0.5
        coef = np.where(on, -1.0, 1.0)
        row = sp.csr_matrix((coef, (np.zeros(d.size, dtype=int), d)), shape=(1, self.model.num_vars))
        model = self.model.with_rows(row, np.array([1.0 - np.sum(on)]), np.array([np.inf]), group="no_good")
        return replace(self, model=model)

    def start(self, x: np.ndarray, pattern: list[np.ndarray], direction: np.ndarray) -> np.ndarray | None:
        """A full MILP solution for input x, activation pattern and direction (w or c), for warm
        starts: every other variable is completed by a small solve with these fixed."""
        from dataclasses import replace as dc_replace

        from .highs import HighsBackend
        from .result import SolveOptions

        lo, hi = self.model.col_lo.copy(), self.model.col_hi.copy()
        lo[self.forward.x] = hi[self.forward.x] = np.clip(x, lo[self.forward.x], hi[self.forward.x])
        for d, s in zip(self.forward.delta, pattern):
            unstable = d >= 0
            lo[d[unstable]] = hi[d[unstable]] = s[unstable]
        for var, val in self.vector.assignment(direction).items():
            lo[var] = hi[var] = val
        fixed = dc_replace(self.model, col_lo=lo, col_hi=hi, q_obj=None, q_constraints=())
        res = HighsBackend().solve(fixed, SolveOptions(time_limit=5.0, threads=1))
        if res.x is None or res.status != "optimal":
            return None
        return res.x

    def to_lipschitz(self, objective_value: float) -> float:
        """Objective value -> Lipschitz value (the l2 objective is squared)."""
        if self.objective.norm == "l2sq":
            return float(np.sqrt(max(objective_value, 0.0)))
        return float(objective_value)


PASS_BOUNDS: tuple[str, ...] = ("interval", "lp")


def build_lipschitz_milp(
    net: Network,
    bounds: NetworkBounds,
    input_norm: str,
    output_norm: str | None,
    target: np.ndarray | None = None,
    formulation: str = "forward",
    pass_bounds: str = "interval",
    deadline: float | None = None,
) -> LipschitzMilp:
    """The MILP whose optimum is the local Lipschitz constant over `bounds`' box.

    With `target` (a vector c of output weights) the function is the scalar c^T f and
    `output_norm` is ignored. `pass_bounds="lp"` tightens the big-M bounds of the Jacobian-vector
    product layer by layer over the MILP's own LP relaxation (safe duals), stopping at `deadline`.
    """
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown formulation {formulation!r}")
    if pass_bounds not in PASS_BOUNDS:
        raise ValueError(f"unknown pass bounds {pass_bounds!r}")
    if target is not None:
        target = np.asarray(target, dtype=np.float64).reshape(-1)
    milp = _build(net, bounds, input_norm, output_norm, target, formulation, None)
    if pass_bounds == "lp":
        milp = _lp_tighten_pass(milp, lambda pb: _build(net, bounds, input_norm, output_norm, target, formulation, pb), deadline)
    return milp


def _build(net, bounds, input_norm, output_norm, target, formulation, pb: SwitchedPassBounds | None) -> LipschitzMilp:
    blocks, pre_lo, pre_hi = scale_hidden_neurons(relu_blocks(net), bounds.pre_lo, bounds.pre_hi)
    weights = [b.weight for b in blocks]
    builder = MilpBuilder()
    fwd = encode_relu_network(builder, blocks, bounds.lo, bounds.hi, pre_lo, pre_hi, "bigm", layers=len(blocks) - 1)
    if formulation == "forward":
        if target is not None:
            weights[-1] = target[None, :] @ weights[-1]
        if target is not None and input_norm == "linf":
            # max over all sign vectors of the linear c^T J w is ||J^T c||_1: no |.| needed
            vec = encode_vector_set(builder, "all_signs", net.input_dim)
            objective = "linear"
        else:
            vec = encode_vector_set(builder, BALL_EXTREMES[input_norm], net.input_dim)  # type: ignore[arg-type]
            # a target's scalar c^T J w: |.| for the one-hot w, squared for the l2 ball
            objective = NORM_OBJECTIVE[input_norm if target is not None else str(output_norm)]
        deltas = fwd.delta
    else:
        if target is not None:
            vec = encode_vector_set(builder, "fixed", net.output_dim, target)
        else:
            vec = encode_vector_set(builder, BALL_EXTREMES[DUAL[str(output_norm)]], net.output_dim)  # type: ignore[arg-type]
        objective = NORM_OBJECTIVE[DUAL[input_norm]]
        deltas = list(reversed(fwd.delta))
    maps, phases = jacobian_maps(weights, fwd.phase, formulation)
    if pb is None:
        pb = switched_pass_bounds(maps, phases, vec.lo, vec.hi)
    signals: list[Expr] = []
    product = encode_switched_pass(builder, maps, deltas, phases, vec.expr, pb, signals)
    obj = encode_norm_objective(builder, product, pb.out_lo, pb.out_hi, objective)  # type: ignore[arg-type]
    builder.set_objective(obj.expr, "max")
    return LipschitzMilp(builder.build(), formulation, blocks, fwd, vec, product, pb, obj, maps, phases, signals)


def _lp_tighten_pass(milp: LipschitzMilp, rebuild, deadline: float | None) -> LipschitzMilp:
    """Tighten t_j (j >= 1) and the product's bounds over the LP relaxation, layer by layer."""
    import time

    from ..bounds.jacobian import slope_interval

    pb = copy.deepcopy(milp.pass_bounds)
    n_layers = len(milp.phases)
    for j in range(1, n_layers + 1):
        if deadline is not None and time.perf_counter() > deadline:
            break
        expr = milp.signals[j] if j < n_layers else milp.product
        lo, hi = (pb.t_lo[j], pb.t_hi[j]) if j < n_layers else (pb.out_lo, pb.out_hi)
        rows = np.flatnonzero(milp.phases[j] == UNSTABLE) if j < n_layers else np.arange(expr.size)
        rows = rows[~expr.row_is_constant()[rows] & (lo[rows] < 0) & (hi[rows] > 0)]
        if rows.size == 0:
            continue
        lp = SafeLp(milp.model)
        coef = expr.widened(lp.num_vars)
        slack = expr.error(np.maximum(np.abs(milp.model.col_lo), np.abs(milp.model.col_hi)))
        for i in rows:
            if deadline is not None and time.perf_counter() > deadline:
                break
            ci = coef[i].toarray().reshape(-1)
            hi[i] = min(hi[i], np.nextafter(lp.upper(ci, expr.const[i]) + slack[i], np.inf))
            lo[i] = max(lo[i], np.nextafter(lp.lower(ci, expr.const[i]) - slack[i], -np.inf))
        # re-propagate the tightened layer by interval arithmetic (intersected)
        if j < n_layers:
            for t in range(j, n_layers):
                if t > j:
                    l2, h2 = affine_interval(milp.maps[t], 0.0, pb.s_lo[t - 1], pb.s_hi[t - 1])
                    pb.t_lo[t], pb.t_hi[t] = np.maximum(pb.t_lo[t], l2), np.minimum(pb.t_hi[t], h2)
                pb.s_lo[t], pb.s_hi[t] = slope_interval(pb.t_lo[t], pb.t_hi[t], milp.phases[t])
            l2, h2 = affine_interval(milp.maps[-1], 0.0, pb.s_lo[-1], pb.s_hi[-1])
            pb.out_lo, pb.out_hi = np.maximum(pb.out_lo, l2), np.minimum(pb.out_hi, h2)
        milp = rebuild(pb)
    return milp
