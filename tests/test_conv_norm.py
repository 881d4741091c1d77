"""Structured convolution norm bound >= the exact norm of the unrolled matrix (oracle: LAPACK SVD
of `layer.weight`, the dense matrix the torch importer unrolls independently with torch.conv2d)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models import from_torch
from solvers.conv_norm import conv_spectral_norm_upper, gram_iteration_upper
from solvers.norms import affine_norm_upper


def _conv_layer(c_in, c_out, k, shape, seed, **kw):
    torch.manual_seed(seed)
    conv = torch.nn.Conv2d(c_in, c_out, k, **kw).double()
    net = from_torch(torch.nn.Sequential(conv), (1, c_in) + shape)
    (layer,) = net.layers
    assert layer.conv is not None
    return layer


@settings(max_examples=30, deadline=None)
@given(
    c_in=st.sampled_from([1, 2, 4]),
    c_out=st.sampled_from([1, 2, 4]),
    k=st.sampled_from([1, 2, 3]),
    h=st.integers(3, 9),
    w=st.integers(3, 9),
    stride=st.sampled_from([1, 2, 3]),
    padding=st.integers(0, 2),
    dilation=st.sampled_from([1, 2]),
    grouped=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_conv_bound_dominates_the_unrolled_norm(c_in, c_out, k, h, w, stride, padding, dilation, grouped, seed):
    groups = 2 if grouped and c_in % 2 == 0 and c_out % 2 == 0 else 1
    if dilation * (k - 1) + 1 > min(h, w) + 2 * padding:
        return  # empty output
    layer = _conv_layer(c_in, c_out, k, (h, w), seed, stride=stride, padding=padding, dilation=dilation, groups=groups)
    exact = np.linalg.svd(layer.weight, compute_uv=False)[0]
    bound = conv_spectral_norm_upper(layer.conv)
    assert bound >= exact
    assert affine_norm_upper(layer, "l2", "l2") >= exact


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_bound_is_tight_on_larger_images(stride):
    # the circular embedding only loses at the border: within 5% on 16x16 images (fixed seed)
    layer = _conv_layer(3, 4, 3, (16, 16), 0, stride=stride, padding=1)
    exact = np.linalg.svd(layer.weight, compute_uv=False)[0]
    assert exact <= conv_spectral_norm_upper(layer.conv) <= 1.05 * exact


def test_gram_iteration_is_a_rigorous_upper_bound():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 6, 9)) + 1j * rng.standard_normal((50, 6, 9))
    exact = np.linalg.norm(A, 2, axis=(-2, -1))
    for steps in (0, 1, 3, 12):
        b = gram_iteration_upper(A, steps)
        assert np.all(b >= exact)
    # enough steps make it tight: ratio <= rank^(1/2^(t+1))
    assert np.all(gram_iteration_upper(A, 14) <= exact * 6 ** (1 / 2**15) * (1 + 1e-12))


def test_zero_kernel_and_pure_scaling():
    layer = _conv_layer(2, 2, 1, (4, 4), 0)
    K = np.zeros((2, 2, 1, 1))
    K[0, 0, 0, 0], K[1, 1, 0, 0] = 3.0, -2.0  # 1x1 conv = per-channel scaling: norm exactly 3
    spec = layer.conv.__class__(K, (1, 1), (0, 0, 0, 0), (1, 1), 1, (2, 4, 4), (2, 4, 4))
    assert 3.0 <= conv_spectral_norm_upper(spec) <= 3.0 * (1 + 1e-12)
    zero = layer.conv.__class__(np.zeros_like(K), (1, 1), (0, 0, 0, 0), (1, 1), 1, (2, 4, 4), (2, 4, 4))
    assert conv_spectral_norm_upper(zero) == 0.0


class _ConvThenRowNorm(torch.nn.Module):
    """Conv2d, then a reshape that moves the channel axis, then BatchNorm1d over image rows."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm1d(2)
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.weight[0, 0, 1, 1] = 1.0
            self.bn.weight.copy_(torch.tensor([1.0, 100.0]))

    def forward(self, x):
        return self.bn(self.conv(x).reshape(2, 2, 2))


def test_batch_norm_after_a_reshape_does_not_rescale_the_kernel():
    """Oracle: the SVD of the dense layer the importer checked against torch (its norm is ~100)."""
    net = from_torch(_ConvThenRowNorm().double().eval(), (1, 1, 2, 2))
    (layer,) = net.layers
    exact = np.linalg.norm(layer.weight, 2)
    assert exact > 99.0
    assert affine_norm_upper(layer, "l2", "l2") >= exact * (1 - 1e-12)


def test_conv_flatten_batchnorm1d_imports_and_is_bounded():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Flatten(), torch.nn.BatchNorm1d(32))
    with torch.no_grad():
        m[2].weight.uniform_(0.5, 50.0)
    net = from_torch(m.double().eval(), (1, 1, 4, 4))
    (layer,) = net.layers
    assert affine_norm_upper(layer, "l2", "l2") >= np.linalg.norm(layer.weight, 2) * (1 - 1e-12)


def test_a_stale_structure_record_is_ignored():
    """A ConvSpec that does not compute the layer's matrix must not be used for the bound."""
    from dataclasses import replace

    from models.ir import Affine

    layer = _conv_layer(2, 3, 3, (5, 5), seed=1, padding=1)
    wrong = replace(layer.conv, kernel=layer.conv.kernel * 0.01)
    stale = Affine(layer.weight, layer.bias, conv=wrong)
    assert affine_norm_upper(stale, "l2", "l2") >= np.linalg.norm(layer.weight, 2) * (1 - 1e-12)
