"""Probabilistic radii (Hoeffding): the sample count, the statement's direction against the exact
radius over repeated seeded runs, black-box classifiers, and the label: never certified."""

from __future__ import annotations

import math

import numpy as np
import pytest

import certify
from certify.errors import BadInput
from certify.robustness.probabilistic import hoeffding_samples
from models.ir import sequential
from tests.robustness_oracles import exact_radius, forward, small_classifier


def test_sample_count_is_hoeffdings():
    # n = ln(2 / omega) / (2 (tau / 2)^2): omega = 0.05, tau = 0.02 -> 18444.4 (the paper's 1.8e4)
    assert hoeffding_samples(0.05, 0.02) == 18445
    assert hoeffding_samples(0.05, 0.02, tests=10) == math.ceil(math.log(400) / (2 * 0.01**2))


def test_probabilistic_radius_is_not_below_the_exact_radius():
    """Below the exact radius no sample can flip, so every test there passes: correct code meets
    the issue's criterion (>= (1 - omega) of the runs) with certainty (false-alarm rate 0)."""
    w = small_classifier((3, 8, 4), 1)
    net = sequential(w)
    x0 = np.array([0.14, 0.45, -0.3])
    exact = exact_radius(w, x0, "linf", domain=(-1, 1))
    omega, runs = 0.05, 20
    ok = 0
    for seed in range(runs):
        p = certify.probabilistic_radius(net, x0, domain=(-1, 1), omega=omega, tau=0.02, seed=seed)
        assert p.status == "probabilistic" and not p.certified and p.to_dict()["certified"] is False
        ok += p.lower >= exact - p.precision
    assert ok >= math.ceil((1 - omega) * runs)


def test_the_statement_holds_in_repeated_runs():
    """The guarantee itself: with probability >= 1 - omega at most a fraction tau of the box of
    radius `lower` (within the domain) flips. Each run's flip fraction is measured by an
    independent Monte Carlo estimate (m = 200000 points; it exceeds the truth by SLACK = 0.005 with
    probability <= exp(-2 m SLACK^2) = exp(-10) = 4.54e-5). A run violates the statement with
    probability <= omega + 4.54e-5 =: p; we allow up to 4 violations of 20 runs: for a correct
    implementation the false-alarm rate is P(Binomial(20, p) >= 5) = 2.58e-3 <= 2.7e-3 (in the worst
    case; the one-sided Hoeffding bound makes each run's rate <= omega / 2, so the real rate is far
    lower). Seeds are fixed, so the run is reproducible."""
    w = small_classifier((3, 8, 4), 1)
    net = sequential(w)
    x0 = np.array([0.14, 0.45, -0.3])
    omega, tau, runs, slack, m = 0.05, 0.05, 20, 0.005, 200_000
    c = int(np.argmax(forward(w, x0)))
    check = np.random.default_rng(12345)
    violations = 0
    for seed in range(runs):
        p = certify.probabilistic_radius(net, x0, domain=(-1, 1), omega=omega, tau=tau, seed=seed)
        X = check.uniform(p.box.lo, p.box.hi, size=(m, 3))
        Y = net.forward(X)
        others = np.max(np.delete(Y, c, axis=1), axis=1)
        violations += float(np.mean(others >= Y[:, c])) > tau + slack
    p_run = omega + math.exp(-2 * m * slack**2)
    false_alarm = 1 - sum(math.comb(runs, k) * p_run**k * (1 - p_run) ** (runs - k) for k in range(5))
    assert false_alarm <= 2.7e-3
    assert violations <= 4


def test_black_box_classifiers():
    w = small_classifier((2, 6, 6, 3), 0)
    x0 = np.array([0.1, -0.2])

    class Model:  # scikit-learn style
        def predict(self, X):
            return np.argmax(np.array([forward(w, x) for x in X]), axis=1)

    labels = lambda X: Model().predict(X)  # noqa: E731
    a = certify.probabilistic_radius(Model(), x0, max_radius=2.0, seed=3, tau=0.1)
    b = certify.probabilistic_radius(labels, x0, max_radius=2.0, seed=3, tau=0.1)
    assert a.lower == b.lower and a.predicted_class == int(np.argmax(forward(w, x0)))
    assert a.lower >= exact_radius(w, x0, "linf") - a.precision
    assert a.upper is not None and a.upper - a.lower <= a.precision
    assert a.box.hi[0] - x0[0] == pytest.approx(a.lower)


def test_bad_input():
    net = sequential(small_classifier((2, 4, 3), 0))
    for kwargs, msg in [(dict(omega=1.0, domain=(0, 1)), "omega"), (dict(tau=0, domain=(0, 1)), "tau"),
                        (dict(), "max_radius or a domain"), (dict(max_radius=-1), "max radius")]:
        with pytest.raises(BadInput, match=msg):
            certify.probabilistic_radius(net, [0.5, 0.5], **kwargs)
    with pytest.raises(BadInput, match="has 3 values"):
        certify.probabilistic_radius(net, [0.5, 0.5, 0.5], domain=(0, 1))
