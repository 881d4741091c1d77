"""The optimised slopes' budget (`BoundOptions.alpha_work`, `alpha_deadline`): whatever the budget
the pre-activation bounds contain every sampled pre-activation (sampling oracle, box corners
included) and stay above the triangle LP's optimum over the same earlier bounds (scipy's LP); a
larger budget optimises layers the default work cap leaves at fixed slopes; the deadline is held."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from models.ir import sequential
from solvers.bounds import relu_blocks
from solvers.bounds.options import BoundOptions
from solvers.bounds.pipeline import bound_boxes
from tests.test_lipschitz_batch import _triangle_lp_max
from tests.lipschitz_oracles import random_weights


def _bounds(net, lo, hi, **kw):
    options = BoundOptions(lower_slopes="alpha", rows="per-box", symbolic_output=False, **kw)
    return bound_boxes(relu_blocks(net), lo[None], hi[None], options)


def _widths(nb) -> float:
    return float(sum(np.sum(u - l) for l, u in zip(nb.pre_lo, nb.pre_hi)))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 100_000), budget=st.sampled_from(["none", "past", "short", "unlimited"]),
       steps=st.integers(1, 40))
def test_every_budget_gives_bounds_containing_sampled_preactivations(seed, budget, steps):
    weights = random_weights([5, 12, 12, 12, 12, 3], seed)
    net = sequential(weights)
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-1.0, 0.5, 5)
    hi = lo + rng.uniform(0.05, 1.0, 5)
    now = time.perf_counter()
    kw = {"none": {}, "past": {"alpha_work": np.inf, "alpha_deadline": now - 1.0},
          "short": {"alpha_work": np.inf, "alpha_deadline": now + 0.002},
          "unlimited": {"alpha_work": np.inf, "alpha_deadline": now + 60.0}}[budget]
    nb = _bounds(net, lo, hi, alpha_steps=steps, **kw)
    xs = np.vstack([rng.uniform(lo, hi, (300, 5)), np.where(rng.random((64, 5)) < 0.5, lo, hi)])
    for x in xs:
        for j, z in enumerate(net.preactivations(x)[: len(nb.pre_lo)]):
            assert np.all(z >= nb.pre_lo[j][0] - 1e-12) and np.all(z <= nb.pre_hi[j][0] + 1e-12)


def test_an_unlimited_work_cap_optimises_every_layer_above_the_lp():
    """With a work cap of 0 no layer is optimised (the fixed slopes' bounds); without a cap every
    layer is, and its bounds tighten while never crossing the triangle LP's optimum (CROWN with any
    slopes is a feasible dual point of that LP)."""
    weights = random_weights([4, 16, 16, 16, 16, 2], 3)
    net = sequential(weights)
    lo, hi = np.full(4, -1.0), np.full(4, 1.0)
    fixed = _bounds(net, lo, hi, alpha_work=0.0)
    past = _bounds(net, lo, hi, alpha_work=np.inf, alpha_deadline=time.perf_counter() - 1.0)
    free = _bounds(net, lo, hi, alpha_work=np.inf, alpha_steps=30, alpha_deadline=time.perf_counter() + 60.0)
    for a, b in zip(past.pre_lo + past.pre_hi, fixed.pre_lo + fixed.pre_hi):
        np.testing.assert_array_equal(a, b)  # a deadline already passed optimises nothing
    assert _widths(free) < _widths(fixed) * (1 - 1e-3)
    j = len(free.pre_lo) - 1
    n = weights[j][0].shape[0]
    for i in range(n):
        c = np.zeros(n)
        c[i] = 1.0
        lp_hi = _triangle_lp_max(weights, [p[0] for p in free.pre_lo], [p[0] for p in free.pre_hi], j, c, lo, hi)
        lp_lo = -_triangle_lp_max(weights, [p[0] for p in free.pre_lo], [p[0] for p in free.pre_hi], j, -c, lo, hi)
        assert free.pre_hi[j][0, i] >= lp_hi - 1e-7 * (1 + abs(lp_hi))
        assert free.pre_lo[j][0, i] <= lp_lo + 1e-7 * (1 + abs(lp_lo))


def test_the_alpha_deadline_is_held():
    """Thousands of steps asked for, 0.3 s given: the bounds return about then."""
    weights = random_weights([30, 200, 200, 200, 200, 10], 0)
    net = sequential(weights)
    lo, hi = np.full(30, -1.0), np.full(30, 1.0)
    t = time.perf_counter()
    _bounds(net, lo, hi, alpha_work=np.inf, alpha_steps=100_000, alpha_deadline=t + 0.3)
    assert time.perf_counter() - t < 2.0
