"""Decide "L(f, box) <= D?" by input splitting with interval-Jacobian bounds (low-dimensional inputs).

The local constant over a box is the largest constant over any cover of it by sub-boxes, so a
best-first search over sub-boxes decides the question soundly:

- each sub-box gets batched symbolic pre-activation bounds (`certify.verify.batch_bounds`,
  inherited from its parent), hence an interval matrix [L, U] holding every Clarke Jacobian of
  the sub-box (slopes 1, 0 or [0, 1]), hence an upper bound of its constant (`interval_norm_upper`);
- its centre is replayed as a witness (exact Jacobian where the net is certified differentiable);
- sub-boxes whose bound is <= D are closed; a witness above D rejects; the sub-box with the
  largest bound is split along the input that moves its first-layer pre-activations most.

Accept when every sub-box is closed (the bound is the largest closed bound), reject on a witness,
undecided when the deadline or the node limit is reached. For (linf, l1), the interval norm
max_u sum_i max(|lo_i(u)|, |hi_i(u)|) over sign vectors u of the smaller side is exact once the
sub-box has no unstable neuron, which the plain sum of |entries| never is.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bounds.types import relu_blocks
from solvers.norms import operator_norm_upper
from solvers.phases import ACTIVE, UNSTABLE, phases
from solvers.rounding import gamma, round_up
from solvers.runtime import interrupted

from ..lipschitz.replay import differentiable_point, norm_lower
from ..verify.batch_bounds import BatchedSymbolicBounds, PreBounds
from .decide import ACCEPT, REJECT, UNDECIDED

#: sign vectors of up to this many entries are enumerated for the (linf, l1) interval norm
MAX_SIGNS = 12
#: input splitting is used for inputs up to this dimension
MAX_SPLIT_INPUTS = 16
BATCH = 32
#: boxes with at most this many unstable neurons are bounded by enumerating their slope patterns
MAX_PATTERN_UNSTABLE = 6


def _signs(n: int) -> np.ndarray:
    """Half of {-1, 1}^n as 0/1 rows (u and -u give the same norm): the first entry fixed to +1."""
    rows = np.array(list(itertools.product((0.0, 1.0), repeat=n - 1)), dtype=np.float64).reshape(2 ** (n - 1), n - 1)
    return np.hstack([np.ones((rows.shape[0], 1)), rows])


def interval_jacobians(weights: list[np.ndarray], pre_lo: list[np.ndarray], pre_hi: list[np.ndarray]):
    """(Lw, Uw), each (B, m, n): entrywise bounds of every Clarke Jacobian over each box, widened
    by the float64 error allowance of `LipschitzMilp.phase_bound`."""
    B = pre_lo[0].shape[0] if pre_lo else 1
    L = U = np.broadcast_to(weights[0], (B,) + weights[0].shape)
    mag, length = np.abs(L), weights[0].shape[1]
    for l, u, W in zip(pre_lo, pre_hi, weights[1:]):
        ph = phases(l, u)
        s_hi = ((ph == ACTIVE) | (ph == UNSTABLE)).astype(np.float64)[:, :, None]
        s_lo = (ph == ACTIVE).astype(np.float64)[:, :, None]
        L, U = np.minimum(s_lo * L, s_hi * L), np.maximum(s_lo * U, s_hi * U)
        Wp, Wn = np.maximum(W, 0.0), np.minimum(W, 0.0)
        L, U = Wp @ L + Wn @ U, Wp @ U + Wn @ L
        mag = np.abs(W) @ (s_hi * mag)
        length += W.shape[1]
    E = 4.0 * gamma(length + 2) * mag
    return L - E, U + E


def interval_norm_upper(Lw: np.ndarray, Uw: np.ndarray, p: str, q: str) -> np.ndarray:
    """Upper bounds (B,) of sup ||J||_{p->q} over J in [Lw, Uw] (entrywise), rounding included."""
    B, m, n = Lw.shape
    M = np.maximum(np.abs(Lw), np.abs(Uw))
    if (p, q) == ("linf", "l1") and min(m, n) <= MAX_SIGNS:
        if n > m:  # ||J||_{inf->1} = max over output signs v of ||J^T v||_1
            Lw, Uw = np.swapaxes(Lw, 1, 2), np.swapaxes(Uw, 1, 2)
            m, n = n, m
        P = _signs(n)  # (S, n): 1 where u_j = +1
        lo = Lw @ P.T - Uw @ (1.0 - P).T  # (B, m, S): lower bound of (J u)_i
        hi = Uw @ P.T - Lw @ (1.0 - P).T
        value = np.max(np.sum(np.maximum(np.abs(lo), np.abs(hi)), axis=1), axis=1)
        err = gamma(n + m + 4) * np.sum(M, axis=(1, 2))
        return np.array([round_up(v + e, v + e, 2) for v, e in zip(value, err)])
    return np.array([operator_norm_upper(M[b], p, q) for b in range(B)])


def pattern_norm_upper(weights: list[np.ndarray], pre_lo: list[np.ndarray], pre_hi: list[np.ndarray], p: str, q: str,
                       max_unstable: int) -> float | None:
    """max over every choice of the unstable slopes in {0, 1} of the exact ||J||_{p->q} (one box;
    None when more than `max_unstable` neurons are unstable). J is affine in each slope and the norm
    convex, so the maximum over slopes in [0, 1] is at such a vertex: a sound bound that is tight
    once the box is split finely enough to realise each of those patterns."""
    ph = [phases(l, u) for l, u in zip(pre_lo, pre_hi)]
    count = sum(int(np.sum(x == UNSTABLE)) for x in ph)
    if count > max_unstable:
        return None
    P = 2**count
    bits = ((np.arange(P)[:, None] >> np.arange(count)[None, :]) & 1).astype(np.float64)  # (P, count)
    J = np.broadcast_to(weights[0], (P,) + weights[0].shape)
    mag, length, used = np.abs(weights[0]), weights[0].shape[1], 0
    for x, W in zip(ph, weights[1:]):
        s = np.broadcast_to((x == ACTIVE).astype(np.float64), (P, x.size)).copy()
        unstable = np.flatnonzero(x == UNSTABLE)
        s[:, unstable] = bits[:, used: used + unstable.size]
        used += unstable.size
        J = W @ (s[:, :, None] * J)
        mag = np.abs(W) @ (((x == ACTIVE) | (x == UNSTABLE)).astype(np.float64)[:, None] * mag)
        length += W.shape[1]
    err = 4.0 * gamma(length + 2) * mag  # entrywise error of every product (the phase_bound allowance)
    return float(np.max(interval_norm_upper(J - err, J + err, p, q)))


@dataclass
class SplitDecision:
    decision: str
    lower: float
    upper: float
    witness: np.ndarray | None
    nodes: int
    stop: str


class SplitDecider:
    """Input-splitting decisions for one network and norm pair (reusable across boxes)."""

    def __init__(self, net: Network, p: str, q: str) -> None:
        self.net, self.p, self.q = net, p, q
        self.blocks = relu_blocks(net)
        self.weights = [b.weight for b in self.blocks]
        self.bounder = BatchedSymbolicBounds(net)
        self.reach = np.sum(np.abs(self.weights[0]), axis=0)  # first-layer sensitivity of each input

    def _evaluate(self, lo: np.ndarray, hi: np.ndarray, parents: list, proposal: float) -> tuple[np.ndarray, list[PreBounds]]:
        pre_lo, pre_hi, _, _ = self.bounder.pre_bounds(lo, hi, parents)
        Lw, Uw = interval_jacobians(self.weights, pre_lo, pre_hi)
        upper = interval_norm_upper(Lw, Uw, self.p, self.q)
        for b in np.flatnonzero(upper > proposal):  # the pattern bound only where the interval one is not enough
            exact = pattern_norm_upper(self.weights, [l[b] for l in pre_lo], [u[b] for u in pre_hi],
                                       self.p, self.q, MAX_PATTERN_UNSTABLE)
            if exact is not None:
                upper[b] = min(upper[b], exact)
        all_lo = np.concatenate(pre_lo, axis=1) if pre_lo else np.zeros((len(lo), 0))
        all_hi = np.concatenate(pre_hi, axis=1) if pre_hi else np.zeros((len(lo), 0))
        return upper, [PreBounds(all_lo[b].copy(), all_hi[b].copy()) for b in range(len(lo))]

    def _witness(self, x: np.ndarray) -> float:
        pt = differentiable_point(self.net, x, self.blocks)
        return -math.inf if pt is None else norm_lower(pt, self.p, self.q)

    def decide(self, box: Box, proposal: float, deadline: float | None, max_nodes: int = 20000) -> SplitDecision:
        lo0, hi0 = np.array(box.lo), np.array(box.hi)
        upper, states = self._evaluate(lo0[None], hi0[None], [None], proposal)
        best_lower, best_x = self._witness((lo0 + hi0) / 2), (lo0 + hi0) / 2
        counter = itertools.count()
        heap: list = []
        closed = -math.inf
        nodes = 1

        def offer(u: float, lo, hi, state) -> None:
            nonlocal closed
            if u <= proposal:
                closed = max(closed, u)
            else:
                heapq.heappush(heap, (-u, next(counter), lo, hi, state))

        offer(float(upper[0]), lo0, hi0, states[0])
        stop = "closed"
        while heap:
            if best_lower > proposal:
                return SplitDecision(REJECT, best_lower, math.inf, best_x, nodes, "witness")
            if (deadline is not None and time.perf_counter() >= deadline) or interrupted():
                stop = "time_limit"
                break
            if nodes >= max_nodes:
                stop = "node_limit"
                break
            batch = [heapq.heappop(heap) for _ in range(min(BATCH // 2, len(heap)))]
            los, his, parents = [], [], []
            for _, _, lo, hi, state in batch:
                width = hi - lo
                j = int(np.argmax(width * self.reach))
                if not width[j] > 0:
                    continue
                mid = lo[j] + width[j] / 2
                for a, b in ((lo[j], mid), (mid, hi[j])):
                    clo, chi = lo.copy(), hi.copy()
                    clo[j], chi[j] = a, b
                    los.append(clo)
                    his.append(chi)
                    parents.append(state)
            if not los:  # only point-sized boxes left: their bounds are final
                closed = max(closed, max(-b[0] for b in batch))
                stop = "exhausted"
                break
            ups, sts = self._evaluate(np.array(los), np.array(his), parents, proposal)
            nodes += len(los)
            for u, lo, hi, st in zip(ups, los, his, sts):
                if u > proposal:  # a closed box holds no witness above the proposal
                    x = (lo + hi) / 2
                    w = self._witness(x)
                    if w > best_lower:
                        best_lower, best_x = w, x
                offer(float(u), lo, hi, st)
        if best_lower > proposal:
            return SplitDecision(REJECT, best_lower, math.inf, best_x, nodes, "witness")
        bound = max(closed, max((-h[0] for h in heap), default=-math.inf))
        decision = ACCEPT if not heap and stop == "closed" and bound <= proposal else UNDECIDED
        return SplitDecision(decision, max(best_lower, 0.0), bound, best_x, nodes, stop)


__all__ = ["MAX_SPLIT_INPUTS", "SplitDecider", "SplitDecision", "interval_jacobians", "interval_norm_upper"]
