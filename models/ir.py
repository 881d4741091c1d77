"""Network IR: a feed-forward sequence of affine maps and piecewise-linear activations in float64.

Every importer (ONNX, torch) lowers a model to this IR; every certificate is computed on it.
Convolutions, pooling, batch-norm and input normalisation are unrolled into dense affine maps;
an affine layer produced from a convolution keeps a `ConvSpec` so structure-aware bounds
(Gram iteration, FFT) can use it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterator, Sequence, Union

import numpy as np

from . import memory
from .errors import BadInput, ModelError


@dataclass(frozen=True)
class ConvSpec:
    """Structure of an affine layer that is a 2-D convolution (cross-correlation) of its input.

    `kernel` has shape (C_out, C_in / groups, kH, kW); `pads` is (top, left, bottom, right).
    Input and output are flattened in C-order from `in_shape` = (C_in, H, W) and `out_shape`.
    """

    kernel: np.ndarray
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilation: tuple[int, int]
    groups: int
    in_shape: tuple[int, int, int]
    out_shape: tuple[int, int, int]


@dataclass(frozen=True, eq=False)
class Affine:
    """y = W x + b with W of shape (out, in)."""

    weight: np.ndarray
    bias: np.ndarray
    conv: ConvSpec | None = None
    kind: str = field(default="affine", init=False)

    def __post_init__(self) -> None:
        w = np.ascontiguousarray(self.weight, dtype=np.float64)
        b = np.ascontiguousarray(self.bias, dtype=np.float64).reshape(-1)
        if w.ndim != 2:
            raise ModelError(f"affine weight must be a matrix, got shape {w.shape}")
        if b.shape[0] != w.shape[0]:
            raise ModelError(f"affine bias has {b.shape[0]} entries for {w.shape[0]} outputs")
        w.setflags(write=False)
        b.setflags(write=False)
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "bias", b)

    @property
    def in_dim(self) -> int:
        return self.weight.shape[1]

    @property
    def out_dim(self) -> int:
        return self.weight.shape[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x @ self.weight.T + self.bias


@dataclass(frozen=True)
class ReLU:
    """Elementwise max(x, 0) on `size` neurons."""

    size: int
    kind: str = field(default="relu", init=False)

    @property
    def in_dim(self) -> int:
        return self.size

    @property
    def out_dim(self) -> int:
        return self.size

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0.0)


Layer = Union[Affine, ReLU]


def hash_values(h, values: np.ndarray, block_bytes: int = 1 << 24) -> None:
    """Feed float64 values to a hash in row blocks (a large matrix is never copied at once); -0.0
    is hashed as 0.0, since the two compute the same function."""
    flat = values.reshape(values.shape[0], -1) if values.ndim > 1 else values.reshape(1, -1)
    rows = max(1, block_bytes // (8 * max(flat.shape[1], 1)))
    for start in range(0, flat.shape[0], rows):
        h.update((np.asarray(flat[start:start + rows], dtype="<f8") + 0.0).tobytes())


def _all_finite(values: np.ndarray, block_bytes: int = 1 << 24) -> bool:
    """No NaN or inf, checked in row blocks (the boolean mask of a large matrix is never built whole)."""
    flat = values.reshape(values.shape[0], -1) if values.ndim > 1 else values.reshape(1, -1)
    rows = max(1, block_bytes // max(flat.shape[1], 1))
    return all(bool(np.isfinite(flat[s:s + rows]).all()) for s in range(0, flat.shape[0], rows))


class Network:
    """A feed-forward network: `layers` applied in order to a flat float64 input vector.

    `input_shape` is the tensor shape the source model expects (batch dimension included when the
    source had one, fixed to 1); the IR works on its C-order flattening of length `input_dim`.
    """

    def __init__(
        self,
        layers: Sequence[Layer],
        input_shape: Sequence[int] | None = None,
        output_shape: Sequence[int] | None = None,
        name: str = "network",
    ) -> None:
        self.layers: tuple[Layer, ...] = tuple(layers)
        if not self.layers:
            raise ModelError("a network needs at least one layer")
        first = self.layers[0].in_dim
        self.input_shape = tuple(int(s) for s in (input_shape or (first,)))
        self.output_shape = tuple(int(s) for s in (output_shape or (self.layers[-1].out_dim,)))
        self.name = name
        self._validate()
        memory.track(self)  # its arrays count as held against CERTIFY_MEMORY_LIMIT while it lives

    # ----------------------------------------------------------------------------- structure
    def _validate(self) -> None:
        if int(np.prod(self.input_shape)) != self.layers[0].in_dim:
            raise ModelError(
                f"input shape {list(self.input_shape)} does not match the first layer's "
                f"{self.layers[0].in_dim} inputs"
            )
        for i, (a, b) in enumerate(zip(self.layers, self.layers[1:])):
            if a.out_dim != b.in_dim:
                raise ModelError(
                    f"layer {i} ({a.kind}) has {a.out_dim} outputs but layer {i + 1} "
                    f"({b.kind}) takes {b.in_dim}"
                )
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Affine):
                for what, arr in (("weights", layer.weight), ("bias", layer.bias)):
                    if not _all_finite(arr):
                        bad = "NaN" if np.isnan(arr).any() else "inf"
                        raise ModelError(
                            f"layer {i} (affine) {what} contain {bad}; the model cannot be "
                            "certified: re-export it with finite parameters"
                        )
        if int(np.prod(self.output_shape)) != self.output_dim:
            raise ModelError(
                f"output shape {list(self.output_shape)} does not match {self.output_dim} outputs"
            )

    @property
    def input_dim(self) -> int:
        return self.layers[0].in_dim

    @property
    def output_dim(self) -> int:
        return self.layers[-1].out_dim

    @property
    def relu_count(self) -> int:
        return sum(layer.size for layer in self.layers if isinstance(layer, ReLU))

    @property
    def relu_sizes(self) -> list[int]:
        return [layer.size for layer in self.layers if isinstance(layer, ReLU)]

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        parts = []
        for layer in self.layers:
            if isinstance(layer, Affine):
                parts.append(f"Affine({layer.in_dim}->{layer.out_dim}{', conv' if layer.conv else ''})")
            else:
                parts.append(f"ReLU({layer.size})")
        return f"Network({self.name!r}: " + ", ".join(parts) + ")"

    def describe(self) -> dict:
        """The JSON description printed by `certify inspect`."""
        layers = []
        for layer in self.layers:
            if isinstance(layer, Affine):
                entry = {"kind": "affine", "in": layer.in_dim, "out": layer.out_dim}
                if layer.conv is not None:
                    entry["conv"] = {
                        "in_shape": list(layer.conv.in_shape),
                        "out_shape": list(layer.conv.out_shape),
                        "kernel": list(layer.conv.kernel.shape),
                        "stride": list(layer.conv.stride),
                    }
                layers.append(entry)
            else:
                layers.append({"kind": "relu", "size": layer.size})
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "layers": layers,
            "relu_count": self.relu_count,
        }

    def fingerprint(self) -> str:
        """The network's identity: a SHA-256 hex digest of the function it computes as layers.

        Hashed: the fused layers (`fused()`: runs of affine maps multiplied out, so an input
        normalisation kept as its own affine map or folded into the first weights hashes alike
        when no rounding separates them), every weight and bias as float64 bytes, and the ReLU
        sizes. Not hashed: the name, the tensor input/output shapes (the IR works on their
        flattening) and the convolution structure (its matrix is hashed). A reload of the same
        file, and a torch module and its ONNX export, give the same digest; any change of a weight
        gives another. Certificates carry it so that a constant proven for one network is never
        used to calibrate noise for another.
        """
        if getattr(self, "_fingerprint", None) is None:
            h = hashlib.sha256(b"certify.network/1")
            for layer in self.fused().layers:
                if isinstance(layer, Affine):
                    h.update(b"A" + np.asarray(layer.weight.shape, dtype="<i8").tobytes())
                    hash_values(h, layer.weight)
                    hash_values(h, layer.bias)
                else:
                    h.update(b"R" + np.asarray([layer.size], dtype="<i8").tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    # ----------------------------------------------------------------------------- evaluation
    def check_input(self, x: np.ndarray, what: str = "input") -> np.ndarray:
        """Validate one input vector (or a batch (k, n)) and return it as float64."""
        arr = np.asarray(x, dtype=np.float64)
        if arr.ndim == 0 or arr.shape[-1] != self.input_dim:
            got = arr.shape[-1] if arr.ndim else 1
            raise BadInput(
                f"{what} has {got} values but the model takes {self.input_dim} inputs "
                f"(shape {list(self.input_shape)})"
            )
        if not np.all(np.isfinite(arr)):
            raise BadInput(f"{what} contains NaN or inf")
        return arr

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on one input (n,) or a batch (k, n) in float64."""
        h = self.check_input(x)
        for layer in self.layers:
            h = layer(h)
        return h

    __call__ = forward

    def preactivations(self, x: np.ndarray) -> list[np.ndarray]:
        """Inputs of every ReLU layer at x (one array per ReLU layer, batched like x)."""
        h = self.check_input(x)
        pre = []
        for layer in self.layers:
            if isinstance(layer, ReLU):
                pre.append(h)
            h = layer(h)
        return pre

    def jacobian(self, x: np.ndarray, grad_at_zero: float = 0.0) -> np.ndarray:
        """Exact Jacobian (m, n) at a single point x.

        Where a pre-activation is exactly 0 the ReLU is not differentiable; `grad_at_zero` picks
        the element of its Clarke derivative [0, 1] used there.
        """
        x = self.check_input(x)
        if x.ndim != 1:
            raise BadInput("jacobian takes a single input vector")
        pattern = [
            np.where(z > 0, 1.0, np.where(z < 0, 0.0, grad_at_zero)) for z in self.preactivations(x)
        ]
        return self.jacobian_for_pattern(pattern)

    def jacobian_for_pattern(self, pattern: Sequence[np.ndarray]) -> np.ndarray:
        """Product W_L D_{L-1} ... D_1 W_1 for given ReLU slopes (one vector per ReLU layer)."""
        relus = [layer for layer in self.layers if isinstance(layer, ReLU)]
        if len(pattern) != len(relus):
            raise BadInput(f"pattern has {len(pattern)} layers, the network has {len(relus)} ReLU layers")
        n, widest = self.input_dim, max(layer.out_dim for layer in self.layers)
        # the identity, J and the next product: checked before the first is allocated
        with memory.working(8.0 * n * (n + 2 * widest), f"the {self.output_dim} x {n} Jacobian (products up to "
                            f"{widest} x {n})", "use a Lipschitz bound that needs no Jacobian matrix (certify global)"):
            J = np.eye(n)
            k = 0
            for layer in self.layers:
                if isinstance(layer, Affine):
                    J = layer.weight @ J
                else:
                    d = np.asarray(pattern[k], dtype=np.float64)
                    if d.shape != (layer.size,):
                        raise BadInput(f"pattern {k} has shape {d.shape}, expected ({layer.size},)")
                    J = d[:, None] * J
                    k += 1
            return J

    # ----------------------------------------------------------------------------- rewriting
    def fused(self) -> "Network":
        """Equivalent network with runs of consecutive affine layers multiplied out.

        The result alternates Affine and ReLU (starting with Affine); conv structure of merged
        layers is dropped. An identity affine is inserted where a ReLU has no affine before it.
        The float64 products are rounded: `fusion_error` bounds how much.
        """
        if getattr(self, "_fused", None) is None:
            self._fused, self._fusion_error = self._fuse()
        return self._fused

    def fusion_error(self) -> float:
        """Largest relative rounding error of a fused row: a bound on |fl(row) - row|_1 over
        |fl(row)|_1, weights and bias together (0 when no two affine layers are adjacent)."""
        self.fused()
        return self._fusion_error

    def _fuse(self) -> tuple["Network", float]:
        u = 2.0**-53
        out: list[Layer] = []
        pending: Affine | None = None
        err_w = err_b = None  # entrywise bounds on the rounding error of the pending product
        worst = 0.0

        def close() -> float:
            if err_w is None:
                return 0.0
            size = _abs_row_sums(pending.weight) + np.abs(pending.bias)
            err = err_w.sum(axis=1) + err_b
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(err > 0, err / size, 0.0)
            return float(np.max(rel, initial=0.0))

        for layer in self.layers:
            if isinstance(layer, Affine):
                if pending is None:
                    pending = layer
                else:
                    r, (k_in, n) = layer.out_dim, pending.weight.shape
                    # |W|, |P|, the product, its error bound and two temporaries of the product's size,
                    # checked before any is allocated (the product stays: it is the fused layer)
                    need = 8.0 * (r * k_in + k_in * n + (4 + (err_w is not None)) * r * n)
                    with memory.working(need, f"fusing consecutive affine layers ({r} x {k_in} times {k_in} x {n})",
                                        "fold the consecutive affine layers of the model before certifying it"):
                        L, k = np.abs(layer.weight), layer.in_dim + 2
                        g = k * u / (1.0 - k * u)
                        # (a zero previous error adds exact zeros: the first product skips them)
                        prod_err = g * (L @ np.abs(pending.weight))
                        err_w = prod_err if err_w is None else L @ err_w + prod_err
                        del prod_err
                        prev_b = np.zeros_like(pending.bias) if err_b is None else err_b
                        err_b = L @ prev_b + g * (L @ np.abs(pending.bias) + np.abs(layer.bias))
                        del L
                        pending = Affine(layer.weight @ pending.weight, layer.weight @ pending.bias + layer.bias)
            else:
                if pending is None:
                    pending = Affine(np.eye(layer.size), np.zeros(layer.size))
                worst = max(worst, close())
                out.extend([pending, layer])
                pending, err_w, err_b = None, None, None
        if pending is not None:
            worst = max(worst, close())
            out.append(pending)
        return Network(out, self.input_shape, self.output_shape, self.name), worst

    def affine_blocks(self) -> tuple[list[Affine], bool]:
        """Affine maps of the fused network and whether the network ends with a ReLU.

        For a fused network A_1, ReLU, A_2, ReLU, ..., A_k (and optionally a final ReLU) this
        returns [A_1, ..., A_k]; an identity final map is appended when the network ends with a
        ReLU, so encoders can always treat the last map as the output layer.
        """
        fused = self.fused()
        affines = [layer for layer in fused.layers if isinstance(layer, Affine)]
        ends_with_relu = isinstance(fused.layers[-1], ReLU)
        if ends_with_relu:
            m = fused.output_dim
            affines.append(Affine(np.eye(m), np.zeros(m)))
        return affines, ends_with_relu

    def with_layers(self, layers: Sequence[Layer], name: str | None = None) -> "Network":
        return Network(layers, self.input_shape, None, name or self.name)

    def then(self, layer: Affine) -> "Network":
        """This network followed by an extra affine map (e.g. a margin c^T f)."""
        return Network(list(self.layers) + [layer], self.input_shape, None, self.name)

    # ----------------------------------------------------------------------------- serialisation
    def save_npz(self, path: str) -> None:
        """Save without pickle (arrays only); load with `Network.load_npz`."""
        arrays: dict[str, np.ndarray] = {
            "input_shape": np.asarray(self.input_shape, dtype=np.int64),
            "output_shape": np.asarray(self.output_shape, dtype=np.int64),
            "kinds": np.asarray([0 if isinstance(l, Affine) else 1 for l in self.layers], dtype=np.int64),
        }
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Affine):
                arrays[f"W{i}"] = layer.weight
                arrays[f"b{i}"] = layer.bias
            else:
                arrays[f"n{i}"] = np.asarray(layer.size, dtype=np.int64)
        np.savez(path, **arrays)

    @classmethod
    def load_npz(cls, path: str, name: str | None = None) -> "Network":
        try:
            with np.load(path, allow_pickle=False) as data:
                layers: list[Layer] = []
                for i, kind in enumerate(data["kinds"]):
                    if kind == 0:
                        layers.append(Affine(data[f"W{i}"], data[f"b{i}"]))
                    else:
                        layers.append(ReLU(int(data[f"n{i}"])))
                return cls(layers, tuple(data["input_shape"]), tuple(data["output_shape"]), name or str(path))
        except (OSError, KeyError, ValueError) as exc:
            if isinstance(exc, BadInput):
                raise
            raise ModelError(f"cannot read network file {path}: {exc}") from None


def _abs_row_sums(values: np.ndarray, block_bytes: int = 1 << 24) -> np.ndarray:
    """|values|.sum(axis=1) in row blocks (each row's sum is the same: no copy of the whole matrix)."""
    rows = max(1, block_bytes // (8 * max(values.shape[1], 1)))
    return np.concatenate([np.abs(values[s:s + rows]).sum(axis=1) for s in range(0, values.shape[0], rows)])


def sequential(weights: Sequence[tuple[np.ndarray, np.ndarray]], name: str = "mlp", final_relu: bool = False) -> Network:
    """Dense ReLU network from (W, b) pairs: ReLU between consecutive affine maps."""
    layers: list[Layer] = []
    for k, (w, b) in enumerate(weights):
        aff = Affine(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64))
        layers.append(aff)
        if k < len(weights) - 1 or final_relu:
            layers.append(ReLU(aff.out_dim))
    return Network(layers, name=name)
