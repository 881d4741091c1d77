"""Networks of SDP-based Lipschitz layers (SLL, Araujo et al., ICLR 2023), in float64.

An SLL layer is a residual map that the feed-forward IR (`models.ir.Network`) cannot hold:

    h(x) = x - 2 W^T diag(t) ReLU(W x + b),   W of shape (k, n), t >= 0 of length k.

It is 1-Lipschitz in l2 exactly when diag(t)^{1/2} W W^T diag(t)^{1/2} <= I. SLL trains a
parameter q and sets t by a scaled Gershgorin bound, t_i = 1 / sum_j |e^{-q_i} (W W^T)_ij e^{q_j}|
(`gershgorin_t`), which makes the layer 1-Lipschitz in exact arithmetic; the certificate in
`certify.lipschitz.sll` does not trust that and recomputes the layer's constant from W and t.

`SLLNetwork` is a sequence of `SLLLayer`, `models.ir.Affine` (e.g. the final "LinearNormalized"
layer, whose rows have unit norm, so its constant is ||Q||_2, up to sqrt(#rows), not 1) and
`models.ir.ReLU`. A convolutional SLL layer (kernel (k, C, s, s), stride 1, padding s // 2) is
stored unrolled as a dense W with its `ConvSpec` and per-neuron t (constant per channel), so the
certificate can use the structured convolution bound; keep images small (the dense W has
(k H W) x (C H W) entries).

`sll_from_torch(module)` reads an `nn.Sequential` of such layers: SLL layers are recognised by a
`compute_t()` method next to `weight`/`weights` (dense) or `kernel` (conv), `bias` and `q`; t is
recomputed by calling the module's own `compute_t` on a float64 copy; `LinearNormalized` (an
`nn.Linear` subclass normalising rows) gives Q = W / ||W_i||_2 in float64. The result is checked
against the module's float64 forward. Everything certified is the float64 model.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np

from .errors import BadInput, ModelError, UnsupportedOperator
from .ir import Affine, ConvSpec, ReLU, hash_values

TORCH_CHECK_RTOL = 1e-9
MAX_UNROLLED_INPUTS = 8192


def gershgorin_t(weight: np.ndarray, q: np.ndarray | None = None) -> np.ndarray:
    """SLL's t_i = 1 / sum_j |e^{-q_i} (W W^T)_ij e^{q_j}| in float64 (0 where the sum is 0)."""
    W = np.asarray(weight, dtype=np.float64)
    q = np.zeros(W.shape[0]) if q is None else np.asarray(q, dtype=np.float64).reshape(-1)
    M = np.abs(np.exp(-q)[:, None] * (W @ W.T) * np.exp(q)[None, :])
    s = M.sum(axis=1)
    return np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)


