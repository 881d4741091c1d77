"""The symbolic bounds of `solvers.bounds` evaluated for a batch of boxes at once, with inheritance.

Same algorithm and rounding policy as `solvers.bounds.pipeline` with method "symbolic" (interval
step, then CROWN back-substitution with `relu_relaxation`, widened by `4 * 2^j * gamma(N) * |C| mag`
exactly as `solvers.bounds.symbolic.backsubstitute_upper`), vectorised over B boxes. Two search
specific savings, both sound because a child box lies inside its parent:

- a child starts from its parent's pre-activation bounds (intersection);
- only neurons unstable in some box of the batch (after inheritance) are back-substituted again: a
  neuron stable on the parent is stable on the child, and its relaxation (slope 0 or 1) needs no
  bound values; neurons inactive on every box of the batch are dropped from the back-substitution
  (their coefficients are exact zeros).

The spec rows H y are back-substituted as rows (not from per-output bounds), three times: with
CROWN's adaptive lower slopes, with lower lines parallel to the upper ones and with CROWN's other
choice, keeping the smallest bound of each row (each is sound; on ACAS Xu this halves to quarters
the nodes of the hardest instances); optionally the per-box pre-activation rows left unstable are
bounded once more with lower slopes optimised per row (`alpha_slopes`). The first pass's linear
coefficients over the input give the split hint |lambda_i| * width_i of each clause's deciding row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from models.ir import Network
from models.memory import fits, require_work
from solvers.bounds import relu_blocks
from solvers.bounds.blocked import right_abs_matmul, right_interval_matmul
from solvers.rounding import widen
from solvers.bounds.symbolic import relu_relaxation

from .node_bounds import NodeBounds, clause_bounds, stacked_rows
from .spec import Region

# split hints (per-neuron input sensitivities) are computed for inputs up to this size only:
# input splitting is for low-dimensional inputs
SPLIT_HINT_MAX_INPUTS = 64


@dataclass
class PreBounds:
    """Per-node state handed to the children: pre-activation bounds of every ReLU layer,
    concatenated (layer after layer)."""

    lo: np.ndarray
    hi: np.ndarray


def interval_batch(W: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`solvers.bounds.interval.affine_interval` for boxes stacked as rows of lo, hi (B, n) (W+, W-
    and |W| copied in blocks when they do not fit in the memory budget)."""
    what = f"interval bounds of {lo.shape[0]} boxes through a {W.shape[0]} x {W.shape[1]} affine map"
    z_lo, z_hi = right_interval_matmul(lo, hi, W.T, what)
    z_lo, z_hi = z_lo + b, z_hi + b
    mag = right_abs_matmul(np.maximum(np.abs(lo), np.abs(hi)), W.T, what) + np.abs(b)
    return widen(z_lo, z_hi, mag, W.shape[1] + 1)


