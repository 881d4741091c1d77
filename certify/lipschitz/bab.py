"""Local Lipschitz constants at scale: branch-and-bound over input splits and ReLU phases.

Each node is a sub-box of the question's box with some ReLU phases fixed. Its bound comes from the
Clarke Jacobian of the node: sound pre-activation bounds recomputed on the node (interval ->
symbolic, the fixed phases imposed, the parent's bounds intersected: `solvers.bounds`; with input
splits the lower slopes of the relaxations optimised per row, `solvers.bounds.alpha`) give each
neuron a slope interval, and `clarke_norm_bound` bounds ||J||_{p->q} over every Jacobian with
those slopes (output functionals enumerated, interval arithmetic through the switches, then linear
bounds of the Jacobian passes on nodes whose interval bound is above the lower bound:
`solvers.bounds.jacobian_linear`).
Optionally, for nodes with few unstable neurons, the LP relaxation of the Lipschitz MILP rebuilt
on the node's bounds (safe duals) tightens it. When no neuron is unstable the node's Jacobian is
one matrix and its norm is exact. Node centres (and the exact leaves) are replayed as witnesses.

The upper bound of `solvers.bab.branch_and_bound` is the largest bound over open and closed
nodes: a proof at every moment that rests on no MILP solver. Low-dimensional inputs are split
(the input of most influence on the unstable neurons, weighted by pseudo-costs: what splitting it
gave so far; where that split did not lower the bound, every input is tried and the best kept),
others branch on the unstable neuron whose slope uncertainty weighs most on the bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bab import BabProgress, NodeBound, branch_and_bound
from solvers.bab.engine import ROUND_SECONDS
from solvers.bab.bound_worker import BoundWorker
from solvers.bounds import BoundOptions, bound_boxes, network_bounds
from solvers.bounds.beta import clamp_splits, split_input_layer_bounds, split_layer_bounds
from solvers.bounds.jacobian import clarke_functional_bounds, clarke_norm_bound
from solvers.bounds.jacobian_interval import phase_slopes, slope_patterns
from solvers.bounds.types import Bounds, relu_blocks
from solvers.phases import ACTIVE, INACTIVE, UNSTABLE
from solvers.regions import has_no_interior, interior_point
from solvers.runtime import Budget

from .options import NormQuestion
from .witness import WitnessSearch, climb, high_dimensional

INPUT_SPLIT_DIM = 8      # inputs up to this many are split (ReLU phases beyond)
RELU_SPLIT_AT = 2        # ... while more than this many neurons are unstable on the node
LP_NODE_UNSTABLE = 24    # nodes with at most this many unstable neurons also get the LP bound
MILP_FINISH_UNSTABLE = 6  # ... and with at most this many, the exact MILP finisher closes them
MILP_TOP_UNSTABLE = 8    # batched: a node about to be branched with at most this many unstable neurons
                          # gets the finisher first (on ACAS Xu it closes most in 0.3-0.9 s, but the
                          # tree closes them about as fast: the finisher stays an option)
MILP_FINISH_SECONDS = 1.0  # per finished node (its proven bound counts even when cut short)
BATCH = 32               # best open nodes branched together; their input-split children are bounded
                         # in one vectorised call (pre-activations and Jacobian bounds over the batch)
PRE_SLOPES = "best-of-three"  # batched pre-activation rows: CROWN's, parallel and flipped lower slopes
ALPHA_STEPS = 10         # ... then, with input splits, lower slopes optimised per row by this many
                         # steps (`solvers.bounds.alpha`): on small boxes of deep nets the deep layers' bounds
                         # decide the Jacobian bound (5-60x tighter on ACAS Xu sub-boxes)
PROBES = 4               # points per batched node (centre + random) ranked for witness replay
REPLAYS = 2              # ... of which the best this many per batch are replayed
CLIMBS = 2               # ... and walk this many steps across activation regions from the best ones
CLIMB_STEPS = 6
CLIMB_BACKOFF = True     # no walks on high-dimensional boxes once the ascent has found nothing ASCENT_BACKOFF
                         # times: at 784 inputs they cost 0.1 s a batch (a tenth of a 60 s run on MNIST
                         # 256x4 at radius 0.02) and raised nothing there after the first rounds; without
                         # them its 60 s bound went 8.02-8.18 (mean 8.09, 6 runs) -> 7.92-8.09 (mean 7.97,
                         # 5 runs), the lower bound the same; on 256x6 within the noise (16.8-18.6 either way)
CLIMB_PATIENCE = 8       # ... or once this many walks in a row have raised nothing: the ascent's slots come
                         # seconds apart, and until it had backed off the walks took 0.09 s of every batch
                         # (a fifth of this process's time on MNIST 256x4) and raised nothing in 60 s
SEARCH_SHARE = 0.1       # of the tree's time for further dense searches of lower bounds ...
SEARCH_SLOT = 0.3        # ... in slots of at most this many seconds (halved as below: on LipMIP's
                         # 10-layer net none of the seven slots raised the bound, 0.3 s of a 4 s run)
ASCENT_SHARE = 0.3       # on high-dimensional boxes (`witness.high_dimensional`): of the tree's time for
ASCENT_SLOT = 3.0        # smoothed gradient ascents (`smooth_ascent`), in slots of this many seconds, or
                         # longer to catch up on the share when the tree calls rarely (its temperatures
                         # are annealed over one slot); the phase-split tree lowers the upper bound
                         # slowly there, the ascent raises the lower one. Each slot that does not raise
ASCENT_BACKOFF = 2       # the lower bound halves the share, at most this many times (one that does
                         # restores it): on MNIST 256x4 at radius 0.02 the slots after the first few
                         # found nothing, and the tree's 60 s bound went 9.80 -> 9.39 with a 0.1 share
COMPLETE_UNSTABLE = 4    # nodes with at most this many unstable neurons are bounded through the
                         # 2^k phase completions (`_completions`)
PSEUDO_RELIABLE = 2      # input splits seen per input before its pseudo-cost counts (`_input`)
STRONG_INPUTS = True     # an input split that did not lower the bound is followed by a strong one
                         # (every input tried, `branch_many`) before phases are split
COUPLE_ITERATIONS = 30   # phase splits without input splits: the layers below a node's newest split are
                         # re-bounded with its phases as constraints (`_couple`), by Lagrangian dual bounds
                         # optimised in this many steps. LPs with the phases as rows did it before: the
                         # LipMIP 10-10-10-10-10-2 tree closed in 26.7 s (879 nodes), with these bounds in
                         # 4.5 s (1,087; 20 steps: 5.3 s, 60: 8.7 s), with the first layer under every
                         # split too in 3.9-4.9 s (869); digits 32-32 x1 11.6 -> 11.3 -> 7.9 s
NEARER_SIDE = True       # the last ReLU layer coupled on each neuron's side nearer 0 only (`split_layer_bounds`;
                         # dense nets: Fashion-MNIST 784-256-256-10 1.3-2x the nodes in 60 s, MNIST within noise)
COUPLE_ITERATIONS_WIDE = 20  # ... on boxes of more than WIDE_INPUTS free inputs, where the nodes are many and
WIDE_INPUTS = 100            # the tree gains more from nodes: MNIST 256x4 at radius 0.02, 60 s on two cores,
                             # 12 / 15 / 20 / 30 / 45 steps: 6.73 / 6.65 / 6.57 / 6.70 / 6.76 (813 / 781 / 767 /
                             # 593 / 535 nodes); a Fashion-MNIST 784-256-256-10: 4080 / 4093 / 4131 / 4175 / 4278
FORK_AFTER = 0.5         # seconds of tree before the bound worker is forked (trees that close sooner
                         # do not pay the fork: 20-50 ms from a large process)
HOLLOW_SPLITS = 4        # input splits of a fully fixed node without an interior point before the
                         # exact proof that its pattern has no interior (a flat region stays flat)


@dataclass(frozen=True)
class _Node:
    lo: np.ndarray
    hi: np.ndarray
    fixed: tuple[np.ndarray, ...] | None
    prior: Bounds | None
    parent_bound: float = math.inf
    hollow: int = 0        # splits since the fixed pattern (every phase known) showed no interior point
    strong: bool = False   # made by a strong input split (`branch_many`)
    finished: bool = False  # the MILP finisher ran on it (cut short: its bound kept, then split)
    dim: int = -1          # the input whose split made it (-1: a phase split or the root)
    layer: int = -1        # the ReLU layer of the phase split that made it (-1: none)
    caps: np.ndarray | None = None  # the parent's bound of each output functional (`clarke_functional_bounds`)


@dataclass(frozen=True)
class _NodeData:
    """`NodeBound.data` of the tree: the node's pre-activation bounds and, when its Clarke bound
    bounded the output functionals one by one, the bound of each (its children's caps)."""

    bounds: Bounds
    caps: np.ndarray | None = None


@dataclass
class BabOutcome:
    upper: float
    lower: float
    nodes: int
    stop: str
    seconds: float
    worker_nodes: int = 0         # node bounds computed on the second core (`solvers.bab.bound_worker`;
                                  # with strong branching, trial halves too)
    worker_failure: str | None = None  # why the bound worker stopped early, if it did


class LipschitzBab:
    """The `BabProblem` of one local Lipschitz question (see module doc)."""

    def __init__(self, net: Network, box: Box, question: NormQuestion, search: WitnessSearch,
                 node_lp: bool = True, root_bounds: Bounds | None = None, milp_finish: bool = False,
                 budget: Budget | None = None, parallel: bool = True) -> None:
        self.net, self.box, self.q, self.search = net, box, question, search
        self.milp_finish, self.budget = milp_finish and question.p != "l2" and question.q != "l2", budget
        self.root_bounds = root_bounds  # e.g. LP-tightened bounds of the whole box: every node's prior
        self.blocks = relu_blocks(net)
        self.weights = [b.weight for b in self.blocks]
        self.split_inputs = int(np.sum(box.free)) <= INPUT_SPLIT_DIM
        self.node_lp = node_lp
        # (convolutions: the one-sided last layer cost cifar_base_kw 7x its nodes in 60 s, 27 vs 199)
        self.conv = any(getattr(b, "conv", None) is not None for b in self.blocks)
        self.couple_iterations = COUPLE_ITERATIONS_WIDE if int(np.sum(box.free)) > WIDE_INPUTS else COUPLE_ITERATIONS
        self.batched = None  # options of the vectorised bounds of the nodes below the root (not with node LPs)
        if not node_lp:
            self.batched = BoundOptions(lower_slopes=PRE_SLOPES if not self.split_inputs else "alpha",
                                        alpha_steps=ALPHA_STEPS, rows="per-box", symbolic_output=False)
        self.strong = STRONG_INPUTS and self.batched is not None and self.split_inputs
        # pseudo-costs: relative bound decrease of the halves, summed per split input, and counts
        self.input_gain, self.input_splits = np.zeros(len(box.lo)), np.zeros(len(box.lo))
        self.rng = np.random.default_rng(0)
        self.started, self.search_seconds, self.search_calls = time.perf_counter(), 0.0, 0
        self.fruitless = 0  # `_search_more` slots in a row that did not raise the lower bound
        self.climbs_fruitless = 0  # ... and batches' walks (`climb`)
        self.high_dimensional = high_dimensional(box)  # witnesses from the smoothed ascent
        # the neurons unstable on the box (flip walks, `flip_search`) and the lower bound of the last walk
        self.flip_free = None if root_bounds is None else [ph == UNSTABLE for ph in root_bounds.phases()]
        self.flipped = -math.inf
        # on two cores: half of each batch's children bounded by a forked worker
        self.parallel = parallel and BoundWorker.possible()
        # phase splits at 784 inputs cost 0.2 s a node: rounds of two nodes, one per core (`batch_size`)
        self.paired = self.parallel and not self.split_inputs
        self.helper: BoundWorker | None = None
        self.witnesses = True  # False in the worker: it bounds, the tree's process searches witnesses
        self.shared = -math.inf  # the worker's last witness value sent
        self.per_branched = 0.0  # seconds per branched node in the last batch (`batch_size`)

    # ------------------------------------------------------------------ engine hooks
    def root(self) -> _Node:
        return _Node(np.array(self.box.lo), np.array(self.box.hi), None, self.root_bounds)

    def bound(self, node: _Node) -> NodeBound:
        nb = network_bounds(self.net, node.lo, node.hi, "symbolic",
                            fixed=None if node.fixed is None else list(node.fixed), prior=node.prior)
        if nb is None:  # the fixed phases cannot hold together on this box
            return NodeBound(-math.inf, leaf=True)
        phases = nb.phases()
        s_lo, s_hi = phase_slopes(phases)
        upper = clarke_norm_bound(self.weights, s_lo, s_hi, self.q.p, self.q.q, self.q.target,
                                  deadline=self._deadline())
        unstable = int(sum(np.sum(ph == UNSTABLE) for ph in phases))
        if unstable and self.node_lp and unstable <= LP_NODE_UNSTABLE:
            upper = min(upper, self._lp_bound(nb))
        lower = self._replay(0.5 * (node.lo + node.hi))
        if 0 < unstable <= MILP_FINISH_UNSTABLE and self.milp_finish and upper > self.search.lower * (1 + 1e-6):
            bound, complete = self._milp_bound(nb)
            if bound < upper:
                upper = bound
            if complete:  # the node's exact value is proven: nothing left to split
                return NodeBound(upper, lower, leaf=True, data=_NodeData(nb))
        if unstable == 0 and node.fixed is not None and lower < upper * (1 - 1e-9):
            # the centre may lie outside the fixed pattern's region: replay a point inside it, or
            # prove the region has no interior in the box
            return self._exact_leaf(node, nb, upper, lower)
        # with every phase known the node's Jacobian is one matrix: its bound is exact
        return NodeBound(upper, lower, leaf=unstable == 0, data=_NodeData(nb))

    def bound_many(self, nodes: list[_Node]) -> list[NodeBound]:
        """`bound` of each node; nodes with a parent's bounds (input splits and ReLU-phase
        splits) are bounded together (`_bound_boxes`), the root one by one, and with phase splits
        on two cores half of them by the bound worker (`_helper_for`). Once the budget has
        run out, a node with a parent keeps its parent's bound and bounds (sound: the node is a
        subset of its parent) instead of being bounded: the engine stops before branching again."""
        helper = self._helper_for(nodes)
        t = time.perf_counter()
        out = self._bound_here(nodes) if helper is None else helper.bound_many(nodes, self._bound_here)
        self.per_branched = 2.0 * (time.perf_counter() - t) / len(nodes)  # (two children per branched node)
        for n, b in zip(nodes, out):  # pseudo-costs of the inputs (`_input`)
            if n.dim >= 0 and math.isfinite(n.parent_bound) and n.parent_bound > 0 and math.isfinite(b.upper):
                # (a small floor: inputs that never helped keep their structural order)
                self.input_gain[n.dim] += max(0.0, 1.0 - b.upper / n.parent_bound) + 1e-3
                self.input_splits[n.dim] += 1
        return out

    def _bound_here(self, nodes: list[_Node]) -> list[NodeBound]:
        if self._expired() and all(n.prior is not None and math.isfinite(n.parent_bound) for n in nodes):
            return [NodeBound(n.parent_bound, data=_NodeData(n.prior, n.caps)) for n in nodes]
        out: list[NodeBound | None] = [None] * len(nodes)
        boxes = [i for i, n in enumerate(nodes) if self.batched is not None and n.prior is not None]
        if boxes:
            for i, b in zip(boxes, self._bound_boxes([nodes[i] for i in boxes])):
                out[i] = b
        return [b if b is not None else self.bound(n) for n, b in zip(nodes, out)]

    def _bound_boxes(self, nodes: list[_Node]) -> list[NodeBound]:
        """Node bounds of sub-boxes, vectorised: symbolic pre-activation bounds over the batch
        (each node's parent bounds intersected, its fixed phases imposed: `solvers.bounds.bound_boxes`),
        the batched Clarke-Jacobian bound, and witnesses: the Jacobian
        norms at each node's centre and a few random points are estimated together and the best
        replayed (`_replay`: certified differentiable points, the only lower bounds kept)."""
        from .replay import norm_estimates

        lo, hi = np.stack([n.lo for n in nodes]), np.stack([n.hi for n in nodes])
        fixed = None
        if any(n.fixed is not None for n in nodes):
            fixed = [np.stack([np.zeros(b.out_dim, dtype=np.int8) if n.fixed is None else n.fixed[j] for n in nodes])
                     for j, b in enumerate(self.blocks[:-1])]
        batch = bound_boxes(self.blocks, lo, hi, self.batched, parents=Bounds.stack([n.prior for n in nodes]),
                            fixed=fixed)
        if not self.split_inputs:
            self._couple(nodes, batch)
        empty, ph = batch.empty, batch.phases()
        unstable = sum((p == UNSTABLE).sum(axis=1) for p in ph)
        # linear Jacobian bounds on every box whose interval bound is above the lower bound (even
        # wide boxes: their 4-10x tighter bounds order the search better than they cost)
        # (the parents' bounds of each output functional spare the functionals that cannot be the maximum)
        known = [n.caps for n in nodes if n.caps is not None]
        caps = None if not known else np.stack([np.full(known[0].shape, math.inf) if n.caps is None else n.caps
                                                for n in nodes])
        upper, per = clarke_functional_bounds(self.weights, *phase_slopes(ph), self.q.p, self.q.q, self.q.target,
                                              linear_above=self.search.lower, deadline=self._deadline(), caps=caps)
        # witnesses: the probes' estimated norms pick the points to replay
        probes = np.concatenate([0.5 * (lo + hi)[:, None, :],
                                 self.rng.uniform(lo[:, None, :], hi[:, None, :], (len(nodes), PROBES - 1, lo.shape[1]))],
                                axis=1).reshape(-1, lo.shape[1])
        est = norm_estimates(self.blocks, probes, self.q.p, self.q.q, self.q.target)
        lower = np.full(len(nodes), -math.inf)
        for k in np.argsort(-est)[:REPLAYS]:
            if est[k] > self.search.lower:
                lower[k // PROBES] = max(lower[k // PROBES], self._replay(probes[k]))
        # a short walk across activation regions from the batch's best probes (replayed at its end);
        # on high-dimensional boxes only until the ascent has backed off or CLIMB_PATIENCE walks in a
        # row raised nothing (CLIMB_BACKOFF)
        if self.witnesses and not (CLIMB_BACKOFF and self.high_dimensional
                                   and (self.fruitless >= ASCENT_BACKOFF or self.climbs_fruitless >= CLIMB_PATIENCE)):
            before = self.search.lower
            climb(self.search, list(probes[np.argsort(-est)[:CLIMBS]]), CLIMB_STEPS,
                  None if self.budget is None else self.budget.deadline)
            self.climbs_fruitless = 0 if self.search.lower > before else self.climbs_fruitless + 1
        if self.witnesses:
            self._search_more(lo[int(np.argmax(upper))], hi[int(np.argmax(upper))])
        result = []
        for b, n in enumerate(nodes):
            if empty[b]:  # the node's fixed phases cannot hold together on its box
                result.append(NodeBound(-math.inf, leaf=True))
                continue
            nb = batch.box(b)
            if unstable[b] == 0 and n.fixed is not None and lower[b] < upper[b] * (1 - 1e-9):
                result.append(self._exact_leaf(n, nb, float(upper[b]), float(lower[b])))
                continue
            if 0 < unstable[b] <= COMPLETE_UNSTABLE and upper[b] > self.search.lower * (1 + 1e-6):
                result.append(self._completions(n, nb, float(upper[b]), float(lower[b])))
                continue
            # every phase known on a sub-box without fixed phases: one Jacobian on the whole box,
            # whose centre is replayed above only when promising; its bound is (nearly) exact
            result.append(NodeBound(float(upper[b]), float(lower[b]), leaf=bool(unstable[b] == 0),
                                    data=_NodeData(nb, None if per is None else per[b])))
        return result

    def _couple(self, nodes: list[_Node], batch: Bounds) -> None:
        """The first ReLU layer under all of each phase-split node's splits (`split_input_layer_bounds`)
        and the layers below its newest split (below every split when the first layer tightened)
        re-bounded, in place, with the node's phases as constraints, so that a split tightens the
        other layers through the input: Lagrangian dual bounds (beta-CROWN's intermediate bounds,
        `split_layer_bounds`), layer by layer from the new bounds of the layers above, one batch
        over the round's nodes per layer.
        A node whose bounds cross is empty (no point of its box has its phases). Each layer's bounds
        are sound on their own: a deadline between layers keeps the others as they were."""
        todo = [b for b, n in enumerate(nodes) if n.layer >= 0 and not batch.empty[b]]
        if not todo:
            return
        K = len(self.blocks) - 1
        rows = np.array(todo)
        lo, hi = np.stack([nodes[b].lo for b in todo]), np.stack([nodes[b].hi for b in todo])
        fixed = [np.stack([nodes[b].fixed[t] for b in todo]) for t in range(K)]
        pre_lo, pre_hi = clamp_splits([p[rows] for p in batch.pre_lo], [p[rows] for p in batch.pre_hi], fixed)
        first = np.array([nodes[b].layer for b in todo])
        empty = np.zeros(len(todo), dtype=bool)
        for p, q in zip(pre_lo, pre_hi):
            empty |= np.any(p > q, axis=1)
        # the first layer under all of the node's splits (its own layer's too: z_0 is linear in x);
        # a node whose first layer tightened has every later layer bounded again
        deepest = np.array([max(t for t in range(K) if np.any(fixed[t][k])) for k in range(len(todo))])
        for depth in np.unique(deepest):
            sel = np.flatnonzero((deepest == depth) & ~empty)
            if sel.size == 0 or self._expired():
                continue
            l, u = split_input_layer_bounds(self.blocks, lo[sel], hi[sel], [p[sel] for p in pre_lo], [p[sel] for p in pre_hi],
                                            [f[sel] for f in fixed], int(depth) + 1, self.couple_iterations,
                                            self._deadline())
            (l,), (u,) = clamp_splits([l], [u], [fixed[0][sel]])
            first[sel[np.any((l > pre_lo[0][sel]) | (u < pre_hi[0][sel]), axis=1)]] = 0
            pre_lo[0][sel], pre_hi[0][sel] = l, u
            empty[sel] |= np.any(l > u, axis=1)
        for j in range(int(first.min()) + 1, K):
            sel = np.flatnonzero((first < j) & ~empty)
            if self._expired() or sel.size == 0:
                break
            # (the last ReLU layer's bounds serve mainly its Jacobian's slopes: the side that may
            # make a neuron stable; the far side keeps the parent's bound for the branching score and
            # a MILP finisher's big-M, sound and a little looser)
            l, u = split_layer_bounds(self.blocks, lo[sel], hi[sel], [p[sel] for p in pre_lo], [p[sel] for p in pre_hi],
                                      [f[sel] for f in fixed], j, self.couple_iterations, self._deadline(),
                                      nearer_side=NEARER_SIDE and j == K - 1 and not self.conv)
            (pre_lo[j][sel],), (pre_hi[j][sel],) = clamp_splits([l], [u], [fixed[j][sel]])
            empty[sel] |= np.any(pre_lo[j][sel] > pre_hi[j][sel], axis=1)  # (no later layer for those)
        for k, b in enumerate(todo):
            batch.empty[b] |= empty[k]
            for j in range(K):
                batch.pre_lo[j][b], batch.pre_hi[j][b] = pre_lo[j][k], pre_hi[j][k]

    def _exact_leaf(self, node: _Node, nb: Bounds, upper: float, lower: float) -> NodeBound:
        """A node whose phases are all known, some of them fixed: one Jacobian on the part of the
        box where they hold. A point inside that region is replayed (its norm is the node's exact
        value), or the region is proven to have no interior in the box (the node is dropped)."""
        pattern = [(ph == ACTIVE).astype(np.float64) for ph in nb.phases()]
        inside = interior_point(self.net, pattern, node.lo, node.hi, deadline=self._deadline())
        if inside is not None:
            lower = max(lower, self._replay(inside))
        elif has_no_interior(self.net, pattern, node.lo, node.hi, deadline=self._deadline(), exact=False):
            # (the float proof: fast)
            return NodeBound(-math.inf, leaf=True)
        elif self.split_inputs and self._splittable(node) and node.hollow < HOLLOW_SPLITS:
            # no interior point found: split the box (the children's sound bounds under the fixed
            # phases drop the parts where the pattern cannot hold) before the costly exact proof
            return NodeBound(upper, lower, leaf=False, data=_NodeData(nb))
        elif has_no_interior(self.net, pattern, node.lo, node.hi, None if self.budget is None else self.budget.deadline):
            return NodeBound(-math.inf, leaf=True)
        return NodeBound(upper, lower, leaf=True, data=_NodeData(nb))

    def _completions(self, node: _Node, nb: Bounds, upper: float, lower: float) -> NodeBound:
        """A node with a few unstable neurons, bounded through its completions: each choice of
        their phases is one pattern with one Jacobian (its certified norm). A pattern whose norm
        exceeds the lower bound is resolved by the region LP: a point inside it is replayed (the
        norm is attained), or a float Farkas proof shows the region empty in the box (the pattern
        is dropped). The node's bound is the largest norm not dropped; it is a leaf when every
        pattern above the lower bound is resolved (splitting such nodes only cycles through ties)."""
        patterns = slope_patterns(nb.phases())
        bound, open_left = -math.inf, False
        for k in range(patterns[0].shape[0]):
            pattern = [s[k] for s in patterns]
            value = clarke_norm_bound(self.weights, pattern, pattern, self.q.p, self.q.q, self.q.target)
            if value > self.search.lower * (1 + 1e-9):
                inside = interior_point(self.net, pattern, node.lo, node.hi, deadline=self._deadline())
                if inside is not None:
                    lower = max(lower, self._replay(inside))
                    open_left |= lower < value * (1 - 1e-9)  # replay failed: not attained
                elif has_no_interior(self.net, pattern, node.lo, node.hi, exact=False):
                    continue
                else:
                    open_left = True
            bound = max(bound, value)
        return NodeBound(min(upper, bound), lower, leaf=not open_left, data=_NodeData(nb))

    def branch(self, node: _Node, nb: NodeBound, prune_level: float):
        bounds: Bounds = nb.data.bounds
        phases = bounds.phases()
        if self._splits_input(node, nb):
            return [(c, None) for c in self._halves(node, nb, self._input(node, bounds, phases))]
        j, i = self._neuron(bounds, phases)
        fixed = [np.zeros(ph.size, dtype=np.int8) for ph in phases] if node.fixed is None else [f.copy() for f in node.fixed]
        children = []
        for sign in (1, -1):
            f = [a.copy() for a in fixed]
            f[j][i] = sign
            children.append((_Node(node.lo, node.hi, tuple(f), bounds, nb.upper, layer=j, caps=nb.data.caps), None))
        return children

    def branch_many(self, items: list[tuple[_Node, NodeBound]], prune_level: float):
        """`branch` of each node (with `milp_finish`, the MILP finisher first: `_finish`), except
        that a node whose own split did not lower its bound (and that is still to be split by
        inputs: `_splits_input`) gets a strong input split: its halves
        along every wide input are bounded together (`bound_many`) and the input whose worse half has
        the least bound wins (ties: the smaller sum); those halves come back bounded. (Strong
        splits everywhere cost 5x the bounds on ACAS Xu for little gain; where the heuristic's split
        stalled, another input often halves the bound.)"""
        out: list = [None] * len(items)
        if self._expired():  # the engine stops after this round: no finisher, no strong splits
            return [self.branch(node, nb, prune_level) for node, nb in items]
        trials = []  # (item, input, left, right)
        for idx, (node, nb) in enumerate(items):
            finished = self._finish(node, nb)
            if finished is not None:
                out[idx] = [finished]
                continue
            strong = self.strong and _unstable(nb) > 0 and not self._helped(node, nb) and self._splits_input(node, nb)
            dims = self._wide_inputs(node) if strong else []
            if not dims:
                out[idx] = self.branch(node, nb, prune_level)
                continue
            trials += [(idx, k, *self._halves(node, nb, k, strong=True)) for k in dims]
        if trials:
            bounds = self.bound_many([c for t in trials for c in t[2:]])
            best: dict[int, tuple] = {}
            for n, (idx, _, left, right) in enumerate(trials):
                bl, br = bounds[2 * n], bounds[2 * n + 1]
                score = (max(bl.upper, br.upper), bl.upper + br.upper)
                if idx not in best or score < best[idx][0]:
                    best[idx] = (score, [(left, bl), (right, br)])
            for idx, (_, children) in best.items():
                out[idx] = children
        return out

    def attained(self) -> float:
        """The best replayed witness so far (probes, region walks and dense searches alike)."""
        return self.search.lower

    # ------------------------------------------------------------------ on two cores (`solvers.bab.bound_worker`)
    def batch_size(self) -> int:
        """Nodes branched per round: BATCH (the engine makes rounds of about ROUND_SECONDS); with a
        bound worker as many as take about ROUND_SECONDS at the last round's rate, but at least two
        (one per core: at 784 inputs a node takes about 0.2 s); one if the worker failed."""
        if not self.paired:
            return BATCH
        if self.helper is not None and not self.helper.alive:
            return 1
        return int(min(BATCH, max(2, ROUND_SECONDS / self.per_branched))) if self.per_branched > 0 else 2

    def close(self) -> None:
        """End the bound worker, if any."""
        if self.helper is not None:
            self.helper.close()

    def _helper_for(self, nodes: list[_Node]) -> BoundWorker | None:
        """The bound worker for a batch of children (forked at the first batch)."""
        if (not self.parallel or len(nodes) < 2 or self.batched is None or self._expired()
                or time.perf_counter() - self.started < FORK_AFTER):
            return None
        if self.helper is None:
            self.helper = BoundWorker(self._bound_in_worker, self._share, self._take_share, self._deadline())
        return self.helper if self.helper.alive else None

    def _bound_in_worker(self, nodes: list[_Node]) -> list[NodeBound]:
        if self.witnesses:  # (in the worker: it only bounds; the witness search stays with the tree)
            self.witnesses, self.rng = False, np.random.default_rng(1)
        return self._bound_here(nodes)

    def _share(self) -> tuple[float, np.ndarray] | None:
        """The worker's best witness (value, point), when it improved since the last batch."""
        if self.search.point is None or self.search.lower <= self.shared:
            return None
        self.shared = self.search.lower
        return self.shared, self.search.point.x

    def _take_share(self, shared: tuple[float, np.ndarray]) -> None:
        """The worker's witness point, replayed here before it counts (`WitnessSearch.offer`)."""
        value, x = shared
        if value > self.search.lower:
            self.search.offer(x)

    # ------------------------------------------------------------------ helpers
    def _deadline(self) -> float | None:
        return None if self.budget is None else self.budget.deadline

    def _expired(self) -> bool:
        return self.budget is not None and self.budget.expired()

    def _finish(self, node: _Node, nb: NodeBound) -> tuple[_Node, NodeBound] | None:
        """The MILP finisher on a node about to be branched with at most MILP_TOP_UNSTABLE unstable
        neurons: the node itself comes back with the proven bound (a leaf when the MILP closed it),
        or None when the finisher does not apply or did not lower the bound."""
        unstable = _unstable(nb)
        if (not self.milp_finish or node.finished or not 0 < unstable <= MILP_TOP_UNSTABLE
                or nb.upper <= self.search.lower * (1 + 1e-6)):
            return None
        bound, complete = self._milp_bound(nb.data.bounds)
        if bound >= nb.upper:  # (a closed MILP may count patterns of measure zero: not lower)
            return None
        # (the lower reported is the search's: replayed witnesses of the whole box, the engine's prune level)
        return (replace(node, finished=True),
                NodeBound(min(bound, nb.upper), self.search.lower, leaf=complete, data=nb.data))

    def _splits_input(self, node: _Node, nb: NodeBound) -> bool:
        """Inputs are split while the node is wide and has more than RELU_SPLIT_AT unstable neurons
        (or none: `_exact_leaf` found no interior point) and the split that made it lowered its
        bound (else one strong input split is tried first: `branch_many`); phases are split
        otherwise."""
        if not self._splittable(node):
            return False
        unstable = _unstable(nb)
        return unstable == 0 or (unstable > RELU_SPLIT_AT
                                 and (self._helped(node, nb) or (self.strong and not node.strong)))

    @staticmethod
    def _helped(node: _Node, nb: NodeBound) -> bool:
        """The split that made the node lowered its bound below its parent's."""
        return nb.upper < node.parent_bound * (1 - 1e-9)

    def _halves(self, node: _Node, nb: NodeBound, k: int, strong: bool = False) -> tuple[_Node, _Node]:
        """The two halves of the node's box along input k; they start from the node's bounds."""
        mid = 0.5 * (node.lo[k] + node.hi[k])
        left_hi, right_lo = node.hi.copy(), node.lo.copy()
        left_hi[k], right_lo[k] = mid, mid
        hollow = node.hollow + 1 if _unstable(nb) == 0 else 0  # (only `_exact_leaf` splits such nodes)
        data: _NodeData = nb.data
        return (_Node(node.lo, left_hi, node.fixed, data.bounds, nb.upper, hollow=hollow, strong=strong, dim=k,
                      caps=data.caps),
                _Node(right_lo, node.hi, node.fixed, data.bounds, nb.upper, hollow=hollow, strong=strong, dim=k,
                      caps=data.caps))

    def _search_more(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Anytime lower bounds: while the dense search (`dense_ascent`, a new seed each time) has had
        less than SEARCH_SHARE of the tree's time (on high-dimensional boxes the smoothed ascent
        `smooth_ascent`, ASCENT_SHARE, slots of ASCENT_SLOT), run it again, in turns on the whole box
        and on the batch's node of largest bound (where the constant is most likely attained). Each
        slot in a row that raised nothing halves the share (ASCENT_BACKOFF times at most)."""
        from .witness import dense_ascent, flip_search, smooth_ascent

        now = time.perf_counter()
        smooth = self.high_dimensional
        share, slot = (ASCENT_SHARE, ASCENT_SLOT) if smooth else (SEARCH_SHARE, SEARCH_SLOT)
        share *= 0.5**self.fruitless
        if self.search_seconds > share * (now - self.started):
            return
        deadline = None if self.budget is None else self.budget.deadline
        if smooth:  # a slow tree (seconds per batch of 784-input nodes) calls rarely: catch up on the share
            slot = max(slot, share * (now - self.started) - self.search_seconds)
        slot = slot if deadline is None else min(slot, deadline - now)
        if slot <= 0:
            return
        self.search_calls += 1
        before = self.search.lower
        if smooth and self.fruitless and self.flip_free is not None and self.flipped < before:
            # the ascent stalls: walk by single flips from the best witness (once per witness)
            self.flipped = before
            flip_search(self.search, self.flip_free, now + slot)
        else:
            box = None if self.search_calls % 2 else (lo, hi)
            run = smooth_ascent if smooth else dense_ascent
            run(self.search, now + slot, seed=1000 + self.search_calls, box=box)
        self.search_seconds += time.perf_counter() - now
        self.fruitless = 0 if self.search.lower > before else min(self.fruitless + 1, ASCENT_BACKOFF)

    def _wide_inputs(self, node: _Node) -> list[int]:
        """Inputs of the node wider than a relative 1e-3 of the box: input splitting continues while
        there is one (near ReLU ties the slopes of unstable neurons stay free however small the
        box: phases are split then)."""
        width = np.array(self.box.hi) - np.array(self.box.lo)
        return [int(k) for k in np.flatnonzero((node.hi - node.lo) > 1e-3 * np.maximum(width, 1e-300))]

    def _splittable(self, node: _Node) -> bool:
        return self.split_inputs and bool(self._wide_inputs(node))

    def _input(self, node: _Node, bounds: Bounds, phases) -> int:
        """The input whose halving most shrinks the unstable neurons' ranges: width times the
        influence on each unstable neuron (|W| chains through the neurons not inactive on the node:
        the chain through every neuron mis-ranks the inputs on ACAS Xu, 1.5x looser bounds),
        relative to that neuron's range; once every wide input has been split PSEUDO_RELIABLE
        times, weighted by its pseudo-cost (the mean relative bound decrease its splits gave so
        far, as MILP solvers rank branching variables: another 1.2-5x on ACAS Xu)."""
        width = node.hi - node.lo
        score = np.zeros(width.size)
        influence = np.abs(self.weights[0])
        for j, ph in enumerate(phases):
            if j > 0:
                influence = np.abs(self.weights[j]) @ (influence * (phases[j - 1] != INACTIVE)[:, None])
            u = ph == UNSTABLE
            if np.any(u):
                span = (bounds.pre_hi[j] - bounds.pre_lo[j])[u]
                score += (influence[u] * width[None, :] / span[:, None]).sum(axis=0)
        wide = self._wide_inputs(node)
        if wide and np.all(self.input_splits[wide] >= PSEUDO_RELIABLE) and np.any(score[wide] > 0):
            mean = self.input_gain[wide] / self.input_splits[wide]
            return wide[int(np.argmax(score[wide] * mean))]
        return int(np.argmax(score)) if np.any(score > 0) else int(np.argmax(width))

    def _neuron(self, bounds: Bounds, phases) -> tuple[int, int]:
        """The unstable neuron whose slope uncertainty weighs most: |pre-activation range| times
        the |W| chain from it to the output (a BaBSR-like score)."""
        best, where = -1.0, (0, 0)
        down = np.ones(self.weights[-1].shape[0])
        scores = []
        for j in range(len(phases) - 1, -1, -1):
            down = down @ np.abs(self.weights[j + 1])
            span = bounds.pre_hi[j] - bounds.pre_lo[j]
            scores.append((j, np.where(phases[j] == UNSTABLE, span * down, -1.0)))
            down = down * (phases[j] != INACTIVE)
        for j, sc in scores:
            i = int(np.argmax(sc))
            if sc[i] > best:
                best, where = float(sc[i]), (j, i)
        return where

    def _lp_bound(self, nb: Bounds) -> float:
        from solvers.lp import SafeLp
        from solvers.milp.lipschitz import build_lipschitz_milp

        try:
            milp = build_lipschitz_milp(self.net, nb, self.q.p, self.q.q, self.q.target)
        except ValueError:
            return math.inf
        if milp.model.is_quadratic:
            return math.inf
        out = SafeLp(milp.model).maximize(milp.model.obj)
        if out.infeasible:
            return -math.inf
        return milp.to_lipschitz(out.bound + milp.model.obj_offset + milp.model.obj_err)

    def _milp_bound(self, nb: Bounds) -> tuple[float, bool]:
        """The exact MILP finisher on a node with few unstable neurons: (proven bound, closed).
        Its incumbents are replayed as witnesses of the whole question (their regions meet the
        node, a sub-box of the question's box)."""
        from solvers.milp.lipschitz import build_lipschitz_milp
        from solvers.milp.sound import sound_solve

        rem = None if self.budget is None else self.budget.remaining()
        if rem is not None and rem < 0.2:
            return math.inf, False
        try:
            milp = build_lipschitz_milp(self.net, nb, self.q.p, self.q.q, self.q.target)
        except ValueError:
            return math.inf, False
        holder = [milp]
        pair = (self.q.p, self.q.q)
        budget = Budget(MILP_FINISH_SECONDS if rem is None else min(MILP_FINISH_SECONDS, rem))
        sound = sound_solve(milp.model, budget, backend="highs", threads=1,
                            check_point=self.search.check_point(nb, milp),
                            refine=self.search.refine(holder, pair, 1e-6),
                            node_bound=lambda lo, hi: holder[0].phase_bound(lo, hi),
                            units=lambda v: holder[0].to_lipschitz(v))
        for res in sound.results:
            if res.x is not None:
                self.search.replay(holder[0], pair, res.x)
        complete = sound.status == "optimal" and sound.proof is not None and sound.proof.complete
        return holder[0].to_lipschitz(sound.bound), complete

    def _replay(self, x: np.ndarray) -> float:
        """A point of the node as a witness (a sound lower bound when the net is differentiable there)."""
        from .replay import differentiable_point

        pt = differentiable_point(self.net, x, self.search.blocks)
        if pt is None:
            return -math.inf
        val = self.search.value(pt, (self.q.p, self.q.q))
        if val > self.search.lower or self.search.point is None:
            self.search.lower, self.search.point = val, pt
        return val


def _unstable(nb: NodeBound) -> int:
    """Unstable neurons of a bounded node."""
    return int(sum(np.sum(ph == UNSTABLE) for ph in nb.data.bounds.phases()))


def lipschitz_bab(net: Network, box: Box, question: NormQuestion, search: WitnessSearch, budget: Budget,
                  progress=None, node_lp: bool = False, max_nodes: int | None = None,
                  root_bounds: Bounds | None = None, milp_finish: bool = False,
                  target: float = -math.inf, cores: int = 2) -> BabOutcome:
    """Run the branch-and-bound until the interval closes (1e-6 relative), the budget ends or Ctrl-C.
    `milp_finish`: close nodes with few unstable neurons by the exact (proven) MILP. `target`: nodes
    whose bound is at most it close too (a decision "L <= target?": the upper bound then stops at
    the largest closed bound <= target once every node is closed, and the search stops as soon as
    a witness above the target is replayed). `cores`: with 2 or more (and fork, two free cores, no
    `max_nodes`) half of every batch is bounded on a second core (`solvers.bab.bound_worker`)."""
    problem = LipschitzBab(net, box, question, search, node_lp, root_bounds, milp_finish, budget,
                           parallel=cores >= 2 and max_nodes is None)
    try:
        # (two nodes a round on two cores: rounds sized by the deadline alone)
        res = branch_and_bound(problem, target=target, gap=1e-6, deadline=budget.deadline, lower=search.lower,
                               max_nodes=max_nodes, progress=progress, batch=problem.batch_size,
                               stop_above=math.isfinite(target),
                               **({"round_seconds": None} if problem.paired else {}))
    finally:
        problem.close()
    helper = problem.helper
    failure = None if helper is None or helper.failure == "closed" else helper.failure
    return BabOutcome(res.upper, max(res.lower, search.lower), res.nodes, res.stop, res.seconds,
                      0 if helper is None else helper.nodes, failure)


__all__ = ["BabOutcome", "LipschitzBab", "lipschitz_bab", "BabProgress"]
