"""Certified Lipschitz bounds of SLL (SDP-based Lipschitz layer) networks.

Oracles: closed forms for hand-built layers, difference quotients of the float64 forward (lower
bounds), the Jacobian I - 2 W^T D W of a layer whose neurons are all active, torch's forward.
The torch SLL modules below are written here from the paper's formulas.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from certify.errors import BadInput, ModelError, UnsupportedOperator
from certify.lipschitz.global_bounds import global_lipschitz
from certify.lipschitz.sll import sll_layer_bound
from models.ir import Affine
from models.sll import SLLLayer, SLLNetwork, gershgorin_t, sll_from_torch


class DenseSLL(nn.Module):
    """h(x) = x - 2 W^T diag(t) ReLU(W x + b), t_i = 1 / sum_j |e^{-q_i} (W W^T)_ij e^{q_j}|."""

    def __init__(self, n, k):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) / n**0.5)
        self.bias = nn.Parameter(torch.randn(k) * 0.1)
        self.q = nn.Parameter(torch.randn(k) * 0.3)

    def compute_t(self):
        ww = self.weight @ self.weight.T
        return 1.0 / torch.abs(torch.exp(-self.q)[:, None] * ww * torch.exp(self.q)[None, :]).sum(1)

    def forward(self, x):
        return x - 2 * F.linear(self.compute_t() * F.relu(F.linear(x, self.weight, self.bias)), self.weight.T)


class ConvSLL(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(k, c, 3, 3) / 6)
        self.bias = nn.Parameter(torch.randn(1, k, 1, 1) * 0.1)
        self.q = nn.Parameter(torch.randn(k) * 0.3)

    def compute_t(self):
        ktk = torch.abs(F.conv2d(self.kernel, self.kernel, padding=2))
        q = torch.exp(self.q).reshape(-1, 1, 1, 1)
        return 1.0 / (torch.exp(-self.q).reshape(-1, 1, 1, 1) * ktk * q).sum((1, 2, 3))

    def forward(self, x):
        r = self.compute_t().reshape(1, -1, 1, 1) * F.relu(F.conv2d(x, self.kernel, padding=1) + self.bias)
        return x - 2 * F.conv_transpose2d(r, self.kernel, padding=1)


class LinearNormalized(nn.Linear):
    def forward(self, x):
        return F.linear(x, F.normalize(self.weight, dim=1), self.bias)


# difference quotients are computed in floating point: with steps >= 0.05 their rounding error
# is far below this relative tolerance
FD_RTOL = 1e-9


def _max_ratio(f, n, samples=4000, seed=0, scale=1.0):
    """Largest difference quotient ||f(x+d) - f(x)|| / ||d|| over random pairs (a lower bound)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, n)) * scale
    d = rng.standard_normal((samples, n)) * rng.choice([0.05, 0.3, 1.0], size=(samples, 1))
    ratio = np.linalg.norm(f(x + d) - f(x), axis=1) / np.linalg.norm(d, axis=1)
    return float(np.max(ratio)) / (1 + FD_RTOL)


@pytest.mark.parametrize("w,t", [(1.0, 0.25), (2.0, 0.25), (0.5, 1.0), (3.0, 0.5), (1.0, 1.0)])
def test_one_neuron_layer_bound_is_exact(w, t):
    # h(x) = x - 2 t w^2 ReLU(x + b/w): slopes 1 and 1 - 2 t w^2
    layer = SLLLayer(np.array([[w]]), np.array([0.3]), np.array([t]))
    exact = max(1.0, abs(1 - 2 * t * w * w))
    bound, gamma = sll_layer_bound(layer)
    assert exact <= bound <= exact * (1 + 1e-12)
    assert gamma >= t * w * w
    assert _max_ratio(layer, 1) <= bound


def test_identity_weights_with_t_two_gives_three():
    layer = SLLLayer(np.eye(3), np.full(3, 5.0), np.full(3, 2.0))  # h(x) = x - 4 ReLU(x + 5)
    bound, _ = sll_layer_bound(layer)
    assert 3.0 <= bound <= 3.0 * (1 + 1e-12)
    x, y = np.zeros(3), np.full(3, 0.5)  # both in the active region: ratio exactly 3
    assert np.linalg.norm(layer(x) - layer(y)) / np.linalg.norm(x - y) == pytest.approx(3.0)


