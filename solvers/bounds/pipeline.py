"""The bound engine: progressive tightening, layer by layer, interval -> symbolic -> LP (MIPVerify-style),
for one box or a batch of boxes.

Layer j is bounded from the final bounds of layers < j; each step is intersected with the previous
one and with the parent's bounds when given (a child box lies inside its parent: its bounds are
never looser), and the LP step only touches neurons still unstable. Branch-and-bound nodes also
pass fixed ReLU phases. Step times and unstable counts are recorded so their effect can be
measured (`Bounds.steps`). What each step does is chosen by one `BoundOptions`.

Two savings of the batched symbolic step, both sound because a child box lies inside its parent:
a neuron stable on the parent is stable on the child, so only neurons still unstable are
back-substituted again; and neurons inactive on every box of the batch are dropped from the
back-substitution (`symbolic.LiveLayers`: their coefficients are exact zeros).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Literal

import numpy as np

from models.errors import BadInput
from models.ir import Affine, Network
from models.memory import fits

from ..choices import BOUND_METHODS
from ..runtime import command_deadline, earliest, stop_requested
from .interval import affine_interval, magnitudes
from .lp import LayerLps
from .options import BoundOptions
from .symbolic import (LiveLayers, backsubstitute_upper, best_of_slopes, given_slopes_bound, optimized_slopes_bound,
                       row_block)
from .types import Bounds, StepStats, phases, relu_blocks

BoundMethod = Literal["interval", "symbolic", "lp"]
METHODS = BOUND_METHODS
# with a deadline (`BoundOptions.deadline`), symbolic rows are back-substituted in blocks of about this
# many multiply-adds, the deadline checked before each (one layer of a CIFAR conv net at once took
# seconds); the rows are independent, so the blocks change no bound
CHUNK_WORK = 5e8


def _cut(options: BoundOptions) -> bool:
    """Has the bound computation's deadline passed (or Ctrl-C)?"""
    return stop_requested() or (options.deadline is not None and time.perf_counter() >= options.deadline)


def _with_command_deadline(options: BoundOptions) -> BoundOptions:
    """Options without a deadline of their own get the command's (`--time-limit`): a caller that
    passed none (local Lipschitz bounds) ran one CIFAR-style layer's back-substitution 12 minutes
    past a 60 s limit. A deadline already set is kept (verify leaves a grace after the command's)."""
    end = command_deadline()
    return replace(options, deadline=end) if options.deadline is None and end is not None else options


def network_bounds(
    net: Network,
    lo: np.ndarray,
    hi: np.ndarray,
    method: BoundMethod = "lp",
    *,
    lp_deadline: float | None = None,
    lp_output: bool = False,
    lp_cuts: int = 0,
    lp_workers: int = 1,
    fixed: list[np.ndarray] | None = None,
    prior: Bounds | None = None,
) -> Bounds | None:
    """Sound pre-activation bounds of every ReLU layer of `net` over lo <= x <= hi: `bound_boxes`
    for a batch of one box with `BoundOptions(method, lp_deadline=..., lp_output=..., lp_cuts=...,
    lp_workers=...)`.

    Branch-and-bound nodes pass `fixed` (per ReLU layer: +1 neuron assumed active, -1 inactive,
    0 free) and `prior` (the parent's bounds, intersected layer by layer): the bounds then hold
    on the part of the box where the fixed phases hold, and None means that part is empty.
    """
    options = BoundOptions(method=method, lp_deadline=lp_deadline, lp_output=lp_output, lp_cuts=lp_cuts,
                           lp_workers=lp_workers)
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.shape != (net.input_dim,) or hi.shape != (net.input_dim,) or np.any(lo > hi):
        raise BadInput(f"the input box must be two vectors of {net.input_dim} values with lo <= hi")
    nb = bound_boxes(relu_blocks(net), lo[None], hi[None], options,
                     parents=None if prior is None else Bounds.stack([prior]),
                     fixed=None if fixed is None else [np.asarray(f)[None] for f in fixed])
    if nb.empty[0]:
        return None  # the fixed phases contradict each other on this box
    one = nb.box(0)
    one.steps = nb.steps
    return one


