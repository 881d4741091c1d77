"""Post-training weight perturbation, the (empirical) sensitivity sampler and the utility loss."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from certify.errors import BadInput
from certify.privacy import (EmpiricalSensitivity, NumpySampler, perturb_weights, sensitivity_sampler,
                             utility_loss)


def ridge(x, y, lam=0.5):
    """Deterministic training algorithm with a closed form: ridge regression weights."""
    return np.linalg.solve(x.T @ x + lam * np.eye(x.shape[1]), x.T @ y)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3))
    return x, x @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=12)


def test_sensitivity_sampler_against_recomputed_pairs(data):
    x, y = data
    est = sensitivity_sampler(ridge, x, y, pairs=15, seed=4)
    assert isinstance(est, EmpiricalSensitivity) and est.basis == "empirical" and est.pairs == 15
    n = len(x)
    for (i, j), l1, l2 in zip(est.pair_indices, est.per_pair_l1, est.per_pair_l2):
        assert i != j
        keep_i, keep_j = np.arange(n) != i, np.arange(n) != j
        diff = ridge(x[keep_i], y[keep_i]) - ridge(x[keep_j], y[keep_j])
        assert l1 == pytest.approx(np.abs(diff).sum(), rel=1e-12)
        assert l2 == pytest.approx(np.linalg.norm(diff), rel=1e-12)
    assert est.l1 == max(est.per_pair_l1) and est.l2 == max(est.per_pair_l2)
    # a sample maximum: never above the maximum over all pairs (brute force)
    full = max(np.abs(ridge(x[np.arange(n) != i], y[np.arange(n) != i]) - ridge(x[np.arange(n) != j], y[np.arange(n) != j])).sum()
               for i, j in itertools.combinations(range(n), 2))
    assert est.l1 <= full * (1 + 1e-12)


def _head_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 40), torch.nn.ReLU(), torch.nn.Linear(40, 50))


@pytest.mark.parametrize("family,dist,delta", [("logistic", stats.logistic, None), ("laplace", stats.laplace, None),
                                               ("gaussian", stats.norm, 1e-5)])
def test_perturb_weights_noises_only_the_head(family, dist, delta):
    """KS of the weight changes (2050 values, seed 8) against the calibrated noise; false alarm 1e-3."""
    model = _head_model()
    before = [p.detach().clone() for p in model.parameters()]
    out = perturb_weights(model, epsilon=2.0, sensitivity=0.05, delta=delta, family=family, sampler=NumpySampler(8))
    assert out.layer == "2" and out.weights == 40 * 50 + 50
    for p, b in zip(model.parameters(), before):  # the original is untouched
        assert torch.equal(p, b)
    noisy = list(out.module.parameters())
    assert torch.equal(noisy[0], before[0]) and torch.equal(noisy[1], before[1])  # body unchanged
    change = torch.cat([(noisy[2] - before[2]).reshape(-1), noisy[3] - before[3]]).detach().double().numpy()
    scale = out.mechanism.scale
    if family != "gaussian":
        assert scale == pytest.approx(0.05 / 2.0, rel=1e-15)
    assert stats.kstest(change, dist(scale=scale).cdf).pvalue > 1e-3
    g = out.guarantee
    assert (g.epsilon, g.delta, g.metric, g.alpha, g.empirical) == (2.0, delta or 0.0, "records", 1.0, False)


def test_empirical_sensitivity_labels_the_guarantee(data):
    x, y = data
    est = sensitivity_sampler(ridge, x, y, pairs=5, seed=1)
    out = perturb_weights(_head_model(), epsilon=1.0, sensitivity=est, family="logistic", sampler=0)
    assert out.guarantee.empirical and "EMPIRICAL" in out.guarantee.describe()
    assert out.to_dict()["guarantee"]["basis"] == "empirical"
    assert out.mechanism.sensitivity == est.l1
    gauss = perturb_weights(_head_model(), epsilon=1.0, delta=1e-5, sensitivity=est, family="gaussian", sampler=0)
    assert gauss.mechanism.sensitivity == est.l2


def test_secure_weight_perturbation_and_named_layer():
    out = perturb_weights(_head_model(), epsilon=1.0, sensitivity=0.1, layer="0")
    assert out.mechanism.sampler.name == "secure" and out.layer == "0"
    with pytest.raises(BadInput, match="not found"):
        perturb_weights(_head_model(), epsilon=1.0, sensitivity=0.1, layer="head")
    with pytest.raises(BadInput, match="delta"):
        perturb_weights(_head_model(), epsilon=1.0, sensitivity=0.1, family="gaussian")
    with pytest.raises(BadInput, match="sensitivity"):
        perturb_weights(_head_model(), epsilon=1.0, sensitivity=-0.1)


def test_utility_loss_by_hand():
    assert utility_loss(0.9, 0.96) == pytest.approx(1 - 0.9 / 0.96)
    assert utility_loss(0.96, 0.96) == 0.0
    with pytest.raises(BadInput):
        utility_loss(0.5, 0.0)
