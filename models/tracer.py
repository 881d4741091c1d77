"""Lower a model to the IR by tracing affine functions of the current layer input.

A `Symbolic` tensor is an affine function of the current *frontier* h (the network input, or the
output of the last activation): value.ravel() = matrix @ h + const.ravel(). Linear operators act
on the rows of the matrix and on the constant; an activation closes the current affine layer and
starts a new frontier (whose matrix is the identity). Both the ONNX and the torch importer drive
this builder, so the two lower models identically.

Matrices stay sparse while operators allow it (`matrices`); convolution and pooling matrices are
built from the kernel by index arithmetic (`unroll`). The dense IR is allocated once, when the
trace is complete and its total size has been checked against the memory budget (`memory`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import matrices as mx
from .errors import ModelError, UnsupportedOperator
from .ir import Affine, ConvSpec, Layer, Network, ReLU
from .matrices import Matrix
from .memory import gb, require
from .unroll import avg_pool2d_matrix, conv2d_matrix


@dataclass
class Symbolic:
    """value.ravel() = matrix @ h + const.ravel(), with h the frontier number `frontier`."""

    matrix: Matrix  # (size, F): dense ndarray or CSR
    const: np.ndarray  # the value's shape
    frontier: int
    conv: ConvSpec | None = None  # set when value == conv(h) + bias exactly

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.const.shape)

    @property
    def size(self) -> int:
        return int(self.const.size)

    def positions(self) -> np.ndarray:
        """Flat row number of every element: index operators are applied to this array."""
        return np.arange(self.size).reshape(self.shape)

    def is_identity(self) -> bool:
        return self.size == self.matrix.shape[1] and not np.any(self.const) and mx.is_identity(self.matrix)

    def reshape(self, shape: Sequence[int]) -> "Symbolic":
        shape = tuple(int(s) for s in shape)
        return Symbolic(self.matrix, self.const.reshape(shape), self.frontier, self.conv)

    def take(self, src: np.ndarray, const: np.ndarray) -> "Symbolic":
        """Element k of the result is element src[k] of this tensor (-1: zero), plus `const`."""
        const = np.array(const, dtype=np.float64)
        if np.shape(src) != const.shape:  # an importer bug, not bad input
            raise AssertionError(f"row selection of shape {np.shape(src)} for a constant of shape {const.shape}")
        return Symbolic(mx.take_rows(self.matrix, src), const, self.frontier)

    def transpose(self, perm: Sequence[int]) -> "Symbolic":
        perm = tuple(int(p) for p in perm)
        return self.take(self.positions().transpose(perm), self.const.transpose(perm))

    def broadcast_to(self, shape: Sequence[int]) -> "Symbolic":
        shape = tuple(int(s) for s in shape)
        if shape == self.shape:
            return self
        view = (1,) * (len(shape) - len(self.shape)) + self.shape
        return self.take(np.broadcast_to(self.positions().reshape(view), shape), np.broadcast_to(self.const.reshape(view), shape))

    def scale(self, c: np.ndarray | float, divide: bool = False) -> "Symbolic":
        """Elementwise times (or divided by) a constant, with numpy broadcasting."""
        c = np.asarray(c, dtype=np.float64)
        t = self.broadcast_to(np.broadcast_shapes(self.shape, c.shape))
        cb = np.broadcast_to(c, t.shape)
        const = t.const / cb if divide else t.const * cb
        return Symbolic(mx.scale_rows(t.matrix, cb.reshape(-1), divide), np.ascontiguousarray(const), self.frontier)

    def neg(self) -> "Symbolic":
        return Symbolic(mx.negate(self.matrix), -self.const, self.frontier)

    def matmul(self, w: np.ndarray, bias: np.ndarray | None = None) -> "Symbolic":
        """value @ w (w: (K, M) constant, acting on the last axis), plus an optional bias."""
        w = _matrix_operand(w, "MatMul")
        if not self.shape or self.shape[-1] != w.shape[0]:
            raise ModelError(f"MatMul of a {list(self.shape)} tensor with a {list(w.shape)} weight")
        const = np.matmul(self.const, w)
        batch = self.size // w.shape[0]
        matrix = mx.left_multiply(mx.block_diagonal(np.ascontiguousarray(w.T), batch), self.matrix)
        if bias is not None:
            const = const + np.asarray(bias, dtype=np.float64)
        return Symbolic(matrix, np.ascontiguousarray(const), self.frontier)

    def left_matmul(self, w: np.ndarray) -> "Symbolic":
        """w @ value (w: (M, K) constant, acting on the first axis of a vector, else the second-to-last)."""
        w = _matrix_operand(w, "MatMul")
        k = w.shape[1]
        if len(self.shape) == 1:
            if self.shape[0] != k:
                raise ModelError(f"MatMul of a {list(w.shape)} weight with a {list(self.shape)} tensor")
            return Symbolic(mx.left_multiply(w, self.matrix), w @ self.const, self.frontier)
        if self.shape[-2] != k:
            raise ModelError(f"MatMul of a {list(w.shape)} weight with a {list(self.shape)} tensor")
        n = self.shape[-1]
        batch = self.size // (k * n)
        op = mx.block_diagonal(mx.kron_identity(w, n), batch)
        return Symbolic(mx.left_multiply(op, self.matrix), np.ascontiguousarray(np.matmul(w, self.const)), self.frontier)


def _matrix_operand(w: np.ndarray, op: str) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.ndim > 2 and all(s == 1 for s in w.shape[:-2]):
        w = w.reshape(w.shape[-2:])
    if w.ndim != 2:
        raise UnsupportedOperator(f"{op} with a {w.ndim}-D constant operand (only matrices are supported)")
    return w


@dataclass
class _PendingAffine:
    """A traced affine layer, densified when the whole trace is known to fit in memory."""

    matrix: Matrix
    bias: np.ndarray
    conv: ConvSpec | None


class Builder:
    """Accumulates IR layers while a model is traced."""

    def __init__(self, input_shape: Sequence[int], name: str) -> None:
        self.input_shape = tuple(int(s) for s in input_shape)
        self.name = name
        self._pending: list[_PendingAffine | ReLU] = []
        self.frontier = 0

    def input(self) -> Symbolic:
        return self._identity(self.input_shape)

    def _identity(self, shape: tuple[int, ...]) -> Symbolic:
        n = int(np.prod(shape))
        return Symbolic(mx.identity(n), np.zeros(shape), self.frontier)

    def _check(self, t: Symbolic, op: str) -> None:
        if t.frontier != self.frontier:
            raise UnsupportedOperator(
                f"{op} uses a tensor from before an activation (a skip/residual connection across "
                "a nonlinearity), which the feed-forward IR cannot represent"
            )

    def _emit_affine(self, t: Symbolic) -> None:
        self._pending.append(_PendingAffine(t.matrix, t.const.reshape(-1).copy(), t.conv))

    def flush(self, t: Symbolic, op: str) -> Symbolic:
        """Close the current affine map (no activation) so the next op sees the identity."""
        self._check(t, op)
        if t.is_identity():
            return t
        self._emit_affine(t)
        return self._new_frontier(t.shape)

    def _new_frontier(self, shape: tuple[int, ...]) -> Symbolic:
        self.frontier += 1
        return self._identity(shape)

    def relu(self, t: Symbolic, op: str = "Relu") -> Symbolic:
        self._check(t, op)
        last = self._pending[-1] if self._pending else None
        identity = t.is_identity()
        if not (identity and isinstance(last, ReLU)):  # relu(relu(x)) == relu(x)
            if not (identity and isinstance(last, _PendingAffine)):  # a flushed map is already emitted
                self._emit_affine(t)
            self._pending.append(ReLU(t.size))
        return self._new_frontier(t.shape)

    def add(self, a: Symbolic, b: Symbolic, op: str) -> Symbolic:
        self._check(a, op)
        self._check(b, op)
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = a.broadcast_to(shape), b.broadcast_to(shape)
        return Symbolic(mx.add(a.matrix, b.matrix), a.const + b.const, self.frontier)

    def add_const(self, t: Symbolic, c: np.ndarray, op: str) -> Symbolic:
        """t + c for a constant c; a bias added to a convolution keeps its structure."""
        self._check(t, op)
        c = np.asarray(c, dtype=np.float64)
        shape = np.broadcast_shapes(t.shape, c.shape)
        keep = t.conv if shape == t.shape else None
        t = t.broadcast_to(shape)
        return Symbolic(t.matrix, t.const + c, self.frontier, keep)

    def finish(self, t: Symbolic, output_shape: Sequence[int] | None = None) -> Network:
        """Close the trace and allocate the dense IR (after checking that it fits)."""
        self._check(t, "output")
        if not t.is_identity() or not self._pending:
            self._emit_affine(t)
        self._require_dense()
        layers: list[Layer] = []
        for i, entry in enumerate(self._pending):
            if isinstance(entry, _PendingAffine):
                shape = entry.matrix.shape
                weight = mx.to_dense(entry.matrix, f"layer {i} ({shape[0]} x {shape[1]})")
                self._pending[i] = None  # drop the sparse form as soon as the dense one exists
                layers.append(Affine(weight, entry.bias, conv=entry.conv))
            else:
                layers.append(entry)
        self._pending = []
        return Network(layers, self.input_shape, output_shape or t.shape, self.name)

    def _require_dense(self) -> None:
        affine = [(i, e) for i, e in enumerate(self._pending) if isinstance(e, _PendingAffine)]
        total = sum(mx.dense_nbytes(e.matrix.shape) for _, e in affine)
        held = sum(mx.nbytes(e.matrix) for _, e in affine if not mx.is_sparse(e.matrix))
        if not affine:
            return
        i, big = max(affine, key=lambda ie: mx.dense_nbytes(ie[1].matrix.shape))
        kind = "convolution" if big.conv is not None else "affine map"
        what = (
            f"the network's {len(affine)} unrolled affine layers (largest: layer {i}, a "
            f"{big.matrix.shape[0]} x {big.matrix.shape[1]} {kind} of {gb(mx.dense_nbytes(big.matrix.shape))})"
        )
        require(total, what, already=held)


# --------------------------------------------------------------------------- shared linear ops
def conv2d(
    t: Symbolic,
    builder: Builder,
    kernel: np.ndarray,
    bias: np.ndarray | None,
    stride: Sequence[int],
    pads: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    op: str,
) -> Symbolic:
    """2-D cross-correlation of a (1, C, H, W) or (C, H, W) tensor; pads = (top, left, bottom, right).

    The input is first made the identity on a fresh frontier, so the map is the convolution's
    own matrix and keeps its structure (`ConvSpec`) for structure-aware norm bounds.
    """
    kernel = np.asarray(kernel, dtype=np.float64)
    if kernel.ndim != 4:
        raise UnsupportedOperator(f"{op}: only 2-D convolutions are supported (kernel shape {kernel.shape})")
    batched = len(t.shape) == 4
    if not batched and len(t.shape) != 3:
        raise UnsupportedOperator(f"{op}: convolution input must be (N, C, H, W), got shape {list(t.shape)}")
    if batched and t.shape[0] != 1:
        raise UnsupportedOperator(f"{op}: batch size must be 1, got {t.shape[0]}")
    t = builder.flush(t, op)
    chw = t.shape[1:] if batched else t.shape
    top, left, bottom, right = (int(p) for p in pads)
    matrix, out_chw = conv2d_matrix(kernel, chw, stride, (top, left, bottom, right), dilation, groups, op)
    const = np.zeros(out_chw)
    if bias is not None:
        bias = np.asarray(bias, dtype=np.float64).reshape(-1)
        if bias.size != out_chw[0]:
            raise ModelError(f"{op}: {bias.size} biases for {out_chw[0]} output channels")
        const = const + bias.reshape(-1, 1, 1)
    spec = ConvSpec(
        kernel=kernel.copy(),
        stride=(int(stride[0]), int(stride[1])),
        pads=(top, left, bottom, right),
        dilation=(int(dilation[0]), int(dilation[1])),
        groups=int(groups),
        in_shape=tuple(int(s) for s in chw),
        out_shape=tuple(int(s) for s in out_chw),
    )
    if batched:
        const = const[None]
    return Symbolic(matrix, const, t.frontier, conv=spec)


def channel_affine(t: Symbolic, scale: np.ndarray, shift: np.ndarray, op: str) -> Symbolic:
    """x * scale[c] + shift[c] on the channel axis (axis 1 of (N, C, ...); axis 0 of a vector).

    Used for batch-norm; a preceding convolution absorbs it and keeps its structure.
    """
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    shift = np.asarray(shift, dtype=np.float64).reshape(-1)
    shape = t.shape
    axis = 1 if len(shape) >= 2 else 0
    if shape[axis] != scale.size or shift.size != scale.size:
        raise ModelError(f"{op}: {scale.size} channel parameters for {shape[axis]} channels")
    view = [1] * len(shape)
    view[axis] = scale.size
    s, b = scale.reshape(view), shift.reshape(view)
    scaled = t.scale(s)
    out = Symbolic(scaled.matrix, scaled.const + b, t.frontier)
    cs = t.conv
    # the kernel absorbs the scale only when axis 1 is still the convolution's channel axis (a
    # reshape may have moved it; then the structure is dropped and the dense map stays exact)
    if cs is not None and len(shape) == 4 and tuple(shape[1:]) == tuple(cs.out_shape):
        out.conv = ConvSpec(cs.kernel * scale.reshape(-1, 1, 1, 1), cs.stride, cs.pads, cs.dilation, cs.groups, cs.in_shape, cs.out_shape)
    return out


def avg_pool2d(
    t: Symbolic,
    kernel: Sequence[int],
    stride: Sequence[int],
    pads: Sequence[int],
    count_include_pad: bool,
    ceil_mode: bool,
    op: str,
) -> Symbolic:
    """Average pooling of a (1, C, H, W) or (C, H, W) tensor; pads = (top, left, bottom, right)."""
    if len(kernel) != 2:
        raise UnsupportedOperator(f"{op}: only 2-D average pooling is supported")
    batched = len(t.shape) == 4
    if not batched and len(t.shape) != 3:
        raise UnsupportedOperator(f"{op}: pooling input must be (N, C, H, W), got shape {list(t.shape)}")
    if batched and t.shape[0] != 1:
        raise UnsupportedOperator(f"{op}: batch size must be 1, got {t.shape[0]}")
    chw = t.shape[1:] if batched else t.shape
    top, left, bottom, right = (int(p) for p in pads)
    if top != bottom or left != right:
        raise UnsupportedOperator(f"{op}: asymmetric pooling pads {list(pads)} are not supported")
    if top > kernel[0] // 2 or left > kernel[1] // 2:
        raise UnsupportedOperator(f"{op}: pooling pad larger than half the kernel")
    sums, divisor, out_chw = avg_pool2d_matrix(chw, kernel, stride, (top, left), count_include_pad, ceil_mode, op)
    matrix = mx.scale_rows(mx.left_multiply(sums, t.matrix), divisor, divide=True)
    const = (sums @ t.const.reshape(-1)) / divisor
    shape = ((1,) if batched else ()) + tuple(out_chw)
    return Symbolic(matrix, const.reshape(shape), t.frontier)