def magnitudes_batch(blocks, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """`solvers.bounds.interval.magnitudes` for a batch: bounds on |z_j| per box (B, n_j)."""
    m = np.maximum(np.abs(lo), np.abs(hi))
    out = []
    for blk in blocks:
        m = right_abs_matmul(m, blk.weight.T, f"magnitude bounds through a {blk.out_dim} x {blk.in_dim} affine map") \
            + np.abs(blk.bias)
        m = m * (1.0 + 1e-12) + 1e-300
        out.append(m)
    return out


def _unstable(r) -> np.ndarray:
    return (r.up_slope > 0.0) & (r.up_slope < 1.0)


def _parallel_lower(r):
    """Lower lines s z with s = u / (u - l), parallel to the upper line (any s in [0, 1] bounds
    relu(z) from below on every z: 0 >= s z for z < 0, z >= s z for z >= 0)."""
    return replace(r, lo_slope=np.where(_unstable(r), r.up_slope, r.lo_slope))


def _flipped_lower(r):
    """The other of CROWN's two slopes (0 <-> 1) on every unstable neuron."""
    return replace(r, lo_slope=np.where(_unstable(r), 1.0 - r.lo_slope, r.lo_slope))


class LiveLayers:
    """The relaxed ReLU layers of a batch, restricted to neurons alive (not inactive) in some box.

    A neuron inactive on every box has slope and intercept 0 in every relaxation: its column of
    the back-substituted coefficients is exactly zero, so dropping it changes no float result.
    """

    def __init__(self, blocks) -> None:
        self.blocks = blocks
        self.keep: list[np.ndarray] = []  # alive neurons of ReLU layer t
        self.relax: list = []  # relu_relaxation restricted to them, (B, |keep_t|) arrays
        self.weight: list[np.ndarray] = []  # W_t restricted to alive outputs (rows) and alive inputs
        self.bias: list[np.ndarray] = []

    def add(self, l: np.ndarray, u: np.ndarray) -> None:
        """Relax ReLU layer t = len(self.keep) from its final bounds (B, n_t)."""
        t = len(self.keep)
        keep = np.flatnonzero(np.any(u > 0, axis=0))
        r = relu_relaxation(l[:, keep], u[:, keep])
        cols = self.blocks[t].in_dim if t == 0 else self.keep[t - 1].size
        require_work(16.0 * keep.size * cols, f"the alive part ({keep.size} x {cols}) of layer {t} of the batched bounds")
        W = self.blocks[t].weight[keep]
        self.keep.append(keep)
        self.relax.append(r)
        self.weight.append(W if t == 0 else W[:, self.keep[t - 1]])
        self.bias.append(self.blocks[t].bias[keep])

    def inputs_of(self, j: int) -> np.ndarray | slice:
        """Columns of W_j that can be nonzero after the ReLUs (all inputs for j = 0)."""
        return self.keep[j - 1] if j > 0 else slice(None)


def backsubstitute_upper_batch(live: LiveLayers, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                               mag: np.ndarray, gaps: dict[int, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sound upper bounds (B, R) of the rows coeff (R, n_j, or (B, R, n_j): rows per box) of z_j
    over each box, and the input
    coefficients (B, R, n) of the back-substituted linear upper bound. With `gaps`, also records
    per ReLU layer t the intercept each alive neuron adds to the bound (B, R, |alive_t|): the
    relaxation looseness that splitting can remove (a split hint only).

    `solvers.bounds.symbolic.backsubstitute_upper` per box (the relaxations hold (B, n_t) arrays,
    dead neurons dropped); its float64 error bound holds for any summation order and the dropped
    terms are exact zeros, so the widening below keeps it valid.
    """
    blocks = live.blocks
    B = lo.shape[0]
    # lambda (B, R, n_t), its mask, positive part, relaxed products and next product: about six
    # arrays of the widest layer, plus the per-layer intercepts kept for the split hint
    R = coeff.shape[-2]
    widest = max([blocks[t].in_dim for t in range(j + 1)] + [coeff.shape[-1]])
    kept = sum(blocks[t].out_dim for t in range(j)) if gaps is not None else 0
    require_work(8.0 * B * R * (6 * widest + kept), f"the batched symbolic bounds of {B} boxes x {R} rows of layer {j} "
                 f"(arrays of {B} x {R} x {widest})")
    W_j = blocks[j].weight[:, live.inputs_of(j)]
    if coeff.ndim == 3:  # rows of their own per box (B, R, n_j)
        lam, const = coeff @ W_j, coeff @ blocks[j].bias
        row_mag = np.einsum("bn,brn->br", mag, np.abs(coeff))
    else:
        lam = np.broadcast_to(coeff @ W_j, (B, coeff.shape[0], W_j.shape[1]))
        const = np.broadcast_to(coeff @ blocks[j].bias, (B, coeff.shape[0]))
        row_mag = mag @ np.abs(coeff).T
    length = blocks[j].in_dim + 1
    for t in range(j - 1, -1, -1):
        r = live.relax[t]
        # lam_pos * up + lam_neg * lo, as in the per-box code, with one mask (same values)
        pos = lam > 0
        lam_pos = np.where(pos, lam, 0.0)
        if gaps is not None:
            gaps[t] = lam_pos * r.up_icpt[:, None, :]
        const = const + np.einsum("brn,bn->br", lam_pos, r.up_icpt)
        if np.any(r.lo_icpt):
            const = const + np.einsum("brn,bn->br", np.where(pos, 0.0, lam), r.lo_icpt)
        lo_slope = r.lo_slope if r.lo_slope.ndim == 3 else r.lo_slope[:, None, :]  # (per row, or per box)
        lam = lam * np.where(pos, r.up_slope[:, None, :], lo_slope)
        const = const + lam @ live.bias[t]
        lam = lam @ live.weight[t]
        length += blocks[t].in_dim + 2
    upper = const + np.einsum("brn,bn->br", np.maximum(lam, 0.0), hi) + np.einsum("brn,bn->br", np.minimum(lam, 0.0), lo)
    _, upper = widen(upper, upper, row_mag, length + coeff.shape[-1], factor=4.0 * 2.0**j)
    return upper, lam


def best_of_slopes(live: LiveLayers, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray, mag: np.ndarray,
                   up: np.ndarray) -> np.ndarray:
    """min(up, the rows back-substituted again with the parallel and with the flipped lower slopes
    of the unstable ReLUs): each result is sound, so the smallest is (alpha-CROWN's idea with
    three fixed slopes, no optimiser). `up`: the bounds with CROWN's slopes."""
    for variant in (_parallel_lower, _flipped_lower):
        up = np.minimum(up, _with_relaxations(live, [variant(r) for r in live.relax], j, coeff, lo, hi, mag))
    return up


def optimized_slopes_bound(live: LiveLayers, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                           mag: np.ndarray, iterations: int) -> np.ndarray:
    """Upper bounds of the rows back-substituted with lower slopes optimised per row
    (`alpha_slopes`): this module's sound float64 bound, whatever slopes the optimiser returns."""
    from .alpha_slopes import optimized_lower_slopes

    slopes = optimized_lower_slopes(live, j, coeff, lo, hi, iterations)
    relax = [replace(r, lo_slope=s) for r, s in zip(live.relax, slopes)] + live.relax[j:]
    return _with_relaxations(live, relax, j, coeff, lo, hi, mag)


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


def _with_relaxations(live: LiveLayers, relax: list, j: int, coeff, lo, hi, mag) -> np.ndarray:
    """Upper bounds of the rows with the layers relaxed by `relax` instead of `live.relax`."""
    saved = live.relax
    live.relax = relax
    try:
        return backsubstitute_upper_batch(live, j, coeff, lo, hi, mag, None)[0]
    finally:
        live.relax = saved


class BatchedSymbolicBounds:
    """Node bounder: batched symbolic pre-activation bounds (inherited from the parent), then the
    spec rows back-substituted; `G x` bounded exactly over the box."""

    name = "symbolic-batched"

    def __init__(self, net: Network, pre_slopes: int = 1, per_box_rows: bool = False,
                 alpha_iterations: int = 0) -> None:
        self.blocks = relu_blocks(net)
        # each box back-substitutes only its own unstable neurons (padded), not the batch's union
        self.per_box_rows = per_box_rows
        # pre-activation rows back-substituted with CROWN's lower slopes only (1) or also with the
        # parallel and flipped ones (3), the smallest bound kept
        self.pre_slopes = pre_slopes
        # > 0: per_box_rows pre-activation rows also get lower slopes optimised by this many steps
        # (within `alpha_slopes.WORK`)
        self.alpha_iterations = alpha_iterations

    def _rebound_per_box(self, live: LiveLayers, j: int, l: np.ndarray, u: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray, mag: np.ndarray) -> None:
        """Back-substitute, in place, each box's own unstable neurons of layer j (padded to the
        largest count with repeats of a neuron of the box, which bound it again harmlessly)
        rather than every neuron unstable in some box of the batch. With optimised slopes, only
        the neurons the fixed slopes left unstable are bounded again."""
        rows = _unstable_rows(l, u)
        if rows is None:
            return
        C, idx = rows
        up, _ = backsubstitute_upper_batch(live, j, C, lo, hi, mag)
        if self.pre_slopes > 1:
            up = best_of_slopes(live, j, C, lo, hi, mag, up)
        _tighten(l, u, idx, up)
        if not self.alpha_iterations:
            return
        from .alpha_slopes import WORK, optimization_bytes, optimization_work

        rows = _unstable_rows(l, u)
        if rows is None or optimization_work(live, j, C.shape[0], rows[0].shape[1], self.alpha_iterations) > WORK:
            return
        if not fits(optimization_bytes(live, j, C.shape[0], rows[0].shape[1])):
            return  # an optional tightening: the fixed slopes' bounds stand
        C, idx = rows
        _tighten(l, u, idx, optimized_slopes_bound(live, j, C, lo, hi, mag, self.alpha_iterations))

    def pre_bounds(self, lo: np.ndarray, hi: np.ndarray, parents: list[PreBounds | None],
                   sens: list | None = None, fixed: np.ndarray | None = None) -> tuple[list, list, LiveLayers, list]:
        """(pre_lo, pre_hi, relaxed layers, magnitudes): bounds per ReLU layer, each (B, n_j).

        With `sens`, appends per layer the sensitivity of each neuron to each input, |a_up| + |a_lo|
        of its linear bounds (B, n_j, n), for the split hint.
        With `fixed` (B, all ReLUs concatenated: +1 assumed active, -1 inactive, 0 free; as
        `solvers.bounds.network_bounds`), each box's bounds hold on the part of the box where its
        phases hold; `self.empty` (B,) then marks the boxes where that part is empty (the phases
        contradict sound bounds; their returned bounds are placeholders)."""
        blocks = self.blocks
        K = len(blocks) - 1
        self.empty = np.zeros(len(lo), dtype=bool)
        fixed_at = 0
        mags = magnitudes_batch(blocks, lo, hi)
        have_parent = all(p is not None for p in parents)
        if have_parent:
            parent_lo = np.stack([p.lo for p in parents])
            parent_hi = np.stack([p.hi for p in parents])
        offset = 0
        pre_lo: list[np.ndarray] = []
        pre_hi: list[np.ndarray] = []
        live = LiveLayers(blocks)
        prev_lo, prev_hi = lo, hi
        for j in range(K):
            l, u = interval_batch(blocks[j].weight, blocks[j].bias, prev_lo, prev_hi)
            if have_parent:
                width = blocks[j].out_dim
                l = np.maximum(l, parent_lo[:, offset: offset + width])
                u = np.minimum(u, parent_hi[:, offset: offset + width])
                offset += width
            if j > 0 and self.per_box_rows and sens is None:
                self._rebound_per_box(live, j, l, u, lo, hi, mags[j])
            elif j > 0:
                # neurons unstable in some box (after inheritance) are the only ones worth re-bounding
                idx = np.flatnonzero(np.any((l < 0) & (u > 0), axis=0))
                if idx.size:
                    n = blocks[j].out_dim
                    C = np.zeros((2 * idx.size, n))
                    C[np.arange(idx.size), idx] = 1.0
                    C[idx.size + np.arange(idx.size), idx] = -1.0
                    up, lam = backsubstitute_upper_batch(live, j, C, lo, hi, mags[j])
                    if self.pre_slopes > 1:
                        up = best_of_slopes(live, j, C, lo, hi, mags[j], up)
                    u[:, idx] = np.minimum(u[:, idx], up[:, : idx.size])
                    l[:, idx] = np.maximum(l[:, idx], -up[:, idx.size:])
                    if sens is not None:
                        s_j = np.zeros((len(lo), blocks[j].out_dim, lo.shape[1]))
                        s_j[:, idx] = np.abs(lam[:, : idx.size]) + np.abs(lam[:, idx.size:])
                        sens.append(s_j)
                elif sens is not None:
                    sens.append(np.zeros((len(lo), blocks[j].out_dim, lo.shape[1])))
            elif sens is not None:
                sens.append(np.broadcast_to(np.abs(blocks[0].weight), (len(lo),) + blocks[0].weight.shape))
            if fixed is not None:
                F = fixed[:, fixed_at: fixed_at + blocks[j].out_dim]
                fixed_at += blocks[j].out_dim
                l = np.where(F > 0, np.maximum(l, 0.0), l)
                u = np.where(F < 0, np.minimum(u, 0.0), u)
                # sound bounds of the phase-restricted part that cross: that part is empty
                self.empty |= np.any(l > u, axis=1)
                u = np.where(self.empty[:, None], np.maximum(u, l), u)  # finite placeholders
            elif np.any(l > u):  # two sound bounds cannot cross
                raise RuntimeError(f"internal error: crossing bounds in layer {j}; please report this model")
            pre_lo.append(l)
            pre_hi.append(u)
            live.add(l, u)
            prev_lo, prev_hi = np.maximum(l, 0.0), np.maximum(u, 0.0)
        return pre_lo, pre_hi, live, mags

    def __call__(self, region: Region, lo: np.ndarray, hi: np.ndarray, states: list | None = None) -> NodeBounds:
        states = states if states is not None else [None] * len(lo)
        blocks = self.blocks
        K = len(blocks) - 1
        hint = lo.shape[1] <= SPLIT_HINT_MAX_INPUTS
        sens: list | None = [] if hint else None
        pre_lo, pre_hi, live, mags = self.pre_bounds(lo, hi, states, sens)
        rows, owner = stacked_rows(region)
        # rows: G x exactly over the box; H y by back-substitution and by the output interval
        gx_lo = interval_batch(rows.G, np.zeros(rows.count), lo, hi)[0]
        prev_lo = np.maximum(pre_lo[-1], 0.0) if K else lo
        prev_hi = np.maximum(pre_hi[-1], 0.0) if K else hi
        out_lo, out_hi = interval_batch(blocks[K].weight, blocks[K].bias, prev_lo, prev_hi)
        hy_lo = interval_batch(rows.H, np.zeros(rows.count), out_lo, out_hi)[0]
        gaps: dict[int, np.ndarray] | None = {} if hint else None
        up, lam = backsubstitute_upper_batch(live, K, -rows.H, lo, hi, mags[K], gaps)
        up = best_of_slopes(live, K, -rows.H, lo, hi, mags[K], up)
        hy_lo = np.maximum(hy_lo, -up)
        lower = np.nextafter(gx_lo + hy_lo, -np.inf)  # sum of two sound lower bounds, rounded down
        upper, infeasible = clause_bounds(rows, owner, len(region.clauses), lower)
        scores = self._split_scores(region, rows, owner, lower, lam, gaps, sens, live, lo, hi) if hint else None
        all_lo = np.concatenate(pre_lo, axis=1) if pre_lo else np.zeros((len(lo), 0))
        all_hi = np.concatenate(pre_hi, axis=1) if pre_hi else np.zeros((len(lo), 0))
        # copies: a view would keep the whole batch's arrays alive as long as one node lives
        new_states = [PreBounds(all_lo[b].copy(), all_hi[b].copy()) for b in range(len(lo))]
        return NodeBounds(upper, infeasible, scores, new_states)

    @staticmethod
    def _split_scores(region, rows, owner, lower, lam, gaps, sens, live, lo, hi) -> np.ndarray:
        """Per clause and input, what bisecting the input should gain on the clause's deciding
        row: the linear part |lambda_i| width_i, plus each unstable neuron's relaxation intercept
        shared among the inputs by the neuron's sensitivity |a_i| width_i (B, clauses, n)."""
        B, n = lo.shape
        width = hi - lo
        slack = rows.d - lower
        scores = np.zeros((B, len(region.clauses), n))
        ar = np.arange(B)
        for c in range(len(region.clauses)):
            sel = np.flatnonzero(owner == c)
            if not sel.size:
                continue
            pick = sel[np.argmin(slack[:, sel], axis=1)]
            score = (np.abs(lam[ar, pick]) + np.abs(rows.G[pick])) * width
            for t, g in gaps.items():
                share = sens[t][:, live.keep[t]] * width[:, None, :]
                total = share.sum(axis=2, keepdims=True)
                share = np.divide(share, total, out=np.zeros_like(share), where=total > 0)
                score += np.einsum("bk,bkn->bn", g[ar, pick], share)
            scores[:, c] = score
        return scores


__all__ = ["BatchedSymbolicBounds", "LiveLayers", "PreBounds", "backsubstitute_upper_batch", "best_of_slopes",
           "interval_batch", "magnitudes_batch"]
