"""Best-first branch-and-bound over the activation patterns of a small ReLU network in a box.

Listing every activation region costs one LP per region; on a box crossed by many hyperplanes (a
4-input net with 14 unstable ReLUs holds thousands of regions) that is too many, while the local
Lipschitz constant is decided by the few regions of largest Jacobian norm. This search decides
phases layer by layer (`solvers.region_patterns`: stable and tied neurons never branched on, a
branch dropped only with a Farkas proof that its region has no interior), but bounds every
partial pattern by a caller's `bound(s_lo, s_hi)`: a sound upper bound of the Jacobian norm over
every slope choice in [s_lo, s_hi] (decided neurons fixed, undecided unstable ones in [0, 1]). The
node of largest bound is expanded first, so:

- a complete pattern's bound is its region's certified norm; the caller replays a witness there
  (`settle`), which raises the lower bound;
- a child whose bound is already closed against the lower bound (`done`) is dropped before its
  LP (its bound counts in the result);
- the search ends when the largest open bound is closed against the lower bound: every
  remaining region's norm is at most that bound, so it is the proven upper bound;
- stopped early (deadline, LP budget), max(settled, largest open bound) is still a sound upper
  bound: every region lies below some open node or a settled one.

Soundness rests on: the bound being sound for every slope in the box (Clarke Jacobians at ties
included), Farkas proofs for dropped branches, and the tie/stability argument of `region_patterns`
(patterns that contradict a tie or a stable phase have regions without interior, on which both
phases give the same Jacobian).
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from models.ir import Network

from .bounds.types import relu_blocks
from .neuron_ties import Tie, tied_bits
from .phases import ACTIVE, INACTIVE
from .region_patterns import RegionState, child_state, enter_layer, forced_phase, partial_pattern
from .regions import classify_region, interior_point
from .runtime import past

Slopes = list[np.ndarray]


@dataclass
class RegionBab:
    upper: float        # sound upper bound on the norm over the box (complete or not)
    complete: bool      # the upper bound was closed against the lower one (`done`)
    leaves: int = 0     # complete patterns settled
    lps: int = 0
    pruned: int = 0     # branches proven to have no interior
    bounded: int = 0    # branches dropped by their bound (closed against the lower bound)
    unproven: int = 0   # flat-looking branches kept for want of a proof
    open_nodes: int = 0
    seconds: float = 0.0


def region_bab(net: Network, lo: np.ndarray, hi: np.ndarray, phases: list[np.ndarray], ties: list[Tie],
               bound: Callable[[Slopes, Slopes], float], settle: Callable[[list[np.ndarray], np.ndarray | None, float], bool],
               done: Callable[[float], bool], deadline: float | None = None, max_lps: int = 3000) -> RegionBab:
    """Maximise the Jacobian norm over the box's activation regions (see module doc). `settle(pattern,
    point, norm)` is called on each complete pattern popped (point: one inside its region when the LP
    found it); it returns True when it proved the region has no interior after all (an LP depth
    within the solver's tolerance that no witness replays), and the pattern is dropped; `done(b)` says whether an open bound b is closed against the caller's lower bound."""
    t0 = time.perf_counter()
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    hidden = relu_blocks(net)[:-1]
    tie_maps = [tied_bits(ties, j, b.weight.shape[0]) for j, b in enumerate(hidden)]
    base_lo = [(ph == ACTIVE).astype(np.float64) for ph in phases]
    base_hi = [(ph != INACTIVE).astype(np.float64) for ph in phases]
    out = RegionBab(math.inf, False)

    def advance(st: RegionState) -> RegionState:
        """Decide what is decided: forced phases, and entering the next layer."""
        while st.layer < len(hidden):
            if st.k == st.cur.size:
                s = st.cur.astype(np.float64)
                st = enter_layer(hidden, st.layer + 1, st.done + [s], s[:, None] * st.Mz, s * st.dz, st.x)
                continue
            bit = forced_phase(phases[st.layer][st.k], tie_maps[st.layer], st.cur, st.k)
            if bit is None:
                break
            st = child_state(st, bit, st.x)
        return st

    def slopes(st: RegionState) -> tuple[Slopes, Slopes]:
        s_lo, s_hi = list(st.done), list(st.done)
        if st.layer < len(hidden):
            cur = st.cur[: st.k].astype(np.float64)
            s_lo.append(np.concatenate([cur, base_lo[st.layer][st.k:]]))
            s_hi.append(np.concatenate([cur, base_hi[st.layer][st.k:]]))
            s_lo += base_lo[st.layer + 1:]
            s_hi += base_hi[st.layer + 1:]
        return s_lo, s_hi

    count = itertools.count()
    x0 = interior_point(net, [], lo, hi)
    if x0 is None and np.any(hi > lo):
        x0 = 0.5 * (lo + hi)
    root = advance(enter_layer(hidden, 0, [], np.eye(lo.size), np.zeros(lo.size), x0))
    heap = [(-bound(*slopes(root)), next(count), root)]
    settled = -math.inf
    while heap:
        b = -heap[0][0]
        if done(b):
            out.complete = True
            break
        if out.lps > max_lps or past(deadline):
            break
        _, _, st = heapq.heappop(heap)
        if st.layer == len(hidden):
            if settle(st.done, st.x, b):
                out.pruned += 1
                continue
            out.leaves += 1
            settled = max(settled, b)
            continue
        for bit in (1, 0):
            # bounded first: a child closed against the lower bound needs no LP nor emptiness proof
            # (the child's slopes are a subset of the parent's: both bounds hold, keep the smaller)
            cb = min(b, bound(*slopes(advance(child_state(st, bit, None)))))
            if done(cb):
                out.bounded += 1
                settled = max(settled, cb)
                continue
            kept, x = _child_region(net, st, bit, lo, hi, deadline, out)
            if kept:
                heapq.heappush(heap, (-cb, next(count), advance(child_state(st, bit, x))))
    out.complete = out.complete or not heap
    out.open_nodes = len(heap)
    out.upper = max(settled, -heap[0][0] if heap else -math.inf)
    out.seconds = time.perf_counter() - t0
    return out


def _child_region(net: Network, st: RegionState, bit: int, lo: np.ndarray, hi: np.ndarray, deadline: float | None,
                  out: RegionBab) -> tuple[bool, np.ndarray | None]:
    """(False when neuron st.k's phase `bit` is proven to leave no interior, else True with an
    interior point of the child's partial region when one is known)."""
    k = st.k
    if st.x is not None:
        z_x = float(st.Mz[k] @ st.x + st.dz[k])
        mag = float(np.abs(st.Mz[k]) @ np.abs(st.x) + abs(st.dz[k]))
        if abs(z_x) > 1e-9 * mag + 1e-300 and (z_x > 0) == bool(bit):
            return True, st.x  # the parent's interior point is strictly on this side
    pattern, mask = partial_pattern(st, bit)
    out.lps += 1
    x, flat = classify_region(net, pattern, lo, hi, deadline=deadline, mask=mask)
    if x is not None:
        return True, x
    if flat:
        out.pruned += 1
        return False, None
    out.unproven += 1
    return True, None


__all__ = ["RegionBab", "region_bab"]
