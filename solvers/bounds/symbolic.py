"""Symbolic (CROWN/DeepPoly-style) bounds by back-substitution to the input box, for a batch of boxes.

A ReLU with bounds l < 0 < u is relaxed by  alpha z <= relu(z) <= u (z - l) / (u - l)  with the
adaptive lower slope alpha = 1 if u > -l else 0 (CROWN); stable ReLUs are exact (slope 0 or 1).
Any lower slope in [0, 1] is sound: `best_of_slopes` also tries the lines parallel to the upper
ones and CROWN's other choice, `optimized_slopes_bound` slopes optimised per row (`alpha`). The
bound of a linear function of z_j is obtained by substituting the relaxations layer by layer down
to the input and maximising over the box. Boxes are rows of (B, n) arrays (one box: B = 1).

Rounding: the back-substituted sums are bounded by the absolute-value forward pass (each layer at
most doubles it through the relaxation intercepts), so the float64 result is widened by
4 * 2^j * gamma(N) * magnitude, with N the total length of the summation chains; that bound holds
for any summation order, and the neurons dropped below (inactive on every box) add exact zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from models.ir import Affine
from models.memory import block_rows, fits, require_work

from ..rounding import widen
from .sparse import csr_t, rmul, sparse_product
from .types import ACTIVE, INACTIVE, phases


@dataclass(frozen=True)
class ReluRelaxation:
    """Linear bounds  lo_slope z <= relu(z) <= up_slope z + up_icpt  per neuron (every sound lower
    line of a ReLU through the origin: slope in [0, 1], no intercept)."""

    up_slope: np.ndarray
    up_icpt: np.ndarray
    lo_slope: np.ndarray


def relu_relaxation(l: np.ndarray, u: np.ndarray) -> ReluRelaxation:
    ph = phases(l, u)
    unstable = ph == 0
    up_slope = np.where(ph == ACTIVE, 1.0, 0.0)
    denom = np.where(unstable, u - l, 1.0)
    up_slope = np.where(unstable, u / denom, up_slope)
    up_icpt = np.where(unstable, -up_slope * l, 0.0)
    lo_slope = np.where(ph == ACTIVE, 1.0, np.where(unstable & (u > -l), 1.0, 0.0))
    lo_slope = np.where(ph == INACTIVE, 0.0, lo_slope)
    return ReluRelaxation(up_slope, up_icpt, lo_slope)


def _unstable(r: ReluRelaxation) -> np.ndarray:
    return (r.up_slope > 0.0) & (r.up_slope < 1.0)


def _parallel_lower(r: ReluRelaxation) -> ReluRelaxation:
    """Lower lines s z with s = u / (u - l), parallel to the upper line (any s in [0, 1] bounds
    relu(z) from below on every z: 0 >= s z for z < 0, z >= s z for z >= 0)."""
    return replace(r, lo_slope=np.where(_unstable(r), r.up_slope, r.lo_slope))


def _flipped_lower(r: ReluRelaxation) -> ReluRelaxation:
    """The other of CROWN's two slopes (0 <-> 1) on every unstable neuron."""
    return replace(r, lo_slope=np.where(_unstable(r), 1.0 - r.lo_slope, r.lo_slope))


