"""Decide "L(f, box) <= D?" by input splitting with interval-Jacobian bounds (low-dimensional inputs).

The local constant over a box is the largest constant over any cover of it by sub-boxes, so a
best-first search over sub-boxes (`solvers.bab.branch_and_bound`) decides the question soundly:

- each sub-box gets batched symbolic pre-activation bounds (`solvers.bounds.bound_boxes`,
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

import itertools
import math
from dataclasses import dataclass

import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bab import NodeBound, branch_and_bound
from solvers.bounds import Bounds
from solvers.bounds.jacobian_interval import interval_jacobian, phase_slopes, slope_patterns
from solvers.bounds.options import BoundOptions
from solvers.bounds.pipeline import bound_boxes
from solvers.bounds.types import relu_blocks
from solvers.norms import operator_norm_upper
from solvers.phases import UNSTABLE, phases
from solvers.rounding import gamma, round_up
from solvers.runtime import interrupted

from ..lipschitz.replay import differentiable_point, norm_lower
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
    patterns = slope_patterns(ph)
    L, U = interval_jacobian(weights, patterns, patterns)  # each pattern's one Jacobian, rounding included
    return float(np.max(interval_norm_upper(L.reshape((-1,) + L.shape[-2:]), U.reshape((-1,) + U.shape[-2:]), p, q)))


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
        self.options = BoundOptions(rows="unstable", symbolic_output=False)
        self.reach = np.sum(np.abs(self.weights[0]), axis=0)  # first-layer sensitivity of each input

    def _evaluate(self, lo: np.ndarray, hi: np.ndarray, parents: list, proposal: float) -> tuple[np.ndarray, list[Bounds]]:
        nb = bound_boxes(self.blocks, lo, hi, self.options,
                         parents=Bounds.stack(parents) if all(p is not None for p in parents) else None)
        pre_lo, pre_hi = nb.pre_lo, nb.pre_hi
        Lw, Uw = interval_jacobian(self.weights, *phase_slopes(nb.phases()))
        Lw, Uw = np.broadcast_to(Lw, (len(lo),) + Lw.shape[-2:]), np.broadcast_to(Uw, (len(lo),) + Uw.shape[-2:])
        upper = interval_norm_upper(Lw, Uw, self.p, self.q)
        for b in np.flatnonzero(upper > proposal):  # the pattern bound only where the interval one is not enough
            exact = pattern_norm_upper(self.weights, [l[b] for l in pre_lo], [u[b] for u in pre_hi],
                                       self.p, self.q, MAX_PATTERN_UNSTABLE)
            if exact is not None:
                upper[b] = min(upper[b], exact)
        return upper, [nb.box(b) for b in range(len(lo))]

    def _witness(self, x: np.ndarray) -> float:
        pt = differentiable_point(self.net, x, self.blocks)
        return -math.inf if pt is None else norm_lower(pt, self.p, self.q)

    def decide(self, box: Box, proposal: float, deadline: float | None, max_nodes: int = 20000) -> SplitDecision:
        problem = _SplitProblem(self, box, proposal)
        # best-first by bound (the engine's default); a witness above the proposal stops it
        res = branch_and_bound(problem, target=proposal, deadline=deadline, max_nodes=max_nodes, batch=BATCH // 2,
                               stop_above=True, interrupt=lambda: problem.exhausted or interrupted())
        best_x = problem.center if res.incumbent is None else res.incumbent
        if res.lower > proposal:
            return SplitDecision(REJECT, res.lower, math.inf, best_x, res.nodes, "witness")
        stop = "exhausted" if problem.exhausted else _STOPS.get(res.stop, res.stop)
        decision = ACCEPT if stop == "closed" and res.open_nodes == 0 and res.upper <= proposal else UNDECIDED
        return SplitDecision(decision, max(res.lower, 0.0), res.upper, best_x, res.nodes, stop)


# the engine's stops as split decisions report them (a Ctrl-C reads as the time limit, as before)
_STOPS = {"interrupted": "time_limit"}


@dataclass(eq=False)
class _Box:
    lo: np.ndarray
    hi: np.ndarray
    state: Bounds | None  # the parent's pre-activation bounds until bounded, then its own
    split: int = -1


class _SplitProblem:
    """One decision "L(f, box) <= proposal?" as a `solvers.bab` problem: node bounds from the
    interval (or pattern) Jacobian norm, witnesses at the centres of boxes above the proposal."""

    def __init__(self, decider: SplitDecider, box: Box, proposal: float) -> None:
        self.d, self.proposal = decider, proposal
        self.lo, self.hi = np.array(box.lo), np.array(box.hi)
        self.center = (self.lo + self.hi) / 2
        self.exhausted = False  # a box that cannot be split stays above the proposal: no acceptance

    def root(self) -> _Box:
        return _Box(self.lo, self.hi, None)

    def bound(self, node: _Box) -> NodeBound:
        return self._bound([node], witness_all=True)[0]  # the root's centre is always a witness

    def bound_many(self, nodes: list[_Box]) -> list[NodeBound]:
        return self._bound(nodes, witness_all=False)

    def _bound(self, nodes: list[_Box], witness_all: bool) -> list[NodeBound]:
        lo, hi = np.array([n.lo for n in nodes]), np.array([n.hi for n in nodes])
        ups, sts = self.d._evaluate(lo, hi, [n.state for n in nodes], self.proposal)
        width = hi - lo
        splits = np.argmax(width * self.d.reach, axis=1)
        # point-sized along every input that matters: the bound is final
        leaves = ~(width[np.arange(len(nodes)), splits] > 0)
        out = []
        for u, node, st, j, leaf in zip(ups.tolist(), nodes, sts, splits.tolist(), leaves.tolist()):
            node.state, node.split = st, j
            nb = NodeBound(u, leaf=leaf)
            if witness_all or u > self.proposal:  # a box below the proposal holds no witness above it
                x = (node.lo + node.hi) / 2
                nb.lower, nb.witness = self.d._witness(x), x
            self.exhausted |= leaf and u > self.proposal
            out.append(nb)
        return out

    def branch(self, node: _Box, nb: NodeBound, prune_level: float) -> list[tuple[_Box, float | None]]:
        j, lo, hi = node.split, node.lo, node.hi
        mid = lo[j] + (hi[j] - lo[j]) / 2
        kids = []
        for a, b in ((lo[j], mid), (mid, hi[j])):
            clo, chi = lo.copy(), hi.copy()
            clo[j], chi[j] = a, b
            kids.append((_Box(clo, chi, node.state), None))
        return kids


__all__ = ["MAX_SPLIT_INPUTS", "SplitDecider", "SplitDecision", "interval_norm_upper"]
