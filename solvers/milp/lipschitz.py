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
import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from models.ir import Affine, Network

from ..bounds.interval import affine_interval
from ..bounds.jacobian import SwitchedPassBounds, jacobian_maps, switched_pass_bounds
from ..bounds.types import Bounds, relu_blocks
from ..choices import FORMULATIONS, PASS_BOUNDS
from ..lp import Expr, ForwardEncoding, MilpBuilder, MilpModel, SafeLp, encode_relu_network
from ..phases import UNSTABLE
from .jacobian import VectorSetEncoding, encode_switched_pass, encode_vector_set
from .norm_objective import NormObjective, encode_norm_objective
from ..rounding import gamma, ldexp_up, mul_up, round_up, sqrt_up
from .scaling import _exact_ldexp, scale_hidden_neurons, scale_inputs

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
    in_exp: int = 0   # model inputs are x * 2^-in_exp
    out_exp: int = 0  # the objective is (a norm of) 2^out_exp * 2^in_exp * J ...

    @property
    def num_binaries(self) -> int:
        return self.model.num_integers

    def point(self, v: np.ndarray) -> np.ndarray:
        """The network input of a model solution (the model's inputs are scaled)."""
        return np.ldexp(np.asarray(v)[self.forward.x], self.in_exp)

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

    def start(self, x: np.ndarray, pattern: list[np.ndarray], direction: np.ndarray,
              time_limit: float = 5.0) -> np.ndarray | None:
        """A full MILP solution for input x, activation pattern and direction (w or c), for warm
        starts: every other variable is completed by a small solve with these fixed."""
        from dataclasses import replace as dc_replace

        from .highs import HighsBackend
        from .result import SolveOptions

        lo, hi = self.model.col_lo.copy(), self.model.col_hi.copy()
        xs = np.ldexp(np.asarray(x, dtype=np.float64), -self.in_exp)
        lo[self.forward.x] = hi[self.forward.x] = np.clip(xs, lo[self.forward.x], hi[self.forward.x])
        for d, s in zip(self.forward.delta, pattern):
            unstable = d >= 0
            lo[d[unstable]] = hi[d[unstable]] = s[unstable]
        for var, val in self.vector.assignment(direction).items():
            lo[var] = hi[var] = val
        # every binary is fixed: the rest is an LP (integrality dropped, so no MIP machinery runs)
        fixed = dc_replace(self.model, col_lo=lo, col_hi=hi, q_obj=None, q_constraints=(),
                           integer=np.zeros(self.model.num_vars, dtype=bool))
        res = HighsBackend().solve(fixed, SolveOptions(time_limit=time_limit, threads=1))
        if res.x is None or res.status != "optimal":
            return None
        return res.x

    def to_lipschitz(self, objective_value: float, upward: bool = True) -> float:
        """Objective value -> Lipschitz value: square root of the l2 objective, scaling undone.

        Rounded up (an upper bound stays one) unless `upward` is False."""
        v = float(objective_value)
        if not math.isfinite(v):
            return v
        if self.objective.norm == "l2sq":
            v = sqrt_up(v) if upward else math.sqrt(max(v, 0.0))
        e = -(self.in_exp + self.out_exp)
        return ldexp_up(v, e) if upward and v >= 0 else float(np.ldexp(v, e))

    def phase_bound(self, lo: np.ndarray, hi: np.ndarray) -> float:
        """A sound bound on the objective over the solutions whose binaries lie in [lo, hi] (the
        column bounds of a branch-and-bound node): with the ReLU slopes of fixed neurons known and
        the others in [0, 1], the Jacobian lies in an interval matrix [L, U], and the objective is
        at most ||max(|L|, |U|)|| in the norm of the direction set (squared for the l2 objective),
        a certified norm plus the product's rounding. Exact for a full pattern; the proof uses it
        where LP relaxations of l2 balls and squares are weak."""
        from ..bounds.jacobian_interval import interval_jacobian
        from ..norms import operator_norm_upper
        from ..phases import ACTIVE, UNSTABLE

        deltas = self.forward.delta if self.formulation == "forward" else self.forward.delta[::-1]
        s_lo, s_hi = [], []
        for ph, d in zip(self.phases, deltas):
            sl, sh = np.where(ph == ACTIVE, 1.0, 0.0), np.where(ph == ACTIVE, 1.0, 0.0)
            u = ph == UNSTABLE
            sl[u], sh[u] = np.round(lo[d[u]]), np.round(hi[d[u]])
            s_lo.append(sl)
            s_hi.append(sh)
        L, U = interval_jacobian(self.maps, s_lo, s_hi)
        B = np.maximum(np.abs(L), np.abs(U))
        kind = {"signs": "linf", "all_signs": "linf", "onehot": "l1", "ball": "l2", "fixed": "fixed"}[self.vector.kind]
        out = {"l1": "l1", "linf": "linf", "l2sq": "l2", "linear": "l2"}[self.objective.norm]  # 1 row: any norm
        if kind == "fixed":
            c = np.abs(np.asarray(self.vector.fixed))
            B, kind = ((B @ c) * (1 + 1e-12))[:, None], "l1"
        elif B.shape[1] == 1:
            kind = "l1"  # a single input: every direction set is {+-1}
        value = operator_norm_upper(B, kind, out)
        if self.objective.norm == "l2sq":
            value = mul_up(value, value)
        return round_up(value + self.model.obj_err, value + self.model.obj_err, 2)

    def to_objective(self, lipschitz_value: float) -> float:
        """Lipschitz value -> objective value (the inverse of `to_lipschitz`, to nearest)."""
        v = float(np.ldexp(float(lipschitz_value), self.in_exp + self.out_exp))
        return v * v if self.objective.norm == "l2sq" else v




