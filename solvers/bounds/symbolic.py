"""Symbolic (CROWN/DeepPoly-style) bounds by back-substitution to the input box.

A ReLU with bounds l < 0 < u is relaxed by  alpha z <= relu(z) <= u (z - l) / (u - l)  with the
adaptive lower slope alpha = 1 if u > -l else 0 (CROWN); stable ReLUs are exact (slope 0 or 1).
The bound of a linear function of z_j is obtained by substituting these relaxations layer by layer
down to the input and maximising over the box.

Rounding: the back-substituted sums are bounded by the absolute-value forward pass (each layer at
most doubles it through the relaxation intercepts), so the float64 result is widened by
4 * 2^j * gamma(N) * magnitude, with N the total length of the summation chains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.ir import Affine

from models.memory import block_rows

from ..rounding import widen
from .types import ACTIVE, INACTIVE, phases


@dataclass(frozen=True)
class ReluRelaxation:
    """Linear bounds  lo_slope z + lo_icpt <= relu(z) <= up_slope z + up_icpt  per neuron."""

    up_slope: np.ndarray
    up_icpt: np.ndarray
    lo_slope: np.ndarray
    lo_icpt: np.ndarray


def relu_relaxation(l: np.ndarray, u: np.ndarray) -> ReluRelaxation:
    ph = phases(l, u)
    unstable = ph == 0
    up_slope = np.where(ph == ACTIVE, 1.0, 0.0)
    denom = np.where(unstable, u - l, 1.0)
    up_slope = np.where(unstable, u / denom, up_slope)
    up_icpt = np.where(unstable, -up_slope * l, 0.0)
    lo_slope = np.where(ph == ACTIVE, 1.0, np.where(unstable & (u > -l), 1.0, 0.0))
    lo_slope = np.where(ph == INACTIVE, 0.0, lo_slope)
    return ReluRelaxation(up_slope, up_icpt, lo_slope, np.zeros_like(l))


def backsubstitute_upper(
    blocks: list[Affine],
    relax: list[ReluRelaxation],
    j: int,
    coeff: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    mag: np.ndarray,
) -> np.ndarray:
    """Sound upper bounds of the rows of coeff @ z_j over the box, z_j = A_j(relu(z_{j-1})) ...

    `relax[t]` relaxes ReLU layer t < j; `mag` bounds |z_j| (absolute-value forward pass).
    Rows are independent: when their working arrays do not fit in the memory budget they are
    back-substituted in blocks of rows (`row_block`).
    """
    k = row_block(blocks, j, coeff.shape[0], coeff.shape[1])
    if k >= coeff.shape[0]:
        return _rows_upper(blocks, relax, j, coeff, lo, hi, mag)
    return np.concatenate([_rows_upper(blocks, relax, j, coeff[s:s + k], lo, hi, mag)
                           for s in range(0, coeff.shape[0], k)])


def row_block(blocks: list[Affine], j: int, rows: int, width: int) -> int:
    """How many rows (each `width` coefficients on z_j) to back-substitute at once within the budget:
    all of them when they fit. Per row: the coefficients and about six vectors of the widest layer
    (lambda, its positive and negative parts, their relaxed products)."""
    widest = max([blocks[t].in_dim for t in range(j + 1)] + [width])
    return block_rows(rows, 8.0 * (2 * width + 6 * widest), f"symbolic (CROWN) bounds of layer {j}",
                      alternative="use interval bounds (--bounds interval), which need no back-substitution")


def _rows_upper(blocks, relax, j, coeff, lo, hi, mag) -> np.ndarray:
    """`backsubstitute_upper` of one block of rows (the arguments are the same)."""
    lam = coeff @ blocks[j].weight
    const = coeff @ blocks[j].bias
    length = blocks[j].in_dim + 1
    for t in range(j - 1, -1, -1):
        r = relax[t]
        lam_pos = np.maximum(lam, 0.0)
        lam_neg = np.minimum(lam, 0.0)
        const = const + lam_pos @ r.up_icpt + lam_neg @ r.lo_icpt
        lam = lam_pos * r.up_slope + lam_neg * r.lo_slope
        const = const + lam @ blocks[t].bias
        lam = lam @ blocks[t].weight
        length += blocks[t].in_dim + 2
    upper = const + np.maximum(lam, 0.0) @ hi + np.minimum(lam, 0.0) @ lo
    _, upper = widen(upper, upper, np.abs(coeff) @ mag, length + coeff.shape[1], factor=4.0 * 2.0**j)
    return upper


def symbolic_layer_bounds(
    blocks: list[Affine],
    pre_lo: list[np.ndarray],
    pre_hi: list[np.ndarray],
    j: int,
    lo: np.ndarray,
    hi: np.ndarray,
    mag: np.ndarray,
    rows: np.ndarray | None = None,
    relax: list[ReluRelaxation] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of z_j (only its `rows` when given) from the bounds of z_0..z_{j-1}; `relax` may
    pass the layers' relaxations already computed."""
    if relax is None:
        relax = [relu_relaxation(pre_lo[t], pre_hi[t]) for t in range(j)]
    n = blocks[j].out_dim
    idx = np.arange(n) if rows is None else np.asarray(rows)
    # rows +e_i and -e_i of the neurons, built block by block (never the n x n identity)
    step = max(row_block(blocks, j, 2 * idx.size, n) // 2, 1)
    lower, upper = np.empty(idx.size), np.empty(idx.size)
    for s in range(0, idx.size, step):
        part = idx[s:s + step]
        eye = np.zeros((part.size, n))
        eye[np.arange(part.size), part] = 1.0
        both = _rows_upper(blocks, relax, j, np.vstack([eye, -eye]), lo, hi, mag)
        lower[s:s + step], upper[s:s + step] = -both[part.size:], both[:part.size]
    return lower, upper
