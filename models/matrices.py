"""The matrices of the ONNX/torch tracer: dense float64 arrays or scipy CSR arrays.

While a model is traced, every tensor is an affine function `matrix @ h + const` of the current
layer input h (see `tracer`). Right after an activation that matrix is the identity, and most
operators (convolution, pooling, padding, slicing, transposes, batch-norm) keep it sparse, so it
is stored in CSR form; only products with dense weights (Gemm, MatMul) make it dense. The IR
itself stays dense (`Affine.weight`): a matrix is densified once, at its final size, when the
traced layer is emitted.

Every operation keeps the float64 values exact where the identity-basis evaluation was exact
(row selections copy values; a row scale is one multiplication per entry, as before), and every
dense allocation is checked against the memory budget first (`memory.allocating`).
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
from .scipy_import import sparse as sp  # scipy.sparse without numpy's lazy submodules (see there)

from .memory import allocating

Matrix = Union[np.ndarray, sp.csr_array]

# a CSR matrix denser than this is stored dense (CSR costs 12-16 bytes per entry, dense 8)
DENSE_ABOVE = 0.5


def identity(n: int) -> sp.csr_array:
    return sp.csr_array(sp.eye_array(n, format="csr", dtype=np.float64))


def is_sparse(m: Matrix) -> bool:
    return sp.issparse(m)


def nbytes(m: Matrix) -> int:
    """Bytes held by `m` (CSR: data, indices and row pointers)."""
    if is_sparse(m):
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)
    return int(m.nbytes)


def dense_nbytes(shape: Sequence[int]) -> int:
    return 8 * int(shape[0]) * int(shape[1])


def _label(shape: Sequence[int]) -> str:
    return f"a {shape[0]} x {shape[1]} matrix"


def is_identity(m: Matrix) -> bool:
    """Exactly the identity (checked without allocating an n x n array)."""
    n, f = m.shape
    if n != f:
        return False
    if is_sparse(m):
        return (
            m.nnz == n
            and np.array_equal(m.indptr, np.arange(n + 1))
            and np.array_equal(m.indices, np.arange(n))
            and bool(np.all(m.data == 1.0))
        )
    return bool(np.all(np.diagonal(m) == 1.0)) and int(np.count_nonzero(m)) == n


def to_dense(m: Matrix, what: str | None = None) -> np.ndarray:
    """C-contiguous float64 copy (no copy for a dense matrix that already is)."""
    if not is_sparse(m):
        return np.ascontiguousarray(m, dtype=np.float64)
    with allocating(dense_nbytes(m.shape), what or _label(m.shape)):
        return m.toarray()


def _compact(m: Matrix) -> Matrix:
    if is_sparse(m) and m.nnz > DENSE_ABOVE * m.shape[0] * m.shape[1]:
        return to_dense(m)
    return m


def take_rows(m: Matrix, src: np.ndarray) -> Matrix:
    """Rows m[src[k]] in order; src[k] = -1 gives a zero row (constant padding)."""
    src = np.asarray(src, dtype=np.int64).reshape(-1)
    if is_sparse(m):
        keep = src >= 0
        rows = np.flatnonzero(keep)
        sel = sp.csr_array((np.ones(rows.size), (rows, src[keep])), shape=(src.size, m.shape[0]))
        return sel @ m  # one entry per row of `sel`: values are copied exactly
    with allocating(dense_nbytes((src.size, m.shape[1])), _label((src.size, m.shape[1]))):
        out = m[np.maximum(src, 0)]
        out[src < 0] = 0.0
    return out


def scale_rows(m: Matrix, c: np.ndarray, divide: bool = False) -> Matrix:
    """Row k times c[k] (or divided by c[k]): one float64 operation per entry."""
    c = np.asarray(c, dtype=np.float64).reshape(-1)
    if is_sparse(m):
        rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
        data = m.data / c[rows] if divide else m.data * c[rows]
        return sp.csr_array((data, m.indices.copy(), m.indptr.copy()), shape=m.shape)
    with allocating(dense_nbytes(m.shape), _label(m.shape)):
        return m / c[:, None] if divide else m * c[:, None]


def add(a: Matrix, b: Matrix) -> Matrix:
    if is_sparse(a) and is_sparse(b):
        return _compact(sp.csr_array(a + b))
    with allocating(dense_nbytes(a.shape), _label(a.shape)):
        if is_sparse(a):
            a, b = b, a
        return a + b if not is_sparse(b) else np.asarray(b + a)  # dense + sparse


def negate(m: Matrix) -> Matrix:
    if is_sparse(m):
        return sp.csr_array((-m.data, m.indices.copy(), m.indptr.copy()), shape=m.shape)
    with allocating(dense_nbytes(m.shape), _label(m.shape)):
        return -m


def left_multiply(a: Matrix, m: Matrix) -> Matrix:
    """a @ m; dense when either factor is dense.

    With m the identity (the common case: a weight applied right after an activation) the result
    is a copy of a, exactly as the identity-basis evaluation gave.
    """
    shape = (a.shape[0], m.shape[1])
    if is_sparse(a) and is_sparse(m):
        return _compact(sp.csr_array(a @ m))
    if is_identity(m):
        return a.copy() if is_sparse(a) else np.array(a, dtype=np.float64, order="C", copy=True)
    with allocating(2 * dense_nbytes(shape), _label(shape)):
        if is_sparse(m):  # dense a: (m^T a^T)^T, then one C-ordered copy
            return np.ascontiguousarray((m.T @ np.asarray(a, dtype=np.float64).T).T)
        return np.ascontiguousarray(a @ m)


def vstack(parts: Sequence[Matrix]) -> Matrix:
    if all(is_sparse(p) for p in parts):
        return sp.csr_array(sp.vstack(parts, format="csr"))
    shape = (sum(p.shape[0] for p in parts), parts[0].shape[1])
    with allocating(dense_nbytes(shape), _label(shape)):
        return np.vstack([p.toarray() if is_sparse(p) else p for p in parts])


def block_diagonal(block: Matrix, copies: int) -> Matrix:
    """kron(I_copies, block) as CSR (a weight applied along the last axis of a batched tensor)."""
    if copies == 1:
        return block
    return sp.csr_array(sp.kron(sp.eye_array(copies, format="csr"), sp.csr_array(block), format="csr"))


def kron_identity(block: np.ndarray, n: int) -> sp.csr_array:
    """kron(block, I_n) as CSR (a weight applied along the second-to-last axis)."""
    return sp.csr_array(sp.kron(sp.csr_array(np.asarray(block, dtype=np.float64)), sp.eye_array(n, format="csr"), format="csr"))