def bound_boxes(
    blocks: list[Affine],
    lo: np.ndarray,
    hi: np.ndarray,
    options: BoundOptions = BoundOptions(),
    *,
    parents: Bounds | None = None,
    fixed: list[np.ndarray] | None = None,
    sens: list | None = None,
    rebound_from: int = 1,
    slopes_out: dict | None = None,
    row_slopes: dict | None = None,
) -> Bounds:
    """Sound bounds of every layer of the network `blocks` (`relu_blocks`) over each box
    lo[b] <= x <= hi[b] (B, n): a `Bounds` of (B, n_j) arrays.

    `parents`: bounds (a batch of B) of boxes containing them, intersected layer by layer.
    `fixed` (per ReLU layer, (B, n_j): +1 assumed active, -1 inactive, 0 free): each box's bounds
    hold on the part of the box where its phases hold; `empty[b]` marks the boxes where that part
    is empty (the phases contradict sound bounds; their bounds are placeholders). Without fixed
    phases crossing bounds are an internal error.
    With `sens` (a list), appends per ReLU layer the sensitivity of each neuron to each input,
    |a_up| + |a_lo| of its linear bounds (B, n_j, n), for split hints (`rows` "all" or "unstable").
    `rebound_from` (with `parents`, without `sens`): the symbolic step starts at that layer; the
    earlier layers keep the parents' bounds (intersected with the interval step), e.g. below a
    branch-and-bound child's new split, which changes no bound of its own or earlier layers.
    `slopes_out` (a dict, one box, "per-box" rows with optimised slopes): receives per layer j whose
    slopes were optimised (idx (R,), slopes per ReLU layer t < j (1, 2R, n_t)), its unstable neurons
    and the rows' slopes. `row_slopes` (such a dict, from a box containing these): the symbolic
    re-bound of those neurons also back-substitutes them with the given slopes and keeps the
    smaller bound (`symbolic.given_slopes_bound`; optimised once on a root, they keep most of
    what re-optimising them on a child would gain, at the cost of one more back-substitution).
    """
    options = _with_command_deadline(options)
    B = lo.shape[0]
    K = len(blocks) - 1
    steps = {name: StepStats(name) for name in METHODS[: METHODS.index(options.method) + 1]}
    empty = np.zeros(B, dtype=bool)
    mags = magnitudes([b.weight for b in blocks], [b.bias for b in blocks], lo, hi)
    live = LiveLayers(blocks)
    pre_lo: list[np.ndarray] = []
    pre_hi: list[np.ndarray] = []
    prev_lo, prev_hi = lo, hi
    layer_lps: list[LayerLps] = []
    for j in range(K + 1):
        t = time.perf_counter()
        l, u = affine_interval(blocks[j].weight, blocks[j].bias, prev_lo, prev_hi)
        steps["interval"].seconds += time.perf_counter() - t
        _count(steps["interval"], j, K, l, u)
        if parents is not None:  # sub-boxes of the parents': never looser than their bounds
            pl, pu = (parents.pre_lo[j], parents.pre_hi[j]) if j < K else (parents.out_lo, parents.out_hi)
            l, u = np.maximum(l, pl), np.minimum(u, pu)
        if j > 0 and options.symbolic and (j < K or options.symbolic_output) and not _cut(options) and (
                parents is None or sens is not None or j >= rebound_from):
            t = time.perf_counter()
            if options.rows == "per-box" and j < K and sens is None:
                _rebound_per_box(live, j, l, u, lo, hi, mags[j], options, K - j, slopes_out)
            else:
                every = j == K or (options.rows == "all" and parents is None)
                given = None if row_slopes is None or sens is not None else row_slopes.get(j)
                _rebound(live, j, l, u, lo, hi, mags[j], options, every, sens, given)
            steps["symbolic"].seconds += time.perf_counter() - t
        elif sens is not None and j < K:
            sens.append(np.broadcast_to(np.abs(blocks[0].weight), (B,) + blocks[0].weight.shape) if j == 0
                        else np.zeros((B, blocks[j].out_dim, lo.shape[1])))
        if "symbolic" in steps:
            _count(steps["symbolic"], j, K, l, u)
        if j > 0 and "lp" in steps and (j < K or options.lp_output):
            t = time.perf_counter()
            lp_deadline = earliest(options.lp_deadline, options.deadline)
            if not layer_lps:  # (per box: each extends its encoding of the layers above)
                layer_lps = [LayerLps(blocks, lo[b], hi[b], options.lp_cuts) for b in range(B)]
            for b in range(B):
                l[b], u[b], lps = layer_lps[b].tighten([p[b] for p in pre_lo] + [l[b]], [p[b] for p in pre_hi] + [u[b]],
                                                       j, deadline=lp_deadline, min_gain=options.lp_min_gain,
                                                       workers=options.lp_workers)
                steps["lp"].lps += lps
            steps["lp"].seconds += time.perf_counter() - t
        if "lp" in steps:
            _count(steps["lp"], j, K, l, u)
        if fixed is not None:
            if j < K:
                l = np.where(fixed[j] > 0, np.maximum(l, 0.0), l)
                u = np.where(fixed[j] < 0, np.minimum(u, 0.0), u)
            # sound bounds of the phase-restricted part that cross: that part is empty
            empty |= np.any(l > u, axis=1)
            u = np.where(empty[:, None], np.maximum(u, l), u)  # finite placeholders
        elif np.any(l > u):  # two sound bounds cannot cross
            raise RuntimeError(f"internal error: crossing bounds in layer {j}; please report this model")
        pre_lo.append(l)
        pre_hi.append(u)
        if j < K:
            if options.symbolic:
                live.add(l, u)
            prev_lo, prev_hi = np.maximum(l, 0.0), np.maximum(u, 0.0)
    out_lo, out_hi = pre_lo.pop(), pre_hi.pop()
    return Bounds(lo, hi, pre_lo, pre_hi, out_lo, out_hi, options.method, list(steps.values()), empty,
                         relaxed=(live, mags))


