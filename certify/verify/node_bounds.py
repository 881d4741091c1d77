"""Node bounding for the verification search: the one pluggable piece.

A *node* is a sub-box of a region's input box. A `NodeBounder` returns, for a batch of nodes and
every clause of the region, a sound upper bound on the clause's unsafe margin over the node

    max_{x in node}  min_r ( d_r - G_r x - H_r f(x) )

and whether the clause is proven infeasible there (the margin bound is negative, or 0 with a strict
row). The search closes a node when every clause is infeasible. Bounders only have to be sound;
tighter ones close nodes earlier. `SymbolicRowBounds` (here) bounds each row separately with the
project's sound symbolic bounds (`solvers.bounds.network_bounds`) one box at a time;
`batch_bounds.BatchedSymbolicBounds` is the same computation batched, with the parent's bounds
reused (the default of `verify`). LP/MILP node bounds and ReLU splitting plug in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from models.ir import Network
from solvers.bounds import network_bounds, relu_blocks
from solvers.bounds.interval import affine_interval, magnitudes
from solvers.bounds.symbolic import backsubstitute_upper, relu_relaxation

from .spec import LinearRows, Region


@dataclass
class NodeBounds:
    """Bounds of a batch of B nodes of one region with k clauses.

    `margin_upper[b, c]`: sound upper bound on clause c's margin over node b (+inf if unknown);
    `infeasible[b, c]`: clause c has no point in node b (proven);
    `split_scores[b, c, i]`: optional preference for bisecting input i of node b to help close
    clause c (larger first; the search adds them up over the clauses still open);
    `states[b]`: optional bounder data handed to node b's children (e.g. its pre-activation bounds,
    valid on every sub-box).
    """

    margin_upper: np.ndarray
    infeasible: np.ndarray
    split_scores: np.ndarray | None = None
    states: list[Any] | None = None


class NodeBounder(Protocol):
    """Sound bounds of the clauses of `region` over the boxes lo[b] <= x <= hi[b] (B, n).

    `states[b]` is what this bounder returned for node b's parent (None at a root): anything proven
    on the parent box holds on the child and may be reused."""

    name: str

    def __call__(self, region: Region, lo: np.ndarray, hi: np.ndarray, states: list[Any] | None = None) -> NodeBounds: ...


def stacked_rows(region: Region) -> tuple[LinearRows, np.ndarray]:
    """All rows of the region's clauses stacked, and the clause index of each row."""
    rows = region.clauses[0].rows
    owner = [np.zeros(rows.count, dtype=int)]
    for c, d in enumerate(region.clauses[1:], start=1):
        rows = rows.concat(d.rows)
        owner.append(np.full(d.rows.count, c))
    return rows, np.concatenate(owner)


def clause_bounds(rows: LinearRows, owner: np.ndarray, k: int, lhs_lower: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From sound lower bounds of each row's left side (B, R): clause margin upper bounds (B, k)
    and infeasibility (some row's lower bound exceeds its right side; reaches it if strict)."""
    # d - lower, rounded up: the float subtraction may round down by half an ulp
    slack_up = np.nextafter(rows.d - lhs_lower, np.inf)
    row_out = (lhs_lower > rows.d) | (rows.strict & (lhs_lower >= rows.d))
    B = lhs_lower.shape[0]
    upper = np.full((B, k), np.inf)
    infeasible = np.zeros((B, k), dtype=bool)
    for c in range(k):
        sel = owner == c
        if np.any(sel):
            upper[:, c] = slack_up[:, sel].min(axis=1)
            infeasible[:, c] = row_out[:, sel].any(axis=1)
    return upper, infeasible


class SymbolicRowBounds:
    """Each row's left side G x + H y bounded below over a box: G x exactly by interval arithmetic,
    H y by CROWN-style back-substitution of the row H itself through the network (tighter than
    combining per-output bounds), intersected with the interval bound from the output bounds.

    Pre-activation bounds come from `solvers.bounds.network_bounds(net, lo, hi, method)`.
    """

    name = "symbolic"

    def __init__(self, net: Network, method: str = "symbolic") -> None:
        self.net = net
        self.method = method
        self.blocks = relu_blocks(net)

    def row_lower(self, rows: LinearRows, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Sound lower bounds (R,) of G_r x + H_r f(x) over one box."""
        nb = network_bounds(self.net, lo, hi, self.method)
        gx_lo, _ = affine_interval(rows.G, np.zeros(rows.count), lo, hi)
        hy_lo, _ = affine_interval(rows.H, np.zeros(rows.count), nb.out_lo, nb.out_hi)
        blocks = self.blocks
        K = len(blocks) - 1
        if rows.count:
            relax = [relu_relaxation(nb.pre_lo[t], nb.pre_hi[t]) for t in range(K)]
            mag = magnitudes([b.weight for b in blocks], [b.bias for b in blocks], lo, hi)[K]
            sym = -backsubstitute_upper(blocks, relax, K, -rows.H, lo, hi, mag)
            hy_lo = np.maximum(hy_lo, sym)
        # the sum of two sound lower bounds, rounded down
        return np.nextafter(gx_lo + hy_lo, -np.inf)

    def __call__(self, region: Region, lo: np.ndarray, hi: np.ndarray, states: list[Any] | None = None) -> NodeBounds:
        rows, owner = stacked_rows(region)
        lower = np.stack([self.row_lower(rows, l, h) for l, h in zip(lo, hi)])
        upper, infeasible = clause_bounds(rows, owner, len(region.clauses), lower)
        return NodeBounds(upper, infeasible)


__all__ = ["NodeBounder", "NodeBounds", "SymbolicRowBounds", "clause_bounds", "stacked_rows"]
