"""Bounds of Jacobian-vector products of a ReLU network over all admissible ReLU slopes.

A product with the Jacobian J = M_k D_{k-1} M_{k-1} ... D_0 M_0 is a *switched linear pass*:

    t_0 = M_0 u,   s_j = D_j t_j,   t_{j+1} = M_{j+1} s_j,   out = t_k,

with D_j diagonal: slope 1 on active, 0 on inactive and anything in [0, 1] on unstable neurons
(covering both choices of ReLU'(0) at ties). The forward (tangent) pass J u uses M_j = W_j; the
backward (adjoint) pass J^T c uses the transposed maps in reverse order. Interval arithmetic with
u in a box gives sound bounds on every t_j and s_j (the big-M constants of the switches).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from models.memory import BLOCK_BYTES, block_rows, fits, require_work, work_left, working

from .blocked import abs_matmul, interval_matmul, right_abs_matmul, right_interval_matmul
from .interval import affine_interval
from .jacobian_interval import fixed_jacobian, interval_jacobian, rounding_allowance
from .jacobian_linear import linear_pass_upper
from .live import live_neurons, sliced_weights
from .types import ACTIVE, UNSTABLE


@dataclass
class SwitchedPassBounds:
    """`t_lo[j]`, `t_hi[j]`: signal entering switch layer j; `s_lo[j]`, `s_hi[j]`: after it;
    `out_lo`, `out_hi`: the result of the last map."""

    t_lo: list[np.ndarray]
    t_hi: list[np.ndarray]
    s_lo: list[np.ndarray]
    s_hi: list[np.ndarray]
    out_lo: np.ndarray
    out_hi: np.ndarray


def slope_interval(t_lo: np.ndarray, t_hi: np.ndarray, phase: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of s * t for s = 1 (active), 0 (inactive), s in [0, 1] (unstable)."""
    s_lo = np.where(phase == ACTIVE, t_lo, np.where(phase == UNSTABLE, np.minimum(t_lo, 0.0), 0.0))
    s_hi = np.where(phase == ACTIVE, t_hi, np.where(phase == UNSTABLE, np.maximum(t_hi, 0.0), 0.0))
    return s_lo, s_hi


def switched_pass_bounds(maps: list[np.ndarray], phases: list[np.ndarray], u_lo: np.ndarray, u_hi: np.ndarray) -> SwitchedPassBounds:
    """Interval bounds of the pass maps[k] D_{k-1} ... D_0 maps[0] u for u in [u_lo, u_hi]."""
    if len(maps) != len(phases) + 1:
        raise ValueError("a switched pass needs one more map than switch layers")
    t_lo, t_hi, s_lo, s_hi = [], [], [], []
    lo, hi = affine_interval(maps[0], 0.0, np.asarray(u_lo, dtype=np.float64), np.asarray(u_hi, dtype=np.float64))
    for j, ph in enumerate(phases):
        t_lo.append(lo)
        t_hi.append(hi)
        sl, sh = slope_interval(lo, hi, ph)
        s_lo.append(sl)
        s_hi.append(sh)
        lo, hi = affine_interval(maps[j + 1], 0.0, sl, sh)
    return SwitchedPassBounds(t_lo, t_hi, s_lo, s_hi, lo, hi)


