"""The branch-and-bound over activation patterns (`solvers.region_bab`) and its partial-pattern norm
bound (`certify.lipschitz.exact_regions.pattern_norm_bound`), against independent oracles: region
enumeration with verified interiors (`tests.lipschitz_oracles`) and Jacobians of sampled slopes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certify.lipschitz.exact_regions import pattern_norm_bound
from certify.lipschitz.options import NormQuestion
from models.ir import sequential
from solvers.bounds import network_bounds
from solvers.neuron_ties import neuron_ties
from solvers.region_bab import region_bab
from tests.lipschitz_oracles import exact_lipschitz, jacobian, opnorm, random_box_case

QUESTIONS = [("linf", "linf", None), ("l1", "l1", None), ("linf", "l2", None), ("l1", "l2", None),
             ("l2", "l2", None), ("l2", None, 0), ("linf", None, 0)]


def _setup(seed: int, p: str, q: str | None, c: int | None):
    w, lo, hi = random_box_case(seed, 3, 5, 2, 2, 0.4)
    net = sequential(w)
    nb = network_bounds(net, lo, hi, "interval")
    hidden = [W for W, _ in w[:-1]], [b for _, b in w[:-1]]
    target = None if c is None else np.eye(2)[c]
    question = NormQuestion.of(net, p, q or "l1", None, target)
    return w, lo, hi, net, nb, neuron_ties(*hidden), question, target


def _norm(J: np.ndarray, p: str, q: str | None, target) -> float:
    if target is None:
        return opnorm(J, p, q)
    g = J.T @ target
    return float({"linf": np.abs(g).sum(), "l1": np.abs(g).max(), "l2": np.linalg.norm(g)}[p])


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("p,q,c", QUESTIONS)
def test_region_bab_reaches_the_enumerated_constant(seed, p, q, c):
    w, lo, hi, net, nb, ties, question, target = _setup(seed, p, q, c)
    exact = exact_lipschitz(w, lo, hi, p, q, target)  # the oracle: every region with an interior
    weights = [W for W, _ in w]

    def bound(s_lo, s_hi):
        return pattern_norm_bound(weights, s_lo, s_hi, question, None, None)

    res = region_bab(net, lo, hi, nb.phases(), ties, bound, lambda *a: False,
                     lambda b: b <= exact * (1 + 1e-9), max_lps=100000)
    assert res.complete
    # sound and exact: never below the constant, and closed to it (these nets have no slivers)
    assert exact * (1 - 1e-12) <= res.upper <= exact * (1 + 1e-9)
    # anytime: stopped after a single LP, the bound still holds
    early = region_bab(net, lo, hi, nb.phases(), ties, bound, lambda *a: False, lambda b: False, max_lps=0)
    assert not early.complete and early.upper >= exact * (1 - 1e-12)


@pytest.mark.parametrize("above", [None, -math.inf])  # interval bounds alone, and linear ones too
@pytest.mark.parametrize("p,q,c", QUESTIONS)
def test_pattern_norm_bound_covers_every_slope_choice(p, q, c, above):
    w, lo, hi, net, nb, ties, question, target = _setup(11, p, q, c)
    weights = [W for W, _ in w]
    rng = np.random.default_rng(5)
    for _ in range(5):
        # a slope box: some neurons fixed, the others anywhere in [0, 1]
        fixed = [rng.random(W.shape[0]) < 0.5 for W, _ in w[:-1]]
        val = [rng.integers(0, 2, W.shape[0]).astype(float) for W, _ in w[:-1]]
        s_lo = [np.where(f, v, 0.0) for f, v in zip(fixed, val)]
        s_hi = [np.where(f, v, 1.0) for f, v in zip(fixed, val)]
        b = pattern_norm_bound(weights, s_lo, s_hi, question, above, None)
        # oracle: the norm of sampled Jacobians (vertex slopes and interior ones) with those slopes
        for _ in range(60):
            s = [np.where(f, v, rng.choice([0.0, 1.0, rng.random()], size=v.size)) for f, v in zip(fixed, val)]
            assert _norm(jacobian(w, s), p, q, target) <= b * (1 + 1e-12)
        # one fixed pattern: the bound is its norm (certified, a few ulps above)
        exact = _norm(jacobian(w, val), p, q, target)
        assert exact <= pattern_norm_bound(weights, val, val, question, None, None) <= exact * (1 + 1e-9) + 1e-300
