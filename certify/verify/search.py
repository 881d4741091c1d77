"""Input-splitting search (complete for the unsafe set when every node can be closed).

Each region's box is bisected along one input at a time and every node is bounded by a pluggable
`NodeBounder`. The input to bisect is the one with the largest split score: the bounder's own
(e.g. |coefficient| * width of the deciding row's linear bound), else the first-order influence
width_i * |d row / d x_i| at the node's center. A node is *closed* when every clause of its region
is proven infeasible on it; the answer is `unsat` only when every node of every region is closed.

Nodes are expanded in batches, mostly depth-first (the frontier stays small, so a node can carry
its bounder state, e.g. its pre-activation bounds; the child whose center is closer to unsafe goes
first), a quarter of each batch best-first by the unsafe margin at the node's center.
The center of every new node is evaluated, and every few batches PGD runs inside the open node
whose center is closest to unsafe: any point with a non-negative margin is replayed before `sat`
is claimed.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.runtime import past

from .attack import Falsifier
from .counterexample import Counterexample
from .node_bounds import NodeBounder, NodeBounds

SAT, UNSAT, TIMEOUT, EXHAUSTED = "sat", "unsat", "timeout", "exhausted"
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


@dataclass
class _Node:
    region: int
    lo: np.ndarray
    hi: np.ndarray
    upper: np.ndarray  # (k,) clause margin upper bounds (+inf unknown)
    open: np.ndarray  # (k,) clauses not yet proven infeasible
    split: int  # input to bisect next
    depth: int
    state: Any = None
    center_margin: float = -np.inf  # unsafe margin at the node's center (steers PGD)
    taken: bool = False  # already expanded (the node may still sit in the other frontier queue)

    @property
    def key(self) -> float:
        """Upper bound on the node's unsafe margin (its open clauses)."""
        return float(np.max(np.where(self.open, self.upper, -np.inf)))


