"""Input-splitting search (complete for the unsafe set when every node can be closed).

Each region's box is bisected along one input at a time and every node is bounded by a pluggable
`NodeBounder`. The input to bisect is the one with the largest split score: the bounder's own
(e.g. |coefficient| * width of the deciding row's linear bound), else the first-order influence
width_i * |d row / d x_i| at the node's center. A node is *closed* when every clause of its region
is proven infeasible on it; the answer is `unsat` only when every node of every region is closed.

The search loop is `solvers.bab.branch_and_bound` (budgets, batches, the sound upper bound), with a
`DepthFirst` frontier: nodes are expanded in batches, mostly depth-first (the frontier stays
small, so a node can carry its bounder state, e.g. its pre-activation bounds; the child whose
center is closer to unsafe goes first), a quarter of each batch best-first by the unsafe margin at
the node's center. The center of every new node is evaluated, and every few batches PGD runs
inside the open node whose center is closest to unsafe (the engine's `attained` hook): any point
with a non-negative margin is replayed before `sat` is claimed, and stops the search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.bab import DepthFirst, NodeBound, branch_and_bound
from solvers.bab.engine import ROUND_SECONDS
from solvers.runtime import command_deadline, earliest, past, stop_requested

from .attack import Falsifier
from .counterexample import Counterexample
from .node_bounds import NodeBounder, NodeBounds

SAT, UNSAT, TIMEOUT, EXHAUSTED = "sat", "unsat", "timeout", "exhausted"
SPLIT = "split"  # (run_search with split_when only: the caller searches the open entries)
# inputs narrower than this fraction of the widest one (relative widths) are not split further
MIN_RELATIVE_WIDTH = 1e-2
# above this many open nodes the search is purely depth-first (bounded memory)
BEST_FIRST_MAX_FRONTIER = 20_000


@dataclass
class SearchOutcome:
    """`status`: sat / unsat (every node closed) / timeout / exhausted (nodes remain that cannot
    be split or bounded further, or the input is too high-dimensional to split)."""

    status: str
    counterexample: Counterexample | None = None
    nodes: int = 0
    upper: float | None = None  # sound upper bound on the spec's maximum unsafe margin
    open_nodes: int = 0
    max_depth: int = 0
    notes: list[str] = field(default_factory=list)
    split: tuple[list, float] | None = None  # status SPLIT: (open entries, bound of the closed part)


@dataclass(eq=False)
class _Node:
    region: int
    lo: np.ndarray
    hi: np.ndarray
    depth: int
    parent: _Node | None = None  # until bounded: the node inherits its parent's bounds and state
    upper: np.ndarray | None = None  # (k,) clause margin upper bounds (+inf unknown)
    open: np.ndarray | None = None  # (k,) clauses not yet proven infeasible
    split: int = -1  # input to bisect next
    state: Any = None
    center_margin: float = -np.inf  # unsafe margin at the node's center (steers PGD and the order)


class InputSplitSearch:
    """Bisection of the regions' input boxes with sound node bounds: a `solvers.bab` problem run
    depth-first (`DepthFirst` by center margin) that stops at the first replayed counterexample."""

    def __init__(self, falsifier: Falsifier, bounder: NodeBounder, *, batch_size: int = 32,
                 max_split_dims: int = 16, pgd_every: int = 10) -> None:
        self.f = falsifier
        self.bounder = bounder
        self.batch_size = batch_size
        self.max_split_dims = max_split_dims
        self.pgd_every = pgd_every
        self.nodes = 0
        self.max_depth = 0
        self.stuck: list[_Node] = []
        self.cex: Counterexample | None = None
        self.rounds = 0
        self.deadline: float | None = None
        self.frontier = DepthFirst(lambda node, nb: node.center_margin, best_first_max=BEST_FIRST_MAX_FRONTIER)

    # ---------------------------------------------------------------- the BabProblem side
    def roots(self) -> list[_Node]:
        return [_Node(r, region.lo, region.hi, 0) for r, region in enumerate(self.f.regions)]

    def bound(self, node: _Node) -> NodeBound:
        return self.bound_many([node])[0]

    def bound_many(self, nodes: list[_Node]) -> list[NodeBound]:
        """The nodes' bounds, one region at a time; after a counterexample the rest stay unbounded
        (+inf: the search stops)."""
        if len(self.f.regions) == 1:
            return self._expand(0, nodes)
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(nodes):
            groups.setdefault(n.region, []).append(i)
        out: list[NodeBound | None] = [None] * len(nodes)
        for r, idx in groups.items():
            if self.cex is not None:
                break
            for i, nb in zip(idx, self._expand(r, [nodes[i] for i in idx]), strict=True):
                out[i] = nb
        return [NodeBound(np.inf) if nb is None else nb for nb in out]

    def branch(self, node: _Node, nb: NodeBound, prune_level: float) -> list[tuple[_Node, float | None]]:
        s = node.split
        mid = 0.5 * (node.lo[s] + node.hi[s])
        left_hi, right_lo = node.hi.copy(), node.lo.copy()
        left_hi[s], right_lo[s] = mid, mid
        return [(_Node(node.region, node.lo, left_hi, node.depth + 1, node), None),
                (_Node(node.region, right_lo, node.hi, node.depth + 1, node), None)]

    def attained(self) -> float:
        """Every `pgd_every` rounds, PGD inside the open node whose center is closest to unsafe
        (once per node); the margin of the counterexample found so far (-inf: none)."""
        i, self.rounds = self.rounds, self.rounds + 1
        if self.cex is None and self.pgd_every and i % self.pgd_every == self.pgd_every - 1 and not past(self.deadline):
            entry = max(self.frontier.open_entries(), key=lambda e: e[2].center_margin, default=None)
            best = None if entry is None else entry[2]
            if best is not None and np.isfinite(best.center_margin):
                best.center_margin = -np.inf
                self.cex = self._pgd_in(best, self.deadline)
        # a replayed counterexample satisfies every row of its clause: its margin is >= 0 (stop_at)
        return -np.inf if self.cex is None else self.cex.margin

    # ---------------------------------------------------------------- one batch of nodes
    def _expand(self, r: int, nodes: list[_Node]) -> list[NodeBound]:
        region = self.f.regions[r]
        k = len(region.clauses)
        region_width = np.where(region.hi > region.lo, region.hi - region.lo, 1.0)
        lo, hi = np.stack([n.lo for n in nodes]), np.stack([n.hi for n in nodes])
        parents = [n.parent for n in nodes]
        b: NodeBounds = self.bounder(region, lo, hi, [None if p is None else p.state for p in parents])
        self.nodes += len(lo)
        centers = 0.5 * (lo + hi)
        Y, masks = self.f.batch.forward(centers)
        self.f.evaluated += len(centers)
        margins = np.stack([c.margin(centers, Y) for c in region.clauses], axis=1)
        cex = self.f.consider(r, centers, margins)
        if cex is not None:
            self.cex = cex
            return [NodeBound(np.inf, lower=cex.margin, witness=cex)] + [NodeBound(np.inf) for _ in nodes[1:]]
        parent_upper = np.stack([p.upper if p is not None else np.full(k, np.inf) for p in parents])
        parent_open = np.stack([p.open if p is not None else np.ones(k, dtype=bool) for p in parents])
        for n, p in zip(nodes, parents):
            if p is not None:
                p.state = n.parent = None  # the children carry their own state
        upper = np.minimum(parent_upper, b.margin_upper)
        open_ = parent_open & ~b.infeasible
        if b.split_scores is not None:
            scores = np.einsum("bcn,bc->bn", b.split_scores, open_.astype(np.float64))
        else:
            scores = self._scores(r, lo, hi, centers, Y, masks, open_)
        B = len(lo)
        splits = self._choose(scores, (hi - lo) / region_width)
        self.max_depth = max(self.max_depth, max(n.depth for n in nodes))
        center_margin = np.max(np.where(open_, margins, -np.inf), axis=1)
        is_open = open_.any(axis=1)
        ar = np.arange(B)
        mid = 0.5 * (lo[ar, splits] + hi[ar, splits])
        splittable = ((hi - lo > 0).sum(axis=1) <= self.max_split_dims) & (lo[ar, splits] < mid) & (mid < hi[ar, splits])
        # a closed node's bound is final: the largest of its clauses' bounds; an open one's: that of its open clauses
        bounds = np.where(is_open, np.max(np.where(open_, upper, -np.inf), axis=1), upper.max(axis=1)).tolist()
        out = []
        for i, (node, nb_open, can_split, split, cm, bound) in enumerate(zip(
                nodes, is_open.tolist(), splittable.tolist(), splits.tolist(), center_margin.tolist(), bounds)):
            node.upper, node.open, node.split, node.center_margin = upper[i], open_[i], split, cm
            if not nb_open:  # every clause proven infeasible: closed
                out.append(NodeBound(bound, leaf=True))
            elif not can_split:  # open but cannot be split: the search ends `exhausted`
                self.stuck.append(node)
                out.append(NodeBound(bound, leaf=True))
            else:
                node.state = None if b.states is None else b.states[i]
                out.append(NodeBound(bound))
        return out

    def _scores(self, r: int, lo: np.ndarray, hi: np.ndarray, centers: np.ndarray, Y: np.ndarray,
                masks: list[np.ndarray], open_: np.ndarray) -> np.ndarray:
        """width_i * |gradient_i| of the binding row of every open clause (summed), at the center."""
        region = self.f.regions[r]
        width = hi - lo
        gsum = np.zeros_like(lo)
        for c, clause in enumerate(region.clauses):
            rows = clause.rows
            if rows.count == 0:
                continue
            pick = np.argmin(rows.slack(centers, Y), axis=1)
            gX = rows.G[pick] + self.f.batch.backward(masks, rows.H[pick])
            gsum += np.abs(gX) * open_[:, [c]]
        return width * gsum

    @staticmethod
    def _choose(scores: np.ndarray, rel_width: np.ndarray) -> np.ndarray:
        """The input to bisect per node (B,): the best score among inputs not already much
        narrower (relative to the region) than the widest one, so that an input the bound ignores
        still gets split eventually; the widest input when no eligible score is positive."""
        widest = rel_width.max(axis=1, keepdims=True)
        eligible = (rel_width >= MIN_RELATIVE_WIDTH * widest) & (rel_width > 0)
        masked = np.where(eligible, scores, -np.inf)
        best = np.argmax(masked, axis=1)
        fallback = ~(masked.max(axis=1) > 0)
        best[fallback] = np.argmax(rel_width[fallback], axis=1)
        return best

    # ---------------------------------------------------------------- driver
    def run(self, deadline: float) -> SearchOutcome:
        out = run_search(self, deadline)
        if self.stuck:
            out.notes.append(f"{len(self.stuck)} node(s) could not be closed and cannot be split further "
                             "(too small, or too many input dimensions for input splitting)")
        return out

    def _pgd_in(self, node: _Node, deadline: float) -> Counterexample | None:
        """A short PGD run inside a node (its open clauses), then an LP over the activation region
        of the node's center (exact where the net is affine)."""
        starts = self.f.rng.uniform(node.lo, node.hi, size=(8, node.lo.size))
        center = 0.5 * (node.lo + node.hi)
        starts[0] = center
        for c in np.flatnonzero(node.open):
            cex = self.f.pgd(node.region, int(c), starts, 20, deadline, lo=node.lo, hi=node.hi)
            if cex is None:
                cex = self.f.lp_polish(node.region, int(c), center, node.lo, node.hi)
            if cex is not None:
                return cex
        return None


