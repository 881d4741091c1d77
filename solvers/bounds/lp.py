"""LP tightening of unstable neurons (triangle relaxation of the earlier layers) with safe bounds.

For each unstable neuron of layer j we maximise and minimise z_j over the LP relaxation of layers
< j (MIPVerify's "LP" step) with `solvers.lp.SafeLp`: the bound is recomputed from the solver's
multipliers by weak duality in float64 (sound whatever the solver's tolerances were), and widened
by the rounding error of the composed objective row (`Expr.error`).
"""

from __future__ import annotations

import numpy as np

from models.ir import Affine

from ..lp import MilpBuilder, SafeLp, encode_relu_network
from ..phases import UNSTABLE, phases
from ..runtime import past


def lp_tighten_layer(
    blocks: list[Affine],
    pre_lo: list[np.ndarray],
    pre_hi: list[np.ndarray],
    j: int,
    lo: np.ndarray,
    hi: np.ndarray,
    deadline: float | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Tightened bounds of z_j (layers < j must already have their final bounds).

    Only neurons unstable under the current bounds are optimised (stable ones cannot change
    phase). Returns (lo_j, hi_j, number of LPs solved); stops early at `deadline` (perf_counter),
    at the command deadline or at Ctrl-C (`solvers.runtime.past`).
    """
    l_j, u_j = pre_lo[j].copy(), pre_hi[j].copy()
    unstable = np.flatnonzero(phases(l_j, u_j) == UNSTABLE)
    if unstable.size == 0 or j == 0 or past(deadline):
        return l_j, u_j, 0  # (past the deadline: not even the LP is built)
    builder = MilpBuilder()
    enc = encode_relu_network(builder, blocks, lo, hi, pre_lo, pre_hi, relaxation="triangle", layers=j)
    lp = SafeLp(builder.build())
    rows = enc.post[j - 1].affine(blocks[j].weight, blocks[j].bias)
    coef = rows.widened(lp.num_vars)  # sparse: one dense row at a time (never rows x variables)
    # the objective rows compose weights through stable neurons in float64: widen by their error
    slack = rows.error(builder.vmax())
    for i in unstable:
        if past(deadline):
            break
        c_i = coef[[i]].toarray().reshape(-1)
        u_j[i] = min(u_j[i], np.nextafter(lp.upper(c_i, rows.const[i]) + slack[i], np.inf))
        if u_j[i] <= 0:
            continue  # proven inactive
        if past(deadline):
            break
        l_j[i] = max(l_j[i], np.nextafter(lp.lower(c_i, rows.const[i]) - slack[i], -np.inf))
    return l_j, u_j, lp.solves
