"""The Clarke-Jacobian bound with a parent's per-functional bounds as caps
(`solvers.bounds.jacobian.clarke_functional_bounds(caps=)`, the Lipschitz tree's children): the
capped bound of a child slope box equals the uncapped one where the caps are the parent's (the
skipped functionals cannot hold the maximum), bounds fewer functionals, and covers the child's
exact norm (every slope vertex and output sign vector enumerated: the oracle). The phase-split
tree whose children carry caps (14 inputs, 5 outputs) is checked against activation-region
enumeration in tests/test_bound_worker.py."""

from __future__ import annotations

from itertools import product

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import solvers.bounds.jacobian as jm
import solvers.bounds.live as live_mod
from solvers.bounds.jacobian import clarke_functional_bounds
from tests.lipschitz_oracles import random_weights
from tests.test_jacobian_linear import _jac, _slopes, _vertices


def _child(rng, s_lo, s_hi, fix: int):
    """A slope box inside the given one: `fix` free slopes fixed at an end, others narrowed."""
    lo, hi = [s.copy() for s in s_lo], [s.copy() for s in s_hi]
    free = [(j, i) for j in range(len(lo)) for i in np.flatnonzero(lo[j] < hi[j])]
    for k, (j, i) in enumerate(free):
        if k < fix:
            lo[j][i] = hi[j][i] = hi[j][i] if rng.random() < 0.5 else lo[j][i]
        elif rng.random() < 0.3:
            lo[j][i] = lo[j][i] + 0.3 * (hi[j][i] - lo[j][i])
    return lo, hi


def _batch(boxes):
    return ([np.stack([b[0][j] for b in boxes]) for j in range(len(boxes[0][0]))],
            [np.stack([b[1][j] for b in boxes]) for j in range(len(boxes[0][0]))])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(13, 24), m=st.integers(4, 6), fix=st.integers(0, 4))
def test_caps_of_the_parent_give_the_uncapped_bound_of_the_child(seed, n, m, fix):
    rng = np.random.default_rng(seed)
    sizes = [n, 6, 5, m]
    Ws = [W for W, _ in random_weights(sizes, seed)]
    parent = _slopes(rng, sizes, 7)
    children = [_child(rng, *parent, fix), _child(rng, *parent, fix + 1), parent]
    p_lo, p_hi = _batch([parent])
    _, caps = clarke_functional_bounds(Ws, p_lo, p_hi, "linf", "l1", linear_above=None)
    c_lo, c_hi = _batch(children)
    caps3 = np.repeat(caps, 3, axis=0)
    caps3[2] = np.inf  # a box without caps: every functional bounded
    plain, plain_per = clarke_functional_bounds(Ws, c_lo, c_hi, "linf", "l1", linear_above=None)
    capped, per = clarke_functional_bounds(Ws, c_lo, c_hi, "linf", "l1", linear_above=None, caps=caps3)
    # the interval pass is monotone in the slope box: the parent's bound of each functional caps the
    # child's, so the maximum is the same, and each functional's bound is at most its cap
    assert np.array_equal(capped, plain)
    assert np.all(per <= caps3) and np.all(per >= plain_per)
    # with the linear bounds too: still a bound of the child's exact norm, and at most its cap
    signs = [np.array(c) for c in product((-1.0, 1.0), repeat=m)]
    linear, _ = clarke_functional_bounds(Ws, c_lo, c_hi, "linf", "l1", caps=caps3)
    for b, (lo, hi) in enumerate(children):
        exact = max(np.abs(c @ _jac(Ws, v)).sum() for v in _vertices(lo, hi) for c in signs)
        assert exact * (1 - 1e-12) <= linear[b] <= capped[b] * (1 + 1e-12)


def test_caps_spare_the_functionals_below_the_maximum(monkeypatch):
    """A child whose bound stays near its parent's bounds only the functionals near the maximum."""
    rng = np.random.default_rng(3)
    sizes = [20, 8, 7, 6]  # 32 functionals
    Ws = [W for W, _ in random_weights(sizes, 3)]
    parent = _slopes(rng, sizes, 6)
    p_lo, p_hi = _batch([parent])
    _, caps = clarke_functional_bounds(Ws, p_lo, p_hi, "linf", "l1", linear_above=None)
    bounded = []
    real = jm._functional_bounds

    def spy(weights, s_lo, s_hi, p, C, *a):
        bounded.append(C.shape[-2] * s_lo[0].shape[0])
        return real(weights, s_lo, s_hi, p, C, *a)

    monkeypatch.setattr(jm, "_functional_bounds", spy)
    value, per = clarke_functional_bounds(Ws, p_lo, p_hi, "linf", "l1", linear_above=None, caps=caps)
    assert value[0] == caps.max() and sum(bounded) < caps.shape[1]
    # the skipped ones keep their caps, none above the maximum
    assert np.all(per <= value[0])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 10), m=st.integers(1, 4),
       pair=st.sampled_from([("linf", "l1"), ("linf", "linf"), ("l1", "l1"), ("l2", "l2"), ("l1", "l2")]))
def test_switches_dead_on_every_box_are_dropped_without_changing_the_bound(seed, n, m, pair):
    """Neurons whose slope is 0 on every box of the batch are left out of the Jacobian bound
    (`solvers.bounds.live`): the bounds equal those over the whole network, and cover the exact norm of
    every box (every slope vertex enumerated)."""
    rng = np.random.default_rng(seed)
    sizes = [n, 7, 6, m]
    Ws = [W for W, _ in random_weights(sizes, seed)]
    boxes = [_slopes(rng, sizes, 5) for _ in range(3)]
    for j, width in enumerate(sizes[1:-1]):  # a third of each layer inactive on every box
        dead = rng.choice(width, size=width // 3, replace=False)
        for lo, hi in boxes:
            lo[j][dead] = hi[j][dead] = 0.0
    s_lo, s_hi = _batch(boxes)
    assert live_mod.live_neurons([s > 0 for s in s_hi], Ws) is not None
    p, q = pair
    share = live_mod.LIVE_SHARE
    try:
        live_mod.LIVE_SHARE = 0.0
        whole, _ = clarke_functional_bounds(Ws, s_lo, s_hi, p, q)
        live_mod.LIVE_SHARE = 1.0
        live, _ = clarke_functional_bounds(Ws, s_lo, s_hi, p, q)
    finally:
        live_mod.LIVE_SHARE = share
    assert np.allclose(live, whole, rtol=1e-9, atol=0.0)
    from tests.lipschitz_oracles import opnorm

    for b, (lo, hi) in enumerate(boxes):
        exact = max(opnorm(_jac(Ws, v), p, q) for v in _vertices(lo, hi))
        assert exact * (1 - 1e-9) <= live[b]
