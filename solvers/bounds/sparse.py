"""Products with a layer's weight that skip its zeros: unrolled convolutions as CSR matrices.

The IR stores a convolution as its dense (C_out H_out W_out) x (C_in H W) matrix; on CIFAR nets 1-6%
of it is non-zero, and the bounds of the ReLU-split search (`beta`, the symbolic re-bound, the
interval step) spent most of their time multiplying zeros. `rmul(X, W)` is X @ W and
`rmul_abs(X, W)` is X @ |W| for a read-only weight W (or a view of one, e.g. W.T): when W is mostly
zeros the product runs on a CSR copy of W^T built once per weight, layout and dtype (cached while
the weight lives), otherwise on the dense array (or its cached copy in the requested dtype).

Soundness: a sparse product sums the same non-zero terms as the dense one in another order and
leaves out exact zeros (0 * x is an exact 0, x finite), so every caller's rounding allowance,
which bounds any summation order of n terms by gamma(n) times the sum of absolute values, covers
both. Writeable arrays are never cached (their contents could change): they take the dense path.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

#: a weight with at most this share of non-zeros (and more than MIN_SIZE entries) goes sparse:
#: below it scipy's CSR product beat float32 BLAS by 1.6x (6% dense) to 7x (1.5% dense) on the
#: oval21 convolutions at 16-400 rows
SPARSE_DENSITY = 0.1
MIN_SIZE = 4096

_cache: dict[tuple, "_Ops"] = {}


def mostly_zeros(size: int, nonzero: int) -> bool:
    """Is a weight of `size` entries, `nonzero` of them non-zero, multiplied faster as CSR?"""
    return size > MIN_SIZE and nonzero <= SPARSE_DENSITY * size


class _Ops:
    """One weight's products in one dtype: a dense array, or CSR copies of W^T (and |W|^T)."""

    def __init__(self, W: np.ndarray, dtype: np.dtype) -> None:
        nonzero = int(np.count_nonzero(W))
        self.sparse = mostly_zeros(W.size, nonzero)
        self.dense: np.ndarray | None = None
        self.t: Any = None
        self.parts: dict[str, Any] = {}
        if self.sparse:
            from models.scipy_import import import_scipy

            sp = import_scipy("scipy.sparse")
            self.t = sp.csr_matrix(np.asarray(W.T, dtype=dtype))
        elif W.dtype != dtype:  # (the weight itself is never held: the cache must not keep it alive)
            self.dense = np.ascontiguousarray(W, dtype=dtype)
        self.dense_abs: np.ndarray | None = None

    def mul(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        if self.sparse:
            return self._mul(X, self.t)
        return X @ (W if self.dense is None else self.dense)

    def mul_abs(self, X: np.ndarray, W: np.ndarray) -> np.ndarray:
        if self.sparse:
            return self._mul(X, self.part("abs"))
        if self.dense is None:
            return X @ np.abs(W)
        if self.dense_abs is None:
            self.dense_abs = np.abs(self.dense)
        return X @ self.dense_abs

    def part(self, kind: str):
        """CSR of |W|^T, max(W, 0)^T or min(W, 0)^T ("abs", "pos", "neg"), built once."""
        got = self.parts.get(kind)
        if got is None:
            t = self.t
            got = abs(t) if kind == "abs" else (t.maximum(0.0) if kind == "pos" else t.minimum(0.0)).tocsr()
            self.parts[kind] = got
        return got

    @staticmethod
    def _mul(X: np.ndarray, M) -> np.ndarray:
        lead = X.shape[:-1]
        X2 = X.reshape(-1, X.shape[-1])
        out = np.asarray(M @ X2.T).T  # (W^T X^T)^T = X W
        return out.reshape(lead + (out.shape[-1],))


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _ops(W: np.ndarray, dtype) -> _Ops | None:
    """The cached products of W in `dtype`, None for a writeable W (not cacheable)."""
    if W.flags.writeable or W.ndim != 2:
        return None
    dtype = np.dtype(dtype)
    key = (W.__array_interface__["data"][0], W.shape, W.strides, W.dtype.str, dtype.str)
    ops = _cache.get(key)
    if ops is None:
        root = _root(W)
        if root.flags.writeable:
            return None
        ops = _cache[key] = _Ops(W, dtype)
        weakref.finalize(root, _cache.pop, key, None)  # the memory may hold another array later
    return ops


def rmul(X: np.ndarray, W: np.ndarray, dtype=None) -> np.ndarray:
    """X @ W (X (..., n), W (n, m)); with `dtype`, W taken in that dtype (X should be in it too)."""
    ops = _ops(W, X.dtype if dtype is None else dtype)
    if ops is None:
        return X @ (W if dtype is None else np.asarray(W, dtype=dtype))
    return ops.mul(X, W)


def multiplier(W: np.ndarray, dtype) -> Callable[[np.ndarray], np.ndarray]:
    """X -> X @ W with W in `dtype`, as `rmul`, its cache look-up (several microseconds: a cost on
    small nets, where one bound multiplies thousands of times) done once."""
    ops = _ops(W, dtype)
    if ops is None:
        Wd = np.asarray(W, dtype=dtype)
        return lambda X: X @ Wd
    return lambda X: ops.mul(X, W)


def rmul_abs(X: np.ndarray, W: np.ndarray, dtype=None) -> np.ndarray:
    """X @ |W| (as `rmul`)."""
    ops = _ops(W, X.dtype if dtype is None else dtype)
    if ops is None:
        return X @ np.abs(W if dtype is None else np.asarray(W, dtype=dtype))
    return ops.mul_abs(X, W)


def rmul_part(X: np.ndarray, W: np.ndarray, kind: str) -> np.ndarray:
    """X @ max(W, 0) ("pos"), X @ min(W, 0) ("neg") or X @ |W| ("abs") for a sparse W (`is_sparse`)."""
    ops = _ops(W, X.dtype)
    assert ops is not None and ops.sparse
    return ops._mul(X, ops.part(kind))


def csr_t(W: np.ndarray, dtype=np.float64):
    """The cached CSR copy of W^T when `rmul` treats W as sparse, else None."""
    ops = _ops(W, dtype)
    return ops.t if ops is not None and ops.sparse else None


def sparse_product(X: np.ndarray, M_t) -> np.ndarray:
    """X @ M for M given as the CSR matrix M_t = M^T (X (..., n))."""
    return _Ops._mul(X, M_t)


def is_sparse(W: np.ndarray) -> bool:
    """Does `rmul` multiply W as a sparse matrix?"""
    ops = _ops(W, W.dtype)
    return ops is not None and ops.sparse


__all__ = ["SPARSE_DENSITY", "csr_t", "is_sparse", "mostly_zeros", "multiplier", "rmul", "rmul_abs", "rmul_part", "sparse_product"]
