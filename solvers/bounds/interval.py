"""Interval arithmetic through affine maps (exact for one affine map over a box, then loose).

Every function takes one box (vectors (n,)) or a batch of boxes (rows of (B, n) arrays); the
results are the same floats either way (one product per layout: W @ x for a box, X @ W^T for a
batch), widened for rounding here and nowhere else.
"""

from __future__ import annotations

import numpy as np

from ..rounding import widen
from .blocked import abs_matmul, interval_matmul, right_abs_matmul, right_interval_matmul
from .sparse import is_sparse, rmul_part


def affine_interval(weight: np.ndarray, bias: np.ndarray | float, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of W h + b over lo <= h <= hi (widened for float64 rounding); lo, hi (n,) or (B, n).

    W+, W- and |W| are copies of W: made in blocks when they do not fit in the memory budget
    (`blocked`), so the largest layer is never copied three times."""
    boxes = "" if lo.ndim == 1 else f" of {lo.shape[0]} boxes"
    what = f"interval bounds{boxes} through a {weight.shape[0]} x {weight.shape[1]} affine map"
    z_lo, z_hi = _interval_product(weight, lo, hi, what)
    z_lo, z_hi = z_lo + bias, z_hi + bias
    mag = _abs_product(weight, np.maximum(np.abs(lo), np.abs(hi)), what) + np.abs(bias)
    return widen(z_lo, z_hi, mag, weight.shape[1] + 1)


def affine_transpose_interval(weight: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of W^T g over lo <= g <= hi (the backward pass through W)."""
    return affine_interval(weight.T, 0.0, lo, hi)


def magnitudes(weights: list[np.ndarray], biases: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Upper bounds on |z_j| from the absolute-value forward pass (used to size rounding errors);
    lo, hi (n,) or (B, n)."""
    m = np.maximum(np.abs(lo), np.abs(hi))
    out = []
    for w, b in zip(weights, biases):
        m = _abs_product(w, m, f"magnitude bounds through a {w.shape[0]} x {w.shape[1]} affine map") + np.abs(b)
        m = m * (1.0 + 1e-12) + 1e-300  # cover the rounding of this very computation
        out.append(m)
    return out


def _interval_product(W: np.ndarray, lo: np.ndarray, hi: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    if lo.ndim == 1:
        return interval_matmul(W, lo, hi, what)
    if lo.shape[0] == 1:  # a batch of one: the matrix-vector products (faster, the same floats)
        z_lo, z_hi = interval_matmul(W, lo[0], hi[0], what)
        return z_lo[None], z_hi[None]
    if is_sparse(W.T):  # an unrolled convolution: cached CSR parts, no dense W+ / W- copies per call
        return (rmul_part(lo, W.T, "pos") + rmul_part(hi, W.T, "neg"),
                rmul_part(hi, W.T, "pos") + rmul_part(lo, W.T, "neg"))
    return right_interval_matmul(lo, hi, W.T, what)


def _abs_product(W: np.ndarray, m: np.ndarray, what: str) -> np.ndarray:
    if m.ndim == 1:
        return abs_matmul(W, m, what)
    if m.shape[0] == 1:
        return abs_matmul(W, m[0], what)[None]
    return rmul_part(m, W.T, "abs") if is_sparse(W.T) else right_abs_matmul(m, W.T, what)


__all__ = ["affine_interval", "affine_transpose_interval", "magnitudes"]
