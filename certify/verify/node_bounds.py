"""Node bounding for the verification search: the one pluggable piece.

A *node* is a sub-box of a region's input box. A `NodeBounder` returns, for a batch of nodes and
every clause of the region, a sound upper bound on the clause's unsafe margin over the node

    max_{x in node}  min_r ( d_r - G_r x - H_r f(x) )

and whether the clause is proven infeasible there (the margin bound is negative, or 0 with a strict
row). The search closes a node when every clause is infeasible. Bounders only have to be sound;
tighter ones close nodes earlier. Both bounders here take their bounds from the bound engine
(`solvers.bounds`): `SymbolicRowBounds` one box at a time (`network_bounds`), and
`BatchedSymbolicBounds` (the default of `verify`) for the whole batch with each node's parent
bounds passed in (`bound_boxes`), adding the split hints. LP/MILP node bounds and ReLU splitting
plug in the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from models.ir import Network
from solvers.bounds import Bounds, network_bounds, relu_blocks
from solvers.bounds.interval import affine_interval
from solvers.bounds.options import BoundOptions
from solvers.bounds.pipeline import bound_boxes
from solvers.bounds.rows import relaxed_layers
from solvers.bounds.symbolic import backsubstitute_upper, best_of_slopes

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
            live, mags = relaxed_layers(blocks, nb)
            sym = -backsubstitute_upper(live, K, -rows.H, lo[None], hi[None], mags[K])[0][0]
            hy_lo = np.maximum(hy_lo, sym)
        # the sum of two sound lower bounds, rounded down
        return np.nextafter(gx_lo + hy_lo, -np.inf)

    def __call__(self, region: Region, lo: np.ndarray, hi: np.ndarray, states: list[Any] | None = None) -> NodeBounds:
        rows, owner = stacked_rows(region)
        lower = np.stack([self.row_lower(rows, l, h) for l, h in zip(lo, hi)])
        upper, infeasible = clause_bounds(rows, owner, len(region.clauses), lower)
        return NodeBounds(upper, infeasible)


# split hints (per-neuron input sensitivities) are computed for inputs up to this size only:
# input splitting is for low-dimensional inputs
SPLIT_HINT_MAX_INPUTS = 64


class BatchedSymbolicBounds:
    """Node bounder: batched symbolic pre-activation bounds (each node's parent bounds intersected),
    then the spec rows H y back-substituted as rows (not from per-output bounds) three times, with
    CROWN's adaptive lower slopes, lower lines parallel to the upper ones and CROWN's other choice,
    keeping the smallest bound of each row (each is sound; on ACAS Xu this halves to quarters the
    nodes of the hardest instances); `G x` bounded exactly over the box. The first pass's linear
    coefficients over the input give the split hint |lambda_i| * width_i of each clause's deciding
    row. With a `deadline` the pre-activation tightening stops there (`BoundOptions.deadline`: the
    neurons not reached keep sound interval bounds) and the two extra slope passes are skipped, so a
    batch ends about a second after it (the search then stops)."""

    name = "symbolic-batched"

    def __init__(self, net: Network, options: BoundOptions | None = None, *, deadline: float | None = None) -> None:
        self.blocks = relu_blocks(net)
        self.options = options or BoundOptions(rows="unstable", symbolic_output=False)
        if deadline is not None:
            self.options = replace(self.options, deadline=deadline)

    def __call__(self, region: Region, lo: np.ndarray, hi: np.ndarray, states: list[Any] | None = None) -> NodeBounds:
        states = states if states is not None else [None] * len(lo)
        parents = Bounds.stack(states) if all(s is not None for s in states) else None
        K = len(self.blocks) - 1
        hint = lo.shape[1] <= SPLIT_HINT_MAX_INPUTS
        sens: list | None = [] if hint else None
        nb = bound_boxes(self.blocks, lo, hi, self.options, parents=parents, sens=sens)
        live, mags = nb.relaxed
        rows, owner = stacked_rows(region)
        # rows: G x exactly over the box; H y by back-substitution and by the output interval
        gx_lo = affine_interval(rows.G, np.zeros(rows.count), lo, hi)[0]
        hy_lo = affine_interval(rows.H, np.zeros(rows.count), nb.out_lo, nb.out_hi)[0]
        gaps: dict[int, np.ndarray] | None = {} if hint else None
        up, lam = backsubstitute_upper(live, K, -rows.H, lo, hi, mags[K], gaps)
        if self.options.deadline is None or time.perf_counter() < self.options.deadline:
            up = best_of_slopes(live, K, -rows.H, lo, hi, mags[K], up)
        hy_lo = np.maximum(hy_lo, -up)
        lower = np.nextafter(gx_lo + hy_lo, -np.inf)  # sum of two sound lower bounds, rounded down
        upper, infeasible = clause_bounds(rows, owner, len(region.clauses), lower)
        scores = _split_scores(region, rows, owner, lower, lam, gaps, sens, live, lo, hi) if hint else None
        return NodeBounds(upper, infeasible, scores, [nb.box(b) for b in range(len(lo))])


def _split_scores(region, rows, owner, lower, lam, gaps, sens, live, lo, hi) -> np.ndarray:
    """Per clause and input, what bisecting the input should gain on the clause's deciding
    row: the linear part |lambda_i| width_i, plus each unstable neuron's relaxation intercept
    shared among the inputs by the neuron's sensitivity |a_i| width_i (B, clauses, n)."""
    B, n = lo.shape
    width = hi - lo
    slack = rows.d - lower
    scores = np.zeros((B, len(region.clauses), n))
    ar = np.arange(B)
    for c in range(len(region.clauses)):
        sel = np.flatnonzero(owner == c)
        if not sel.size:
            continue
        pick = sel[np.argmin(slack[:, sel], axis=1)]
        score = (np.abs(lam[ar, pick]) + np.abs(rows.G[pick])) * width
        for t, g in gaps.items():
            share = sens[t][:, live.keep[t]] * width[:, None, :]
            total = share.sum(axis=2, keepdims=True)
            share = np.divide(share, total, out=np.zeros_like(share), where=total > 0)
            score += np.einsum("bk,bkn->bn", g[ar, pick], share)
        scores[:, c] = score
    return scores


__all__ = ["BatchedSymbolicBounds", "NodeBounder", "NodeBounds", "SymbolicRowBounds", "clause_bounds", "stacked_rows"]