def jacobian_maps(weights: list[np.ndarray], phases: list[np.ndarray], mode: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(maps, phases) of the forward pass J u ("forward") or the adjoint pass J^T c ("backward")."""
    if mode == "forward":
        return list(weights), list(phases)
    if mode == "backward":
        return [w.T for w in reversed(weights)], list(reversed(phases))
    raise ValueError(f"unknown pass direction {mode!r}")


# what a refusal of the Jacobian bounds suggests (a bound that needs no Jacobian matrices)
JACOBIAN_ALTERNATIVE = "use a global bound (certify global --method naive or eclipse-fast: products of layer norms)"
# output functionals enumerated exactly up to this many outputs (2^(m-1) sign vectors for l1)
MAX_SIGN_OUTPUTS = 12
LINEAR_FIRST_DIRECTIONS = 4  # input directions per box in the first round of linear bounds
CAP_SHARE = 0.85             # with caps (`clarke_functional_bounds`): the first round bounds the functionals
CAP_FIRST = 8                # within this share of the box's largest cap, and at least this many
ENTRYWISE_TOP = 4            # linf inputs: the entrywise linear rows also run on this many boxes of the
ENTRYWISE_TOP_INPUTS = 100   # largest bound beyond this many inputs (`_entrywise_top`)
LINEAR_WORK = 3e9            # estimated multiply-adds per round of linear bounds (about a second)
SLOW_RATE = 1e8             # multiply-adds per second assumed of a loaded machine, where a bound that cannot
                            # be cut short is started only when it would end by the deadline at this rate
LINEAR_CHUNK_WORK = 2e8      # with a deadline: linear bounds in chunks of about this much work, the
                             # deadline checked before each (a round of LINEAR_WORK took 1-4.5 s on a
                             # loaded 2-core machine: PTR steps ran seconds past their limit)


def clarke_norm_bound(weights: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray], p: str,
                      q: str | None, target: np.ndarray | None = None, linear_above: float | None = -math.inf,
                      deadline: float | None = None) -> float:
    """A sound upper bound on ||J||_{p->q} (or ||J^T c||_{p*} for a target c) over every Clarke
    Jacobian J = W_k D_{k-1} ... D_0 W_0 whose slopes lie in [s_lo[j], s_hi[j]] (within [0, 1]).

    The output side is kept exact where cheap: ||J||_{p->q} = max over extreme points c of the
    dual q-ball of ||J^T c||_{p*} ({+-1}^m for l1 outputs, {e_i} for linf, the target itself), and
    each c^T J is bounded by interval arithmetic backwards through the switches, so the signs of c
    cancel inside the product (a Fast-Lip/RecurJac-style bound), then tightened by linear bounds of
    the switched passes (`jacobian_linear`) unless the interval bound is at most `linear_above`
    (None: never). Other cases bound the interval matrix entrywise. Float rounding is covered by
    the |W| chain. `deadline` (a `time.perf_counter()` value): linear bounds not started by then
    are skipped (their interval bounds stand), so the call ends soon after it."""
    from ..norms import dual, operator_norm_upper
    from ..rounding import round_up

    m = weights[-1].shape[0]
    C = _output_functionals(m, q, target)
    length = sum(w.shape[1] for w in weights) + m + 2
    n0, widest = weights[0].shape[1], max(w.shape[0] for w in weights)
    what = f"the Jacobian matrices of a local Lipschitz bound (up to {widest} x {n0})"
    if all(np.array_equal(a, b) for a, b in zip(s_lo, s_hi)):  # one Jacobian: its norm, certified
        # M, its magnitude, their products and scaled copies: about five widest x n0 matrices
        with working(8.0 * 5 * widest * n0, what, JACOBIAN_ALTERNATIVE):
            M, err = fixed_jacobian(weights, s_lo, chain=length, what=what)
            if target is not None:
                c = np.asarray(target, dtype=np.float64)
                M, err = (c @ M)[None, :], ((np.abs(c) @ err) * (1 + 1e-12))[None, :]
                p, q = dual(dual(p)), "l1"  # the row vector's dual norm: ||g||_{p*} = ||g^T||_{p -> any} for 1 row
            total = operator_norm_upper(M, p, str(q)) + operator_norm_upper(err, p, str(q))
            # one rounding of a sum of upper bounds: relative to the sum (an absolute 1.0 was an
            # ulp short above 1 and 1e-6 loose at 1e-9 scales)
            return round_up(total, total, 2)
    if C is None:  # entrywise bound of the interval matrix
        # L, U, mag, their slope products and the products with W: about ten widest x n0 matrices
        with working(8.0 * 10 * widest * n0, what, JACOBIAN_ALTERNATIVE):
            L, U = interval_jacobian(weights, s_lo, s_hi, chain=length, what=what)
            return operator_norm_upper(np.maximum(np.abs(L), np.abs(U)), p, str(q))
    rows = [s[None, :] for s in s_lo], [s[None, :] for s in s_hi]
    return float(clarke_functional_bounds(weights, rows[0], rows[1], p, q, target, linear_above, deadline)[0][0])


def clarke_norm_bound_batch(weights: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray], p: str,
                            q: str | None, target: np.ndarray | None = None,
                            linear_above: float | np.ndarray | None = -math.inf,
                            deadline: float | None = None) -> np.ndarray:
    """`clarke_norm_bound` for B slope boxes at once: s_lo[j], s_hi[j] are (B, n_j) arrays; returns
    the B bounds (`linear_above`: one threshold, or one per box). The enumerated output functionals
    are bounded vectorised over the batch (the same interval arithmetic and rounding allowance);
    the other cases box by box. `deadline`: as in `clarke_norm_bound`."""
    return clarke_functional_bounds(weights, s_lo, s_hi, p, q, target, linear_above, deadline)[0]


def clarke_functional_bounds(weights: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray], p: str,
                             q: str | None, target: np.ndarray | None = None,
                             linear_above: float | np.ndarray | None = -math.inf, deadline: float | None = None,
                             caps: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(`clarke_norm_bound_batch`'s B bounds, the bound of each enumerated output functional c of
    every box (B, |C|) or None where they are not enumerated one by one: no functionals, or linf
    inputs few enough to be enumerated too).

    `caps` (B, |C|, +inf where unknown): sound bounds of each functional on each box known
    beforehand, e.g. a branch-and-bound parent's (a child's slope box lies in its parent's, so
    every Jacobian of the child is one of the parent's). The box's bound is the largest over c, so
    a functional whose cap is at most the largest bound computed for the box need not be bounded:
    its cap stands for it, and the maximum is what bounding every functional would give (or
    lower: each computed bound is also met with its cap). The functionals are bounded largest cap
    first, those within CAP_SHARE of the box's largest cap (at least CAP_FIRST) in the first round,
    then any whose cap still exceeds the box's largest bound."""
    C = _output_functionals(weights[-1].shape[0], q, target)
    B = s_lo[0].shape[0] if s_lo else 1
    if C is None or not s_lo:
        above = None if linear_above is None else np.broadcast_to(np.asarray(linear_above, dtype=float), (B,))
        return np.array([clarke_norm_bound(weights, [s[b] for s in s_lo], [s[b] for s in s_hi], p, q, target,
                                           None if above is None else float(above[b]), deadline)
                         for b in range(B)]), None
    length = sum(w.shape[1] for w in weights) + weights[-1].shape[0] + 2  # (the whole net's: an upper bound below)
    # the same Jacobians without the switches that are 0 on every box: their row of W_j and column of
    # W_{j+1} multiply exact zeros in every product and every magnitude of the rounding allowance
    live = live_neurons([s > 0 for s in s_hi], weights)
    if live is not None:
        weights = sliced_weights(weights, live)
        s_lo, s_hi = [s[:, k] for s, k in zip(s_lo, live)], [s[:, k] for s, k in zip(s_hi, live)]
    if _input_directions(p, weights[0].shape[1]) is not None:  # (paired with the input directions)
        return _functional_bounds(weights, s_lo, s_hi, p, C, length, linear_above, deadline).max(axis=1), None
    if caps is None or not np.any(np.isfinite(caps)):
        per = _functional_bounds(weights, s_lo, s_hi, p, C, length, linear_above, deadline)
    else:
        per = _capped_bounds(weights, s_lo, s_hi, p, C, length, linear_above, deadline, caps)
    if linear_above is not None and p == "linf" and weights[0].shape[1] > ENTRYWISE_TOP_INPUTS:
        per = _entrywise_top(weights, s_lo, s_hi, p, C, length, per, linear_above, deadline)
    return per.max(axis=1), per


def _capped_bounds(weights, s_lo, s_hi, p: str, C: np.ndarray, length: int, linear_above, deadline,
                   caps: np.ndarray) -> np.ndarray:
    """`clarke_functional_bounds` with caps: rounds of the functionals still to bound, per box
    (each round one call over its boxes, every box given the same number of functionals, its
    largest caps first)."""
    B, m = caps.shape
    per = np.array(caps, dtype=np.float64, copy=True)
    done = np.zeros((B, m), dtype=bool)
    above = None if linear_above is None else np.broadcast_to(np.asarray(linear_above, dtype=float), (B,))
    top = caps.max(axis=1)
    todo = caps >= np.where(np.isfinite(top), CAP_SHARE * top, -np.inf)[:, None]
    order = np.argsort(-caps, axis=1, kind="stable")
    first = np.zeros_like(todo)
    np.put_along_axis(first, order[:, :min(CAP_FIRST, m)], True, axis=1)
    todo |= first
    while np.any(todo):
        boxes = np.flatnonzero(todo.any(axis=1))
        k = int(todo[boxes].sum(axis=1).max())
        # each box's functionals to bound first, then (padding to k) its largest caps not bounded yet
        rank = np.where(todo[boxes], 0, np.where(done[boxes], 2, 1))
        pick = np.lexsort((-caps[boxes], rank), axis=1)[:, :k]
        Cb = C[pick]                                                   # (boxes, k, outputs)
        vals = _functional_bounds(weights, [s[boxes] for s in s_lo], [s[boxes] for s in s_hi], p, Cb, length,
                                  None if above is None else above[boxes], deadline)
        rows = boxes[:, None]
        per[rows, pick] = np.minimum(per[rows, pick], vals)
        done[rows, pick] = True
        best = np.where(done, per, -np.inf).max(axis=1)
        todo = ~done & (per > best[:, None])
    return per


def _output_functionals(m: int, q: str | None, target: np.ndarray | None) -> np.ndarray | None:
    """The extreme points c of the dual q-ball (one per +- pair) when few, or the target."""
    if target is not None:
        return np.asarray(target, dtype=np.float64).reshape(1, -1)
    if q == "linf":
        return np.eye(m)
    if q == "l1" and m <= MAX_SIGN_OUTPUTS:
        return np.array(np.meshgrid(*([[1.0]] + [[-1.0, 1.0]] * (m - 1)), indexing="ij")).reshape(m, -1).T
    return None


def _functional_bounds(weights, s_lo, s_hi, p: str, C: np.ndarray, length: int,
                       linear_above: float | None = -math.inf, deadline: float | None = None) -> np.ndarray:
    """Bounds (B, c) of ||c^T J||_{p*} for each c in C ((c, m), or (B, c, m): each box its own),
    slopes (B, n_j): the row c^T J bounded by interval arithmetic backwards through the switches
    (Fast-Lip / RecurJac style); paired with forward passes over the input directions when those
    are few (`_paired_bound`, shared C only), where the bound is the maximum over c, repeated.

    Memory: per functional c, the rows kept per switch layer (GL, GU) plus about eight working
    arrays of the widest layer, per box. When all functionals do not fit in the budget they are
    bounded in blocks (each functional's bound is computed on its own)."""
    B = s_lo[0].shape[0]
    sizes = [w.shape[1] for w in weights]
    c = C.shape[-2]
    k = block_rows(c, 8.0 * B * (2 * sum(sizes) + 8 * max(sizes)),
                   f"the Jacobian row bounds of {B} box(es) (rows of up to {max(sizes)} entries)",
                   alternative=JACOBIAN_ALTERNATIVE)
    if k >= c:
        return _functional_bounds_of(weights, s_lo, s_hi, p, C, length, linear_above, deadline)
    if _input_directions(p, weights[0].shape[1]) is not None:  # (one maximum over c per block)
        return np.repeat(np.max([_functional_bounds_of(weights, s_lo, s_hi, p, C[s:s + k], length, linear_above,
                                                       deadline)[:, 0] for s in range(0, c, k)], axis=0)[:, None],
                         c, axis=1)
    return np.concatenate([_functional_bounds_of(weights, s_lo, s_hi, p, C[..., s:s + k, :], length, linear_above,
                                                 deadline) for s in range(0, c, k)], axis=1)


def _functional_bounds_of(weights, s_lo, s_hi, p: str, C: np.ndarray, length: int,
                          linear_above: float | None = -math.inf, deadline: float | None = None) -> np.ndarray:
    """`_functional_bounds` of the functionals C in one piece."""
    B = s_lo[0].shape[0]
    GL, GU, err, rows = _backward_rows(weights, s_lo, s_hi, C, length)
    D = _input_directions(p, weights[0].shape[1])
    if D is not None:  # both sides enumerated: each pair (c, w) bounded forwards and backwards
        value = _paired_bound(weights, s_lo, s_hi, C, D, GL, GU, err, rows, linear_above, deadline)
        return np.repeat(value[:, None], C.shape[-2], axis=1)
    Bm = np.maximum(np.abs(GL), np.abs(GU)) + err
    if linear_above is not None and p == "linf":
        # the rows' l1 norms bounded with the input direction u a variable too (`_input_linear`)
        # first, then each entry of c^T J linearly (`_linear_rows`) only on the boxes it left as
        # they were (and beyond ENTRYWISE_TOP_INPUTS inputs on the boxes of largest bound:
        # `_entrywise_top`): on MNIST 256x4 (784 inputs) the former ended below the latter on 74 of
        # 82 boxes (median 0.59x) at a fifth of its cost, which was a sixth of the tree's time; on
        # the digits MLPs (64 inputs) the latter was most of it (digits 32-32 x0: 9.8 s -> 1.4 s)
        interval = _norms_up(Bm, p)
        vals = _input_linear(weights, s_lo, s_hi, C, interval, linear_above, deadline)
        left = np.flatnonzero(np.all(vals == interval, axis=1))
        if left.size:
            above = np.broadcast_to(np.asarray(linear_above, dtype=float), (B,))[left]  # (one per box, or one)
            entries = _linear_rows(weights, [s[left] for s in s_lo], [s[left] for s in s_hi],
                                   C if C.ndim == 2 else C[left], Bm[left], p, above, deadline)
            vals[left] = np.minimum(vals[left], _norms_up(entries, p))
        return vals
    if linear_above is not None:  # each entry of the row c^T J also bounded linearly (adjoint pass)
        Bm = _linear_rows(weights, s_lo, s_hi, C, Bm, p, linear_above, deadline)
    return _norms_up(Bm, p)


def _backward_rows(weights, s_lo, s_hi, C: np.ndarray, length: int):
    """(GL, GU, err, rows): interval bounds (B, c, n_0) of each row c^T J over the slopes (C
    (c, m) or (B, c, m)), the rounding allowance of every entry, and the row intervals entering
    each switch layer (first layer first)."""
    B = s_lo[0].shape[0]
    what = "interval bounds of the Jacobian rows"
    GL = GU = np.broadcast_to(C @ weights[-1], (B, C.shape[-2], weights[-1].shape[1]))
    mag = np.broadcast_to(np.abs(C) @ np.abs(weights[-1]), GL.shape)
    rows = []  # (GL, GU) of the row entering switch layer j, last layer first
    for sl, sh, W in zip(reversed(s_lo), reversed(s_hi), reversed(weights[:-1])):
        rows.append((GL, GU))
        sl, sh = sl[:, None, :], sh[:, None, :]
        GL, GU = np.minimum(GL * sl, GL * sh), np.maximum(GU * sl, GU * sh)
        GL, GU = right_interval_matmul(GL, GU, W, what)
        mag = right_abs_matmul(mag * sh, W, what)
    return GL, GU, rounding_allowance(weights, mag, length), rows[::-1]


def _entrywise_top(weights, s_lo, s_hi, p: str, C: np.ndarray, length: int, per: np.ndarray, linear_above,
                   deadline: float | None) -> np.ndarray:
    """per (B, c) (the functionals C (c, m) shared by the boxes), bounds of ||c^T J||_1 (linf inputs beyond ENTRYWISE_TOP_INPUTS), tightened by
    the entrywise linear rows of the adjoint pass (`_linear_rows`) where they can lower a box's
    bound: on the ENTRYWISE_TOP boxes of largest bound above `linear_above`, in rounds, each
    box's functional of largest bound as long as that one was not tightened yet, within
    LINEAR_WORK multiply-adds in all. (On a Fashion-MNIST 784-256-256-10 these rows lowered the
    60 s bound of its first image from 5,381 to 5,001.)"""
    B = per.shape[0]
    above = np.broadcast_to(np.asarray(-math.inf if linear_above is None else linear_above, dtype=float), (B,))
    best = per.max(axis=1)
    free = sum((sh > sl).sum(axis=1) for sl, sh in zip(s_lo, s_hi))  # (B,)
    boxes = [b for b in np.argsort(-best, kind="stable")[:ENTRYWISE_TOP] if best[b] > above[b] and free[b] > 0]
    if not boxes:
        return per
    per, tight = per.copy(), np.zeros(per.shape, dtype=bool)
    per_row = float(sum(W.size for W in weights))
    work = 0.0
    while deadline is None or time.perf_counter() < deadline:
        pairs = [(b, int(np.argmax(per[b]))) for b in boxes]
        pairs = [(b, c) for b, c in pairs if not tight[b, c]]
        cost = [(2.0 * free[b] + 2 * weights[0].shape[1]) * per_row for b, _ in pairs]
        keep = [k for k in range(len(pairs)) if work + sum(cost[:k + 1]) <= LINEAR_WORK]
        if not keep:
            break
        bb = np.array([pairs[k][0] for k in keep])
        cc = np.array([pairs[k][1] for k in keep])
        work += sum(cost[k] for k in keep)
        sl, sh = [s[bb] for s in s_lo], [s[bb] for s in s_hi]
        Cp = C[cc][:, None, :]  # (one functional per pair)
        GL, GU, err, _ = _backward_rows(weights, sl, sh, Cp, length)
        Bm = np.maximum(np.abs(GL), np.abs(GU)) + err
        entries = _linear_rows(weights, sl, sh, Cp, Bm, p, above[bb], deadline)
        per[bb, cc] = np.minimum(per[bb, cc], _norms_up(entries, p)[:, 0])
        tight[bb, cc] = True
    return per


def _norms_up(Bm: np.ndarray, p: str) -> np.ndarray:
    """||row||_{p*} of entrywise bounds (B, c, n), rounded up (B, c)."""
    from ..norms import dual
    from ..rounding import gamma

    d = dual(p)
    vals = _row_norms(Bm, p)
    if d != "linf":  # (a maximum needs no rounding; sums and square roots are rounded up)
        n_round = Bm.shape[2] + (2 if d == "l1" else 4) + 2
        vals = vals + 2.0 * gamma(n_round) * np.abs(vals) + 1e-300  # `round_up`, entrywise
    return vals


def _input_linear(weights, s_lo, s_hi, C, vals: np.ndarray, above, deadline: float | None) -> np.ndarray:
    """vals (B, c), sound bounds of ||c^T J||_1, tightened by `jacobian_input_linear` (the input
    direction a variable of its box) on the boxes with a free slope whose bound exceeds `above`,
    the largest first, within LINEAR_WORK multiply-adds (each box: two rows per free neuron and
    one per functional through every map), each only when it would end by `deadline` at SLOW_RATE."""
    from .jacobian_input_linear import input_linear_upper

    best = vals.max(axis=1)
    above = np.broadcast_to(np.asarray(above, dtype=float), best.shape)  # (one per box, or one)
    free = sum((sh > sl).sum(axis=1) for sl, sh in zip(s_lo, s_hi))
    per_row = float(sum(W.size for W in weights))
    work, out = 0.0, vals
    for b in np.argsort(-best, kind="stable"):
        cost = (2.0 * free[b] + C.shape[-2]) * per_row
        if free[b] == 0 or best[b] <= above[b] or work + cost > LINEAR_WORK:
            continue
        if deadline is not None and time.perf_counter() + cost / SLOW_RATE >= deadline:
            continue  # (it might not end by the deadline: a smaller box may)
        work += cost
        with working(8.0 * 4 * (2 * free[b] + C.shape[-2]) * max(W.shape[1] for W in weights),
                      "linear bounds of the Jacobian rows with the input direction free"):
            up = input_linear_upper(weights, [s[b] for s in s_lo], [s[b] for s in s_hi], C if C.ndim == 2 else C[b])
        out = out.copy() if out is vals else out
        out[b] = np.minimum(out[b], up)
    return out


def _linear_rows(weights, s_lo, s_hi, C, Bm, p: str, above, deadline: float | None = None) -> np.ndarray:
    """Bm (B, c, n), bounds of |c^T J| entrywise, tightened by the linear bound of the adjoint
    pass of each c (`jacobian_linear`) on the boxes whose bound may exceed `above`, rows of the
    largest bound first within the work cap."""
    maps = jacobian_maps(weights, s_lo, "backward")[0]
    sl_b, sh_b = s_lo[::-1], s_hi[::-1]
    vals = _row_norms(Bm, p)                                   # (B, c)
    todo = (_free_boxes(s_lo, s_hi) & (vals.max(axis=1) > above))[:, None] & np.ones(vals.shape, dtype=bool)
    bb, cc, cost = _within_work(todo, vals, maps, sl_b, sh_b, 2 * weights[0].shape[1])
    if bb.size == 0:
        return Bm
    n = weights[0].shape[1]
    up = _linear_upper(maps, sl_b, sh_b, C[cc] if C.ndim == 2 else C[bb, cc], np.vstack([np.eye(n), -np.eye(n)]), bb,
                       cost, deadline)
    bb, cc = bb[: len(up)], cc[: len(up)]
    Bm = Bm.copy()
    Bm[bb, cc] = np.minimum(Bm[bb, cc], np.maximum(up[:, :n], up[:, n:]))
    return Bm


def _free_boxes(s_lo, s_hi) -> np.ndarray:
    """(B,): boxes with some slope not fixed (their Jacobian is not one matrix)."""
    return np.any(np.concatenate([sh > sl for sl, sh in zip(s_lo, s_hi)], axis=1), axis=1)


def _within_work(todo: np.ndarray, value: np.ndarray, maps, s_lo, s_hi,
                 rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (box, instance) pairs of `todo` (B, W) to bound linearly, largest `value` first, while
    the estimated multiply-adds stay within LINEAR_WORK (wide nets would take minutes: there the
    interval bound stands), and the estimated cost of each. Cost of one instance: its
    back-substituted rows (two per free neuron, plus the output rows) through the layers."""
    b, w = np.nonzero(todo)
    if b.size == 0:
        return b, w, np.zeros(0)
    free = sum((sh > sl).sum(axis=1) for sl, sh in zip(s_lo, s_hi))  # (B,)
    per_row = sum(M.shape[0] * M.shape[1] for M in maps)
    cost = (2.0 * free[b] + rows) * per_row
    order = np.argsort(-value[b, w], kind="stable")
    keep = order[np.cumsum(cost[order]) <= LINEAR_WORK]
    return b[keep], w[keep], cost[keep]


def _linear_upper(maps, s_lo, s_hi, directions: np.ndarray, rows: np.ndarray, box_of: np.ndarray, cost: np.ndarray,
                  deadline: float | None) -> np.ndarray:
    """`linear_pass_upper` of the instances in their order; with a deadline, in chunks of about
    LINEAR_CHUNK_WORK (instances are independent: the same bounds), none started after the
    deadline: the bounds (n, r) of the first n instances (n may be smaller than their number)."""
    # memory of an instance: its back-substituted rows (cost / multiply-adds per row) times about six
    # vectors of the widest layer; when all do not fit, chunks within the budget, and an instance
    # that does not fit alone ends the list (the others keep their interval bounds)
    per_row = max(sum(M.shape[0] * M.shape[1] for M in maps), 1)
    mem = np.asarray(cost, dtype=float) * (48.0 * max(max(M.shape) for M in maps) / per_row)
    room = None if fits(float(mem.sum())) else max(min(work_left()[0], BLOCK_BYTES), 0.0)
    if deadline is None and room is None:
        return linear_pass_upper(maps, s_lo, s_hi, directions, rows, box_of)
    done, parts, total, total_mem = 0, [], np.cumsum(cost), np.cumsum(mem)
    while done < len(box_of) and (deadline is None or time.perf_counter() < deadline):
        end = len(box_of)
        if deadline is not None:
            base = total[done - 1] if done else 0.0
            end = max(done + 1, int(np.searchsorted(total, base + LINEAR_CHUNK_WORK, side="right")))
        if room is not None:
            if mem[done] > room:
                break
            base = total_mem[done - 1] if done else 0.0
            end = min(end, max(done + 1, int(np.searchsorted(total_mem, base + room, side="right"))))
        parts.append(linear_pass_upper(maps, s_lo, s_hi, directions[done:end], rows, box_of[done:end]))
        done = end
    return np.concatenate(parts) if parts else np.zeros((0, rows.shape[0]))


def _row_norms(Bm: np.ndarray, p: str) -> np.ndarray:
    """||row||_{p*} of entrywise bounds (B, c, n), unrounded (callers round up what they return)."""
    from ..norms import dual

    d = dual(p)
    return Bm.sum(axis=2) if d == "l1" else (Bm.max(axis=2) if d == "linf" else np.sqrt((Bm * Bm).sum(axis=2)))


def _input_directions(p: str, n: int) -> np.ndarray | None:
    """Extreme points of the unit p-ball (up to sign) when few: {+-1}^n with w_0 = 1, or {e_k}."""
    if p == "linf" and n <= MAX_SIGN_OUTPUTS:
        return np.array(np.meshgrid(*([[1.0]] + [[-1.0, 1.0]] * (n - 1)), indexing="ij")).reshape(n, -1).T
    if p == "l1":
        return np.eye(n)
    return None


def _paired_bound(weights, s_lo, s_hi, C: np.ndarray, D: np.ndarray, GL: np.ndarray, GU: np.ndarray,
                  err_back: np.ndarray, rows: list, linear_above: float | None = -math.inf,
                  deadline: float | None = None) -> np.ndarray:
    """max over c in C and w in D of the best of several bounds of c^T J w, per box (B,).

    The forward pass bounds the vector J w for each w by intervals, the backward pass the row c^T J
    for each c; both bound the same scalar, so their minimum does, pair by pair. The passes also
    meet at every switch layer j: c^T J w = sum_i g_i d_i f_i with g (the row entering switch j,
    `rows[j]`), f (the forward signal entering it) and the slope d_i in their intervals, bounded
    term by term at the vertices of the three intervals (the product is linear in each). For the
    l1 input set D = {e_k} the value is |c^T J e_k| (both signs are covered by bounding -c^T J e_k
    too). Slopes s_lo[j], s_hi[j] are (B, n_j); GL, GU, err_back (B, |C|, n).

    Rounding: every computed endpoint is within the |W|-chain allowance `err` of its exact
    interval-arithmetic value; a meet adds the products' and the sum's roundings, bounded by the
    same chain, so it is widened by three allowances."""
    from ..rounding import gamma, round_up

    B = s_lo[0].shape[0]
    Cp, Cn = np.maximum(C, 0.0), np.minimum(C, 0.0)
    Dp, Dn = np.maximum(D.T, 0.0), np.minimum(D.T, 0.0)
    err = err_back @ np.abs(D.T)  # the |W| chain covers both passes' rounding
    bwd_hi, bwd_lo = GU @ Dp + GL @ Dn, GL @ Dp + GU @ Dn  # bounds of c^T J w, (B, c, w)
    hi, lo = bwd_hi + err, bwd_lo - err
    widest = max(w.shape[0] for w in weights)
    require_work(8.0 * 8 * B * widest * D.shape[0], f"the forward Jacobian bounds of {B} box(es) x {D.shape[0]} "
                 "input direction(s)", JACOBIAN_ALTERNATIVE)
    L = U = np.broadcast_to(weights[0] @ D.T, (B,) + (weights[0].shape[0], D.shape[0]))
    last = len(rows) - 1
    for j, ((gl, gu), sl, sh, W) in enumerate(zip(rows, s_lo, s_hi, weights[1:])):
        # (meets at the first and last switches rarely beat the full passes; a meet is a tightening
        # only, skipped when its (box, functional, direction, neuron) arrays do not fit in memory)
        if 0 < j < last and fits(8.0 * 10 * gl.shape[0] * gl.shape[1] * L.shape[2] * int(np.any(sh > 0, axis=0).sum())):
            hi, lo = _meet(gl, gu, L, U, sl, sh, hi, lo, 3.0 * err)
        sl, sh = sl[:, :, None], sh[:, :, None]
        L, U = np.minimum(sl * L, sh * L), np.maximum(sl * U, sh * U)
        L, U = interval_matmul(W, L, U, "interval bounds of the forward Jacobian passes")
    fwd_hi, fwd_lo = Cp @ U + Cn @ L, Cp @ L + Cn @ U
    n_round = weights[0].shape[1] + C.shape[1] + 4
    hi = np.minimum(hi, fwd_hi + err)
    lo = np.maximum(lo, fwd_lo - err)
    if linear_above is not None:
        hi, lo = _linear_pairs(weights, s_lo, s_hi, C, D, hi, lo, linear_above, deadline)
    value = np.max(np.maximum(hi, -lo), axis=(1, 2))
    return np.array([round_up(float(v), float(v), n_round) for v in value]) * (1.0 + 4.0 * gamma(n_round))


def _linear_pairs(weights, s_lo, s_hi, C, D, hi, lo, above, deadline: float | None = None):
    """(hi, lo) of every pair (c, w) (B, c, w) tightened by the linear bound of the forward pass
    of w (`jacobian_linear`), on the boxes whose bound exceeds `above` and that have a free slope.
    Directions go in two rounds, the box's most promising first (largest pair bound): the second
    takes only those still above what the first proved. Each round stays within the work cap."""
    free = _free_boxes(s_lo, s_hi)
    rows = np.vstack([C, -C])
    done = np.zeros((hi.shape[0], D.shape[0]), dtype=bool)
    hi, lo = hi.copy(), lo.copy()
    for first in (True, False):
        pair = np.maximum(hi, -lo)                 # (B, c, w)
        box_val = pair.max(axis=(1, 2))
        dir_val = pair.max(axis=1)                 # (B, w)
        if first:
            k = min(LINEAR_FIRST_DIRECTIONS, D.shape[0])
            rank = np.argsort(-dir_val, axis=1, kind="stable")[:, :k]
            todo = np.zeros_like(done)
            np.put_along_axis(todo, rank, True, axis=1)
        else:  # the best proven so far per box: a direction below it cannot raise the maximum
            proven = np.where(done, dir_val, -np.inf).max(axis=1)
            todo = ~done & (dir_val > proven[:, None])
        todo &= (free & (box_val > above))[:, None]
        b, w, cost = _within_work(todo, dir_val, weights, s_lo, s_hi, rows.shape[0])
        if b.size == 0:
            continue
        up = _linear_upper(weights, s_lo, s_hi, D[w], rows, b, cost, deadline)  # (P, 2c)
        b, w = b[: len(up)], w[: len(up)]
        m = C.shape[0]
        hi[b, :, w] = np.minimum(hi[b, :, w], up[:, :m])
        lo[b, :, w] = np.maximum(lo[b, :, w], -up[:, m:])
        done[b, w] = True
    return hi, lo


def _meet(gl, gu, L, U, sl, sh, hi, lo, err):
    """(hi, lo) tightened by the meet of a backward row interval [gl, gu] (B, c, n) and forward
    signals [L, U] (B, n, w) through slopes [sl, sh] (B, n): sum_i of the largest (smallest) vertex
    product g_i d_i f_i, widened by `err` (B, c, w). Neurons with slope 0 on every box add exact
    zeros and are skipped."""
    alive = np.flatnonzero(np.any(sh > 0, axis=0))
    g_lo, g_hi = gl[:, :, None, alive], gu[:, :, None, alive]
    f_lo, f_hi = np.swapaxes(L[:, alive], 1, 2)[:, None], np.swapaxes(U[:, alive], 1, 2)[:, None]
    a, b, c, d = g_lo * f_lo, g_lo * f_hi, g_hi * f_lo, g_hi * f_hi
    p_hi = np.maximum(np.maximum(a, b), np.maximum(c, d))
    p_lo = np.minimum(np.minimum(a, b, out=a), np.minimum(c, d, out=c), out=a)
    d_lo, d_hi = sl[:, None, None, alive], sh[:, None, None, alive]
    # d >= 0: the largest d P is sh P for P >= 0 and sl P for P < 0 (the smallest: the reverse)
    up = np.where(p_hi > 0, d_hi, d_lo)
    dn = np.where(p_lo < 0, d_hi, d_lo)
    hi = np.minimum(hi, np.einsum("bcwn,bcwn->bcw", p_hi, up) + err)
    lo = np.maximum(lo, np.einsum("bcwn,bcwn->bcw", p_lo, dn) - err)
    return hi, lo