def run_search(problem: Any, deadline: float, *, split_when=None, interrupt=None) -> SearchOutcome:
    """The driver of a verification search (input splitting or ReLU splitting): `problem` is a
    `solvers.bab` problem with `batch_size`, `frontier` and the state the engine's hooks fill in
    (`cex`: a replayed counterexample, `stuck`: nodes neither closed nor splittable, `nodes`,
    `max_depth`; optionally `memory_stop`: its open nodes outgrew the memory budget, the answer is
    then unknown). Runs the engine until a counterexample, closure or the deadline; the statuses
    and the sound upper bound of the spec's margin. `split_when` (the engine's): the search may stop
    with status SPLIT, its open entries and closed bound in `split` (the caller searches them);
    `interrupt`: a further stop request, polled every round."""
    problem.deadline = deadline
    res = branch_and_bound(problem, deadline=earliest(deadline, command_deadline()), batch=problem.batch_size,
                           stop_at=0.0, frontier=problem.frontier, split_when=split_when,
                           interrupt=lambda: (stop_requested() or getattr(problem, "memory_stop", False)
                                              or (interrupt is not None and interrupt())),
                           round_seconds=getattr(problem, "round_seconds", ROUND_SECONDS))
    if res.stop == "split" and problem.cex is None:
        return SearchOutcome(SPLIT, None, problem.nodes, None, len(res.open_entries), problem.max_depth,
                             split=(res.open_entries, res.closed_bound))
    if problem.cex is not None:
        status = SAT
    elif res.stop == "closed":
        status = EXHAUSTED if problem.stuck else UNSAT
    elif getattr(problem, "memory_stop", False):  # (the open nodes outgrew the memory budget)
        status = EXHAUSTED
    else:
        status = TIMEOUT
    # every leaf is closed, open or stuck, and the engine's upper bound covers them all: it
    # bounds the spec's margin (not reported with sat, where nodes were left unbounded)
    upper = float(res.upper) if status != SAT and np.isfinite(res.upper) else None
    return SearchOutcome(status, problem.cex, problem.nodes, upper, res.open_nodes + len(problem.stuck),
                         problem.max_depth)


__all__ = ["EXHAUSTED", "InputSplitSearch", "SAT", "SPLIT", "SearchOutcome", "TIMEOUT", "UNSAT", "run_search"]
