"""Partial activation patterns of a small ReLU network inside a box: the search state of
`solvers.region_bab`, which decides one phase at a time, layer by layer.

A partial pattern whose polytope (the decided neurons' sign constraints within the box) has no
interior is dropped only with a proof (`solvers.regions.has_no_interior`: a Farkas certificate of
"max depth <= 0", checked in float64 with a rounding allowance or in exact rationals); a branch the
LP finds flat but that cannot be proven so is kept (sound, only looser). Phases are not branched
on when they are known (`forced_phase`):

- stable neurons (sound pre-activation bounds of one sign on the box): the other phase's region
  has z = 0, so no interior unless z == 0 there, where both phases give the same Jacobian;
- tied neurons (`solvers.neuron_ties`: exact duplicates and negations): the phase follows the
  representative's, by the same argument.

So the complete patterns cover every full-dimensional region up to Jacobian-equivalent patterns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .phases import ACTIVE, INACTIVE


@dataclass
class RegionState:
    layer: int
    done: list[np.ndarray]   # full patterns of the layers before `layer`
    cur: np.ndarray          # decided phases of `layer` (0/1), first `k` valid
    k: int
    Mz: np.ndarray           # the layer's pre-activations as an affine map of x under `done`
    dz: np.ndarray
    x: np.ndarray | None     # an interior point of the partial pattern's region


def enter_layer(hidden, layer: int, done: list[np.ndarray], M: np.ndarray, d: np.ndarray, x) -> RegionState:
    if layer == len(hidden):
        return RegionState(layer, done, np.zeros(0), 0, M, d, x)
    W, b = hidden[layer].weight, hidden[layer].bias
    return RegionState(layer, done, np.zeros(W.shape[0], dtype=np.int8), 0, W @ M, W @ d + b, x)


def forced_phase(phase: int, ties: tuple[np.ndarray, np.ndarray], cur: np.ndarray, k: int) -> int | None:
    if phase == ACTIVE:
        return 1
    if phase == INACTIVE:
        return 0
    source, same = ties
    if source[k] >= 0:
        return int(cur[source[k]]) if same[k] else 1 - int(cur[source[k]])
    return None


def child_state(st: RegionState, bit: int, x) -> RegionState:
    cur = st.cur.copy()
    cur[st.k] = bit
    return RegionState(st.layer, st.done, cur, st.k + 1, st.Mz, st.dz, x)


def partial_pattern(st: RegionState, bit: int) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    cur = st.cur.astype(np.float64)
    cur[st.k] = bit
    mask = np.zeros(cur.size, dtype=bool)
    mask[: st.k + 1] = True
    return st.done + [cur], [None] * len(st.done) + [mask]


__all__ = ["RegionState", "child_state", "enter_layer", "forced_phase", "partial_pattern"]