class LiveLayers:
    """The relaxed ReLU layers of a batch, restricted to neurons alive (not inactive) in some box.

    A neuron inactive on every box has slope and intercept 0 in every relaxation: its column of
    the back-substituted coefficients is exactly zero, so dropping it changes no bound (only the
    summation order, which the rounding allowance covers). Where the restricted copy of a weight
    matrix would not fit in the memory budget the layer keeps every neuron (no copy).
    """

    def __init__(self, blocks: list[Affine]) -> None:
        self.blocks = blocks
        self.keep: list[np.ndarray] = []  # alive neurons of ReLU layer t
        self.relax: list[ReluRelaxation] = []  # relu_relaxation restricted to them, (B, |keep_t|) arrays
        self.weight: list[np.ndarray] = []  # W_t restricted to alive outputs (rows) and alive inputs
        self.bias: list[np.ndarray] = []
        # CSR copies of weight[t]^T where the layer is an unrolled convolution (`sparse`), else None
        self.sparse_t: list = []

    def add(self, l: np.ndarray, u: np.ndarray) -> None:
        """Relax ReLU layer t = len(self.keep) from its final bounds (B, n_t)."""
        t = len(self.keep)
        n = l.shape[1]
        W = self.blocks[t].weight
        keep = np.flatnonzero(np.any(u > 0, axis=0)) if l.shape[0] > 1 else None
        cols = W.shape[1] if t == 0 else self.keep[t - 1].size
        # one box keeps every neuron (its products then sum exactly as a single box's always did),
        # and so does a layer whose restricted copy would not fit in the memory budget
        if keep is None or not fits(8.0 * keep.size * cols):
            keep = np.arange(n)
            if t > 0 and self.keep[t - 1].size < W.shape[1]:
                W = W[:, self.keep[t - 1]]
            self.relax.append(relu_relaxation(l, u))
            self.bias.append(self.blocks[t].bias)
        else:
            W = W[keep] if t == 0 else W[keep][:, self.keep[t - 1]]
            self.relax.append(relu_relaxation(l[:, keep], u[:, keep]))
            self.bias.append(self.blocks[t].bias[keep])
        self.keep.append(keep)
        self.weight.append(W)
        self.sparse_t.append(self._sparse_sub(t, keep))

    def _sparse_sub(self, t: int, keep: np.ndarray):
        """weight[t]^T (W_t restricted to alive rows and columns) as CSR, None for a dense layer."""
        full = csr_t(self.blocks[t].weight)
        if full is None:
            return None
        if t > 0 and self.keep[t - 1].size < full.shape[0]:
            full = full[self.keep[t - 1]]
        return full[:, keep] if keep.size < full.shape[1] else full

    def mul(self, t: int, X: np.ndarray) -> np.ndarray:
        """X @ weight[t] (sparse where the layer is)."""
        return X @ self.weight[t] if self.sparse_t[t] is None else sparse_product(X, self.sparse_t[t])

    def work(self, t: int) -> int:
        """Multiply-adds per row of a product with weight[t]."""
        return self.weight[t].size if self.sparse_t[t] is None else int(self.sparse_t[t].nnz)

    def inputs_of(self, j: int) -> np.ndarray | slice:
        """Columns of W_j that can be nonzero after the ReLUs (all inputs for j = 0)."""
        if j == 0 or (self.keep[j - 1].size == self.blocks[j].in_dim and self.relax[j - 1].up_slope.shape[0] == 1):
            return slice(None)
        return self.keep[j - 1]

    def with_relaxations(self, relax: list[ReluRelaxation]) -> "LiveLayers":
        """The same layers relaxed by `relax` instead."""
        other = LiveLayers(self.blocks)
        other.keep, other.relax, other.weight, other.bias = self.keep, list(relax), self.weight, self.bias
        other.sparse_t = self.sparse_t
        return other


def _row_bytes(blocks: list[Affine], j: int, width: int, boxes: int, kept: int) -> float:
    """Working bytes per back-substituted row (each `width` coefficients on z_j), per box: the
    coefficients, about six vectors of the widest layer (lambda, its mask, positive part, relaxed
    products) and `kept` recorded intercepts."""
    widest = max([blocks[t].in_dim for t in range(j + 1)] + [width])
    return 8.0 * boxes * (2 * width + 6 * widest + kept)


def row_block(blocks: list[Affine], j: int, rows: int, width: int, boxes: int = 1, kept: int = 0) -> int:
    """How many rows to back-substitute at once within the budget: all of them when they fit."""
    return block_rows(rows, _row_bytes(blocks, j, width, boxes, kept), _what(j, boxes), alternative=SYMBOLIC_ALTERNATIVE)


SYMBOLIC_ALTERNATIVE = "use interval bounds (--bounds interval), which need no back-substitution"


def _what(j: int, boxes: int) -> str:
    return f"symbolic (CROWN) bounds of layer {j}" + (f" of {boxes} boxes" if boxes > 1 else "")


