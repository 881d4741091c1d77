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
