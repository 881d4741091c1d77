"""Lower a model to the IR by tracing affine functions of the current layer input.

A `Symbolic` tensor is an affine function of the current *frontier* h (the network input, or the
output of the last activation): value = sum_j h_j * basis[j] + const. Linear operators act on the
basis (the frontier index is a leading batch axis) and on the constant; an activation closes the
current affine layer and starts a new frontier. Both the ONNX and the torch importer drive this
builder, so the two lower models identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .errors import ModelError, UnsupportedOperator
from .ir import Affine, ConvSpec, Layer, Network, ReLU


@dataclass
class Symbolic:
    """value = tensordot(h, basis, 1) + const, with h the frontier `frontier` of the builder."""

    basis: np.ndarray  # (F, *shape)
    const: np.ndarray  # shape
    frontier: int
    conv: ConvSpec | None = None  # set when value == conv(h) + bias exactly (basis is a conv of I)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.const.shape)

    def map_linear(self, fn: Callable[[np.ndarray], np.ndarray], bias: np.ndarray | float | None = None) -> "Symbolic":
        """Apply the linear map `fn` (acting on the trailing axes, batched over axis 0) plus bias."""
        basis = fn(self.basis)
        const = fn(self.const[None])[0]
        if bias is not None:
            const = const + bias
        return Symbolic(basis, const, self.frontier)

    def reshape(self, shape: Sequence[int]) -> "Symbolic":
        shape = tuple(int(s) for s in shape)
        return Symbolic(self.basis.reshape((-1,) + shape), self.const.reshape(shape), self.frontier, self.conv)

    def is_identity(self) -> bool:
        f = self.basis.shape[0]
        return (
            self.basis[0].size == f
            and not np.any(self.const)
            and np.array_equal(self.basis.reshape(f, f), np.eye(f))
        )


class Builder:
    """Accumulates IR layers while a model is traced."""

    def __init__(self, input_shape: Sequence[int], name: str) -> None:
        self.input_shape = tuple(int(s) for s in input_shape)
        self.name = name
        self.layers: list[Layer] = []
        self.frontier = 0
        self._width = int(np.prod(self.input_shape))

    def input(self) -> Symbolic:
        n = self._width
        return Symbolic(np.eye(n).reshape((n,) + self.input_shape), np.zeros(self.input_shape), self.frontier)

    def _check(self, t: Symbolic, op: str) -> None:
        if t.frontier != self.frontier:
            raise UnsupportedOperator(
                f"{op} uses a tensor from before an activation (a skip/residual connection across "
                "a nonlinearity), which the feed-forward IR cannot represent"
            )

    def _emit_affine(self, t: Symbolic) -> None:
        f = t.basis.shape[0]
        weight = t.basis.reshape(f, -1).T
        self.layers.append(Affine(weight, t.const.reshape(-1), conv=t.conv))

    def flush(self, t: Symbolic, op: str) -> Symbolic:
        """Close the current affine map (no activation) so the next op sees the identity."""
        self._check(t, op)
        if t.is_identity():
            return t
        self._emit_affine(t)
        return self._new_frontier(t.shape)

    def _new_frontier(self, shape: tuple[int, ...]) -> Symbolic:
        self.frontier += 1
        n = int(np.prod(shape))
        return Symbolic(np.eye(n).reshape((n,) + shape), np.zeros(shape), self.frontier)

    def relu(self, t: Symbolic, op: str = "Relu") -> Symbolic:
        self._check(t, op)
        last = self.layers[-1] if self.layers else None
        identity = t.is_identity()
        if not (identity and isinstance(last, ReLU)):  # relu(relu(x)) == relu(x)
            if not (identity and isinstance(last, Affine)):  # a flushed map is already emitted
                self._emit_affine(t)
            self.layers.append(ReLU(int(np.prod(t.shape))))
        return self._new_frontier(t.shape)

    def add(self, a: Symbolic, b: Symbolic, op: str) -> Symbolic:
        self._check(a, op)
        self._check(b, op)
        shape = np.broadcast_shapes(a.shape, b.shape)
        f = a.basis.shape[0]
        basis = np.broadcast_to(a.basis, (f,) + shape) + np.broadcast_to(b.basis, (f,) + shape)
        return Symbolic(basis, a.const + b.const, self.frontier)

    def add_const(self, t: Symbolic, c: np.ndarray, op: str) -> Symbolic:
        """t + c for a constant c; a bias added to a convolution keeps its structure."""
        self._check(t, op)
        c = np.asarray(c, dtype=np.float64)
        shape = np.broadcast_shapes(t.shape, c.shape)
        basis = np.broadcast_to(t.basis, (t.basis.shape[0],) + shape)
        keep = t.conv if shape == t.shape else None
        return Symbolic(basis, t.const + c, self.frontier, keep)

    def finish(self, t: Symbolic, output_shape: Sequence[int] | None = None) -> Network:
        self._check(t, "output")
        if not t.is_identity() or not self.layers:
            self._emit_affine(t)
        return Network(self.layers, self.input_shape, output_shape or t.shape, self.name)


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

    The input is first made the identity on a fresh frontier so that the result keeps its
    convolution structure (`ConvSpec`) for structure-aware norm bounds.
    """
    import torch
    import torch.nn.functional as F

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
    k = torch.from_numpy(kernel)

    def apply(x: np.ndarray) -> np.ndarray:
        xt = torch.from_numpy(np.ascontiguousarray(x.reshape((-1,) + chw)))
        xt = F.pad(xt, (left, right, top, bottom))
        y = F.conv2d(xt, k, None, tuple(stride), 0, tuple(dilation), groups)
        return y.numpy()

    basis = apply(t.basis)
    out_chw = basis.shape[1:]
    const = np.zeros(out_chw)
    if bias is not None:
        const = const + np.asarray(bias, dtype=np.float64).reshape(-1, 1, 1)
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
        basis = basis[:, None]
        const = const[None]
    return Symbolic(basis, const, t.frontier, conv=spec)


