"""Exact power-of-two rescaling of hidden neurons, so that big-M constants are of order one.

ReLU is positively homogeneous: relu(2^e z) = 2^e relu(z). Scaling row i of A_j (and its bias and
the bounds of z_j) by 2^{e_i} and column i of A_{j+1} by 2^{-e_i} leaves the network function and
its Jacobian unchanged, and in binary floating point the scaled numbers are exact (no rounding)
unless they leave the normal range, which is checked. Neurons whose bound magnitude
max(|l_i|, |u_i|) lies outside [2^-10, 2^10] are moved to the edge of that band (upward scaling is
capped so that no row coefficient exceeds 2^20), so the big-M rows of badly scaled networks
(weights 1e6 next to 1e-6, or inputs in [-1000, 1000]) no longer let a solver's 1e-9 feasibility
and integrality tolerances move z by whole units (which changed the optimum). Moderate bounds are
left alone: rescaling a neuron rescales a column of the next layer, and scaling every neuron to
unit bounds widened coefficient ranges enough for HiGHS and CBC to return wrong bounds on
fuzzed nets.
"""

from __future__ import annotations

import math

import numpy as np

from models.ir import Affine


# an upward scaling never makes a row's largest coefficient exceed this (a neuron whose bounds are
# zero up to rounding must not get 1e15 coefficients: HiGHS rejects those)
MAX_ROW = 2.0**20
BAND = 10


def _exponents(lo: np.ndarray, hi: np.ndarray, row_max: np.ndarray) -> np.ndarray:
    m = np.maximum(np.abs(lo), np.abs(hi))
    e = np.zeros(m.shape, dtype=np.int64)
    ok = np.isfinite(m) & (m > 0) & np.isfinite(row_max) & (row_max > 0)
    # only magnitudes outside [2^-BAND, 2^BAND] are moved, to the edge of that band: rescaling a
    # neuron rescales a column of the next layer, so moderate bounds are left as they are
    k = np.round(np.log2(m[ok])).astype(np.int64)
    e[ok] = np.where(k > BAND, BAND - k, np.where(k < -BAND, -BAND - k, 0))
    cap = np.floor(np.log2(MAX_ROW / row_max[ok])).astype(np.int64)
    e[ok] = np.minimum(e[ok], np.maximum(cap, 0))
    return e


def _exact_ldexp(a: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """a * 2^e, or None if any entry would round (overflow or subnormal result)."""
    out = np.ldexp(a, e)
    if np.all(np.isfinite(out)) and np.array_equal(np.ldexp(out, -e), a):
        return out
    return None


def scale_hidden_neurons(
    blocks: list[Affine], pre_lo: list[np.ndarray], pre_hi: list[np.ndarray]
) -> tuple[list[Affine], list[np.ndarray], list[np.ndarray]]:
    """The same network with every hidden neuron rescaled by a power of two (see module doc).

    Returns the original blocks and bounds unchanged if any scaled number would not be exact.
    """
    exps: list[np.ndarray] = []
    for j, (l, u) in enumerate(zip(pre_lo, pre_hi)):
        w = np.abs(blocks[j].weight)
        if j:  # the row as it will be after the previous layer's column scaling
            w = np.ldexp(w, -exps[-1][None, :])
        row_max = np.maximum(w.max(axis=1, initial=0.0), np.abs(blocks[j].bias))
        exps.append(_exponents(l, u, row_max))
    if not any(np.any(e) for e in exps):
        return blocks, pre_lo, pre_hi
    new_blocks: list[Affine] = []
    for k, blk in enumerate(blocks):
        row = exps[k] if k < len(exps) else np.zeros(blk.out_dim, dtype=np.int64)
        col = exps[k - 1] if k >= 1 else np.zeros(blk.in_dim, dtype=np.int64)
        w = _exact_ldexp(blk.weight, row[:, None] - col[None, :])
        b = _exact_ldexp(blk.bias, row)
        if w is None or b is None:
            return blocks, pre_lo, pre_hi
        new_blocks.append(Affine(w, b))
    lo = [_exact_ldexp(l, e) for l, e in zip(pre_lo, exps)]
    hi = [_exact_ldexp(u, e) for u, e in zip(pre_hi, exps)]
    if any(v is None for v in lo + hi):
        return blocks, pre_lo, pre_hi
    return new_blocks, lo, hi  # type: ignore[return-value]


def scale_inputs(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray) -> tuple[list[Affine], np.ndarray, np.ndarray, int]:
    """Inputs rescaled by one power of two x' = 2^-e x so that the box is of order one.

    The first block's weights absorb 2^e (exact); a norm ball in x' is the same ball in x, so the
    Jacobian (and every Lipschitz objective) is scaled by exactly 2^e. Returns e = 0 (nothing
    changed) when the box is already moderate or a scaled number would round."""
    m = float(np.max(np.maximum(np.abs(lo), np.abs(hi)), initial=0.0))
    if not (math.isfinite(m) and m > 0) or 2.0**-4 <= m <= 2.0**4:
        return blocks, lo, hi, 0
    e = int(np.round(np.log2(m)))
    w = _exact_ldexp(blocks[0].weight, np.full((1, blocks[0].in_dim), e))
    lo2, hi2 = _exact_ldexp(lo, np.full(lo.shape, -e)), _exact_ldexp(hi, np.full(hi.shape, -e))
    if w is None or lo2 is None or hi2 is None:
        return blocks, lo, hi, 0
    return [Affine(w, blocks[0].bias)] + list(blocks[1:]), lo2, hi2, e
