"""rho_hat by sampling against the certified rho of linear-model boxes (theory vs practice)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression

from certify.errors import BadInput
from certify.ldp import empirical_rho, make_mechanism, theory_vs_practice
from certify.robustness.classifiers import linear_hyperrectangle


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return LogisticRegression(max_iter=5000).fit(X, y), X


@pytest.mark.parametrize("name", ["laplace", "pm", "sw", "exponential", "krr"])
def test_certified_rho_lower_bounds_rho_hat(cancer, name):
    model, X = cancer
    x0 = X[7]
    cert = linear_hyperrectangle(model, x0, features=[0, 20])
    mech = make_mechanism(name, 1.0, **({"clip": True} if name == "laplace" else {}))
    rows = theory_vs_practice(mech, model, cert, [1.0, 4.0, 8.0], features=[0, 20], n=3000, sampler=11)
    for row in rows:
        assert row.consistent, row.to_dict()  # rho <= upper end of the 99% interval of rho_hat
        assert 0 <= row.rho <= 1 and row.n == 3000 and "numpy" in row.sampler


def test_callable_scores_and_exact_sampler(cancer):
    model, X = cancer
    w = torch.tensor(np.vstack([-model.coef_[0], model.coef_[0]]), dtype=torch.float64)
    b = torch.tensor([-model.intercept_[0], model.intercept_[0]], dtype=torch.float64)
    net = torch.nn.Linear(30, 2).double()
    with torch.no_grad():
        net.weight.copy_(w / 2)
        net.bias.copy_(b / 2)
    cert = linear_hyperrectangle(model, X[3], features=[1])
    import random

    out = empirical_rho(make_mechanism("pm", 3.0), net, cert, features=[1], n=60, sampler=random.Random(1))
    assert out.consistent and "exact" in out.sampler


def test_uncertified_box_can_be_inconsistent(cancer):
    model, X = cancer
    x0 = X[7]
    cert = linear_hyperrectangle(model, x0, features=[27])
    assert cert.box.lo[27] > 0.2  # the class changes within [0, 1] on feature 27
    # a box larger than the robust region (all of [0, 1] on feature 27): rho claims more than sampling sees
    box = (np.where(np.arange(30) == 27, 0.0, x0), np.where(np.arange(30) == 27, 1.0, x0))
    big = empirical_rho(make_mechanism("pm", 1.0), model, box, point=x0, features=[27], n=4000, sampler=3)
    tight = empirical_rho(make_mechanism("pm", 1.0), model, cert, features=[27], n=4000, sampler=3)
    assert tight.consistent and tight.rho < big.rho == pytest.approx(1.0)
    assert not big.consistent


def test_bad_arguments(cancer):
    model, X = cancer
    cert = linear_hyperrectangle(model, X[3], features=[1])
    with pytest.raises(BadInput):
        empirical_rho(make_mechanism("pm", 3.0), model, cert, features=[1], n=0)
    with pytest.raises(BadInput):
        empirical_rho(make_mechanism("pm", 3.0), model, cert, features=[1], confidence=1.0)
