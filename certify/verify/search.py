"""Input-splitting search (complete for the unsafe set when every node can be closed).

Each region's box is bisected along one input at a time and every node is bounded by a pluggable
`NodeBounder`. The input to bisect is the one with the largest split score: the bounder's own
(e.g. |coefficient| * width of the deciding row's linear bound), else the first-order influence
width_i * |d row / d x_i| at the node's center. A node is *closed* when every clause of its region
is proven infeasible on it; the answer is `unsat` only when every node of every region is closed.

Nodes are expanded depth-first in batches (the frontier stays small, so a node can carry its
bounder state, e.g. its pre-activation bounds); the child whose center is closer to unsafe goes first.
The center of every new node is evaluated, and every few batches PGD runs inside the open node
whose center is closest to unsafe: any point with a non-negative margin is replayed before `sat`
is claimed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .attack import Falsifier
from .counterexample import Counterexample
from .node_bounds import NodeBounder, NodeBounds

SAT, UNSAT, TIMEOUT, EXHAUSTED = "sat", "unsat", "timeout", "exhausted"
# inputs narrower than this fraction of the widest one (relative widths) are not split further
MIN_RELATIVE_WIDTH = 1e-2


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
        kids = []
        for i in range(len(lo)):
            depth = 0 if parents[i] is None else parents[i].depth + 1
            self.max_depth = max(self.max_depth, depth)
            width = hi[i] - lo[i]
            split = self._choose(scores[i], width / region_width)
            node = _Node(r, lo[i], hi[i], upper[i], open_[i], split, depth, None if b.states is None else b.states[i],
                         float(np.max(np.where(open_[i], margins[i], -np.inf))))
            if not node.open.any():
                self.closed_upper = max(self.closed_upper, float(np.max(node.upper)))
                continue
            mid = 0.5 * (lo[i, split] + hi[i, split])
            if int(np.sum(width > 0)) > self.max_split_dims or not lo[i, split] < mid < hi[i, split]:
                node.state = None
                self.stuck.append(node)
                continue
            kids.append(node)
        # depth-first: the most promising child is popped first
        kids.sort(key=lambda n: n.center_margin)
        self.stack.extend(kids)
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
    def _choose(scores: np.ndarray, rel_width: np.ndarray) -> int:
        """The input to bisect: the best score among inputs not already much narrower (relative to
        the region) than the widest one, so that an input the bound ignores still gets split
        eventually; the widest input when no score is positive."""
        if rel_width.max() <= 0:
            return 0
        eligible = rel_width >= MIN_RELATIVE_WIDTH * rel_width.max()
        masked = np.where(eligible, scores, -np.inf)
        if not masked.max() > 0:
            return int(np.argmax(rel_width))
        return int(np.argmax(masked))

    # ---------------------------------------------------------------- driver
    def run(self, deadline: float) -> SearchOutcome:
        for r, region in enumerate(self.f.regions):
            cex = self._expand(r, region.lo[None, :], region.hi[None, :], [None])
            if cex is not None:
                return self._outcome(SAT, cex)
            if time.perf_counter() > deadline:
                return self._outcome(TIMEOUT)
        batches = 0
        while self.stack:
            if time.perf_counter() > deadline:
                return self._outcome(TIMEOUT)
            if self.pgd_every and batches % self.pgd_every == self.pgd_every - 1:
                # PGD inside the open node whose center is closest to unsafe (once per node)
                best = max(self.stack, key=lambda n: n.center_margin)
                if np.isfinite(best.center_margin):
                    best.center_margin = -np.inf
                    cex = self._pgd_in(best, deadline)
                    if cex is not None:
                        return self._outcome(SAT, cex)
            batches += 1
            popped = [self.stack.pop() for _ in range(min(self.batch_size, len(self.stack)))]
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
        return self._outcome(EXHAUSTED if self.stuck else UNSAT)

    def _pgd_in(self, node: _Node, deadline: float) -> Counterexample | None:
        """A short PGD run inside a node (its open clauses)."""
        starts = self.f.rng.uniform(node.lo, node.hi, size=(8, node.lo.size))
        starts[0] = 0.5 * (node.lo + node.hi)
        for c in np.flatnonzero(node.open):
            cex = self.f.pgd(node.region, int(c), starts, 20, deadline, lo=node.lo, hi=node.hi)
            if cex is not None:
                return cex
        return None

    def _outcome(self, status: str, cex: Counterexample | None = None) -> SearchOutcome:
        # every leaf is closed, on the stack or stuck (nodes being split only when sat, where no
        # upper bound is reported): the largest of their bounds bounds the spec's margin
        uppers = [self.closed_upper] + [n.key for n in self.stack] + [n.key for n in self.stuck]
        top = max(uppers)
        upper = float(top) if status != SAT and np.isfinite(top) else None
        notes = []
        if self.stuck:
            notes.append(f"{len(self.stuck)} node(s) could not be closed and cannot be split further "
                         "(too small, or too many input dimensions for input splitting)")
        return SearchOutcome(status, cex, self.nodes, upper, len(self.stack) + len(self.stuck), self.max_depth, notes)


__all__ = ["EXHAUSTED", "InputSplitSearch", "SAT", "SearchOutcome", "TIMEOUT", "UNSAT"]
