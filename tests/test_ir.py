"""Network IR invariants (hypothesis) with finite differences and explicit products as oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from models import Affine, BadInput, ModelError, Network, ReLU, sequential
from models.zoo import random_relu_net

sizes = st.lists(st.integers(1, 6), min_size=2, max_size=5)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, seed=st.integers(0, 10_000))
def test_forward_fused_and_explicit_loop_agree(sizes, seed):
    net = random_relu_net(sizes, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, sizes[0]))
    # oracle: the textbook loop over (W, b) pairs
    h = x
    Ws = [l for l in net.layers if isinstance(l, Affine)]
    for k, a in enumerate(Ws):
        h = h @ a.weight.T + a.bias
        if k < len(Ws) - 1:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(net.forward(x), h, atol=1e-12)
    np.testing.assert_allclose(net.fused().forward(x), h, atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, seed=st.integers(0, 10_000))
def test_jacobian_matches_central_differences(sizes, seed):
    net = random_relu_net(sizes, seed)
    x = np.random.default_rng(seed + 1).standard_normal(sizes[0])
    J = net.jacobian(x)
    # skip points within 1e-6 of a ReLU kink, where finite differences straddle two regions
    if any(np.min(np.abs(z)) < 1e-5 for z in net.preactivations(x) if z.size):
        return
    h = 1e-7
    fd = np.stack([(net.forward(x + h * e) - net.forward(x - h * e)) / (2 * h) for e in np.eye(sizes[0])], axis=1)
    np.testing.assert_allclose(J, fd, atol=1e-5)


def test_consecutive_affines_fuse_and_npz_roundtrip(tmp_path):
    rng = np.random.default_rng(0)
    layers = [Affine(rng.standard_normal((3, 2)), rng.standard_normal(3)), Affine(rng.standard_normal((4, 3)), rng.standard_normal(4)),
              ReLU(4), Affine(rng.standard_normal((2, 4)), rng.standard_normal(2)), ReLU(2)]
    net = Network(layers, name="t")
    fused = net.fused()
    assert [l.kind for l in fused.layers] == ["affine", "relu", "affine", "relu"]
    x = rng.standard_normal((5, 2))
    np.testing.assert_allclose(fused.forward(x), net.forward(x), atol=1e-12)
    maps, ends_with_relu = net.affine_blocks()
    assert ends_with_relu and len(maps) == 3 and np.array_equal(maps[-1].weight, np.eye(2))
    net.save_npz(tmp_path / "n.npz")
    back = Network.load_npz(tmp_path / "n.npz")
    np.testing.assert_array_equal(back.forward(x), net.forward(x))


def test_grad_at_zero_selects_clarke_element():
    net = sequential([(np.array([[1.0]]), np.array([0.0])), (np.array([[2.0]]), np.array([0.0]))])
    assert net.jacobian([0.0])[0, 0] == 0.0
    assert net.jacobian([0.0], grad_at_zero=1.0)[0, 0] == 2.0


def test_validation_errors():
    with pytest.raises(ModelError, match="outputs but layer 1"):
        Network([Affine(np.ones((3, 2)), np.zeros(3)), ReLU(4)])
    with pytest.raises(ModelError, match="NaN"):
        Network([Affine(np.array([[np.nan]]), np.zeros(1))])
    net = random_relu_net((3, 4, 2), 0)
    with pytest.raises(BadInput, match="takes 3 inputs"):
        net.forward([1.0, 2.0])
    with pytest.raises(BadInput, match="NaN"):
        net.forward([1.0, np.nan, 0.0])
