"""Every activation region of a small ReLU network inside a box, with a proof that none is missed.

A depth-first search over the hidden neurons, layer by layer, decides one phase at a time. A
partial pattern whose polytope (the decided neurons' sign constraints within the box) has no
interior is dropped only with a proof (`solvers.regions.has_no_interior`: a Farkas certificate of
"max depth <= 0", checked in float64 with a rounding allowance or in exact rationals); a branch the
LP finds flat but that cannot be proven so is kept (its completions count as regions: sound, only
looser). Phases are not branched on when they are known:

- stable neurons (sound pre-activation bounds of one sign on the box): the other phase's region
  has z = 0, so no interior unless z == 0 there, where both phases give the same Jacobian;
- tied neurons (`solvers.neuron_ties`: exact duplicates and negations): the phase follows the
  representative's, by the same argument.

So the leaves cover every full-dimensional region up to Jacobian-equivalent patterns, and
max over leaves of a certified ||J_leaf|| is a sound upper bound on the local Lipschitz constant,
resting on no solver's tolerance. Leaves carry an interior point when the LP found one (for the
witness replay, which makes the lower bound). The search stops at `deadline` or `max_nodes` LPs
and then reports itself incomplete (its leaves are then no bound at all).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from models.ir import Network

from .bounds.types import relu_blocks
from .neuron_ties import Tie, tied_bits
from .phases import ACTIVE, INACTIVE
from .regions import classify_region, interior_point
from .runtime import past


@dataclass
class RegionLeaf:
    pattern: list[np.ndarray]
    point: np.ndarray | None  # a point of the region's interior (None: kept without an LP point)


@dataclass
class Enumeration:
    leaves: list[RegionLeaf] = field(default_factory=list)
    complete: bool = False
    lps: int = 0
    pruned: int = 0       # branches proven to have no interior
    unproven: int = 0     # flat-looking branches kept for want of a proof
    seconds: float = 0.0


@dataclass
class RegionState:
    layer: int
    done: list[np.ndarray]   # full patterns of the layers before `layer`
    cur: np.ndarray          # decided phases of `layer` (0/1), first `k` valid
    k: int
    Mz: np.ndarray           # the layer's pre-activations as an affine map of x under `done`
    dz: np.ndarray
    x: np.ndarray | None     # an interior point of the partial pattern's region
    share: float = 1.0       # 2^-(branchings above): the part of the search tree below this state


def enumerate_regions(net: Network, lo: np.ndarray, hi: np.ndarray, phases: list[np.ndarray], ties: list[Tie],
                      deadline: float | None = None, max_nodes: int = 4000, max_leaves: int = 2000) -> Enumeration:
    """The activation regions of `net` in [lo, hi] (see module doc). `phases`: per hidden layer,
    `solvers.phases` codes from sound pre-activation bounds over the box."""
    t0 = time.perf_counter()
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    blocks = relu_blocks(net)
    hidden = blocks[:-1]
    out = Enumeration()
    tie_maps = [tied_bits(ties, j, b.weight.shape[0]) for j, b in enumerate(hidden)]
    x0 = interior_point(net, [], lo, hi)
    if x0 is None and np.any(hi > lo):
        x0 = 0.5 * (lo + hi)
    stack = [enter_layer(hidden, 0, [], np.eye(lo.size), np.zeros(lo.size), x0)]
    explored = 0.0  # share of the tree finished (leaves and pruned branches), for the projection
    while stack:
        if out.lps > max_nodes or len(out.leaves) > max_leaves or past(deadline) or _hopeless(t0, deadline, explored):
            out.seconds = time.perf_counter() - t0
            return out
        st = stack.pop()
        if st.layer == len(hidden):
            out.leaves.append(RegionLeaf(st.done, st.x))
            explored += st.share
            continue
        n_layer = st.cur.size
        if st.k == n_layer:
            s = st.cur.astype(np.float64)
            Ms, ds = s[:, None] * st.Mz, s * st.dz
            nxt = enter_layer(hidden, st.layer + 1, st.done + [s], Ms, ds, st.x)
            nxt.share = st.share
            stack.append(nxt)
            continue
        k = st.k
        forced = forced_phase(phases[st.layer][k], tie_maps[st.layer], st.cur, k)
        if forced is not None:
            stack.append(child_state(st, forced, st.x))
            continue
        z_x = None if st.x is None else float(st.Mz[k] @ st.x + st.dz[k])
        mag = None if st.x is None else float(np.abs(st.Mz[k]) @ np.abs(st.x) + abs(st.dz[k]))
        sure = z_x is not None and abs(z_x) > 1e-9 * mag + 1e-300
        children = []
        half = RegionState(st.layer, st.done, st.cur, st.k, st.Mz, st.dz, st.x, st.share / 2)
        for bit in (1, 0):
            if sure and (z_x > 0) == bool(bit):
                # the parent's interior point is strictly on this side: still interior
                children.append(child_state(half, bit, st.x))
                continue
            pattern, mask = partial_pattern(st, bit)
            out.lps += 1
            x, flat = classify_region(net, pattern, lo, hi, deadline=deadline, mask=mask)
            if x is not None:
                children.append(child_state(half, bit, x))
            elif flat:
                out.pruned += 1
                explored += half.share
            else:
                out.unproven += 1
                children.append(child_state(half, bit, None))
        stack.extend(children)
    out.complete = True
    out.seconds = time.perf_counter() - t0
    return out


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
    return RegionState(st.layer, st.done, cur, st.k + 1, st.Mz, st.dz, x, st.share)


HOPELESS_AFTER = 0.2  # of the time allowed: from then on, stop when the projected total is ...
HOPELESS_FACTOR = 1.3  # ... this many times the time allowed (the caller's next method needs it)


def _hopeless(t0: float, deadline: float | None, explored: float) -> bool:
    """Will the search clearly not finish by the deadline? The projection divides the time spent
    by the share of the tree finished (a Knuth-style estimate: each branching halves the share)."""
    if deadline is None:
        return False
    spent, allowed = time.perf_counter() - t0, deadline - t0
    if spent < HOPELESS_AFTER * allowed:
        return False
    return spent / max(explored, 1e-12) > HOPELESS_FACTOR * allowed


def partial_pattern(st: RegionState, bit: int) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    cur = st.cur.astype(np.float64)
    cur[st.k] = bit
    mask = np.zeros(cur.size, dtype=bool)
    mask[: st.k + 1] = True
    return st.done + [cur], [None] * len(st.done) + [mask]


__all__ = ["Enumeration", "RegionLeaf", "RegionState", "child_state", "enter_layer", "enumerate_regions", "forced_phase",
           "partial_pattern"]
