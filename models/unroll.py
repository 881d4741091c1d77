"""Sparse matrices of 2-D convolution and average pooling, built from the kernel by index arithmetic.

Both act on a (C, H, W) tensor flattened in C-order and return a CSR matrix of shape
(outputs, inputs) with, per output row, the entries in increasing input order. Nothing is
evaluated on an identity basis: the memory is that of the nonzero entries (a 3x3 convolution has
9 C_in / groups entries per output), checked against the budget before it is allocated.

Conventions follow torch (which the importers used before): pads are (top, left, bottom, right);
pooling windows, their divisors (`count_include_pad`) and `ceil_mode` output sizes are those of
`torch.nn.functional.avg_pool2d`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from .scipy_import import sparse as sp  # scipy.sparse without numpy's lazy submodules (see there)

from .errors import ModelError
from .memory import allocating


def _index_dtype(*sizes: int) -> type:
    return np.int32 if max(sizes) < 2**31 - 1 else np.int64


def _valid_taps(out: int, size: int, k: int, stride: int, dilation: int, before: int) -> np.ndarray:
    """(out, k) mask: tap a of output i reads input i*stride - before + a*dilation inside [0, size)."""
    pos = np.arange(out)[:, None] * stride - before + np.arange(k)[None, :] * dilation
    return (pos >= 0) & (pos < size)


def _check_inside(pattern: np.ndarray, size: int, op: str) -> None:
    """Guard for the index arithmetic: scipy does not bound-check CSR indices when it densifies."""
    if pattern.size and (pattern.min() < 0 or pattern.max() >= size):
        raise AssertionError(f"{op}: unrolled index outside the input (certify bug, please report it)")


def conv2d_output(size: int, k: int, stride: int, dilation: int, before: int, after: int) -> int:
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1


def conv2d_matrix(
    kernel: np.ndarray,
    in_shape: Sequence[int],
    stride: Sequence[int],
    pads: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    op: str,
) -> tuple[sp.csr_array, tuple[int, int, int]]:
    """Matrix of the cross-correlation y[o, i, j] = sum K[o, c, a, b] xpad[g(o) C_g + c, ...].

    Returns (matrix of shape (O*OH*OW, C*H*W), (O, OH, OW)).
    """
    kernel = np.asarray(kernel, dtype=np.float64)
    n_out, c_group, kh, kw = kernel.shape
    c_in, h, w = (int(s) for s in in_shape)
    sh, sw = (int(s) for s in stride)
    dh, dw = (int(d) for d in dilation)
    top, left, bottom, right = (int(p) for p in pads)
    groups = int(groups)
    if groups < 1 or c_in != c_group * groups or n_out % groups:
        raise ModelError(
            f"{op}: kernel {list(kernel.shape)} with group={groups} does not fit an input with {c_in} channels"
        )
    if min(sh, sw, dh, dw) < 1 or min(top, left, bottom, right) < 0:
        raise ModelError(f"{op}: strides and dilations must be positive and pads non-negative")
    oh = conv2d_output(h, kh, sh, dh, top, bottom)
    ow = conv2d_output(w, kw, sw, dw, left, right)
    if oh < 1 or ow < 1:
        raise ModelError(f"{op}: the kernel does not fit the padded {h}x{w} input")
    va = _valid_taps(oh, h, kh, sh, dh, top)  # (oh, kh)
    vb = _valid_taps(ow, w, kw, sw, dw, left)  # (ow, kw)
    # one output channel's pattern (group 0): rows (i, j), entries (c, a, b) in increasing input order
    rows_a = (np.arange(oh)[:, None] * sh - top + np.arange(kh)[None, :] * dh)  # input row per (i, a)
    cols_b = (np.arange(ow)[:, None] * sw - left + np.arange(kw)[None, :] * dw)  # input column per (j, b)
    mask = va[:, None, None, :, None] & vb[None, :, None, None, :]  # (oh, ow, 1, kh, kw)
    mask = np.broadcast_to(mask, (oh, ow, c_group, kh, kw))
    chan = np.arange(c_group)[None, None, :, None, None]
    in_idx = (chan * h + rows_a[:, None, None, :, None]) * w + cols_b[None, :, None, None, :]
    pattern = in_idx[mask]  # entries of one output channel, row-major over (i, j)
    _check_inside(pattern, c_group * h * w, op)
    taps = np.broadcast_to(np.arange(c_group * kh * kw).reshape(1, 1, c_group, kh, kw), mask.shape)[mask]
    per_row = (c_group * va.sum(axis=1)[:, None] * vb.sum(axis=1)[None, :]).reshape(-1)  # (oh*ow,)
    nnz = n_out * pattern.size
    idx_t = _index_dtype(c_in * h * w, nnz)
    with allocating(nnz * (8 + np.dtype(idx_t).itemsize), f"the sparse matrix of {op} ({nnz} entries)"):
        data = np.empty((n_out, pattern.size))
        indices = np.empty((n_out, pattern.size), dtype=idx_t)
        per_group = n_out // groups
        offsets = (np.arange(n_out) // per_group) * (c_group * h * w)
        indices[:] = pattern[None, :] + offsets[:, None]
        data[:] = kernel.reshape(n_out, -1)[:, taps]
        indptr = np.zeros(n_out * oh * ow + 1, dtype=idx_t)
        np.cumsum(np.tile(per_row, n_out), out=indptr[1:])
        matrix = sp.csr_array((data.reshape(-1), indices.reshape(-1), indptr), shape=(n_out * oh * ow, c_in * h * w))
    matrix.has_sorted_indices = True
    return matrix, (n_out, oh, ow)


def _pool_output(size: int, k: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape (dilation 1)."""
    num = size + 2 * pad - (k - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = num // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_windows(out: int, size: int, k: int, stride: int, pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output: clipped window [start, end) and the padded window length torch divides by."""
    start = np.arange(out) * stride - pad
    end = np.minimum(start + k, size + pad)
    padded = end - start
    return np.maximum(start, 0), np.minimum(end, size), padded


def avg_pool2d_matrix(
    in_shape: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    pad: Sequence[int],
    count_include_pad: bool,
    ceil_mode: bool,
    op: str,
) -> tuple[sp.csr_array, np.ndarray, tuple[int, int, int]]:
    """(window-sum matrix with entries 1, divisor per output row, output shape (C, OH, OW)).

    The average is the window sum divided by the divisor, in that order (as torch computes it);
    an empty window (possible with ceil_mode) gives 0.
    """
    c, h, w = (int(s) for s in in_shape)
    kh, kw = (int(s) for s in kernel)
    sh, sw = (int(s) for s in stride)
    ph, pw = (int(p) for p in pad)
    if min(kh, kw, sh, sw) < 1:
        raise ModelError(f"{op}: kernel and strides must be positive")
    oh, ow = _pool_output(h, kh, sh, ph, ceil_mode), _pool_output(w, kw, sw, pw, ceil_mode)
    if oh < 1 or ow < 1:
        raise ModelError(f"{op}: the pooling window does not fit the {h}x{w} input")
    r0, r1, rp = _pool_windows(oh, h, kh, sh, ph)
    c0, c1, cp = _pool_windows(ow, w, kw, sw, pw)
    nr, nc = np.maximum(r1 - r0, 0), np.maximum(c1 - c0, 0)
    per_row = (nr[:, None] * nc[None, :]).reshape(-1)
    divisor = (rp[:, None] * cp[None, :]) if count_include_pad else (nr[:, None] * nc[None, :])
    divisor = np.where(per_row.reshape(oh, ow) > 0, divisor, 1).astype(np.float64).reshape(-1)
    # one channel's pattern: rows (i, j), window entries (a, b) in increasing input order
    pos_r = (np.arange(oh) * sh - ph)[:, None] + np.arange(kh)[None, :]
    pos_c = (np.arange(ow) * sw - pw)[:, None] + np.arange(kw)[None, :]
    mask = ((pos_r >= 0) & (pos_r < h))[:, None, :, None] & ((pos_c >= 0) & (pos_c < w))[None, :, None, :]
    pattern = (pos_r[:, None, :, None] * w + pos_c[None, :, None, :])[mask]
    _check_inside(pattern, h * w, op)
    nnz = c * pattern.size
    idx_t = _index_dtype(c * h * w, nnz)
    with allocating(nnz * (8 + np.dtype(idx_t).itemsize), f"the sparse matrix of {op} ({nnz} entries)"):
        indices = (pattern[None, :] + (np.arange(c) * h * w)[:, None]).astype(idx_t).reshape(-1)
        indptr = np.zeros(c * oh * ow + 1, dtype=idx_t)
        np.cumsum(np.tile(per_row, c), out=indptr[1:])
        matrix = sp.csr_array((np.ones(nnz), indices, indptr), shape=(c * oh * ow, c * h * w))
    matrix.has_sorted_indices = True
    return matrix, np.tile(divisor, c), (c, oh, ow)
