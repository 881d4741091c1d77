"""Convolution and average-pooling matrices built by index arithmetic, against torch as the oracle.

torch applied to an identity basis gives the unrolled matrix exactly (every entry is one kernel
tap times 1.0), so the comparison is bitwise; random inputs check the map itself.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from models import ModelError
from models import matrices as mx
from models.memory import ModelTooLarge, allocating, budget, parse_size, require
from models.unroll import avg_pool2d_matrix, conv2d_matrix


def _torch_conv_of_identity(kernel, chw, stride, pads, dilation, groups):
    n = int(np.prod(chw))
    top, left, bottom, right = pads
    x = F.pad(torch.eye(n, dtype=torch.float64).reshape((n,) + chw), (left, right, top, bottom))
    y = F.conv2d(x, torch.from_numpy(kernel), None, stride, 0, dilation, groups)
    return y.reshape(n, -1).T.numpy(), tuple(y.shape[1:])


@settings(max_examples=40, deadline=None)
@given(
    groups=st.sampled_from([1, 2]), c_per=st.integers(1, 2), o_per=st.integers(1, 2),
    h=st.integers(1, 7), w=st.integers(1, 7), kh=st.integers(1, 3), kw=st.integers(1, 3),
    sh=st.integers(1, 3), sw=st.integers(1, 2), dh=st.integers(1, 2), dw=st.integers(1, 2),
    pads=st.tuples(*[st.integers(0, 2)] * 4), seed=st.integers(0, 2**16),
)
def test_conv_matrix_is_torch_conv_of_the_identity_bit_for_bit(groups, c_per, o_per, h, w, kh, kw, sh, sw, dh, dw, pads, seed):
    chw = (groups * c_per, h, w)
    kernel = np.random.default_rng(seed).standard_normal((groups * o_per, c_per, kh, kw))
    padded_h, padded_w = h + pads[0] + pads[2], w + pads[1] + pads[3]
    if dh * (kh - 1) + 1 > padded_h or dw * (kw - 1) + 1 > padded_w:
        with pytest.raises(ModelError, match="does not fit"):
            conv2d_matrix(kernel, chw, (sh, sw), pads, (dh, dw), groups, "Conv")
        return
    matrix, out_shape = conv2d_matrix(kernel, chw, (sh, sw), pads, (dh, dw), groups, "Conv")
    ref, ref_shape = _torch_conv_of_identity(kernel, chw, (sh, sw), pads, (dh, dw), groups)
    assert out_shape == ref_shape
    assert np.array_equal(matrix.toarray(), ref)
    # the constructor flags the rows as sorted: a fresh array recomputes that from the structure
    fresh = mx.sp.csr_array((matrix.data, matrix.indices, matrix.indptr), shape=matrix.shape)
    assert fresh.has_canonical_format and matrix.nnz == np.count_nonzero(ref)


@settings(max_examples=40, deadline=None)
@given(
    c=st.integers(1, 3), h=st.integers(1, 9), w=st.integers(1, 9), kh=st.integers(1, 4), kw=st.integers(1, 4),
    sh=st.integers(1, 3), sw=st.integers(1, 3), ph=st.integers(0, 2), pw=st.integers(0, 2),
    include=st.booleans(), ceil=st.booleans(), seed=st.integers(0, 2**16),
)
def test_avg_pool_matrix_matches_torch(c, h, w, kh, kw, sh, sw, ph, pw, include, ceil, seed):
    if ph > kh // 2 or pw > kw // 2 or kh > h + 2 * ph or kw > w + 2 * pw:
        return  # torch refuses these; the importer refuses them earlier (see avg_pool2d)
    sums, divisor, out_shape = avg_pool2d_matrix((c, h, w), (kh, kw), (sh, sw), (ph, pw), include, ceil, "AveragePool")
    x = np.random.default_rng(seed).standard_normal((2, c, h, w))
    ref = F.avg_pool2d(torch.from_numpy(x), (kh, kw), (sh, sw), (ph, pw), ceil, include)
    assert out_shape == tuple(ref.shape[1:])
    ours = (sums @ x.reshape(2, -1).T).T / divisor
    np.testing.assert_allclose(ours, ref.reshape(2, -1).numpy(), rtol=1e-13, atol=1e-13)
    # on the identity basis the entries are exactly 1 / divisor, as torch computes them
    eye = F.avg_pool2d(torch.eye(c * h * w, dtype=torch.float64).reshape(-1, c, h, w), (kh, kw), (sh, sw), (ph, pw), ceil, include)
    assert np.array_equal(mx.scale_rows(sums, divisor, divide=True).toarray(), eye.reshape(c * h * w, -1).T.numpy())


def test_matrix_helpers_agree_with_dense_algebra():
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((6, 4)) * (rng.uniform(size=(6, 4)) < 0.4)
    sparse = mx.sp.csr_array(dense)
    src = np.array([3, -1, 0, 5, 5])
    for m in (dense, sparse):
        taken = mx.take_rows(m, src)
        expect = np.where((src >= 0)[:, None], dense[np.maximum(src, 0)], 0.0)
        assert np.array_equal(mx.to_dense(taken), expect)
        c = rng.uniform(0.5, 2.0, 6)
        assert np.array_equal(mx.to_dense(mx.scale_rows(m, c)), dense * c[:, None])
        assert np.array_equal(mx.to_dense(mx.scale_rows(m, c, divide=True)), dense / c[:, None])
        a = rng.standard_normal((3, 6))
        np.testing.assert_allclose(mx.to_dense(mx.left_multiply(a, m)), a @ dense, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(mx.to_dense(mx.left_multiply(mx.sp.csr_array(a), m)), a @ dense, rtol=1e-14, atol=1e-14)
        for other in (dense, sparse):
            assert np.array_equal(mx.to_dense(mx.add(m, other)), 2 * dense)
            assert np.array_equal(mx.to_dense(mx.vstack([m, other])), np.vstack([dense, dense]))
        assert np.array_equal(mx.to_dense(mx.negate(m)), -dense)
    assert mx.is_identity(mx.identity(5)) and mx.is_identity(np.eye(5))
    assert not mx.is_identity(mx.scale_rows(mx.identity(5), np.full(5, 2.0))) and not mx.is_identity(np.ones((5, 5)))


def test_memory_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("CERTIFY_MEMORY_LIMIT", "1.5G")
    assert budget() == (1.5e9, "CERTIFY_MEMORY_LIMIT=1.5G")
    assert parse_size("512M") == 512_000_000 and parse_size("1000") == 1000
    require(1.4e9, "a matrix")
    with pytest.raises(ModelTooLarge, match=r"model too large: needs 2 GB for a 1000 x 1000 matrix.*CERTIFY_MEMORY_LIMIT"):
        require(2e9, "a 1000 x 1000 matrix")
    with pytest.raises(ModelTooLarge, match="allocation failed"):
        with allocating(10, "a small matrix"):
            raise MemoryError
    monkeypatch.setenv("CERTIFY_MEMORY_LIMIT", "lots")
    with pytest.raises(ModelError, match="is not a size"):
        budget()


def test_default_budget_is_half_of_what_is_available(monkeypatch):
    monkeypatch.delenv("CERTIFY_MEMORY_LIMIT", raising=False)
    limit, source = budget()
    meminfo = open("/proc/meminfo").read()
    available = int(meminfo.split("MemAvailable:")[1].split()[0]) * 1024
    assert 0 < limit <= 0.5 * available * 1.2 and "half" in source
