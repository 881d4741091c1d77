"""LP tightening of unstable neurons with safe bounds: the triangle relaxation of the earlier
layers, or the big-M relaxation tightened by each earlier neuron's ideal cuts.

For each unstable neuron of layer j we maximise and minimise z_j over the LP relaxation of layers
< j (MIPVerify's "LP" step) with `solvers.lp.SafeLp`: the bound is recomputed from the solver's
multipliers by weak duality in float64 (sound whatever the solver's tolerances were), and widened
by the rounding error of the composed objective row (`Expr.error`).

With `cut_rounds` each neuron's LP is the big-M encoding's relaxation (the triangle) tightened by
rounds of the earlier neurons' ideal cuts (`solvers.lp.relu_cuts`, Anderson et al. 2020) separated
at that LP's optimum. The triangle relaxes each earlier neuron over its own pre-activation interval
alone; the ideal cuts describe its convex hull jointly with its inputs, which the neurons of a
layer share. The cuts of one neuron are removed before the next (they are separated at its
optimum: pooled, the rows of 86 neurons made each LP about 100x slower on mnist_fc 256x4).
"""

from __future__ import annotations

import numpy as np

from models.ir import Affine

from ..lp import MilpBuilder, SafeLp, encode_relu_network
from ..lp.relu import constrain_phases, extend_relu_network
from ..lp.relu_cuts import solve_with_cuts
from ..phases import UNSTABLE, phases
from ..runtime import past

PROBE = 8  # neurons of a layer whose gain decides whether its LPs go on (`min_gain`)


def lp_tighten_layer(
    blocks: list[Affine],
    pre_lo: list[np.ndarray],
    pre_hi: list[np.ndarray],
    j: int,
    lo: np.ndarray,
    hi: np.ndarray,
    deadline: float | None = None,
    cut_rounds: int = 0,
    min_gain: float = 0.0,
    split: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Tightened bounds of z_j (layers < j must already have their final bounds).

    Only neurons unstable under the current bounds are optimised (stable ones cannot change
    phase), the closest to stable (min(-l, u) / (u - l)) first. `cut_rounds`: up to that many rounds
    of ideal cuts per bound (0: the triangle LP). `min_gain`: after PROBE neurons the layer stops
    when less than this share of them became stable (the LPs do not pay there: the closest to
    stable come first). Returns (lo_j, hi_j, number of LPs solved); stops early at
    `deadline` (perf_counter), at the command deadline or at Ctrl-C (`solvers.runtime.past`);
    each LP is stopped there too (its bound is then still sound). `split` (per ReLU layer < j: +1
    neuron assumed active, -1 inactive, 0 free; their bounds in `pre_lo`/`pre_hi` already clamped):
    the phases enter the LP as rows z >= 0 / z <= 0, so the bounds hold where those phases hold and
    a split tightens the later layers through the input (a proven infeasible LP gives crossing
    bounds: no point of the box has those phases). `LayerLps` does the same for the layers of a
    box in order, without re-encoding the layers above each one.
    """
    return LayerLps(blocks, lo, hi, cut_rounds, split).tighten(pre_lo, pre_hi, j, deadline, min_gain)


class LayerLps:
    """`lp_tighten_layer` for layers of one box taken in increasing order: the LP encoding of the
    layers above is extended by the layers new since the last call (their bounds are final by
    then) rather than built again (LipMIP's 10-layer net: about half of each call was the
    encoding of the layers above)."""

    def __init__(self, blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, cut_rounds: int = 0,
                 split: list[np.ndarray] | None = None) -> None:
        self.blocks, self.lo, self.hi, self.cut_rounds = blocks, lo, hi, cut_rounds
        self.split = list(split or [])
        self.relaxation = "bigm" if cut_rounds else "triangle"
        self.builder = MilpBuilder()
        self.enc = encode_relu_network(self.builder, blocks, lo, hi, [], [], self.relaxation, layers=0)  # (x only)

    def tighten(self, pre_lo: list[np.ndarray], pre_hi: list[np.ndarray], j: int, deadline: float | None = None,
                min_gain: float = 0.0) -> tuple[np.ndarray, np.ndarray, int]:
        """`lp_tighten_layer(blocks, pre_lo, pre_hi, j, lo, hi, deadline, cut_rounds, min_gain, split)`;
        j must not decrease from one call to the next, and the bounds of layers encoded by an
        earlier call must be the ones given now."""
        blocks, lo, hi, cut_rounds = self.blocks, self.lo, self.hi, self.cut_rounds
        l_j, u_j = pre_lo[j].copy(), pre_hi[j].copy()
        unstable = np.flatnonzero(phases(l_j, u_j) == UNSTABLE)
        if unstable.size == 0 or j == 0 or past(deadline):
            return l_j, u_j, 0  # (past the deadline: not even the LP is built)
        l0, u0 = l_j[unstable], u_j[unstable]
        unstable = unstable[np.argsort(np.minimum(-l0, u0) / (u0 - l0), kind="stable")]
        builder, enc, done = self.builder, self.enc, len(self.enc.pre)
        if done > j:
            raise ValueError("LayerLps: layers must be tightened in increasing order")
        extend_relu_network(builder, enc, blocks, pre_lo, pre_hi, j, self.relaxation)
        constrain_phases(builder, enc, self.split[:j], first=done)
        model = builder.build()
        lp = SafeLp(model)  # (integrality relaxed: the big-M encoding's LP is the triangle's)
        vmax = np.maximum(np.abs(model.col_lo), np.abs(model.col_hi))
        rows = enc.post[j - 1].affine(blocks[j].weight, blocks[j].bias)
        coef = rows.widened(lp.num_vars)  # sparse: one dense row at a time (never rows x variables)
        # the objective rows compose weights through stable neurons in float64: widen by their error
        slack = rows.error(builder.vmax())

        def bound(c: np.ndarray, const: float) -> float:
            """max c v + const over the LP, tightened by rounds of cuts (each round's bound is sound)."""
            added: list = []
            best = min((out.bound for _, out in solve_with_cuts(lp, enc, blocks, lo, hi, pre_lo, pre_hi, vmax, c, const,
                                                               cut_rounds, deadline, added)), default=np.inf)
            if added:
                lp.delete_rows(np.concatenate(added))
            return best

        gains = []
        for i in unstable:
            if past(deadline) or (len(gains) == PROBE and np.mean(gains) < min_gain):
                break
            c_i = coef[[i]].toarray().reshape(-1)
            u_j[i] = min(u_j[i], np.nextafter(bound(c_i, rows.const[i]) + slack[i], np.inf))
            if u_j[i] > 0 and not past(deadline):  # (else proven inactive, or no time left)
                l_j[i] = max(l_j[i], np.nextafter(-bound(-c_i, -rows.const[i]) - slack[i], -np.inf))
            if len(gains) < PROBE:
                gains.append(float(l_j[i] >= 0 or u_j[i] <= 0))
        return l_j, u_j, lp.solves