def test_gershgorin_layers_are_certified_one_lipschitz():
    rng = np.random.default_rng(1)
    for k, n in [(8, 8), (12, 6), (5, 9)]:
        W, q = rng.standard_normal((k, n)), rng.standard_normal(k) * 0.5
        layer = SLLLayer.from_q(W, rng.standard_normal(k), q)
        bound, gamma = sll_layer_bound(layer)
        assert gamma <= 1 + 1e-12 and bound <= 1 + 1e-12
        assert _max_ratio(layer, n, scale=2.0) <= bound


def test_a_mis_specified_t_is_caught_and_the_bound_is_tight():
    rng = np.random.default_rng(2)
    W = rng.standard_normal((6, 6))
    t = 1.5 * gershgorin_t(W)  # "trusting 1" would be wrong here
    layer = SLLLayer(W, np.full(6, 100.0), t)  # huge bias: all neurons active near 0
    bound, gamma = sll_layer_bound(layer)
    J = np.eye(6) - 2 * W.T @ np.diag(t) @ W  # the Jacobian in the active region
    exact_active = np.linalg.norm(J, 2)
    assert bound > 1.0
    assert exact_active <= bound
    if gamma > 1:  # then the active region attains 2 gamma - 1
        assert bound <= exact_active * (1 + 1e-9)


def test_torch_dense_sll_network():
    torch.manual_seed(0)
    model = nn.Sequential(DenseSLL(8, 12), DenseSLL(8, 8), LinearNormalized(8, 3))
    net = sll_from_torch(model)
    assert [type(l).__name__ for l in net.layers] == ["SLLLayer", "SLLLayer", "Affine"]
    res = global_lipschitz(net)
    assert res.method == "sll" and res.certified
    Q = F.normalize(model[2].weight.detach().double(), dim=1).numpy()
    q_norm = np.linalg.norm(Q, 2)
    assert q_norm > 1.0  # unit rows do not make the last layer 1-Lipschitz
    assert res.details["layers"][2]["bound"] == pytest.approx(q_norm, rel=1e-9)
    assert res.upper >= q_norm  # both SLL layers are certified with constant 1
    m64 = model.double()

    def f(x):
        with torch.no_grad():
            return m64(torch.from_numpy(x)).numpy()

    assert _max_ratio(f, 8, scale=2.0) <= res.upper
    l1 = global_lipschitz(net, input_norm="linf", output_norm="l1")
    assert l1.upper == pytest.approx(res.upper * np.sqrt(8) * np.sqrt(3), rel=1e-12)


def test_torch_conv_sll_network():
    torch.manual_seed(1)
    model = nn.Sequential(ConvSLL(2, 4), ConvSLL(2, 3), nn.Flatten(), LinearNormalized(50, 3))
    net = sll_from_torch(model, (2, 5, 5))
    res = global_lipschitz(net)
    for i, layer in enumerate(net.layers[:2]):
        assert layer.conv is not None
        exact_gamma = np.linalg.eigvalsh(layer.weight.T @ np.diag(layer.t) @ layer.weight)[-1]
        assert res.details["layers"][i]["gamma"] >= exact_gamma
    m64 = model.double()

    def f(x):
        with torch.no_grad():
            return m64(torch.from_numpy(x).reshape(-1, 2, 5, 5)).numpy()

    assert _max_ratio(f, 50, samples=2000) <= res.upper


def test_bad_sll_inputs():
    with pytest.raises(ModelError, match="NaN"):
        SLLLayer(np.array([[np.nan]]), np.zeros(1), np.ones(1))
    with pytest.raises(ModelError, match="non-negative"):
        SLLLayer(np.eye(2), np.zeros(2), np.array([1.0, -1.0]))
    torch.manual_seed(0)
    bad = nn.Sequential(DenseSLL(4, 4))
    with torch.no_grad():
        bad[0].weight[0, 0] = float("nan")
    with pytest.raises(ModelError, match="NaN"):
        sll_from_torch(bad)
    with pytest.raises(UnsupportedOperator, match="Tanh"):
        sll_from_torch(nn.Sequential(DenseSLL(4, 4), nn.Tanh()))
    net = SLLNetwork([SLLLayer(np.eye(2), np.zeros(2), np.ones(2)), Affine(np.ones((1, 2)), np.zeros(1))])
    with pytest.raises(BadInput, match="method='sll'"):
        global_lipschitz(net, "lipsdp-neuron")
    both = global_lipschitz(net, "all")
    assert both.best.method == "sll"
