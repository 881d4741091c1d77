"""The proof: is there a float64 point in a box where the ensemble's class may change?

Exact branch-and-bound over boxes (no LP, no solver tolerance). Each leaf of each tree is the
product of intervals (a_f, b_f] its path allows; it is reachable from a box [lo, hi] iff
lo_f <= b_f and a_f < hi_f for every feature. Over a box, the largest score gain of competitor j
over the predicted class c is at most base_j - base_c + sum_t max_{reachable leaves} (v_j - v_c)
(the trees are bounded independently). When every such bound is below -2 guard (the guard covers
the float error of these sums and of scikit-learn's), no point of the box changes the class.
Otherwise the box is split at a cutoff of the worst tree's worst reachable leaf; when every tree
has a single reachable leaf the leaf combination is decided exactly (fractions): a possible flip
(margin <= guard) is returned as a *cell* (the box where that combination is reached).

The MILP (`tree_milp`) only proposes answers; this search proves them (or corrects them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .tree_milp import first_above
from .tree_model import TreeEnsemble


@dataclass
class Verdict:
    """status "safe" (proven), "flip" (cell_lo/cell_hi: float64 bounds of a cell where the class
    may change, all inside the box) or "unknown" (node or time budget exhausted)."""

    status: str
    nodes: int
    cell_lo: np.ndarray | None = None
    cell_hi: np.ndarray | None = None


class BoxVerifier:
    """Proves boxes safe for class `c`; features outside `movable` are fixed at x0."""

    def __init__(self, ens: TreeEnsemble, c: int, x0: np.ndarray, movable: np.ndarray) -> None:
        self.ens, self.c, self.x0 = ens, c, np.asarray(x0, dtype=np.float64)
        self.dims = np.flatnonzero(movable)
        fixed = np.flatnonzero(~movable)
        A, B, W, tree_of = [], [], [], []
        comp = [j for j in range(ens.n_classes) if j != c]
        self.comp = comp
        self.leaf_ids: list[tuple[int, int]] = []
        for ti, t in enumerate(ens.trees):
            for leaf, a, b in _leaf_boxes(t, ens.n_features):
                # a fixed feature decides its splits once and for all
                if fixed.size and not np.all((self.x0[fixed] <= b[fixed]) & (self.x0[fixed] > a[fixed])):
                    continue
                A.append(a[self.dims])
                B.append(b[self.dims])
                W.append([t.value[leaf, j] - t.value[leaf, c] for j in comp])
                tree_of.append(ti)
                self.leaf_ids.append((ti, leaf))
        self.A = np.array(A).reshape(len(A), self.dims.size)
        self.B = np.array(B).reshape(len(B), self.dims.size)
        self.W = np.array(W, dtype=np.float64).reshape(len(W), len(comp))
        tree_of = np.array(tree_of)
        self.starts = np.flatnonzero(np.r_[True, tree_of[1:] != tree_of[:-1]]) if tree_of.size else np.zeros(0, int)
        self.base = np.array([ens.base[j] - ens.base[c] for j in comp])
        self.threshold = -2.0 * ens.guard

    def check(self, lo: np.ndarray, hi: np.ndarray, *, deadline: float | None = None,
              max_nodes: int = 2_000_000) -> Verdict:
        """Search the box [lo, hi] (full feature vectors; fixed features must equal x0)."""
        root = (np.asarray(lo, dtype=np.float64)[self.dims].copy(), np.asarray(hi, dtype=np.float64)[self.dims].copy())
        stack = [root]
        nodes = 0
        while stack:
            nodes += 1
            if nodes > max_nodes or (deadline is not None and nodes % 64 == 0 and time.perf_counter() > deadline):
                return Verdict("unknown", nodes)
            blo, bhi = stack.pop()
            mask = np.all((blo <= self.B) & (bhi > self.A), axis=1)
            vals = np.where(mask[:, None], self.W, -np.inf)
            tmax = np.maximum.reduceat(vals, self.starts, axis=0)
            ub = self.base + tmax.sum(axis=0)
            if np.all(ub < self.threshold):
                continue
            count = np.add.reduceat(mask.astype(np.int64), self.starts)
            if np.all(count == 1):
                if self._flips(np.flatnonzero(mask)):
                    return self._cell(np.flatnonzero(mask), *root, nodes)
                continue
            f, cut = self._split(mask, vals, tmax, count, ub, blo, bhi)
            left_hi, right_lo = bhi.copy(), blo.copy()
            left_hi[f], right_lo[f] = cut, first_above(cut)
            stack.append((blo, left_hi))
            stack.append((right_lo, bhi))
        return Verdict("safe", nodes)

    def _split(self, mask, vals, tmax, count, ub, blo, bhi) -> tuple[int, float]:
        j = int(np.argmax(ub))
        vmin = np.minimum.reduceat(np.where(mask, self.W[:, j], np.inf), self.starts)
        spread = np.where(count > 1, tmax[:, j] - vmin, -np.inf)
        t = int(np.argmax(spread))
        end = self.starts[t + 1] if t + 1 < self.starts.size else self.W.shape[0]
        idx = np.arange(self.starts[t], end)
        idx = idx[mask[idx]]
        worst = int(idx[np.argmax(self.W[idx, j])])
        a, b = self.A[worst], self.B[worst]
        for f in range(blo.size):  # a cut of the worst leaf's path that the box straddles
            if blo[f] <= a[f] < bhi[f]:
                return f, float(a[f])
            if blo[f] <= b[f] < bhi[f]:
                return f, float(b[f])
        # the worst leaf fits the box: cut another reachable leaf of the tree
        for k in idx:
            for f in range(blo.size):
                if blo[f] <= self.A[k, f] < bhi[f]:
                    return f, float(self.A[k, f])
                if blo[f] <= self.B[k, f] < bhi[f]:
                    return f, float(self.B[k, f])
        raise AssertionError("a tree with two reachable leaves has no cut inside the box")  # pragma: no cover

    def _flips(self, rows: np.ndarray) -> bool:
        leaves = [0] * len(self.ens.trees)
        for r in rows:
            ti, leaf = self.leaf_ids[r]
            leaves[ti] = leaf
        return min(self.ens.margins_exact(leaves, self.c)) <= Fraction(self.ens.guard)

    def _cell(self, rows: np.ndarray, blo, bhi, nodes: int) -> Verdict:
        """The whole cell of the leaf combination (within the searched box's other limits)."""
        a = self.A[rows].max(axis=0)
        b = self.B[rows].min(axis=0)
        lo, hi = self.x0.copy(), self.x0.copy()
        lo[self.dims] = np.maximum(blo, [first_above(v) if np.isfinite(v) else -np.inf for v in a])
        hi[self.dims] = np.minimum(bhi, b)
        return Verdict("flip", nodes, lo, hi)


def _leaf_boxes(t, n_features: int):
    """(leaf node, a, b) per leaf: the leaf is reached iff a_f < x_f <= b_f for every f."""
    out = []
    stack = [(0, np.full(n_features, -np.inf), np.full(n_features, np.inf))]
    while stack:
        node, a, b = stack.pop()
        f = t.feature[node]
        if f < 0:
            out.append((node, a, b))
            continue
        cut = t.cutoff[node]
        lb = b.copy()
        lb[f] = min(lb[f], cut)
        ra = a.copy()
        ra[f] = max(ra[f], cut)
        stack.append((int(t.left[node]), a, lb))
        stack.append((int(t.right[node]), ra, b))
    return out


__all__ = ["BoxVerifier", "Verdict"]
