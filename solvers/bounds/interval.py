"""Interval arithmetic through affine maps (exact for one affine map over a box, then loose)."""

from __future__ import annotations

import numpy as np

from ..rounding import widen
from .blocked import abs_matmul, interval_matmul


def affine_interval(weight: np.ndarray, bias: np.ndarray | float, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of W h + b over lo <= h <= hi (widened for float64 rounding).

    W+, W- and |W| are copies of W: made in row blocks when they do not fit in the memory budget
    (`blocked`), so the largest layer is never copied three times."""
    what = f"interval bounds through a {weight.shape[0]} x {weight.shape[1]} affine map"
    z_lo, z_hi = interval_matmul(weight, lo, hi, what)
    z_lo, z_hi = z_lo + bias, z_hi + bias
    mag = abs_matmul(weight, np.maximum(np.abs(lo), np.abs(hi)), what) + np.abs(bias)
    return widen(z_lo, z_hi, mag, weight.shape[1] + 1)


def affine_transpose_interval(weight: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of W^T g over lo <= g <= hi (the backward pass through W)."""
    return affine_interval(weight.T, 0.0, lo, hi)


def magnitudes(weights: list[np.ndarray], biases: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Upper bounds on |z_j| from the absolute-value forward pass (used to size rounding errors)."""
    m = np.maximum(np.abs(lo), np.abs(hi))
    out = []
    for w, b in zip(weights, biases):
        m = abs_matmul(w, m, f"magnitude bounds through a {w.shape[0]} x {w.shape[1]} affine map") + np.abs(b)
        m = m * (1.0 + 1e-12) + 1e-300  # cover the rounding of this very computation
        out.append(m)
    return out