def backsubstitute_upper(live: LiveLayers, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                         mag: np.ndarray, gaps: dict[int, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Sound upper bounds (B, R) of the rows coeff (R, n_j, or (B, R, n_j): rows per box) of z_j
    over each box [lo, hi] (B, n), and the input coefficients (B, R, n) of the back-substituted
    linear upper bound. `mag` (B, n_j) bounds |z_j| (`interval.magnitudes`). With `gaps`, also
    records per ReLU layer t the intercept each alive neuron adds to the bound (B, R, |alive_t|):
    the relaxation looseness that splitting can remove (a split hint only).

    Rows are independent: when their working arrays do not fit in the memory budget they are
    back-substituted in blocks of rows (then no coefficients are returned, and no gaps allowed)."""
    R, B = coeff.shape[-2], lo.shape[0]
    kept = sum(live.blocks[t].out_dim for t in range(j)) if gaps is not None else 0
    k = row_block(live.blocks, j, R, coeff.shape[-1], B, kept)
    if k >= R:
        return _rows_upper(live, j, coeff, lo, hi, mag, gaps)
    if gaps is not None:  # split hints need every row at once: refused (the whole does not fit)
        require_work(R * _row_bytes(live.blocks, j, coeff.shape[-1], B, kept), _what(j, B), SYMBOLIC_ALTERNATIVE)
    return np.concatenate([_rows_upper(live, j, coeff[..., s:s + k, :], lo, hi, mag, None)[0]
                           for s in range(0, R, k)], axis=1), None


def _rows_upper(live: LiveLayers, j: int, coeff, lo, hi, mag, gaps) -> tuple[np.ndarray, np.ndarray]:
    """`backsubstitute_upper` of one block of rows (the arguments are the same)."""
    blocks = live.blocks
    B = lo.shape[0]
    # one box with shared rows: plain matrix products over (R, n) rows (a batch's einsums sum in
    # another order; both are covered by the same allowance, this keeps one box's floats)
    one = B == 1 and coeff.ndim == 2

    def box(a):  # a per-box array as it meets the rows
        return a[0] if one else (a if a.ndim == 3 else a[:, None, :])

    def rowdot(x, v):  # sum over n of rows x (.., R, n) times the per-box vector v (B, n)
        return x @ v[0] if one else np.einsum("brn,bn->br", x, v)

    inputs = live.inputs_of(j)

    def head(c):  # c @ W_j restricted to the alive inputs (an unrolled convolution: sparse)
        if csr_t(blocks[j].weight) is not None:
            return rmul(c, blocks[j].weight)[..., inputs]
        return c @ blocks[j].weight[:, inputs]

    if coeff.ndim == 3:  # rows of their own per box (B, R, n_j)
        lam, const = head(coeff), coeff @ blocks[j].bias
        row_mag = np.einsum("bn,brn->br", mag, np.abs(coeff))
    elif one:
        lam, const = head(coeff), coeff @ blocks[j].bias
        row_mag = np.abs(coeff) @ mag[0]
    else:
        h = head(coeff)
        lam = np.broadcast_to(h, (B, coeff.shape[0], h.shape[1]))
        const = np.broadcast_to(coeff @ blocks[j].bias, (B, coeff.shape[0]))
        row_mag = mag @ np.abs(coeff).T
    length = blocks[j].in_dim + 1
    for t in range(j - 1, -1, -1):
        r = live.relax[t]
        # lam_pos * up + lam_neg * lo (one of the two products is an exact zero)
        lam_pos, lam_neg = np.maximum(lam, 0.0), np.minimum(lam, 0.0)
        if gaps is not None:
            gaps[t] = lam_pos * box(r.up_icpt) if not one else (lam_pos * r.up_icpt[0])[None]
        const = const + rowdot(lam_pos, r.up_icpt)
        lam = lam_pos * box(r.up_slope) + lam_neg * box(r.lo_slope)
        const = const + lam @ live.bias[t]
        lam = live.mul(t, lam)
        length += blocks[t].in_dim + 2
    upper = const + rowdot(np.maximum(lam, 0.0), hi) + rowdot(np.minimum(lam, 0.0), lo)
    _, upper = widen(upper, upper, row_mag, length + coeff.shape[-1], factor=4.0 * 2.0**j)
    return (upper[None], lam[None]) if one else (upper, lam)


def given_slopes_bound(live: LiveLayers, j: int, neurons: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                       mag: np.ndarray, given: tuple[np.ndarray, list[np.ndarray]]) -> np.ndarray:
    """Upper bounds (B, 2k) of the rows +e_i for the k `neurons` i of z_j, then -e_i,
    back-substituted with lower slopes given per row: `given` = (idx (R,), per ReLU layer t < j
    slopes (1, 2R, n_t) over every neuron of t) for the rows +e_idx then -e_idx, e.g. optimised on
    a box containing these (`optimized_slopes_bound`'s `keep`). A neuron unstable here takes its
    given slope, any other its own relaxation's; the rows of neurons outside idx keep their own
    slopes. Sound whatever the slopes (every line through the origin with a slope in [0, 1] bounds
    a ReLU from below)."""
    idx, slopes = given
    R, B, n = idx.size, lo.shape[0], live.blocks[j].out_dim
    where = np.full(n, -1)
    where[idx] = np.arange(R)
    # rows per block: the slopes add about as much as the back-substitution's own arrays
    step = max(row_block(live.blocks, j, 2 * neurons.size, n, B) // 4, 1)
    out = np.empty((B, 2 * neurons.size))
    for s in range(0, neurons.size, step):
        part = neurons[s:s + step]
        k = part.size
        pos = where[part]
        have = np.concatenate([pos >= 0] * 2)[None, :, None]
        order = np.concatenate([np.maximum(pos, 0), R + np.maximum(pos, 0)])
        relax = []
        for t, (r, S) in enumerate(zip(live.relax[:j], slopes)):
            rows = S[0][order][:, live.keep[t]]  # (2k, |alive_t|)
            relax.append(replace(r, lo_slope=np.where(_unstable(r)[:, None, :] & have, rows[None], r.lo_slope[:, None, :])))
        C = np.zeros((2 * k, n))
        C[np.arange(k), part] = 1.0
        C[k + np.arange(k), part] = -1.0
        up = backsubstitute_upper(live.with_relaxations(relax + live.relax[j:]), j, C, lo, hi, mag)[0]
        out[:, s:s + k] = up[:, :k]
        out[:, neurons.size + s:neurons.size + s + k] = up[:, k:]
    return out


def best_of_slopes(live: LiveLayers, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray, mag: np.ndarray,
                   up: np.ndarray) -> np.ndarray:
    """min(up, the rows back-substituted again with the parallel and with the flipped lower slopes
    of the unstable ReLUs): each result is sound, so the smallest is (alpha-CROWN's idea with
    three fixed slopes, no optimiser). `up`: the bounds with CROWN's slopes."""
    for variant in (_parallel_lower, _flipped_lower):
        other = live.with_relaxations([variant(r) for r in live.relax])
        up = np.minimum(up, backsubstitute_upper(other, j, coeff, lo, hi, mag)[0])
    return up


def optimized_slopes_bound(live: LiveLayers, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                           mag: np.ndarray, iterations: int, deadline: float | None = None,
                           keep: list | None = None) -> np.ndarray:
    """Upper bounds of the rows back-substituted with lower slopes optimised per row (`alpha`):
    this module's sound float64 bound, whatever slopes the optimiser returns (the optimiser stops
    early at `deadline`). With `keep` (a list), the slopes (per ReLU layer t < j, (B, R, |alive_t|))
    are appended to it."""
    from .alpha import optimized_lower_slopes

    slopes = optimized_lower_slopes(live, j, coeff, lo, hi, iterations, deadline=deadline)
    if keep is not None:
        keep.append(slopes)
    relax = [replace(r, lo_slope=s) for r, s in zip(live.relax, slopes)] + live.relax[j:]
    return backsubstitute_upper(live.with_relaxations(relax), j, coeff, lo, hi, mag)[0]


__all__ = ["LiveLayers", "ReluRelaxation", "backsubstitute_upper", "best_of_slopes", "given_slopes_bound", "optimized_slopes_bound",
           "relu_relaxation", "row_block"]