def build_lipschitz_milp(
    net: Network,
    bounds: Bounds,
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
    blocks, x_lo, x_hi, in_exp = scale_inputs(relu_blocks(net), bounds.lo, bounds.hi)
    blocks, pre_lo, pre_hi = scale_hidden_neurons(blocks, bounds.pre_lo, bounds.pre_hi)
    scaled = _Scaled(blocks, x_lo, x_hi, pre_lo, pre_hi, in_exp)
    milp = _build(net, scaled, input_norm, output_norm, target, formulation, None, None)
    if pass_bounds == "lp":
        out_exp = milp.out_exp
        rebuild = lambda pb: _build(net, scaled, input_norm, output_norm, target, formulation, pb, out_exp)  # noqa: E731
        milp = _lp_tighten_pass(milp, rebuild, deadline)
    return milp


@dataclass
class _Scaled:
    """The network's blocks, input box and pre-activation bounds after exact power-of-two scaling."""

    blocks: list[Affine]
    lo: np.ndarray
    hi: np.ndarray
    pre_lo: list[np.ndarray]
    pre_hi: list[np.ndarray]
    in_exp: int


def _build(net, sc: _Scaled, input_norm, output_norm, target, formulation, pb: SwitchedPassBounds | None,
           out_exp: int | None) -> LipschitzMilp:
    blocks = sc.blocks
    weights = [b.weight for b in blocks]
    builder = MilpBuilder()
    fwd = encode_relu_network(builder, blocks, sc.lo, sc.hi, sc.pre_lo, sc.pre_hi, "bigm", layers=len(blocks) - 1)
    target_err = None
    if formulation == "forward":
        if target is not None:
            # c^T W in float64: its rounding (<= gamma_m |c|^T |W|) is added to the objective error
            target_err = gamma(target.size + 2) * (np.abs(target)[None, :] @ np.abs(weights[-1]))
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
        # the objective scaled by 2^out_exp (exactly) so that its interval bound is of order one
        pb = switched_pass_bounds(maps, phases, vec.lo, vec.hi)
        out_exp = _objective_exponent(pb.out_lo, pb.out_hi)
        scaled = [_exact_ldexp(a, np.full(a.shape, out_exp)) for a in (maps[-1], pb.out_lo, pb.out_hi)]
        if any(a is None for a in scaled):
            out_exp = 0
        else:
            pb = replace(pb, out_lo=scaled[1], out_hi=scaled[2])
    maps = maps[:-1] + [np.ldexp(maps[-1], out_exp)]
    if target_err is not None:
        target_err = np.ldexp(target_err, out_exp)
    signals: list[Expr] = []
    product = encode_switched_pass(builder, maps, deltas, phases, vec.expr, pb, signals)
    obj = encode_norm_objective(builder, product, pb.out_lo, pb.out_hi, objective)  # type: ignore[arg-type]
    builder.set_objective(obj.expr, "max")
    model = builder.build()
    if target_err is not None:
        s_mag = np.maximum(np.abs(pb.s_lo[-1]), np.abs(pb.s_hi[-1])) if pb.s_lo else np.abs(vec.hi)
        e = float((target_err @ s_mag)[0]) * (1 + 1e-12)
        y_mag = float(max(abs(pb.out_lo[0]), abs(pb.out_hi[0])))
        extra = 2.0 * y_mag * e + e * e if obj.norm == "l2sq" else e
        model = replace(model, obj_err=model.obj_err + extra)
    return LipschitzMilp(model, formulation, blocks, fwd, vec, product, pb, obj, maps, phases, signals, sc.in_exp, out_exp)


def _objective_exponent(lo: np.ndarray, hi: np.ndarray) -> int:
    """e with 2^e times the objective's interval bound of order one (0 when it is zero)."""
    mag = float(np.sum(np.maximum(np.abs(lo), np.abs(hi))))
    if not (math.isfinite(mag) and mag > 0):
        return 0
    return int(np.clip(-np.round(np.log2(mag)), -600, 600))


def _lp_tighten_pass(milp: LipschitzMilp, rebuild, deadline: float | None) -> LipschitzMilp:
    """Tighten t_j (j >= 1) and the product's bounds over the LP relaxation, layer by layer."""
    from ..bounds.jacobian import slope_interval
    from ..runtime import past

    pb = copy.deepcopy(milp.pass_bounds)
    n_layers = len(milp.phases)
    for j in range(1, n_layers + 1):
        if past(deadline):  # the deadline, the command's or Ctrl-C
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
            if past(deadline):
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
