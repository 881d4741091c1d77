"""Certified Lipschitz bounds of SLL networks (`models.sll.SLLNetwork`), layer by layer.

For an SLL layer h(x) = x - 2 W^T D ReLU(W x + b), D = diag(t) >= 0, let
gamma = ||D^{1/2} W||_2^2 = lambda_max(W^T D W). Then Lip_2(h) <= max(1, 2 gamma - 1):

    If gamma = 0 then D W = 0 and h is the identity. Otherwise D' = D / gamma satisfies
    D'^{1/2} W W^T D'^{1/2} <= I, and g(x) = x - 2 W^T D' ReLU(W x + b) is 1-Lipschitz: with
    d = x - y and e = ReLU(W x + b) - ReLU(W y + b) we have e_i (W d)_i >= e_i^2 (ReLU is
    monotone with slopes in [0, 1]), so
        ||d - 2 W^T D' e||^2 <= ||d||^2 - 4 e^T D' e + 4 e^T D' W W^T D' e <= ||d||^2.
    Since h = (1 - gamma) id + gamma g, Lip(h) <= |1 - gamma| + gamma = max(1, 2 gamma - 1).

The bound is tight for a single neuron (slopes 1 and 1 - 2 gamma). gamma is proven in float64
from the stored W and t (`solvers.norms.gram_norm_upper`, or the structured convolution bound
with the kernel scaled per channel by sqrt(t_c) rounded up); SLL's Gershgorin t gives gamma <= 1
in exact arithmetic, and the certificate shows by how much rounding or a mis-specified t moves
it. Affine layers contribute ||Q||_2 (the final LinearNormalized layer has unit rows, so up to
sqrt(#classes), not 1), ReLUs 1. The l2 product converts to other norms like the SDP bounds.
"""

from __future__ import annotations

import time

import numpy as np

from models.ir import Affine, ConvSpec, ReLU
from models.sll import SLLLayer, SLLNetwork
from solvers.conv_norm import conv_spectral_norm_upper
from solvers.norms import affine_norm_upper, gram_norm_upper
from solvers.rounding import U, add_up, mul_up, sqrt_up

from .global_result import GlobalLipschitzResult, norm_conversion


def sll_gamma_upper(layer: SLLLayer) -> float:
    """Certified upper bound on gamma = lambda_max(W^T diag(t) W) of an SLL layer."""
    bound = gram_norm_upper(layer.weight, layer.t)
    if layer.conv is not None:
        spec = layer.conv
        k, H, W = spec.out_shape
        t_ch = layer.t.reshape(k, H * W)
        if np.all(t_ch == t_ch[:, :1]):  # per-channel t: scale the kernel's output channels
            s = np.array([sqrt_up(v) for v in t_ch[:, 0]])  # s_c >= sqrt(t_c): a larger operator
            scaled = ConvSpec(spec.kernel * s[:, None, None, None], spec.stride, spec.pads, spec.dilation,
                              spec.groups, spec.in_shape, spec.out_shape)
            c = conv_spectral_norm_upper(scaled, kernel_rel_err=2.0 * U)  # the product rounds once
            bound = min(bound, mul_up(c, c))
    return bound


def sll_layer_bound(layer: SLLLayer) -> tuple[float, float]:
    """(Lip_2 upper bound of the layer, gamma upper bound)."""
    gamma = sll_gamma_upper(layer)
    return max(1.0, add_up(mul_up(2.0, gamma), -1.0)), gamma


def sll_lipschitz(net: SLLNetwork, p: str = "l2", q: str = "l2") -> GlobalLipschitzResult:
    """Certified Lip_{p->q} upper bound of an SLL network (product of proven layer constants)."""
    t0 = time.perf_counter()
    upper, layers = 1.0, []
    for i, layer in enumerate(net.layers):
        if isinstance(layer, SLLLayer):
            bound, gamma = sll_layer_bound(layer)
            layers.append({"layer": i, "kind": "sll", "bound": bound, "gamma": gamma})
        elif isinstance(layer, Affine):
            bound = affine_norm_upper(layer, "l2", "l2")
            layers.append({"layer": i, "kind": "affine", "bound": bound})
        else:
            assert isinstance(layer, ReLU)
            continue
        upper = mul_up(upper, bound)
    c, why = norm_conversion(p, q, net.input_dim, net.output_dim)
    details = {"l2_bound": upper, "norm_conversion": c, "conversion": why, "layers": layers}
    return GlobalLipschitzResult(None, mul_up(upper, c), "certified", input_norm=p, output_norm=q,
                                 seconds=time.perf_counter() - t0, method="sll", details=details)