def channel_affine(t: Symbolic, scale: np.ndarray, shift: np.ndarray, op: str) -> Symbolic:
    """x * scale[c] + shift[c] on the channel axis (axis 1 of (N, C, ...); axis 0 of a vector).

    Used for batch-norm; a preceding convolution absorbs it and keeps its structure.
    """
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    shift = np.asarray(shift, dtype=np.float64).reshape(-1)
    shape = t.shape
    axis = 1 if len(shape) >= 2 else 0
    if shape[axis] != scale.size:
        raise ModelError(f"{op}: {scale.size} channel parameters for {shape[axis]} channels")
    view = [1] * len(shape)
    view[axis] = scale.size
    s, b = scale.reshape(view), shift.reshape(view)
    out = Symbolic(t.basis * s[None], t.const * s + b, t.frontier)
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
    import torch
    import torch.nn.functional as F

    if len(kernel) != 2:
        raise UnsupportedOperator(f"{op}: only 2-D average pooling is supported")
    batched = len(t.shape) == 4
    chw = t.shape[1:] if batched else t.shape
    top, left, bottom, right = (int(p) for p in pads)
    if top != bottom or left != right:
        raise UnsupportedOperator(f"{op}: asymmetric pooling pads {list(pads)} are not supported")
    if top > kernel[0] // 2 or left > kernel[1] // 2:
        raise UnsupportedOperator(f"{op}: pooling pad larger than half the kernel")

    def apply(x: np.ndarray) -> np.ndarray:
        xt = torch.from_numpy(np.ascontiguousarray(x.reshape((-1,) + tuple(chw))))
        y = F.avg_pool2d(xt, tuple(kernel), tuple(stride), (top, left), ceil_mode, count_include_pad)
        return y.numpy()

    basis = apply(t.basis)
    const = apply(t.const[None])[0]
    if batched:
        basis = basis[:, None]
        const = const[None]
    return Symbolic(basis, const, t.frontier)
