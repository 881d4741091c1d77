"""Lower-bound search of local Lipschitz questions (`certify.lipschitz.witness`): dense sampling,
the batched local search and the region walk, against independent oracles (region enumeration by
LPs and brute-force operator norms, `tests.lipschitz_oracles`). Lower bounds must never exceed the
exact constant, every kept value must be a replayed witness, and on tiny nets the search reaches
the exact value."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.lipschitz.options import NormQuestion
from certify.lipschitz.replay import batch_jacobians, norm_estimates
from certify.lipschitz.witness import WitnessSearch, dense_ascent, walk_regions
from models.box import Box
from models.ir import sequential
from solvers.bounds.types import relu_blocks
from solvers.runtime import Budget
from tests.lipschitz_oracles import exact_lipschitz, jacobian, opnorm, random_box_case, random_weights

PAIRS = [("linf", "l1"), ("linf", "linf"), ("l1", "l1"), ("l2", "l1"), ("linf", "l2")]
NETS = {"a": ([2, 6, 6, 2], 3), "b": ([3, 5, 4, 3], 11), "c": ([4, 4, 4, 4, 2], 7)}


def _pattern(weights, x):
    """Activation pattern at x by an independent forward pass."""
    h, pattern = np.asarray(x, float), []
    for W, b in weights[:-1]:
        z = W @ h + b
        s = (z > 0).astype(float)
        pattern.append(s)
        h = s * z
    return pattern


@lru_cache(maxsize=None)
def _case(name):
    sizes, seed = NETS[name]
    w = random_weights(sizes, seed)
    return w, sequential(w), np.full(sizes[0], -0.7), np.full(sizes[0], 0.9)


@lru_cache(maxsize=None)
def _exact(name, p, q):
    w, _, lo, hi = _case(name)
    return exact_lipschitz(w, lo, hi, p, q)


def _search(net, lo, hi, p, q, target=None):
    question = NormQuestion.of(net, p, None if target is not None else q, None, target)
    search = WitnessSearch(net, Box(tuple(lo), tuple(hi)), question, Budget(None))
    search.sample()
    return search


def _check_witness(search, weights, lo, hi, p, q):
    """The kept point lies in the box and its Jacobian (the oracle's) has at least the kept norm."""
    pt = search.point
    assert pt is not None
    assert np.all(pt.x >= lo) and np.all(pt.x <= hi)
    J = jacobian(weights, _pattern(weights, pt.x))
    assert search.lower <= opnorm(J, p, q) * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("p,q", PAIRS)
def test_search_reaches_the_exact_constant_on_tiny_nets(name, p, q):
    w, net, lo, hi = _case(name)
    exact = _exact(name, p, q)
    search = _search(net, lo, hi, p, q)
    walk_regions(search, None)
    assert search.lower <= exact * (1 + 1e-9) + 1e-12
    assert search.lower >= exact * (1 - 1e-6)
    _check_witness(search, w, lo, hi, p, q)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 4), width=st.integers(2, 6), depth=st.integers(1, 3),
       m=st.integers(1, 3), pair=st.sampled_from(PAIRS), radius=st.floats(0.05, 1.0))
def test_dense_ascent_never_exceeds_the_exact_constant(seed, n, width, depth, m, pair, radius):
    p, q = pair
    w, lo, hi = random_box_case(seed, n, width, depth, m, radius)
    net = sequential(w)
    exact = exact_lipschitz(w, lo, hi, p, q)
    search = _search(net, lo, hi, p, q)
    dense_ascent(search, None, samples=512, rounds=10, pop=32, seed=seed)
    assert search.lower <= exact * (1 + 1e-9) + 1e-12
    if search.point is not None:
        _check_witness(search, w, lo, hi, p, q)


def test_short_deadline_still_sound_and_returns():
    w, net, lo, hi = _case("c")
    import time

    search = _search(net, lo, hi, "linf", "l1")
    t = time.perf_counter()
    walk_regions(search, t + 0.05)
    assert time.perf_counter() - t < 5.0
    assert search.lower <= _exact("c", "linf", "l1") * (1 + 1e-9)


@pytest.mark.parametrize("sizes", [[3, 7, 5, 2], [2, 6, 4, 9], [5, 8, 5]])
@pytest.mark.parametrize("p,q", PAIRS + [("l1", "linf"), ("l2", "l2")])
def test_batched_jacobians_and_norm_estimates_match_the_oracle(sizes, p, q):
    w = random_weights(sizes, 5)
    blocks = relu_blocks(sequential(w))
    X = np.random.default_rng(1).uniform(-1, 1, (40, sizes[0]))
    J = batch_jacobians(blocks, X)
    est = norm_estimates(blocks, X, p, q, None)
    for x, Jb, e in zip(X, J, est):
        Jo = jacobian(w, _pattern(w, x))
        assert np.allclose(Jb, Jo, atol=1e-12)
        exact_norm = (p, q) in (("l1", "l1"), ("l1", "linf"), ("linf", "linf"), ("l2", "l2")) or \
            ((p, q) == ("linf", "l1") and sizes[0] <= 16)
        if exact_norm and (p, q) != ("l2", "l2"):
            assert e == pytest.approx(opnorm(Jo, p, q), rel=1e-9)
    c = np.linspace(-1, 1, sizes[-1])
    est_t = norm_estimates(blocks, X, p, None, c)
    dual = {"linf": 1, "l1": np.inf, "l2": 2}[p]
    for x, e in zip(X, est_t):
        assert e == pytest.approx(np.linalg.norm(jacobian(w, _pattern(w, x)).T @ c, dual), rel=1e-9, abs=1e-12)
    J32 = batch_jacobians(blocks, X, np.float32)
    assert J32.dtype == np.float32 and np.allclose(J32, J, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", ["linf", "l1", "l2"])
def test_search_on_a_scalar_target_reaches_the_exact_constant(p):
    w, net, lo, hi = _case("b")
    c = np.array([1.0, -1.0, 0.5])
    exact = exact_lipschitz(w, lo, hi, p, None, target=c)
    search = _search(net, lo, hi, p, None, target=c)
    walk_regions(search, None)
    assert exact * (1 - 1e-6) <= search.lower <= exact * (1 + 1e-9) + 1e-12


def test_dense_ascent_on_a_sub_box_keeps_witnesses_inside_it():
    w, net, lo, hi = _case("a")
    sub_lo, sub_hi = lo + 0.3 * (hi - lo), lo + 0.6 * (hi - lo)
    search = _search(net, lo, hi, "linf", "l1")
    search.lower, search.point = 0.0, None  # only the sub-box search counts
    dense_ascent(search, None, samples=512, rounds=10, pop=32, box=(sub_lo, sub_hi))
    assert search.point is not None and np.all(search.point.x >= sub_lo) and np.all(search.point.x <= sub_hi)
    assert search.lower <= exact_lipschitz(w, sub_lo, sub_hi, "linf", "l1") * (1 + 1e-9) + 1e-12
