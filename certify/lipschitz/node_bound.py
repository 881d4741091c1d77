"""The node bound the MILP's proof computes before any LP: the Jacobian branch-and-bound's bound.

A node of the proof (`solvers.bab.prove_bound`) fixes some of the MILP's binaries, i.e. the phases
of some unstable ReLUs. With those phases imposed, the shared bound engine re-derives the
pre-activation bounds of the box (symbolic, the root's bounds intersected: `network_bounds` with
`fixed`, exactly as `certify.lipschitz.bab` bounds its nodes), so more neurons become stable and a
contradictory pattern is found empty; the Clarke-Jacobian bound over the resulting slope intervals
(`clarke_norm_bound`, linear bounds of the Jacobian passes included) bounds the Lipschitz constant
on the node. On LipMIP's nets it is 1.5-2x below the big-M LP relaxation near the root and exact
once every phase is fixed, so most nodes close without an LP. Everything is computed in float64
with rounding allowances from the network itself: nothing rests on a solver's tolerance.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bounds import BoundOptions, bound_boxes
from solvers.bounds.jacobian import MAX_SIGN_OUTPUTS, clarke_norm_bound_batch
from solvers.bounds.jacobian_interval import phase_slopes
from solvers.bounds.types import Bounds, relu_blocks
from solvers.milp.lipschitz import LipschitzMilp
from solvers.rounding import gamma

# the output layer's bounds are not used here: its back-substitution is skipped (interval bounds
# stand; 10-10-10-10-10-2's proof: same 3421 nodes, 17-24% less time with the cached root below)
OPTIONS = BoundOptions(method="symbolic", symbolic_output=False)


def clarke_node_bound(net: Network, box: Box, root: Bounds, milp: LipschitzMilp, pair: tuple[str, str | None],
                      target: np.ndarray | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """`phase_bound(col_lo, col_hi)` for the proof of `milp` (a linear model; None for the
    quadratic l2 ones, whose proof has its own node bound): a sound upper bound, in the model's
    objective units, on the Lipschitz constant of `pair` (or of c^T f) over the part of the box
    where the phases fixed by the node's binaries hold (-inf when that part is empty)."""
    if milp.model.is_quadratic or milp.objective.norm == "l2sq":
        return None
    blocks = relu_blocks(net)
    weights = [b.weight for b in blocks]
    lo, hi = np.array(box.lo, dtype=np.float64), np.array(box.hi, dtype=np.float64)
    layers = [(np.flatnonzero(d >= 0), d[d >= 0]) for d in milp.forward.delta]
    shapes = [d.size for d in milp.forward.delta]
    exp = milp.in_exp + milp.out_exp
    # the linear bounds of the Jacobian passes only where the input directions are enumerated (l1,
    # or linf up to MAX_SIGN_OUTPUTS inputs: paired with the output functionals): on LipMIP's
    # 10-10-10-10-10-2 they cut the proof's nodes 2.7x (9199 -> 3421); with 64 inputs (digits MLPs)
    # the proof closed with the same 827 nodes without them, 9 s instead of 84 s
    n0 = weights[0].shape[1]
    linear = -math.inf if pair[0] == "l1" or (pair[0] == "linf" and n0 <= MAX_SIGN_OUTPUTS) else None
    stacked: dict[int, tuple[np.ndarray, np.ndarray, Bounds]] = {}  # the root's box and bounds per batch size

    def roots(B: int) -> tuple[np.ndarray, np.ndarray, Bounds]:
        # (read-only for bound_boxes: built once per batch size rather than at every call)
        if B not in stacked:
            stacked[B] = (np.repeat(lo[None], B, axis=0), np.repeat(hi[None], B, axis=0), Bounds.stack([root] * B))
        return stacked[B]

    def bound(col_lo: np.ndarray, col_hi: np.ndarray) -> np.ndarray:
        B = col_lo.shape[0]
        fixed = []
        for (neurons, cols), n in zip(layers, shapes):
            f = np.zeros((B, n), dtype=np.int8)
            on, off = col_lo[:, cols] >= 0.5, col_hi[:, cols] <= 0.5  # binary fixed to 1: active; to 0: inactive
            f[:, neurons] = np.where(on, 1, np.where(off, -1, 0))
            fixed.append(f)
        box_lo, box_hi, parents = roots(B)
        nb = bound_boxes(blocks, box_lo, box_hi, OPTIONS, parents=parents, fixed=fixed)
        value = clarke_norm_bound_batch(weights, *phase_slopes(nb.phases()), pair[0], pair[1], target, linear)
        # the objective is the constant times 2^exp (exact powers of two), rounded up for safety
        scaled = np.ldexp(np.asarray(value, dtype=np.float64), exp)
        out = scaled + 2.0 * gamma(4) * np.abs(scaled) + 1e-300
        out[~np.isfinite(scaled)] = scaled[~np.isfinite(scaled)]
        out[nb.empty] = -math.inf  # the fixed phases cannot hold together on the box
        return out

    return bound


__all__ = ["clarke_node_bound"]
