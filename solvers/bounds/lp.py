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

import os
import time
from typing import Callable

import numpy as np

from models.ir import Affine

from ..lp import MilpBuilder, SafeLp, encode_relu_network
from ..lp.relu import constrain_phases, extend_relu_network
from ..lp.relu_cuts import solve_with_cuts
from ..phases import UNSTABLE, phases
from ..runtime import ReportingWorker, die_with_parent, forked_child, may_fork_helpers, past, reporting_to

PROBE = 8  # neurons of a layer whose gain decides whether its LPs go on (`min_gain`)
# a layer's LPs after the probe go to two processes when they would take this long in one (at the
# probe's pace): a fork and the worker's own LP cost tens of milliseconds on a 784-input net
SHARE_SECONDS = 0.25


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
                min_gain: float = 0.0, workers: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
        """`lp_tighten_layer(blocks, pre_lo, pre_hi, j, lo, hi, deadline, cut_rounds, min_gain, split)`;
        j must not decrease from one call to the next, and the bounds of layers encoded by an
        earlier call must be the ones given now. `workers` > 1: the layer's neurons after the probe
        are shared with a forked worker (`share_neurons`)."""
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
        vmax = np.maximum(np.abs(model.col_lo), np.abs(model.col_hi))
        rows = enc.post[j - 1].affine(blocks[j].weight, blocks[j].bias)
        coef = rows.widened(model.num_vars)  # sparse: one dense row at a time (never rows x variables)
        # the objective rows compose weights through stable neurons in float64: widen by their error
        slack = rows.error(builder.vmax())

        lps = [SafeLp(model)]  # (integrality relaxed: the big-M encoding's LP is the triangle's)

        def fresh() -> SafeLp:  # a forked worker's own LP (a solver instance is not shared across a fork)
            lps[0] = SafeLp(model)
            return lps[0]

        def bound(c: np.ndarray, const: float) -> float:
            """max c v + const over the LP, tightened by rounds of cuts (each round's bound is sound)."""
            lp, added = lps[0], []
            best = min((out.bound for _, out in solve_with_cuts(lp, enc, blocks, lo, hi, pre_lo, pre_hi, vmax, c, const,
                                                               cut_rounds, deadline, added)), default=np.inf)
            if added:
                lp.delete_rows(np.concatenate(added))
            return best

        def one(i: int) -> tuple[float, float]:
            c_i = coef[[i]].toarray().reshape(-1)
            u = min(u_j[i], np.nextafter(bound(c_i, rows.const[i]) + slack[i], np.inf))
            l = l_j[i]
            if u > 0 and not past(deadline):  # (else proven inactive, or no time left)
                l = max(l, np.nextafter(-bound(-c_i, -rows.const[i]) - slack[i], -np.inf))
            return float(l), float(u)

        def run(neurons) -> list[tuple[int, float, float]]:
            out = []
            for i in neurons:
                if past(deadline):
                    break
                out.append((int(i), *one(i)))
            return out

        gains, t0 = [], time.perf_counter()
        for i, l, u in run(unstable[:PROBE]):
            l_j[i], u_j[i] = l, u
            gains.append(float(l >= 0 or u <= 0))
        rest = unstable[PROBE:] if len(gains) == PROBE and np.mean(gains) >= min_gain else unstable[:0]
        pace = (time.perf_counter() - t0) / max(len(gains), 1)
        done_rest, there = share_neurons(rest, run, fresh, workers if pace * len(rest) >= SHARE_SECONDS else 1, deadline)
        for i, l, u in done_rest:
            l_j[i], u_j[i] = max(l_j[i], l), min(u_j[i], u)
        return l_j, u_j, lps[0].solves + there


def share_neurons(neurons: np.ndarray, run: Callable[[np.ndarray], list], fresh: Callable[[], SafeLp], workers: int,
                  deadline: float | None) -> tuple[list, int]:
    """`run(neurons)` (a list of (neuron, lower, upper)) on this process and one forked worker,
    every other neuron each: the results of both and the worker's LP count. The worker first calls
    `fresh()` for an LP of its own. One process when `workers` < 2, or this process may not fork
    helpers (`solvers.runtime.may_fork_helpers`: no fork, one core, or a worker itself). A worker
    that fails, dies, or has not reported `runtime.REPORT_JOIN` seconds after the deadline or a stop leaves its
    neurons to this process (which runs them while time is left; the bounds not reached stay as
    they were)."""
    if workers < 2 or len(neurons) < 2 or not may_fork_helpers():
        return run(neurons), 0
    mine, theirs = neurons[0::2], neurons[1::2]
    try:
        worker = ReportingWorker(_neuron_worker, (run, fresh, theirs, os.getpid()))
    except OSError:
        return run(neurons), 0
    try:  # (whatever this process's half raises, the worker is ended)
        out = run(mine)
        msg = worker.wait(stop=lambda: past(deadline))
    finally:
        worker.close()
    if msg[0] == "done":
        return out + msg[1], msg[2]
    return out + run(theirs), 0


def _neuron_worker(conn, run, fresh, neurons: np.ndarray, parent: int) -> None:
    forked_child()
    die_with_parent(parent)
    with reporting_to(conn):  # (on an error the parent runs these neurons itself)
        lp = fresh()
        conn.send(("done", run(neurons), lp.solves))
