"""Region LPs under a deadline (`solvers.regions`): a call past it builds no LP and claims nothing
(no point, no proof of emptiness), an LP begun just before it still gets LP_GRACE. Oracles: the
pattern of the returned point recomputed by the test's own float64 forward pass, and a pattern
that is empty by construction (a neuron and its exact negation both active on a box where their
pre-activation is never 0)."""

from __future__ import annotations

import time

import numpy as np

from models.ir import sequential
from solvers.regions import LP_GRACE, has_no_interior, interior_point


def _net():
    rng = np.random.default_rng(3)
    W1 = rng.standard_normal((6, 4))
    W1[1] = -W1[0]  # neuron 1 is the negation of neuron 0
    b1 = rng.standard_normal(6)
    b1[1] = -b1[0]
    W2 = rng.standard_normal((2, 6))
    return sequential([(W1, b1), (W2, np.zeros(2))]), (W1, b1)


def _pattern(layer, x):
    W, b = layer
    return [(W @ x + b > 0).astype(np.float64)]


def test_an_lp_begun_before_the_deadline_gets_its_grace():
    net, layer = _net()
    lo, hi = np.full(4, -1.0), np.full(4, 1.0)
    x0 = np.random.default_rng(0).uniform(lo, hi)
    pattern = _pattern(layer, x0)
    x = interior_point(net, pattern, lo, hi, deadline=time.perf_counter() + 0.01 * LP_GRACE)
    assert x is not None and np.all(lo <= x) and np.all(x <= hi)
    assert np.array_equal(_pattern(layer, x)[0], pattern[0])


def test_a_call_past_the_deadline_claims_nothing():
    net, layer = _net()
    lo, hi = np.full(4, -1.0), np.full(4, 1.0)
    x0 = np.random.default_rng(0).uniform(lo, hi)
    past = time.perf_counter() - 1.0
    assert interior_point(net, _pattern(layer, x0), lo, hi) is not None
    assert interior_point(net, _pattern(layer, x0), lo, hi, deadline=past) is None
    # neurons 0 and 1 both active: z and -z > 0 at once, an empty region
    empty = _pattern(layer, x0)
    empty[0][0] = empty[0][1] = 1.0
    assert has_no_interior(net, empty, lo, hi)
    assert not has_no_interior(net, empty, lo, hi, deadline=past)
