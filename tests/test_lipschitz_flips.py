"""Witnesses by single-neuron flips (`certify.lipschitz.witness.flip_search`) and the batched pattern
Jacobians and norms it ranks flips by. Oracles: the test's own Jacobian products and brute-force
operator norms (`tests.lipschitz_oracles.jacobian`, `opnorm`; ||J||_{inf->1} = ||J^T||_{inf->1}, whose
enumeration runs over the few outputs), the brute-force region enumeration (`regions`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.lipschitz.options import NormQuestion
from certify.lipschitz.replay import EXACT_ENUMERATION, jacobian_norms, pattern_jacobians
from certify.lipschitz.witness import WitnessSearch, flip_search
from models.box import Box
from models.ir import sequential
from solvers.bounds import network_bounds, relu_blocks
from solvers.phases import UNSTABLE
from solvers.runtime import Budget
from tests.lipschitz_oracles import jacobian, opnorm, random_weights, regions

N = EXACT_ENUMERATION + 1  # more inputs than input sign vectors are enumerated for


def _norm(J: np.ndarray) -> float:
    return opnorm(J.T, "linf", "l1")


@given(seed=st.integers(0, 10_000))
@settings(max_examples=10, deadline=None)
def test_pattern_jacobians_and_their_exact_norms(seed):
    rng = np.random.default_rng(seed)
    w = random_weights([N, 5, 4, 3], seed)
    pats = [rng.integers(0, 2, (4, W.shape[0])).astype(float) for W, _ in w[:-1]]
    J = pattern_jacobians(relu_blocks(sequential(w)), pats)
    norms = jacobian_norms(J, "linf", "l1", None, exact_outputs=True)
    for k in range(4):
        own = jacobian(w, [p[k] for p in pats])
        assert np.allclose(J[k], own, rtol=1e-12, atol=1e-12)
        assert np.isclose(norms[k], _norm(own), rtol=1e-12)


def test_flips_raise_a_weak_witness_and_stay_below_the_constant():
    w = random_weights([N, 6, 6, 2], 5)
    center = np.random.default_rng(5).uniform(-0.5, 0.5, N)
    lo, hi = center - 0.3, center + 0.3
    net = sequential(w)
    box = Box.from_bounds(lo, hi)
    question = NormQuestion.of(net, "linf", "l1")
    search = WitnessSearch(net, box, question, Budget(60.0))
    search.sample(samples=1)  # one random point: a weak start
    start = search.lower
    free = [ph == UNSTABLE for ph in network_bounds(net, lo, hi, "symbolic").phases()]
    raised = flip_search(search, free, None)
    exact = max(_norm(jacobian(w, pattern)) for pattern in regions(w, lo, hi))
    assert raised and start < search.lower <= exact * (1 + 1e-9)
    # the witness is a point of the box whose own Jacobian has the norm claimed
    x = search.point.x
    assert np.all(lo <= x) and np.all(x <= hi)
    h, pattern = x, []
    for W, b in w[:-1]:
        z = W @ h + b
        pattern.append((z > 0).astype(float))
        h = np.maximum(z, 0.0)
    assert np.isclose(_norm(jacobian(w, pattern)), search.lower, rtol=1e-9)
