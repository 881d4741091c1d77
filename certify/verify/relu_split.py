"""ReLU-splitting search for high-dimensional inputs (beta-CROWN's branch-and-bound).

Input splitting cannot split 784 pixels; this search splits ReLU neurons instead. A node is a set
of split decisions (neuron i of ReLU layer t fixed active, z >= 0, or inactive, z <= 0) over the
whole input box of a region. Its bounds, for a batch of nodes at once:

1. pre-activation bounds: the root's (`bound_boxes` with optimised slopes; a root left open is
   refined with the slopes of every layer optimised, `_refine_roots`), then at every node the
   parent's intersected with the node's phases and, below the split, re-bounded by the batched
   symbolic step of `bound_boxes` with the fixed phases, with CROWN's slopes and the refined
   root's (`tighten`, `root_slopes`; the latter only when a trial at the root shows they tighten a
   split's children, `_pick_policy`);
2. every row of every open clause bounded by `solvers.bounds.beta.beta_upper`: alpha slopes and
   split multipliers beta optimised by gradient steps (warm-started from the parent's), the bound
   itself a Lagrangian dual bound evaluated soundly in float64 for those multipliers;
3. the box corner maximising each row's linear bound is evaluated, and every few rounds PGD starts
   there for the clause closest to unsafe: a point with a non-negative margin is replayed
   (`Falsifier.consider`) before `sat` is claimed.

A clause is closed on a node when some row's lower bound exceeds its right side; a node when every
clause is; `unsat` only when every node is closed. The neuron to split: the best few per layer by
BaBSR's intercept score g+ * (-l u / (u - l)) (how much the relaxation adds to the open rows'
bounds) are tried on both children with the node's multipliers (filtered strong branching), and the
one with the best worse child is split; only among the earliest layer's candidates when a trial at
the refined root found that better (`_pick_policy`: early splits tighten every later layer). A
node without unstable neurons left is decided by one safe LP per open clause (`relu_lp`: exact
there); one it cannot close either ends the search `exhausted`. A node about to be split may first
be bounded by that LP tightened by rounds of each neuron's ideal cuts (`_cut_finish`, where a trial
at the root and the branching so far say it pays: `_worth_cutting`), which goes below the triangle
relaxation that beta-CROWN's bound relaxes. The loop is
`solvers.bab.branch_and_bound` with a `DepthFirst` frontier, as for input splitting.

A tree still open after PLAIN_SHARE of the time left at the refined root is searched again from a
copy of that root with every node's unstable neurons bounded under *all* of its splits
(`_rebound_under_splits`: a node's own bounds ignore the half-spaces of splits in the same and
deeper layers), where the cost of such nodes measured at the root lets DEEP_MIN_NODES of them fit.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

import numpy as np

from models.ir import Network
from models.memory import Holding, gb, work_left
from solvers.bab import DepthFirst, NodeBound
from solvers.bounds import Bounds, relu_blocks
from solvers.bounds.beta import (beta_upper, clamp_splits, crown_slopes, estimate_upper, split_layer_bounds_all,
                                  split_neuron_bounds)
from solvers.bounds.options import BoundOptions
from solvers.bounds.pipeline import bound_boxes
from solvers.runtime import past, stop_requested

from .attack import Falsifier
from .counterexample import Counterexample
from .node_bounds import clause_bounds, stacked_rows
from .relu_lp import clause_lp_bound
from .search import SAT, SPLIT, TIMEOUT, SearchOutcome, run_search
from .split_workers import search_halves, split_rule

# gradient steps on alpha / beta at the root and at every other node (warm-started from the parent)
ROOT_ITERATIONS = 60
NODE_ITERATIONS = 16
# the pre-activation slopes of a root the first bound leaves open: optimised on every layer whatever
# its size (the per-call work cap `alpha.WORK` left the deep layers of mnist_fc 256x6 at CROWN's
# slopes and their root margin bounds 2.5-7x looser), for up to ROOT_ALPHA_STEPS steps within
# ROOT_ALPHA_SHARE of the time left
ROOT_ALPHA_STEPS = 30
ROOT_ALPHA_SHARE = 0.1
# then each unstable neuron of such a root bounded by an LP with ROOT_LP_CUTS rounds of ideal cuts
# (`lp.lp_tighten_layer`), layer by layer, within ROOT_LP_SHARE of the time left; a layer's LPs stop
# when less than ROOT_LP_MIN_GAIN of its first 8 neurons (the closest to stable) became stable
# (mnist_fc 256x6 prop_0_0.05's second layer: 31 of 67 neurons made stable in 8 s; cifar_base_kw
# img8194's: 3 of 168 in 21 s, widths 3.4% smaller)
ROOT_LP_CUTS = 2
ROOT_LP_SHARE = 0.5
ROOT_LP_MIN_GAIN = 0.5
ROOT_LP_WORKERS = 2  # the root's LPs of a layer on two processes (nothing else runs on the second core then)
# the root's slopes are re-used below the splits only when the trial lowers the worse child's margin
# bound or its unstable neurons by at least this share (`_pick_policy`)
REUSE_GAIN = 0.01
# the cut finisher (`_cut_finish`): rounds of ideal cuts per LP; its share of the search's time at
# most CUT_SHARE times the share of its tries that closed their node (plus CUT_GRACE seconds); its
# first CUT_CALIBRATE tries (the refined root's) measure what a try costs and how far it lowers a
# bound, then a node is tried only when it is expected to close it (its bound below the largest
# drop of the last CUT_HISTORY tries) and to save more branching than it costs (`_worth_cutting`)
CUT_ROUNDS = 10
CUT_SHARE = 0.9
CUT_GRACE = 1.0
CUT_CALIBRATE = 1
CUT_HISTORY = 32
# a try's LPs stop after CUT_TRY_SHARE of the search's time limit (at least CUT_TRY_MIN seconds)
CUT_TRY_SHARE = 0.05
CUT_TRY_MIN = 2.0
# the search without re-bounds under all splits gets PLAIN_SHARE of the time left after the root;
# an open tree is then searched again from the refined root with them (`_rebound_under_splits`:
# DEEP_ITERATIONS gradient steps, batches of at most DEEP_FLOATS floats per array)
PLAIN_SHARE = 0.3
DEEP_ITERATIONS = 60
DEEP_FLOATS = 2_000_000
# the second search only where it can afford DEEP_MIN_NODES nodes at the cost measured at the root
# (DEEP_PROBE neurons re-bounded there, scaled to its unstable ones): CIFAR nets' nodes cost far more
DEEP_MIN_NODES = 100
DEEP_PROBE = 16
# split candidates per ReLU layer tried by strong branching (0: BaBSR's score alone)
STRONG_PER_LAYER = 2
# seconds of one round of node bounds (the engine sizes the batch from the last round's per-node time)
ROUND_SECONDS = 1.0
# the open nodes may hold at most this share of the memory budget left when the search starts
# (`models.memory.work_left`); they are checked every round once there are MEASURE_FROM of them
FRONTIER_SHARE = 0.5
MEASURE_FROM = 256
# between full measurements (30 ms for 3,000 CIFAR nodes) the bytes are estimated from the last
# one's bytes per node, for at most MEASURE_EVERY rounds and while the estimate stays below
# MEASURE_NEAR of the cap
MEASURE_EVERY = 10
MEASURE_NEAR = 0.8


@dataclass(eq=False)
class _Node:
    region: int
    split: list[np.ndarray]  # per ReLU layer (n_t,): +1 active, -1 inactive, 0 free
    pre_lo: list[np.ndarray]
    pre_hi: list[np.ndarray]
    out_lo: np.ndarray
    out_hi: np.ndarray
    depth: int
    upper: np.ndarray  # (k,) clause margin upper bounds
    open: np.ndarray  # (k,) clauses not yet proven infeasible
    warm: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = field(default_factory=dict)  # row -> alpha, beta
    choice: tuple[int, int] | None = None  # (layer, neuron) to split next
    early: tuple[int, int] | None = None  # the best-scored candidate of the earliest layer with one
    fresh: bool = True  # pre-activation bounds not yet re-bounded with the node's phases
    # the first layer whose bounds the node's newest split can change (the layer after it), or 1
    # when its parent's re-bound was cut short by the deadline (then every layer is re-bounded)
    rebound_from: int = 1
    complete: bool = True  # every layer's bounds reflect the phases of the layers before it


class ReluSplitSearch:
    """Branch-and-bound over ReLU phases with beta-CROWN node bounds: a `solvers.bab` problem run
    depth-first that stops at the first replayed counterexample."""

    # counts a forked worker's half adds to this process's (`split_workers`)
    COUNTERS = ("cut_tries", "cut_closed", "cut_seconds", "deep_problems", "deep_empty")

    def __init__(self, falsifier: Falsifier, net: Network, *, batch_size: int = 32, tighten: bool = True,
                 root_iterations: int = ROOT_ITERATIONS, iterations: int = NODE_ITERATIONS,
                 strong: int = STRONG_PER_LAYER, pgd_every: int = 5, strong_all_rows: bool = False,
                 rebound_last: bool = False, bound_grace: float = 0.0, skip_unchanged: bool = True,
                 workers: int = 2, reuse_slopes: bool = True, cut_share: float = CUT_SHARE,
                 root_lp: bool = True, deep_iterations: int | None = None,
                 plain_share: float | None = None) -> None:
        self.f = falsifier
        self.bound_grace = bound_grace  # node bounds in flight at the deadline may finish within it
        self.blocks = relu_blocks(net)
        self.rows = [stacked_rows(r) for r in falsifier.regions]
        # search settings
        self.batch_size, self.tighten, self.strong, self.pgd_every = batch_size, tighten, strong, pgd_every
        # rounds of up to a second (the engine's default 0.1 s left 1-2 nodes per bound call, whose
        # fixed costs then dominated), and sized to end by the deadline from the last round's
        # seconds per node (`branch_and_bound`): longer rounds overran a 20 s limit by 3 s
        self.round_seconds = ROUND_SECONDS
        self.root_iterations, self.iterations = root_iterations, iterations
        self.strong_all_rows = strong_all_rows
        self.rebound_last = rebound_last
        self.skip_unchanged = skip_unchanged  # re-bound only the layers after a node's newest split
        # search state (the driver, `search.run_search`, reads nodes, max_depth, stuck, cex)
        self.nodes = self.max_depth = self.rounds = 0
        self.stuck: list[_Node] = []
        self.cex: Counterexample | None = None
        self.deadline: float | None = None
        self._pgd_start: tuple[int, int, np.ndarray] | None = None
        self.frontier = DepthFirst(lambda node, nb: nb.upper if nb is not None else np.inf)
        self.workers = workers  # processes once the tree is large (`split_workers`)
        self.stuck_elsewhere = 0  # stuck nodes of the worker's half
        self._seeds: list | None = None  # open entries a search starts from (`search_entries`)
        self._refined = False  # the open roots' bounds tightened (`_refine_roots`)
        # per region, the refined root's optimised slopes of every layer's unstable neurons
        # (`bound_boxes`' slopes_out), re-used by the re-bound below every split (`_tighten`)
        self.root_slopes: dict[int, dict] = {}
        self.reuse_slopes = reuse_slopes
        self.use_root_lp = root_lp  # the refined root's LP step with ideal cuts (`_refine_roots`)
        self.root_lp: list[tuple[int, float, int, int]] = []  # its LPs, seconds, unstable neurons before and after
        # split the earliest layer with an unstable neuron first (`_pick_policy`), and the trial's
        # worse-child margin bounds of both policies
        self.early_layers = False
        self.policy_trial: dict[str, float] = {}
        self._seed_bounds: dict[int, NodeBound] = {}
        # the open nodes' memory: its cap (set at the root), compactions so far, a stop when even
        # compacted nodes exceed it (`_check_memory`)
        self.memory_cap = np.inf
        self.compactions = 0
        self.memory_stop = False
        self.memory_note = ""
        self.holding = Holding()  # (the open nodes' bytes count as held for the budget's other checks)
        self._per_node = 0.0  # bytes per open node at the last full measurement
        self._estimated = 0  # rounds since then
        # the cut finisher: its share of the time (0: off), seconds spent, nodes tried and closed
        self.cut_share = cut_share
        self.cut_seconds = 0.0
        self.cut_tries = self.cut_closed = 0
        self.cut_drops: list[float] = []  # how far the finisher lowered the clause bounds it tried
        # running means: branching's bound drop per level, its seconds per node
        self.level_drop, self.node_seconds = 0.0, 0.0
        self._started = time.perf_counter()
        self._in_trial = False
        # the second search (`run`): every unstable neuron re-bounded under all of the node's splits
        # (0: no second search), after `plain_share` of the time left at the root (0: right after it)
        self.deep_iterations = DEEP_ITERATIONS if deep_iterations is None else deep_iterations
        self.plain_share = PLAIN_SHARE if plain_share is None else plain_share
        self.deep = False  # (the second search is running)
        self.deep_empty = self.deep_problems = 0
        self._root_entries: list = []  # the refined roots as engine entries, copied for the second search
        self.deep_node_seconds = 0.0  # a node's re-bound under its splits, estimated at the root
        self.deep_note = ""
        self._plain_end = np.inf
        self._root_leaves = -np.inf  # the largest bound of the roots the second search does not search

    # ---------------------------------------------------------------- the BabProblem side
    def roots(self) -> list[_Node]:
        if self._seeds is not None:  # open entries of an earlier search, bounded there
            seeds, self._seeds = self._seeds, None
            self._seed_bounds = {id(e[2]): replace(e[3], upper=min(e[3].upper, e[0])) if e[3] is not None
                                 else NodeBound(e[0]) for e in seeds}
            return [e[2] for e in seeds]
        self.memory_cap = FRONTIER_SHARE * work_left()[0]
        self._started = time.perf_counter()
        out = []
        for r, region in enumerate(self.f.regions):
            nb = bound_boxes(self.blocks, region.lo[None], region.hi[None],
                             BoundOptions(rows="per-box", lower_slopes="alpha", symbolic_output=False,
                                          deadline=self._bound_deadline()))
            k = len(region.clauses)
            out.append(_Node(r, [np.zeros(l.shape[1], dtype=np.int8) for l in nb.pre_lo],
                             [l[0] for l in nb.pre_lo], [u[0] for u in nb.pre_hi], nb.out_lo[0], nb.out_hi[0], 0,
                             np.full(k, np.inf), np.ones(k, dtype=bool), fresh=False))
        return out

    def bound(self, node: _Node) -> NodeBound:
        return self.bound_many([node])[0]

    def bound_many(self, nodes: list[_Node]) -> list[NodeBound]:
        if self._seed_bounds:  # (the engine bounds the roots first: here, the seeds)
            seeded, self._seed_bounds = self._seed_bounds, {}
            return [seeded[id(n)] for n in nodes]
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(nodes):
            groups.setdefault(n.region, []).append(i)
        out: list[NodeBound] = [NodeBound(np.inf)] * len(nodes)
        for r, idx in groups.items():
            if self.cex is not None:
                break
            for i, nb in zip(idx, self._expand(r, [nodes[i] for i in idx]), strict=True):
                out[i] = nb
        if not self._refined and all(n.depth == 0 for n in nodes):
            # roots left open: their pre-activation slopes optimised on every layer, then bounded again
            self._refined = True
            again = [i for i, nb in enumerate(out) if not nb.leaf and nodes[i].open.any()]
            if again and self.cex is None and self._refine_roots([nodes[i] for i in again]):
                self.nodes -= len(again)  # (the same nodes)
                for i, nb in zip(again, self.bound_many([nodes[i] for i in again]), strict=True):
                    out[i] = nb
                live = [nodes[i] for i in again if not out[i].leaf and nodes[i].choice is not None]
                if live and self.cex is None:  # (with or without slopes kept: the policy is tried either way)
                    self._pick_policy(live[0])
            if self.deep_iterations and self.cex is None:
                self._keep_roots(nodes, out)
        return out

    def _keep_roots(self, nodes: list[_Node], out: list[NodeBound]) -> None:
        """Copies of the refined open roots (engine entries: bound, depth, node, node bound) for
        the second search, and the end of the first one (`run`)."""
        entries = [(nb.upper, 0, copy.deepcopy(n), nb) for n, nb in zip(nodes, out) if not nb.leaf and n.choice is not None]
        # the other roots are leaves, closed or stuck: their bounds stay part of the answer's
        self._root_leaves = max((nb.upper for n, nb in zip(nodes, out) if nb.leaf or n.choice is None), default=-np.inf)
        self._root_cap = self.memory_cap
        if not entries or self.deadline is None or past(self.deadline):
            return
        self.deep_node_seconds = self._probe_rebound(entries[0][2])
        now = time.perf_counter()
        self._plain_end = now + self.plain_share * max(self.deadline - now, 0.0)
        if self.deep_node_seconds * DEEP_MIN_NODES <= self.deadline - self._plain_end:
            self._root_entries = entries
        else:
            self.deep_note = (f"no second search with node bounds under all splits: a node's re-bound estimated at "
                              f"{self.deep_node_seconds:.2g} s at the root, too slow for {DEEP_MIN_NODES} nodes")

    def _probe_rebound(self, root: _Node) -> float:
        """Seconds a node's re-bound under its splits would take (`_rebound_under_splits`), from
        DEEP_PROBE of the root's unstable neurons (spread over its layers) bounded that way."""
        region = self.f.regions[root.region]
        K = len(self.blocks) - 1
        unstable = [(t, i) for t in range(K) for i in np.flatnonzero((root.pre_lo[t] < 0) & (root.pre_hi[t] > 0))]
        if not unstable:
            return 0.0
        pick = [unstable[q] for q in np.linspace(0, len(unstable) - 1, min(DEEP_PROBE, len(unstable))).astype(int)]
        P = len(pick)
        started = time.perf_counter()
        split_neuron_bounds(self.blocks, region.lo[None], region.hi[None], [np.repeat(a[None], P, 0) for a in root.pre_lo],
                            [np.repeat(a[None], P, 0) for a in root.pre_hi],
                            [np.repeat(s[None], P, 0) for s in root.split], np.array([t for t, _ in pick]),
                            np.array([i for _, i in pick]), iterations=self.deep_iterations)
        return (time.perf_counter() - started) * len(unstable) / P

    def _pick_policy(self, root: _Node) -> None:
        """Two choices for the whole search, made by trials on the refined root: each split is tried
        on both children, re-bounded as the tree would, and scored by its worse child's margin bound.

        - Re-use the root's slopes below the splits (`root_slopes`, when the refine kept them: one
          open root per region) only when they pay: the earliest layer's best split re-bounded with
          and without them. They are dropped when they lower neither that bound nor the children's
          unstable neurons by REUSE_GAIN: every re-bound then saves their back-substitution. On oval21 (CIFAR) they changed neither and cost 15-50% a
          re-bound; cifar_base_kw img6767 reached a margin bound of 0.259 in 120 s with them, 0.155
          without. On mnist_fc 256x6 prop_3_0.05 the trial gives 7.05 with them and 16.8 without.
        - Split the earliest layer first (`early_layers`) when that does better than the
          strong-branching choice. Strong branching's scores see only the output rows over fixed
          pre-activation bounds; a split in an early layer also tightens every later layer's bounds
          (with the root's optimised slopes: on mnist_fc 256x6 prop_3_0.05 one split of layer 1
          leaves 28 of layer 5's 79 unstable neurons unstable), which only this trial sees."""
        if root.early is None:
            return
        chosen, warm, stuck = root.choice, root.warm, len(self.stuck)
        trial: dict[str, float] = {}
        early = self._trial_split(root, root.early, warm)
        kept = self.root_slopes.get(root.region)
        if early is not None and kept:
            del self.root_slopes[root.region]
            try:
                without = self._trial_split(root, root.early, warm)
            finally:
                self.root_slopes[root.region] = kept
            if without is not None:
                trial["early without root slopes"] = without[0]
                if early[0] >= without[0] - REUSE_GAIN * abs(without[0]) and early[1] >= (1.0 - REUSE_GAIN) * without[1]:
                    self.reuse_slopes = False
                    self.root_slopes.clear()
                    early = without  # (the tree's children from now on)
        if early is not None:
            trial["early"] = early[0]
            strong = self._trial_split(root, chosen, warm) if root.early != chosen else None
            if strong is not None:
                trial["strong"] = strong[0]
        root.choice, root.warm = chosen, warm
        del self.stuck[stuck:]  # (trial children are not the tree's: the tree meets them again)
        self.policy_trial = trial
        self.early_layers = trial.get("early", np.inf) < trial.get("strong", -np.inf)

    def _trial_split(self, root: _Node, choice: tuple[int, int], warm: dict) -> tuple[float, int] | None:
        """Split `choice` of the root on trial: its worse child's margin bound and the children's
        unstable neurons (None once a counterexample was found)."""
        root.choice, root.warm = choice, dict(warm)
        kids = [kid for kid, _ in self.branch(root, NodeBound(np.inf), np.inf)]
        self._in_trial = True  # (no cut finisher on trial children)
        try:
            bounds = self._expand(root.region, kids)
        finally:
            self._in_trial = False
        if self.cex is not None:
            return None
        unstable = sum(int(np.sum((lo < 0) & (hi > 0))) for kid in kids for lo, hi in zip(kid.pre_lo, kid.pre_hi))
        return max(nb.upper for nb in bounds), unstable

    def branch(self, node: _Node, nb: NodeBound, prune_level: float) -> list[tuple[_Node, float | None]]:
        t, i = node.choice
        kids = []
        for sign in (1, -1):
            split = [s.copy() if j == t else s for j, s in enumerate(node.split)]
            split[t][i] = sign
            # a split in the last ReLU layer changes no later layer's bounds: nothing to re-bound
            kids.append((_Node(node.region, split, node.pre_lo, node.pre_hi, node.out_lo, node.out_hi,
                               node.depth + 1, node.upper, node.open, dict(node.warm),
                               fresh=self.rebound_last or t < len(node.split) - 1,
                               rebound_from=t + 1 if node.complete else 1, complete=node.complete), None))
        node.warm = {}
        return kids

    def attained(self) -> float:
        """Every `pgd_every` rounds, PGD on the open clause with the largest bound of the last batch,
        started at its linear bound's maximiser; the counterexample's margin so far (-inf: none)."""
        i, self.rounds = self.rounds, self.rounds + 1
        self._check_memory()
        if (self.cex is None and self.pgd_every and i % self.pgd_every == self.pgd_every - 1
                and self._pgd_start is not None and not past(self.deadline)):
            r, clause, x = self._pgd_start
            self._pgd_start = None
            region = self.f.regions[r]
            starts = np.vstack([x, self.f.rng.uniform(region.lo, region.hi, (3, x.size))])
            self.cex = self.f.pgd(r, clause, starts, 30, self.deadline)
        return -np.inf if self.cex is None else self.cex.margin

    # ---------------------------------------------------------------- one batch of nodes
    def _refine_roots(self, nodes: list[_Node]) -> bool:
        """Tighten the open roots' pre-activation bounds (in place) with slopes optimised on every
        layer, whatever the layer's size (`alpha.WORK` caps the first pass), for up to
        ROOT_ALPHA_STEPS steps within ROOT_ALPHA_SHARE of the time left; False when no time is left.
        Only for roots the first pass leaves open: at 60 s it cost 2.4-4.4 s for root margin bounds
        2.5x lower on mnist_fc 256x6, 5-7 s for 3-19% lower on oval21 (`benchmarks.root_refine`)."""
        if past(self.deadline):
            return False
        now = time.perf_counter()
        end = None if self.deadline is None else now + ROOT_ALPHA_SHARE * (self.deadline - now)
        lp_end = None if self.deadline is None else now + ROOT_LP_SHARE * (self.deadline - now)
        regions = sorted({n.region for n in nodes})
        for left, r in zip(range(len(regions), 0, -1), regions):
            group = [n for n in nodes if n.region == r]
            region = self.f.regions[r]
            lo, hi, parents = _stacked(region, group)
            now = time.perf_counter()
            share = None if end is None else now + max(end - now, 0.0) / left
            lp_share = None if lp_end is None else now + max(lp_end - now, 0.0) / left
            kept: dict = {}
            nb = bound_boxes(self.blocks, lo, hi,
                             BoundOptions(method="lp" if self.use_root_lp else "symbolic", rows="per-box",
                                          lower_slopes="alpha", symbolic_output=False,
                                          alpha_steps=ROOT_ALPHA_STEPS, alpha_work=np.inf, alpha_deadline=share,
                                          lp_cuts=ROOT_LP_CUTS, lp_min_gain=ROOT_LP_MIN_GAIN, lp_deadline=lp_share,
                                          lp_workers=ROOT_LP_WORKERS,
                                          deadline=self._bound_deadline()), parents=parents,
                             slopes_out=kept if len(group) == 1 else None)
            if self.reuse_slopes and kept:
                self.root_slopes[r] = kept
            steps = {step.name: step for step in nb.steps}
            if "lp" in steps:
                self.root_lp.append((steps["lp"].lps, steps["lp"].seconds, sum(steps["symbolic"].unstable),
                                     sum(steps["lp"].unstable)))
            for k, n in enumerate(group):
                n.pre_lo = [l[k] for l in nb.pre_lo]
                n.pre_hi = [u[k] for u in nb.pre_hi]
                n.out_lo, n.out_hi = nb.out_lo[k], nb.out_hi[k]
        return True

    def _tighten(self, r: int, nodes: list[_Node]) -> np.ndarray:
        """Re-bound the pre-activations of fresh nodes with their fixed phases (in place); (B,) empty."""
        B = len(nodes)
        empty = np.zeros(B, dtype=bool)
        fresh = [b for b, n in enumerate(nodes) if n.fresh]
        if not fresh:
            return empty
        # one call per first layer to re-bound: the layers up to a node's newest split keep their
        # bounds (the parent's already reflect every phase before them)
        groups: dict[int, list[int]] = {}
        for b in fresh:
            groups.setdefault(nodes[b].rebound_from if self.skip_unchanged else 1, []).append(b)
        for start, members in sorted(groups.items()):
            self._tighten_group(r, [nodes[b] for b in members], start, empty, members)
        return empty

    def _tighten_group(self, r: int, sub: list[_Node], start: int, empty: np.ndarray, fresh: list[int]) -> None:
        """`_tighten` of nodes of region r whose layers before `start` keep their bounds."""
        lo, hi, parents = _stacked(self.f.regions[r], sub)
        fixed = [np.stack([n.split[t] for n in sub]) for t in range(len(sub[0].split))]
        if self.tighten:
            nb = bound_boxes(self.blocks, lo, hi, BoundOptions(rows="unstable", symbolic_output=False, deadline=self._bound_deadline()),
                             parents=parents, fixed=fixed, rebound_from=start, row_slopes=self.root_slopes.get(r))
            cut = past(self._bound_deadline())
            pre_lo, pre_hi, out_lo, out_hi, gone = nb.pre_lo, nb.pre_hi, nb.out_lo, nb.out_hi, nb.empty
        else:
            pre_lo, pre_hi = clamp_splits(parents.pre_lo, parents.pre_hi, fixed)
            out_lo, out_hi = parents.out_lo, parents.out_hi
            gone = np.zeros(len(sub), dtype=bool)
            cut = True
        for k, (b, n) in enumerate(zip(fresh, sub)):
            n.complete = not cut
            n.pre_lo = [l[k] for l in pre_lo]
            n.pre_hi = [u[k] for u in pre_hi]
            n.out_lo, n.out_hi = out_lo[k], out_hi[k]
            n.fresh = False
            empty[b] = gone[k] or any(np.any(l > u) for l, u in zip(n.pre_lo, n.pre_hi))

    def _check_memory(self) -> None:
        """Keep the open nodes within `memory_cap`: over it, every open node drops its warm starts
        (its children start from CROWN's slopes) and stores its pre-activation bounds in float32,
        rounded outward (restored to float64 when it is expanded: looser by about 1e-7 relative,
        still sound); when even that exceeds the cap the search stops (`memory_stop`). The bytes
        measured are held (`models.memory.Holding`) until the search ends."""
        if not np.isfinite(self.memory_cap):
            return
        nodes = [e[2] for e in self.frontier.open_entries()]
        if len(nodes) < MEASURE_FROM:
            return
        estimate = len(nodes) * self._per_node
        if self._per_node and self._estimated < MEASURE_EVERY and estimate <= MEASURE_NEAR * self.memory_cap:
            self._estimated += 1
            self.holding.set(estimate)
            return
        self._estimated = 0
        held = _held_bytes(nodes)
        if held > self.memory_cap:
            self._compact(nodes)
            held = _held_bytes(nodes)
        self._per_node = held / len(nodes)
        self.holding.set(held)
        if held > self.memory_cap:
            self.memory_stop = True
            self.memory_note = (f"the {len(nodes)} open node(s) hold {gb(held)}, over their share of the memory budget "
                                f"({gb(self.memory_cap)}) even compacted: the search stopped there")

    def _compact(self, nodes: list[_Node]) -> None:
        """Open nodes without warm starts and with float32 bounds (rounded outward)."""
        for n in nodes:
            n.warm = {}
            n.pre_lo = [_outward32(a, -np.inf) for a in n.pre_lo]
            n.pre_hi = [_outward32(a, np.inf) for a in n.pre_hi]
        self.compactions += 1

    def _expand(self, r: int, nodes: list[_Node]) -> list[NodeBound]:
        region = self.f.regions[r]
        for n in nodes:  # (bounds compacted to float32 while the node was open)
            if n.pre_lo and n.pre_lo[0].dtype != np.float64:
                n.pre_lo = [a.astype(np.float64) for a in n.pre_lo]
                n.pre_hi = [a.astype(np.float64) for a in n.pre_hi]
        rows, owner = self.rows[r]
        k = len(region.clauses)
        B = len(nodes)
        self.nodes += B
        self.max_depth = max(self.max_depth, max(n.depth for n in nodes))
        started = time.perf_counter()
        inherited = [float(np.max(np.where(n.open, n.upper, -np.inf))) if n.open.any() else -np.inf for n in nodes]
        empty = self._tighten(r, nodes)
        if self.deep and not self._in_trial:
            self._rebound_under_splits(region, nodes, empty)
        K = len(self.blocks) - 1
        # problems: (node, row) for the rows of every open clause of every non-empty node
        pb, pr = [], []
        for b, n in enumerate(nodes):
            if empty[b]:
                continue
            for row in np.flatnonzero(n.open[owner]):
                pb.append(b)
                pr.append(int(row))
        lhs_lower = np.full((B, rows.count), -np.inf)
        g: list[np.ndarray] = []
        if pb:
            pb_a, pr_a = np.array(pb), np.array(pr)
            pre_lo = [np.stack([nodes[b].pre_lo[t] for b in pb]) for t in range(K)]
            pre_hi = [np.stack([nodes[b].pre_hi[t] for b in pb]) for t in range(K)]
            split = [np.stack([nodes[b].split[t] for b in pb]).astype(np.float64) for t in range(K)]
            pre_lo, pre_hi = clamp_splits(pre_lo, pre_hi, split)
            alpha, beta = self._warm(nodes, pb, pr, pre_lo, pre_hi)
            root = all(n.depth == 0 for n in nodes)
            res = beta_upper(self.blocks, region.lo[None], region.hi[None], pre_lo, pre_hi, split,
                             -rows.H[pr_a], -rows.G[pr_a], alpha=alpha, beta=beta,
                             iterations=self.root_iterations if root else self.iterations)
            lhs_lower[pb_a, pr_a] = -res.upper
            for p, (b, row) in enumerate(zip(pb, pr)):
                # float32 copies: a starting point only (any alpha in [0, 1], beta >= 0 gives a sound
                # bound), at half the bytes, and no view keeping the whole batch's arrays alive
                nodes[b].warm[row] = ([a[p].astype(np.float32) for a in res.warm_alpha],
                                      [x[p].astype(np.float32) for x in res.warm_beta])
            if self._candidates(r, res.x_best):
                return [NodeBound(np.inf, lower=self.cex.margin, witness=self.cex)] + [NodeBound(np.inf)] * (B - 1)
            g = res.g
            worst = int(np.argmax(rows.d[pr_a] + res.upper))
            self._pgd_start = (r, int(owner[pr_a[worst]]), res.x_best[worst])
            probs = (pb, pre_lo, pre_hi, split, res.alpha, res.beta, -rows.H[pr_a], -rows.G[pr_a],
                     rows.d[pr_a], rows.d[pr_a] + res.upper)
        lhs_lower = np.nextafter(lhs_lower, -np.inf)  # (the negation is exact; kept for symmetry)
        upper, infeasible = clause_bounds(rows, owner, k, lhs_lower)
        out = []
        branching = []
        for b, n in enumerate(nodes):
            if empty[b]:
                n.open = np.zeros(k, dtype=bool)
                out.append(NodeBound(-np.inf, leaf=True))
                continue
            n.upper = np.minimum(n.upper, upper[b])
            n.open = n.open & ~infeasible[b]
            if not n.open.any():
                out.append(NodeBound(float(n.upper.max()), leaf=True))
                continue
            bound = float(np.max(np.where(n.open, n.upper, -np.inf)))
            cands = self._ranked(n, [p for p, pb_ in enumerate(pb) if pb_ == b], g)
            if not cands:  # every phase fixed or stable: the LP is exact on the node
                if self._finish(r, n):
                    return [NodeBound(np.inf, lower=self.cex.margin, witness=self.cex)] + [NodeBound(np.inf)] * (B - 1)
                if not n.open.any():
                    out.append(NodeBound(float(n.upper.max()), leaf=True))
                    continue
                self.stuck.append(n)
                out.append(NodeBound(float(np.max(np.where(n.open, n.upper, -np.inf))), leaf=True))
            else:
                first = min(t for t, _ in cands)
                n.early = next(c for c in cands if c[0] == first)
                if self.early_layers:
                    cands = [c for c in cands if c[0] == first]
                n.choice = cands[0]
                branching.append((b, cands))
                out.append(NodeBound(bound))
        self._measure(nodes, inherited)
        cut_before = self.cut_seconds
        if branching and not self._cut_finish(r, nodes, branching, out):
            return [NodeBound(np.inf, lower=self.cex.margin, witness=self.cex)] + [NodeBound(np.inf)] * (B - 1)
        if branching and self.strong:
            self._strong_branching(region, nodes, branching, probs)
        per = (time.perf_counter() - started - (self.cut_seconds - cut_before)) / B
        self.node_seconds = 0.9 * self.node_seconds + 0.1 * per if self.node_seconds else per
        return out

    def _measure(self, nodes: list[_Node], inherited: list[float]) -> None:
        """The running mean of branching's bound drop per level (a parent's margin bound to its
        child's), for the cut finisher's choice (`_worth_cutting`)."""
        drops = [p - float(np.max(np.where(n.open, n.upper, -np.inf))) if n.open.any() else p
                 for n, p in zip(nodes, inherited) if n.depth > 0 and np.isfinite(p) and p > 0]
        drops = [max(d, 0.0) for d in drops if np.isfinite(d)]
        if drops:
            mean = float(np.mean(drops))
            self.level_drop = 0.9 * self.level_drop + 0.1 * mean if self.level_drop else mean

    def _cut_finish(self, r: int, nodes: list[_Node], branching: list, out: list[NodeBound]) -> bool:
        """The cut finisher on the nodes about to be split, smallest margin bound first: each open
        clause bounded by the node's LP tightened by rounds of ideal ReLU cuts
        (`relu_lp.clause_lp_bound(cut_rounds=)`); a node whose every clause it closes becomes a
        leaf (removed from `branching`, `out` updated in place). Beta-CROWN's bound is a relaxed
        dual of the triangle LP; the cuts go below the triangle: on cifar_wide_kw img8517 all 24
        sampled open nodes of a 120 s search (depth 5-18, margin bounds 0.002-0.012) closed in
        0.5-0.8 s each. A node is tried only when `_worth_cutting`. False after a replayed
        counterexample (an LP point)."""
        if not self.cut_share or self._in_trial or not self._refined:
            return True
        for b, cands in sorted(branching, key=lambda e: out[e[0]].upper):
            if past(self.deadline) or not self._worth_cutting(out[b].upper):
                break
            n = nodes[b]
            start = time.perf_counter()
            # a try ends by the search's deadline and within CUT_TRY_SHARE of its time
            until = start + max(CUT_TRY_MIN, CUT_TRY_SHARE * (start - self._started if self.deadline is None
                                                              else self.deadline - self._started))
            until = until if self.deadline is None else min(until, self.deadline)
            # (the likeliest to stay open first: a clause left open means the node is split anyway)
            if self._clause_lps(r, n, sorted(np.flatnonzero(n.open), key=lambda c: -n.upper[c]), cut_rounds=CUT_ROUNDS,
                                deadline=until):
                return False
            self.cut_seconds += time.perf_counter() - start
            self.cut_tries += 1
            if not n.open.any():
                self.cut_closed += 1
                out[b] = NodeBound(float(n.upper.max()), leaf=True)
                branching.remove((b, cands))
            else:
                out[b] = NodeBound(float(np.max(np.where(n.open, n.upper, -np.inf))))
        return True

    def _worth_cutting(self, bound: float) -> bool:
        """Try the cut finisher on a node of this margin bound? Within CUT_SHARE of the search's
        time times the share of its tries that closed their node (plus CUT_GRACE s); after
        CUT_CALIBRATE tries (the refined root: on cifar_wide_kw img8517 it lowers the root's bound by
        0.017, its nodes' by 0.01-0.025) only when the finisher could close the node (the bound is
        below the largest drop of its last CUT_HISTORY tries: a drop stops at the closing round, so
        it understates what the cuts could do) and the subtree branching would otherwise need costs
        more than a try: about 4^(bound / drop per level) nodes at the measured seconds per node
        (bounds fall ever slower down a tree: 2^levels underestimated the subtrees of cifar_wide_kw
        img8517, which branching alone leaves open at 720 s, and still tells cifar_base_kw img8194's
        nodes, which branching closes within a level or two, from them)."""
        rate = (self.cut_closed + 1.0) / (self.cut_tries + 2.0)  # (Laplace's estimate)
        spent = self.cut_seconds <= self.cut_share * rate * (time.perf_counter() - self._started) + CUT_GRACE
        if not spent or self.cut_tries < CUT_CALIBRATE:
            return spent
        if bound > max(self.cut_drops, default=0.0):
            return False
        per_try = self.cut_seconds / self.cut_tries
        levels = bound / self.level_drop if self.level_drop > 0 else np.inf
        return 4.0 ** min(levels, 30.0) * self.node_seconds >= per_try

    def _warm(self, nodes, pb, pr, pre_lo, pre_hi):
        """alpha / beta to start from: the parent's for the same row (new splits' beta 0), else
        CROWN's slopes and beta 0."""
        K = len(pre_lo)
        alpha = [crown_slopes(l, u) for l, u in zip(pre_lo, pre_hi)]
        beta = [np.zeros_like(a) for a in alpha]
        for p, (b, row) in enumerate(zip(pb, pr)):
            w = nodes[b].warm.get(row)
            if w is not None:
                for t in range(K):
                    alpha[t][p] = w[0][t]
                    beta[t][p] = w[1][t]
        return alpha, beta

    def _ranked(self, n: _Node, problems: list[int], g: list[np.ndarray]) -> list[tuple[int, int]]:
        """Split candidates, best BaBSR-style score first: the unstable neurons with the largest
        g+ * (-l u / (u - l)) summed over the node's open rows (ties: the widest relaxation), the
        best `self.strong` of every layer."""
        scored = []
        for t, (l, u) in enumerate(zip(n.pre_lo, n.pre_hi)):
            unst = (l < 0) & (u > 0) & (n.split[t] == 0)
            if not unst.any():
                continue
            gap = np.where(unst, -l * u / np.where(unst, u - l, 1.0), 0.0)
            gp = np.clip(g[t][problems], 0.0, None).sum(axis=0) if problems else np.zeros_like(gap)
            score = np.where(unst, gp * gap + 1e-6 * gap, -1.0)
            top = np.argsort(-score, kind="stable")[:max(self.strong, 1)]
            scored += [(float(score[i]), t, int(i)) for i in top if unst[i]]
        scored.sort(key=lambda x: -x[0])
        return [(t, i) for _, t, i in scored]

    def _strong_branching(self, region, nodes, branching, probs) -> None:
        """Filtered strong branching (FSB): each candidate split of a node is tried on both children
        with the node's optimised alpha / beta (the split neuron becomes stable, its beta 0) on the
        node's row closest to unsafe, and the one whose worse child has the smallest positive
        margin wins (a heuristic: these bounds are not used as bounds)."""
        pb, pre_lo, pre_hi, split, alpha, beta, c, e, d, margin_now = probs
        pb = np.asarray(pb)
        idx, lay, neu, sign, owner = [], [], [], [], []
        for q, (b, cands) in enumerate(branching):
            mine = np.flatnonzero(pb == b)
            ps = mine if self.strong_all_rows else mine[[int(np.argmax(margin_now[mine]))]]
            for m, (t, i) in enumerate(cands):
                for sg in (1, -1):
                    idx += ps.tolist()
                    lay += [t] * ps.size
                    neu += [i] * ps.size
                    sign += [sg] * ps.size
                    owner += [(q, m, sg)] * ps.size
        idx, lay, neu, sign = map(np.asarray, (idx, lay, neu, sign))
        K = len(pre_lo)
        ar = np.arange(idx.size)
        L, U, S = [x[idx] for x in pre_lo], [x[idx] for x in pre_hi], [x[idx] for x in split]
        for t in range(K):
            sel = lay == t
            S[t][ar[sel], neu[sel]] = sign[sel]
            L[t][ar[sel], neu[sel]] = np.where(sign[sel] > 0, np.maximum(L[t][ar[sel], neu[sel]], 0.0),
                                               L[t][ar[sel], neu[sel]])
            U[t][ar[sel], neu[sel]] = np.where(sign[sel] < 0, np.minimum(U[t][ar[sel], neu[sel]], 0.0),
                                               U[t][ar[sel], neu[sel]])
        A = [x[idx] for x in alpha]
        Bt = [x[idx] * (s != 0) for x, s in zip(beta, S)]
        # float32, no allowance: a heuristic (float64 dual bounds cost 2x here, 27% of a CIFAR search)
        up = estimate_upper(self.blocks, region.lo[None], region.hi[None], L, U, S, c[idx], e[idx], A, Bt)
        margin = np.clip(d[idx] + up, 0.0, None)
        worst: dict[tuple[int, int], float] = {}
        acc: dict[tuple[int, int, int], float] = {}
        for key, v in zip(owner, margin.tolist()):
            acc[key] = acc.get(key, 0.0) + v
        for (q, m, sg), v in acc.items():
            worst[(q, m)] = max(worst.get((q, m), -np.inf), v)
        for q, (b, cands) in enumerate(branching):
            m = min(range(len(cands)), key=lambda m: (worst[(q, m)], m))
            nodes[b].choice = cands[m]

    def _rebound_under_splits(self, region, nodes: list[_Node], empty: np.ndarray) -> None:
        """Every unstable neuron of the nodes below the root bounded under all of the node's splits
        (`split_layer_bounds_all`), layer by layer (each layer's problems see the earlier layers' new
        bounds); a node with crossing bounds is empty (`empty[b]` set)."""
        sel = [b for b, n in enumerate(nodes) if not empty[b] and n.depth > 0]
        if not sel:
            return
        K = len(self.blocks) - 1
        split = [np.stack([nodes[b].split[t] for b in sel]) for t in range(K)]
        # (stacked: own copies, where a node's arrays may be shared with its siblings)
        pre_lo, pre_hi = clamp_splits([np.stack([nodes[b].pre_lo[t] for b in sel]) for t in range(K)],
                                      [np.stack([nodes[b].pre_hi[t] for b in sel]) for t in range(K)], split)
        for j in range(K):
            if past(self._bound_deadline()):
                break
            live = ~np.any([np.any(lo > hi, axis=1) for lo, hi in zip(pre_lo, pre_hi)], axis=0)
            before = int(np.sum(((pre_lo[j] < 0) & (pre_hi[j] > 0))[live]))
            pre_lo[j], pre_hi[j] = split_layer_bounds_all(self.blocks, region.lo[None], region.hi[None], pre_lo, pre_hi,
                                                          split, j, self.deep_iterations, self._bound_deadline(),
                                                          DEEP_FLOATS)
            self.deep_problems += before
        for k, b in enumerate(sel):
            n = nodes[b]
            n.pre_lo, n.pre_hi = [a[k].copy() for a in pre_lo], [a[k].copy() for a in pre_hi]  # (no views of the batch)
            if any(np.any(lo > hi) for lo, hi in zip(n.pre_lo, n.pre_hi)):
                empty[b] = True
                self.deep_empty += 1

    def _finish(self, r: int, n: _Node) -> bool:
        """The LP finisher on a node without unstable neurons: each open clause's margin bounded by
        a safe LP (exact there); True after a replayed counterexample."""
        return self._clause_lps(r, n, list(np.flatnonzero(n.open)))

    def _clause_lps(self, r: int, n: _Node, clauses: list[int], *, cut_rounds: int = 0,
                    deadline: float | None = None) -> bool:
        """`clauses` of node n bounded in turn by their safe LPs (`relu_lp.clause_lp_bound`, with
        `cut_rounds` of ideal cuts: then the first clause left open ends the loop, and how far each
        bound went below the node's is recorded for `_worth_cutting`): a clause is closed when its
        bound is negative (or 0 with strict rows), else the LP's point is tried as a
        counterexample. Updates n.upper and n.open; True after a replayed counterexample."""
        region = self.f.regions[r]
        pre_lo, pre_hi = clamp_splits(n.pre_lo, n.pre_hi, n.split)
        n.upper, n.open = n.upper.copy(), n.open.copy()  # (a node's arrays may be its parent's)
        for c in clauses:
            rows = region.clauses[c].rows
            bound, x = clause_lp_bound(self.blocks, region.lo, region.hi, pre_lo, pre_hi, n.split, rows,
                                       cut_rounds=cut_rounds, deadline=deadline)
            if cut_rounds and np.isfinite(n.upper[c]):  # (the rounds stop below 0)
                self.cut_drops = (self.cut_drops + [max(float(n.upper[c]) - max(bound, 0.0), 0.0)])[-CUT_HISTORY:]
            n.upper[c] = min(n.upper[c], bound)
            if bound < 0 or (bound <= 0 and rows.count and np.all(rows.strict)):
                n.open[c] = False
            elif x is not None and self._candidates(r, x[None]):
                return True
            elif cut_rounds:
                break
        return False

    def _candidates(self, r: int, X: np.ndarray) -> bool:
        """Evaluate the maximisers of the linear bounds; True after a replayed counterexample."""
        cex = self.f.consider(r, X, self.f.margins(r, X))
        if cex is not None:
            self.cex = cex
        return cex is not None

    def _bound_deadline(self) -> float | None:
        return None if self.deadline is None else self.deadline + self.bound_grace

    # ---------------------------------------------------------------- driver
    def run(self, deadline: float) -> SearchOutcome:
        """The verification search's driver (`search.run_search`: the engine with this problem,
        its budgets, statuses and sound upper bound), with this search's notes."""
        try:
            out = self._search(deadline)
            if (out.status == TIMEOUT and self._root_entries and not past(deadline) and not stop_requested()
                    and self.cex is None):
                out = self._search_again(out, deadline)
        finally:
            self.holding.release()
        shared = out.notes
        out.notes = [f"ReLU splitting (beta-CROWN node bounds): {self.nodes} node(s), depth {self.max_depth}"]
        if self.early_layers:
            trial = self.policy_trial
            out.notes.append("the earliest layer with an unstable neuron was split first" + (
                f" (at the root its worse child's margin bound was {trial['early']:.4g}, strong branching's "
                f"{trial['strong']:.4g})" if {"early", "strong"} <= trial.keys() else ""))
        if not self.reuse_slopes and "early without root slopes" in self.policy_trial:
            out.notes.append("the root's optimised slopes were not re-used below the splits: at the root they did not "
                             "tighten the children of a split")
        if self.root_lp:
            lps, seconds, before, after = (sum(v) for v in zip(*self.root_lp))
            out.notes.append(f"refined root: {lps} LP(s) with ideal ReLU cuts in {seconds:.1f} s; unstable neurons "
                             f"{before} after the optimised slopes, {after} after the LPs")
        if self.deep_problems:
            out.notes.append(f"node bounds under all splits: {self.deep_problems} neuron(s), {self.deep_empty} node(s) empty")
        elif self.deep_note and out.status == TIMEOUT:
            out.notes.append(self.deep_note)
        if self.cut_tries:
            out.notes.append(f"cut finisher: {self.cut_closed} of {self.cut_tries} node(s) closed by LPs with ideal "
                             f"ReLU cuts ({self.cut_seconds:.1f} s)")
        if self.compactions:
            out.notes.append(f"the open nodes were compacted {self.compactions} time(s) to stay within "
                             f"{gb(self.memory_cap)} (their warm starts dropped, their bounds kept in float32)")
        if self.memory_note:
            out.notes.append(self.memory_note)
        stuck = len(self.stuck) + self.stuck_elsewhere
        if stuck:
            out.notes.append(f"{stuck} node(s) with every ReLU phase fixed could not be closed by the LP")
        out.notes += shared
        return out

    def _search(self, deadline: float) -> SearchOutcome:
        """One search of the tree, on two processes once it is large (`split_workers`); while a
        second search may follow, only until `_plain_end` (set at the refined root)."""
        first = lambda: bool(self._root_entries) and not self.deep  # noqa: E731  (a second search to come)
        out = run_search(self, deadline, split_when=split_rule(self.workers),
                         interrupt=lambda: first() and time.perf_counter() >= self._plain_end)
        if out.status == SPLIT:
            out = search_halves(self, out, min(deadline, self._plain_end) if first() else deadline)
        return out

    def _search_again(self, first: SearchOutcome, deadline: float) -> SearchOutcome:
        """The tree searched again from the refined roots, every node's unstable neurons re-bounded
        under all of its splits (`_rebound_under_splits`): 30-60x a node's cost, which on most
        instances loses against more nodes, on some closes a tree the first search could not (mnist_fc
        256x4 prop_12_0.05: 253 nodes where 83,000 had left it open). The first search's upper
        bound stays valid for the whole tree: the answer keeps the smaller one."""
        self.deep = True
        before = (self.nodes, first.upper)
        # (the second search covers the open roots' trees again: only stuck roots stay stuck)
        self.stuck = [n for n in self.stuck if n.depth == 0]
        self.stuck_elsewhere, self.memory_cap, self.memory_stop = 0, self._root_cap, False
        self.frontier = DepthFirst(self.frontier.priority)
        self._seeds, self._root_entries = self._root_entries, []
        out = self._search(deadline)
        note = (f"searched again from the refined root with node bounds under all splits after {before[0]} node(s)"
                + ("" if before[1] is None else f" (bound then {before[1]:.4g})")
                + f"; a node's re-bound estimated at {self.deep_node_seconds:.2g} s at the root")
        out.notes = first.notes + [note] + out.notes
        if out.status != SAT:  # (sound: the first search's bound; the second's with the root leaves')
            again = None if out.upper is None else max(out.upper, self._root_leaves)
            out.upper = before[1] if again is None else again if before[1] is None else min(again, before[1])
        return out

    def search_entries(self, entries: list, deadline: float, interrupt=None) -> SearchOutcome:
        """A search of its own from open entries of an earlier one (engine entries: bound, depth,
        node, node bound), with a fresh frontier (`split_workers`)."""
        self.frontier = DepthFirst(self.frontier.priority)
        self._seeds = entries
        return run_search(self, deadline, interrupt=interrupt)


