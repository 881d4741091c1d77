"""Products with the positive, negative and absolute parts of a weight matrix, within the memory budget.

Interval arithmetic through W needs W+ = max(W, 0), W- = min(W, 0) and |W|: three copies of the
largest layer (4.3 GB each for a 16384 x 32768 convolution). Every helper here computes its product
in one piece when its working arrays fit in the budget (`models.memory.block_rows`: then the float
results are exactly those of the one-line numpy expression) and otherwise in blocks of rows (of the
output), each block's copies of W+ / W- / |W| dropped before the next; the results then differ from
the one-piece ones only by the summation order of BLAS, which the rounding allowances of every
caller cover (they bound any order). Outputs that cannot fit are refused (`TooLarge`, exit 2)
before anything is allocated.
"""

from __future__ import annotations

import numpy as np

from models.memory import block_rows

F8 = 8  # bytes per float64


def _slices(n: int, k: int) -> list[slice]:
    return [slice(s, min(s + k, n)) for s in range(0, n, k)]


def _out(r: int, X: np.ndarray) -> tuple[tuple[int, ...], int]:
    """Shape of W @ X for W with r rows (numpy's matmul, X (n,), (n, k) or stacked (..., n, k)), and
    the axis of the result that W's rows index."""
    if X.ndim <= 2:
        return (r,) + X.shape[1:], 0
    return X.shape[:-2] + (r, X.shape[-1]), X.ndim - 2


def _at(axis: int, s: slice) -> tuple:
    return (slice(None),) * axis + (s,)


def interval_matmul(W: np.ndarray, L: np.ndarray, U: np.ndarray, what: str,
                    alternative: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(W+ L + W- U, W+ U + W- L) for L <= U ((n,), (n, k) or stacked (..., n, k)): bounds of W x
    over x in [L, U]."""
    r, n = W.shape
    shape, axis = _out(r, L)
    k = int(np.prod(shape)) // max(r, 1)
    rows = block_rows(r, F8 * (2 * n + 6 * k), what, fixed=2 * F8 * r * k, alternative=alternative)
    if rows >= r:
        Wp, Wn = np.maximum(W, 0.0), np.minimum(W, 0.0)
        return Wp @ L + Wn @ U, Wp @ U + Wn @ L
    lo, hi = np.empty(shape), np.empty(shape)
    for s in _slices(r, rows):
        Wp, Wn = np.maximum(W[s], 0.0), np.minimum(W[s], 0.0)
        lo[_at(axis, s)], hi[_at(axis, s)] = Wp @ L + Wn @ U, Wp @ U + Wn @ L
        del Wp, Wn  # before the next block's copies exist
    return lo, hi


def abs_matmul(W: np.ndarray, X: np.ndarray, what: str, alternative: str = "") -> np.ndarray:
    """|W| @ X (X (n,) or (n, k))."""
    r, n = W.shape
    shape, axis = _out(r, X)
    k = int(np.prod(shape)) // max(r, 1)
    rows = block_rows(r, F8 * (n + 2 * k), what, fixed=F8 * r * k, alternative=alternative)
    if rows >= r:
        return np.abs(W) @ X
    out = np.empty(shape)
    for s in _slices(r, rows):
        out[_at(axis, s)] = np.abs(W[s]) @ X
    return out


def right_interval_matmul(GL: np.ndarray, GU: np.ndarray, W: np.ndarray, what: str,
                          alternative: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(GL W+ + GU W-, GU W+ + GL W-) for GL <= GU (..., r): bounds of g W over g in [GL, GU]."""
    r, n = W.shape
    lead = int(np.prod(GL.shape[:-1]))
    cols = block_rows(n, F8 * (2 * r + 6 * lead), what, fixed=2 * F8 * lead * n, alternative=alternative)
    if cols >= n:
        Wp, Wn = np.maximum(W, 0.0), np.minimum(W, 0.0)
        return GL @ Wp + GU @ Wn, GU @ Wp + GL @ Wn
    lo = np.empty(GL.shape[:-1] + (n,))
    hi = np.empty(GL.shape[:-1] + (n,))
    for s in _slices(n, cols):
        Wp, Wn = np.maximum(W[:, s], 0.0), np.minimum(W[:, s], 0.0)
        lo[..., s], hi[..., s] = GL @ Wp + GU @ Wn, GU @ Wp + GL @ Wn
        del Wp, Wn  # before the next block's copies exist
    return lo, hi


def right_abs_matmul(X: np.ndarray, W: np.ndarray, what: str, alternative: str = "") -> np.ndarray:
    """X @ |W| (X (..., r))."""
    r, n = W.shape
    lead = int(np.prod(X.shape[:-1]))
    cols = block_rows(n, F8 * (r + 2 * lead), what, fixed=F8 * lead * n, alternative=alternative)
    if cols >= n:
        return X @ np.abs(W)
    out = np.empty(X.shape[:-1] + (n,))
    for s in _slices(n, cols):
        out[..., s] = X @ np.abs(W[:, s])
    return out


__all__ = ["abs_matmul", "interval_matmul", "right_abs_matmul", "right_interval_matmul"]
