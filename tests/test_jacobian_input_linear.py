"""Linear bounds of c^T J u with u free in [-1, 1]^n (`solvers.bounds.jacobian_input_linear`) and
the Clarke-Jacobian bound that uses them above 12 linf inputs, against exhaustive enumeration:
c^T J u is multilinear in the slopes and linear in u, so its maximum over the slope box and the
input box is attained at a slope vertex with u = sign(J^T c); every vertex is enumerated here
(the oracle), independently of the relaxation."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.bounds.jacobian import clarke_norm_bound
from solvers.bounds.jacobian_input_linear import input_linear_upper
from tests.lipschitz_oracles import random_weights
from tests.test_jacobian_linear import _slopes, _vertices


def _jac(Ws, slopes):
    J = Ws[0]
    for s, W in zip(slopes, Ws[1:]):
        J = W @ (s[:, None] * J)
    return J


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 16), width=st.integers(2, 6), depth=st.integers(1, 3),
       m=st.integers(1, 4), free=st.integers(0, 8))
def test_the_bound_covers_every_slope_vertex(seed, n, width, depth, m, free):
    rng = np.random.default_rng(seed)
    sizes = [n] + [width] * depth + [m]
    Ws = [W for W, _ in random_weights(sizes, seed)]
    s_lo, s_hi = _slopes(rng, sizes, free)
    C = rng.normal(size=(3, m))
    up = input_linear_upper(Ws, s_lo, s_hi, C)
    exact = np.max([np.abs(C @ _jac(Ws, v)).sum(axis=1) for v in _vertices(s_lo, s_hi)], axis=0)
    assert np.all(up >= exact * (1 - 1e-12) - 1e-12)
    if free == 0:  # one Jacobian: the bound is its value (up to the rounding allowance)
        assert up == pytest.approx(exact, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clarke_bound_above_12_inputs_covers_the_clarke_set_and_is_not_looser(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    sizes = [20, 8, 7, 3]
    Ws = [W for W, _ in random_weights(sizes, seed)]
    s_lo, s_hi = _slopes(rng, sizes, 9)
    signs = [np.array(c) for c in product((-1.0, 1.0), repeat=3)]
    # ||J||_{inf->1} = max over c in {+-1}^3 of ||J^T c||_1, at the slope vertices
    exact = max(np.abs(c @ _jac(Ws, v)).sum() for v in _vertices(s_lo, s_hi) for c in signs)
    with_linear = clarke_norm_bound(Ws, s_lo, s_hi, "linf", "l1")
    interval = clarke_norm_bound(Ws, s_lo, s_hi, "linf", "l1", linear_above=None)
    assert exact * (1 - 1e-12) <= with_linear <= interval
    import solvers.bounds.jacobian as jacobian_module

    # the input-linear bound alone (the entrywise linear rows off)
    monkeypatch.setattr(jacobian_module, "_linear_rows", lambda weights, s_lo, s_hi, C, Bm, *a: Bm)
    alone = clarke_norm_bound(Ws, s_lo, s_hi, "linf", "l1")
    assert exact * (1 - 1e-12) <= alone < interval
    monkeypatch.undo()
    target = rng.normal(size=3)  # a scalar target: ||J^T c||_1
    exact_t = max(np.abs(target @ _jac(Ws, v)).sum() for v in _vertices(s_lo, s_hi))
    assert exact_t * (1 - 1e-12) <= clarke_norm_bound(Ws, s_lo, s_hi, "linf", None, target=target) \
        <= clarke_norm_bound(Ws, s_lo, s_hi, "linf", None, target=target, linear_above=None)


@pytest.mark.parametrize("top_inputs", [100, 10])
def test_entrywise_linear_rows_only_on_boxes_the_input_linear_bound_left(monkeypatch, top_inputs):
    """A batch of slope boxes: the entrywise linear rows run on exactly the boxes whose bounds the
    input-linear bound did not change (here box 1, its result withheld), with that box's own
    threshold, and beyond ENTRYWISE_TOP_INPUTS inputs then also (`_entrywise_top`) on the
    ENTRYWISE_TOP boxes of largest bound, one functional a call (the box's largest), never twice
    the same; every bound still covers the box's exact norm (vertex enumeration) and is no looser
    than its interval bound."""
    import solvers.bounds.jacobian as jm

    monkeypatch.setattr(jm, "ENTRYWISE_TOP_INPUTS", top_inputs)
    monkeypatch.setattr(jm, "ENTRYWISE_TOP", 1)
    from solvers.bounds.jacobian import clarke_norm_bound_batch

    rng = np.random.default_rng(7)
    sizes = [20, 8, 7, 3]
    Ws = [W for W, _ in random_weights(sizes, 7)]
    boxes = [_slopes(rng, sizes, 7) for _ in range(3)]
    s_lo = [np.stack([b[0][j] for b in boxes]) for j in range(len(sizes) - 2)]
    s_hi = [np.stack([b[1][j] for b in boxes]) for j in range(len(sizes) - 2)]
    signs = [np.array(c) for c in product((-1.0, 1.0), repeat=3)]
    exact = [max(np.abs(c @ _jac(Ws, v)).sum() for v in _vertices(lo, hi) for c in signs) for lo, hi in boxes]
    interval = clarke_norm_bound_batch(Ws, s_lo, s_hi, "linf", "l1", linear_above=None)
    real_rows, real_input = jm._linear_rows, jm._input_linear
    calls = []

    def rows_spy(weights, sl, sh, C, Bm, p, above, deadline=None):
        calls.append((sl[0].copy(), np.array(above, dtype=float), np.array(C, dtype=float)))
        return real_rows(weights, sl, sh, C, Bm, p, above, deadline)

    def input_withholding_box_1(weights, sl, sh, C, vals, above, deadline=None):
        out = real_input(weights, sl, sh, C, vals, above, deadline).copy()
        out[1] = vals[1]
        return out

    monkeypatch.setattr(jm, "_linear_rows", rows_spy)
    monkeypatch.setattr(jm, "_input_linear", input_withholding_box_1)
    thresholds = np.array([-1.0, -2.0, -3.0])
    got = clarke_norm_bound_batch(Ws, s_lo, s_hi, "linf", "l1", linear_above=thresholds)
    # first: box 1 alone, with its threshold
    assert np.array_equal(calls[0][0], s_lo[0][[1]]) and np.array_equal(calls[0][1], thresholds[[1]])
    top = int(np.argmax(got))
    if top_inputs >= 20:
        assert len(calls) == 1
    else:  # then the box of largest bound, a functional at a time, each once
        assert len(calls) >= 2
        seen = []
        for sl, above, C in calls[1:]:
            assert np.array_equal(sl, s_lo[0][[top]]) and np.array_equal(above, thresholds[[top]])
            assert C.shape[:2] == (1, 1) and not any(np.array_equal(C, c) for c in seen)
            seen.append(C)
    for b in range(3):
        assert exact[b] * (1 - 1e-12) <= got[b] <= interval[b]
    # box 1 got the entrywise linear bound: what the same call gives it alone with the rows on
    monkeypatch.setattr(jm, "_input_linear", lambda weights, sl, sh, C, vals, *a: vals)
    monkeypatch.setattr(jm, "ENTRYWISE_TOP_INPUTS", 100)
    alone = clarke_norm_bound_batch(Ws, [s[[1]] for s in s_lo], [s[[1]] for s in s_hi], "linf", "l1")
    assert got[1] == alone[0] or (top == 1 and got[1] <= alone[0])


def test_no_linear_bound_starts_past_the_deadline():
    import time

    rng = np.random.default_rng(3)
    sizes = [20, 8, 7, 3]
    Ws = [W for W, _ in random_weights(sizes, 3)]
    s_lo, s_hi = _slopes(rng, sizes, 9)
    interval = clarke_norm_bound(Ws, s_lo, s_hi, "linf", "l1", linear_above=None)
    assert clarke_norm_bound(Ws, s_lo, s_hi, "linf", "l1", deadline=time.perf_counter() - 1.0) == interval
    assert clarke_norm_bound(Ws, s_lo, s_hi, "linf", "l1") < interval