def _stacked(region, nodes: list[_Node]) -> tuple[np.ndarray, np.ndarray, Bounds]:
    """The region's box repeated per node, and the nodes' bounds as one batch of `Bounds`."""
    lo = np.repeat(region.lo[None], len(nodes), axis=0)
    hi = np.repeat(region.hi[None], len(nodes), axis=0)
    K = len(nodes[0].pre_lo)
    return lo, hi, Bounds(lo, hi, [np.stack([n.pre_lo[t] for n in nodes]) for t in range(K)],
                          [np.stack([n.pre_hi[t] for n in nodes]) for t in range(K)],
                          np.stack([n.out_lo for n in nodes]), np.stack([n.out_hi for n in nodes]), "symbolic")


def _outward32(a: np.ndarray, direction: float) -> np.ndarray:
    """a in float32, rounded towards `direction` (-inf: never above a, +inf: never below)."""
    if a.dtype == np.float32:
        return a
    with np.errstate(over="ignore"):  # (beyond float32's range: +-inf, outward on that side)
        b = a.astype(np.float32)
    wrong = b > a if direction < 0 else b < a
    return np.where(wrong, np.nextafter(b, np.float32(direction)), b)


def _held_bytes(nodes: list[_Node]) -> int:
    """Bytes of the arrays the nodes hold (arrays shared between nodes once)."""
    seen: dict[int, int] = {}
    for n in nodes:
        for arrays in (n.pre_lo, n.pre_hi, n.split, *(a + b for a, b in n.warm.values())):
            for a in arrays:
                seen[id(a)] = a.nbytes
    return sum(seen.values())


__all__ = ["ReluSplitSearch"]