@dataclass(frozen=True, eq=False)
class SLLLayer:
    """h(x) = x - 2 W^T diag(t) ReLU(W x + b); `conv` is set when W is an unrolled convolution."""

    weight: np.ndarray
    bias: np.ndarray
    t: np.ndarray
    conv: ConvSpec | None = None
    kind: str = "sll"

    def __post_init__(self) -> None:
        W = np.ascontiguousarray(self.weight, dtype=np.float64)
        b = np.ascontiguousarray(self.bias, dtype=np.float64).reshape(-1)
        t = np.ascontiguousarray(self.t, dtype=np.float64).reshape(-1)
        if W.ndim != 2 or b.shape != (W.shape[0],) or t.shape != (W.shape[0],):
            raise ModelError(f"SLL layer needs W (k, n), b (k,), t (k,); got {W.shape}, {b.shape}, {t.shape}")
        for what, arr in (("weights", W), ("bias", b), ("t", t)):
            if not np.all(np.isfinite(arr)):
                raise ModelError(f"SLL layer {what} contain NaN or inf; the model cannot be certified")
        if np.any(t < 0):
            raise ModelError("SLL layer t must be non-negative")
        for name, arr in (("weight", W), ("bias", b), ("t", t)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def from_q(cls, weight: np.ndarray, bias: np.ndarray, q: np.ndarray | None = None) -> "SLLLayer":
        """The layer SLL trains: t from the Gershgorin scaling with parameter q, in float64."""
        return cls(weight, bias, gershgorin_t(weight, q))

    @property
    def in_dim(self) -> int:
        return self.weight.shape[1]

    @property
    def out_dim(self) -> int:
        return self.weight.shape[1]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        z = np.maximum(x @ self.weight.T + self.bias, 0.0) * self.t
        return x - 2.0 * (z @ self.weight)


SLLPart = Union[SLLLayer, Affine, ReLU]


class SLLNetwork:
    """A sequence of SLL layers, affine maps and ReLUs on a flat float64 vector."""

    def __init__(self, layers: Sequence[SLLPart], name: str = "sll") -> None:
        self.layers: tuple[SLLPart, ...] = tuple(layers)
        if not self.layers:
            raise ModelError("an SLL network needs at least one layer")
        for i, (a, b) in enumerate(zip(self.layers, self.layers[1:])):
            if a.out_dim != b.in_dim:
                raise ModelError(f"layer {i} has {a.out_dim} outputs but layer {i + 1} takes {b.in_dim}")
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Affine) and not (np.all(np.isfinite(layer.weight)) and np.all(np.isfinite(layer.bias))):
                raise ModelError(f"layer {i} (affine) contains NaN or inf; the model cannot be certified")
        self.name = name

    @property
    def input_dim(self) -> int:
        return self.layers[0].in_dim

    @property
    def output_dim(self) -> int:
        return self.layers[-1].out_dim

    def __repr__(self) -> str:
        parts = []
        for layer in self.layers:
            if isinstance(layer, SLLLayer):
                parts.append(f"SLL({layer.in_dim}, inner {layer.weight.shape[0]}{', conv' if layer.conv else ''})")
            elif isinstance(layer, Affine):
                parts.append(f"Affine({layer.in_dim}->{layer.out_dim})")
            else:
                parts.append(f"ReLU({layer.size})")
        return f"SLLNetwork({self.name!r}: " + ", ".join(parts) + ")"

    def fingerprint(self) -> str:
        """SHA-256 of the layers (as `models.Network.fingerprint`, with each SLL layer's W, b, t)."""
        if getattr(self, "_fingerprint", None) is None:
            h = hashlib.sha256(b"certify.sll/1")
            for layer in self.layers:
                if isinstance(layer, ReLU):
                    h.update(b"R" + np.asarray([layer.size], dtype="<i8").tobytes())
                    continue
                h.update((b"S" if isinstance(layer, SLLLayer) else b"A")
                         + np.asarray(layer.weight.shape, dtype="<i8").tobytes())
                for arr in (layer.weight, layer.bias) + ((layer.t,) if isinstance(layer, SLLLayer) else ()):
                    hash_values(h, arr)
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def forward(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, dtype=np.float64)
        if h.ndim == 0 or h.shape[-1] != self.input_dim:
            raise BadInput(f"input has {h.shape[-1] if h.ndim else 1} values but the model takes {self.input_dim}")
        if not np.all(np.isfinite(h)):
            raise BadInput("input contains NaN or inf")
        for layer in self.layers:
            h = layer(h)
        return h

    __call__ = forward


# ------------------------------------------------------------------------------------- torch
def _np(t) -> np.ndarray:
    return t.detach().cpu().double().numpy()


def _conv_sll(m64, input_shape: tuple[int, int, int]) -> SLLLayer:
    """Unroll a conv SLL layer (stride 1, 'same' padding k // 2) into a dense W with its ConvSpec."""
    import torch
    import torch.nn.functional as F

    K = m64.kernel.detach()
    if K.ndim != 4 or K.shape[-1] != K.shape[-2] or K.shape[-1] % 2 == 0:
        raise UnsupportedOperator("conv SLL layers need an odd square kernel (k, C, s, s)")
    C, H, Wd = input_shape
    if K.shape[1] != C:
        raise ModelError(f"conv SLL kernel takes {K.shape[1]} channels, the input has {C}")
    n = C * H * Wd
    if n > MAX_UNROLLED_INPUTS:
        raise UnsupportedOperator(f"conv SLL layer on {n} inputs is too large to unroll (limit {MAX_UNROLLED_INPUTS})")
    pad = K.shape[-1] // 2
    with torch.no_grad():
        basis = torch.eye(n, dtype=torch.float64).reshape(n, C, H, Wd)
        cols = F.conv2d(basis, K, padding=pad)  # (n, k, H, W): column j is W e_j
        t_ch = m64.compute_t().detach().reshape(-1)
    W = cols.reshape(n, -1).T.numpy()
    k = K.shape[0]
    bias = np.broadcast_to(_np(m64.bias).reshape(k, 1, 1), (k, H, Wd)).reshape(-1)
    t = np.repeat(_np(t_ch), H * Wd)
    spec = ConvSpec(kernel=_np(K), stride=(1, 1), pads=(pad, pad, pad, pad), dilation=(1, 1), groups=1,
                    in_shape=(C, H, Wd), out_shape=(k, H, Wd))
    return SLLLayer(W, bias, t, conv=spec)