def _rebound(live: LiveLayers, j: int, l: np.ndarray, u: np.ndarray, lo, hi, mag, options: BoundOptions,
             every: bool, sens: list | None, given: tuple | None = None) -> None:
    """Back-substitute, in place, rows +-e_i of layer j: every neuron, or those unstable in some box
    (the only ones worth re-bounding below a parent), built block by block (never the n x n identity).
    With a deadline, in blocks of about `CHUNK_WORK`; the neurons not reached by then keep their bounds."""
    B, n = l.shape
    idx = np.arange(n) if every else np.flatnonzero(np.any((l < 0) & (u > 0), axis=0))
    if sens is not None:
        s_j = np.zeros((B, n, lo.shape[1]))
    step = max(idx.size, 1) if sens is not None else max(row_block(live.blocks, j, 2 * idx.size, n, B) // 2, 1)
    if options.deadline is not None:
        passes = (1 if options.lower_slopes == "crown" else 3) + (given is not None)
        per_row = passes * B * (sum(live.work(t) for t in range(j)) + live.blocks[j].weight.size)
        step = max(min(step, int(CHUNK_WORK / (2 * per_row))), 1)
    for s in range(0, idx.size, step):
        if _cut(options):
            break
        rows = idx[s:s + step]
        k = rows.size
        part = slice(s, s + k) if every else rows  # (every neuron: in place through views)
        C = np.zeros((2 * k, n))
        C[np.arange(k), rows] = 1.0
        C[k + np.arange(k), rows] = -1.0
        up, lam = backsubstitute_upper(live, j, C, lo, hi, mag)
        if options.lower_slopes != "crown":
            up = best_of_slopes(live, j, C, lo, hi, mag, up)
        if given is not None:
            up = np.minimum(up, given_slopes_bound(live, j, rows, lo, hi, mag, given))
        u[:, part] = np.minimum(u[:, part], up[:, :k])
        l[:, part] = np.maximum(l[:, part], -up[:, k:])
        if sens is not None:
            s_j[:, part] = np.abs(lam[:, :k]) + np.abs(lam[:, k:])
    if sens is not None:
        sens.append(s_j)


def _rebound_per_box(live: LiveLayers, j: int, l: np.ndarray, u: np.ndarray, lo, hi, mag,
                     options: BoundOptions, layers_left: int = 1, slopes_out: dict | None = None) -> None:
    """Back-substitute, in place, each box's own unstable neurons of layer j (padded to the
    largest count with repeats of a neuron of the box, which bound it again harmlessly)
    rather than every neuron unstable in some box of the batch. With optimised slopes, only
    the neurons the fixed slopes left unstable are bounded again."""
    rows = _unstable_rows(l, u)
    if rows is None or _cut(options):
        return
    C, idx = rows
    up, _ = backsubstitute_upper(live, j, C, lo, hi, mag)
    if options.lower_slopes != "crown":
        up = best_of_slopes(live, j, C, lo, hi, mag, up)
    _tighten(l, u, idx, up)
    if options.lower_slopes != "alpha" or not options.alpha_steps:
        return
    from .alpha import RATE, WORK, optimization_bytes, optimization_work

    rows = _unstable_rows(l, u)
    cap = WORK if options.alpha_work is None else options.alpha_work
    now = time.perf_counter()
    if (rows is None or optimization_work(live, j, C.shape[0], rows[0].shape[1], options.alpha_steps) > cap
            or _cut(options) or (options.alpha_deadline is not None and now >= options.alpha_deadline)):
        return
    if not fits(optimization_bytes(live, j, C.shape[0], rows[0].shape[1])):
        return  # an optional tightening: the fixed slopes' bounds stand
    C, idx = rows
    end = options.deadline
    if options.alpha_deadline is not None:  # this layer's share of the optimisation's time
        share = (options.alpha_deadline - now) / max(layers_left, 1)
        if optimization_work(live, j, C.shape[0], C.shape[1], 1) > RATE * share:
            return  # (the optimiser takes at least one step, whatever the deadline)
        end = earliest(end, now + share)
    kept: list | None = [] if slopes_out is not None and lo.shape[0] == 1 else None
    _tighten(l, u, idx, optimized_slopes_bound(live, j, C, lo, hi, mag, options.alpha_steps, end, kept))
    if kept:
        slopes_out[j] = (idx[0], kept[0])


def _unstable_rows(l: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(C, idx): rows +-e_i (B, 2R, n) of each box's unstable neurons idx (B, R), padded with
    repeats of the box's first neuron in that order; None when no box has one."""
    unstable = (l < 0) & (u > 0)
    R = int(unstable.sum(axis=1).max())
    if R == 0:
        return None
    B, n = l.shape
    order = np.argsort(~unstable, axis=1, kind="stable")[:, :R]  # each box's unstable first
    idx = np.where(np.take_along_axis(unstable, order, axis=1), order, order[:, :1])
    C = np.zeros((B, 2 * R, n))
    ar = np.arange(B)[:, None]
    C[ar, np.arange(R)[None, :], idx] = 1.0
    C[ar, R + np.arange(R)[None, :], idx] = -1.0
    return C, idx


def _tighten(l: np.ndarray, u: np.ndarray, idx: np.ndarray, up: np.ndarray) -> None:
    """Intersect, in place, the bounds of neurons idx (B, R) with the rows' bounds up (B, 2R)
    (a padded repeat bounds its neuron again: sound all the same)."""
    R = idx.shape[1]
    ar = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
    np.minimum.at(u, (ar, idx), up[:, :R])
    np.maximum.at(l, (ar, idx), -up[:, R:])


def _count(step: StepStats, j: int, n_relu: int, l: np.ndarray, u: np.ndarray) -> None:
    if j < n_relu:
        step.unstable.append(int(np.sum(phases(l, u) == 0)))


def unstable_after_each_step(net: Network, lo: np.ndarray, hi: np.ndarray) -> dict[str, dict]:
    """Run the pipeline up to each step and report unstable counts and seconds (for benchmarks)."""
    out = {}
    for method in METHODS:
        t = time.perf_counter()
        b = network_bounds(net, lo, hi, method)
        out[method] = {"unstable": b.unstable_counts(), "unstable_total": b.num_unstable, "seconds": time.perf_counter() - t}
    return out


__all__ = ["METHODS", "BoundMethod", "bound_boxes", "network_bounds", "unstable_after_each_step", "phases"]