class InputSplitSearch:
    """Depth-first bisection of the regions' input boxes with sound node bounds."""

    def __init__(self, falsifier: Falsifier, bounder: NodeBounder, *, batch_size: int = 32,
                 max_split_dims: int = 16, pgd_every: int = 10) -> None:
        self.f = falsifier
        self.bounder = bounder
        self.batch_size = batch_size
        self.max_split_dims = max_split_dims
        self.pgd_every = pgd_every
        self.nodes = 0
        self.max_depth = 0
        self.closed_upper = -np.inf
        self.stuck: list[_Node] = []
        self.stack: list[_Node] = []
        # the same open nodes by center margin (lazy deletion), for the best-first share of a batch
        self.promising: list[tuple[float, int, _Node]] = []
        self.pushed = itertools.count()

    # ---------------------------------------------------------------- one batch of children
    def _expand(self, r: int, lo: np.ndarray, hi: np.ndarray, parents: list[_Node | None]) -> Counterexample | None:
        region = self.f.regions[r]
        k = len(region.clauses)
        region_width = np.where(region.hi > region.lo, region.hi - region.lo, 1.0)
        b: NodeBounds = self.bounder(region, lo, hi, [None if p is None else p.state for p in parents])
        self.nodes += len(lo)
        centers = 0.5 * (lo + hi)
        Y, masks = self.f.batch.forward(centers)
        self.f.points += len(centers)
        margins = np.stack([c.margin(centers, Y) for c in region.clauses], axis=1)
        cex = self.f.consider(r, centers, margins)
        if cex is not None:
            return cex
        parent_upper = np.stack([p.upper if p is not None else np.full(k, np.inf) for p in parents])
        parent_open = np.stack([p.open if p is not None else np.ones(k, dtype=bool) for p in parents])
        upper = np.minimum(parent_upper, b.margin_upper)
        open_ = parent_open & ~b.infeasible
        if b.split_scores is not None:
            scores = np.einsum("bcn,bc->bn", b.split_scores, open_.astype(np.float64))
        else:
            scores = self._scores(r, lo, hi, centers, Y, masks, open_)
        B = len(lo)
        splits = self._choose(scores, (hi - lo) / region_width)
        depths = np.array([0 if p is None else p.depth + 1 for p in parents])
        self.max_depth = max(self.max_depth, int(depths.max()))
        center_margin = np.max(np.where(open_, margins, -np.inf), axis=1)
        is_open = open_.any(axis=1)
        if not is_open.all():
            self.closed_upper = max(self.closed_upper, float(upper[~is_open].max()))
        ar = np.arange(B)
        mid = 0.5 * (lo[ar, splits] + hi[ar, splits])
        splittable = ((hi - lo > 0).sum(axis=1) <= self.max_split_dims) & (lo[ar, splits] < mid) & (mid < hi[ar, splits])
        kids = []
        for i in np.flatnonzero(is_open):
            node = _Node(r, lo[i], hi[i], upper[i], open_[i], int(splits[i]), int(depths[i]),
                         None if b.states is None or not splittable[i] else b.states[i], float(center_margin[i]))
            (kids if splittable[i] else self.stuck).append(node)
        # depth-first: the most promising child is popped first
        kids.sort(key=lambda n: n.center_margin)
        self.stack.extend(kids)
        if len(self.stack) < BEST_FIRST_MAX_FRONTIER:
            for n in kids:
                heapq.heappush(self.promising, (-n.center_margin, next(self.pushed), n))
        return None

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
        for r, region in enumerate(self.f.regions):
            cex = self._expand(r, region.lo[None, :], region.hi[None, :], [None])
            if cex is not None:
                return self._outcome(SAT, cex)
            if past(deadline):
                return self._outcome(TIMEOUT)
        batches = 0
        while self.stack:
            if past(deadline):  # the timeout, the command deadline or Ctrl-C
                return self._outcome(TIMEOUT)
            if self.pgd_every and batches % self.pgd_every == self.pgd_every - 1:
                # PGD inside the open node whose center is closest to unsafe (once per node)
                best = max((n for n in self.stack if not n.taken), key=lambda n: n.center_margin, default=None)
                if best is not None and np.isfinite(best.center_margin):
                    best.center_margin = -np.inf
                    cex = self._pgd_in(best, deadline)
                    if cex is not None:
                        return self._outcome(SAT, cex)
            batches += 1
            popped = self._take_batch()
            by_region: dict[int, list[tuple[np.ndarray, np.ndarray, _Node]]] = {}
            for node in popped:
                s = node.split
                mid = 0.5 * (node.lo[s] + node.hi[s])
                left_hi, right_lo = node.hi.copy(), node.lo.copy()
                left_hi[s], right_lo[s] = mid, mid
                by_region.setdefault(node.region, []).extend([(node.lo, left_hi, node), (right_lo, node.hi, node)])
            for r, kids in by_region.items():
                lo = np.stack([k[0] for k in kids])
                hi = np.stack([k[1] for k in kids])
                cex = self._expand(r, lo, hi, [k[2] for k in kids])
                if cex is not None:
                    return self._outcome(SAT, cex)
            for node in popped:
                node.state = None  # its children carry their own
        return self._outcome(EXHAUSTED if self.stuck else UNSAT)

    def _take_batch(self) -> list[_Node]:
        """Up to `batch_size` open nodes: a quarter best-first by center margin (finds
        counterexamples), the rest depth-first from the stack (keeps the frontier small)."""
        out: list[_Node] = []
        want_best = self.batch_size // 4
        while self.promising and len(out) < want_best:
            node = heapq.heappop(self.promising)[2]
            if not node.taken:
                node.taken = True
                out.append(node)
        while self.stack and len(out) < self.batch_size:
            node = self.stack.pop()
            if not node.taken:
                node.taken = True
                out.append(node)
        if len(self.promising) > 2 * len(self.stack) + 1000:  # drop the entries of expanded nodes
            self.promising = [e for e in self.promising if not e[2].taken]
            heapq.heapify(self.promising)
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

    def _outcome(self, status: str, cex: Counterexample | None = None) -> SearchOutcome:
        # every leaf is closed, on the stack or stuck (nodes being split only when sat, where no
        # upper bound is reported): the largest of their bounds bounds the spec's margin
        frontier = [n for n in self.stack if not n.taken]
        uppers = [self.closed_upper] + [n.key for n in frontier] + [n.key for n in self.stuck]
        top = max(uppers)
        upper = float(top) if status != SAT and np.isfinite(top) else None
        notes = []
        if self.stuck:
            notes.append(f"{len(self.stuck)} node(s) could not be closed and cannot be split further "
                         "(too small, or too many input dimensions for input splitting)")
        return SearchOutcome(status, cex, self.nodes, upper, len(frontier) + len(self.stuck), self.max_depth, notes)


__all__ = ["EXHAUSTED", "InputSplitSearch", "SAT", "SearchOutcome", "TIMEOUT", "UNSAT"]