def _flatten_modules(module) -> list:
    import torch

    if isinstance(module, torch.nn.Sequential):
        out = []
        for child in module:
            out.extend(_flatten_modules(child))
        return out
    return [module]


def sll_from_torch(module, input_shape: Sequence[int] | None = None, check: bool = True, name: str | None = None) -> SLLNetwork:
    """Read an `nn.Sequential` of SLL layers, Linear / LinearNormalized layers, ReLU and Flatten.

    `input_shape` (C, H, W) is needed when the first layer is a convolutional SLL layer; the
    network then works on the C-order flattening of the image.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise BadInput(f"sll_from_torch expects a torch.nn.Module, got {type(module).__name__}")
    m64 = copy.deepcopy(module).double().eval()
    for pname, p in list(m64.named_parameters()) + list(m64.named_buffers()):
        if p.is_floating_point() and not torch.all(torch.isfinite(p)):
            raise ModelError(f"parameter '{pname}' contains NaN or inf; the model cannot be certified")
    shape = tuple(int(s) for s in input_shape) if input_shape is not None else None
    layers: list[SLLPart] = []
    for i, m in enumerate(_flatten_modules(m64)):
        where = f"layer {i} ({type(m).__name__})"
        if callable(getattr(m, "compute_t", None)):
            if hasattr(m, "kernel"):
                if shape is None or len(shape) != 3:
                    raise BadInput(f"{where}: pass input_shape=(C, H, W) for a convolutional SLL network")
                layers.append(_conv_sll(m, shape))
            else:
                w = getattr(m, "weight", None)
                w = getattr(m, "weights", None) if w is None else w
                if w is None or w.ndim != 2:
                    raise UnsupportedOperator(f"{where}: SLL layer without a 2-D weight")
                with torch.no_grad():
                    t = _np(m.compute_t())
                b = getattr(m, "bias", None)
                b = np.zeros(w.shape[0]) if b is None else _np(b).reshape(-1)
                layers.append(SLLLayer(_np(w), b, t.reshape(-1)))
        elif isinstance(m, torch.nn.Linear):
            W = _np(m.weight)
            if type(m).__name__ == "LinearNormalized":
                W = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
            b = _np(m.bias) if m.bias is not None else np.zeros(W.shape[0])
            layers.append(Affine(W, b))
        elif isinstance(m, torch.nn.ReLU):
            if not layers:
                raise UnsupportedOperator(f"{where}: a leading ReLU needs the input size; start with a layer")
            layers.append(ReLU(layers[-1].out_dim))
        elif isinstance(m, (torch.nn.Flatten, torch.nn.Identity, torch.nn.Dropout)):
            continue
        else:
            raise UnsupportedOperator(f"{where} is not an SLL layer, Linear, LinearNormalized, ReLU or Flatten")
    net = SLLNetwork(layers, name or type(module).__name__)
    if check:
        _check(net, m64, shape)
    return net


def _check(net: SLLNetwork, m64, shape) -> None:
    """Compare with the module's float64 forward on random inputs."""
    import torch

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, net.input_dim))
    with torch.no_grad():
        xt = torch.from_numpy(x.reshape((8,) + shape) if shape else x)
        ref = m64(xt).reshape(8, -1).numpy()
    got = net.forward(x)
    scale = np.max(np.abs(ref)) + 1.0
    err = float(np.max(np.abs(got - ref))) / scale
    if not err <= TORCH_CHECK_RTOL:
        raise ModelError(
            f"the SLL network read from the module disagrees with its forward (relative error {err:.1e}); "
            "its layers do not have the form h(x) = x - 2 W^T diag(t) ReLU(W x + b)"
        )
