"""Inference Privacy mechanisms: scales by hand, releases for IR / torch / callables, provenance."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import torch
from tests.privacy_oracles import exact_delta
from scipy import stats

from certify.cli.common import jsonable
from certify.errors import BadInput
from certify.lipschitz.global_result import GlobalLipschitzResult
from certify.privacy import (GaussInput, GaussOutput, LapOutput, LogisticOutput, NumpySampler, SecureSampler, chain,
                             layer_product_bound, lipschitz_source)
from models import from_torch
from models.zoo import random_relu_net


@pytest.fixture(scope="module")
def net():
    return random_relu_net((6, 12, 3), seed=3)


def test_lap_and_logistic_output_scales_by_hand(net):
    for cls in (LapOutput, LogisticOutput):
        m = cls(net, 7.5, epsilon=0.5, alpha=0.2, sampler=0)
        assert m.scale == pytest.approx(7.5 * 0.2 / 0.5, rel=1e-15) and m.scale >= 7.5 * 0.2 / 0.5
        g = m.guarantee
        assert (g.epsilon, g.delta, g.alpha, g.metric, g.pac) == (0.5, 0.0, 0.2, "l2", True)
        assert g.lipschitz.origin == "user" and g.lipschitz.output_norm == "l1" and g.lipschitz.value == 7.5


@pytest.mark.parametrize("calibration,eps", [("analytic", 2.0), ("classic", 0.5), ("pac", 2.0)])
def test_gauss_output_meets_the_exact_curve(net, calibration, eps):
    m = GaussOutput(net, 4.0, epsilon=eps, delta=1e-6, alpha=0.05, calibration=calibration, sampler=0)
    assert exact_delta(m.scale, eps, 4.0 * 0.05) <= 1e-6
    assert m.calibration.calibration == calibration and m.sampler.name == "numpy"
    if calibration == "classic":
        assert m.scale == pytest.approx(math.sqrt(2 * math.log(1.25e6)) * 0.2 / eps, rel=1e-14)


def test_gauss_output_classic_refused_at_epsilon_one(net):
    with pytest.raises(BadInput, match="analytic"):
        GaussOutput(net, 4.0, epsilon=1.0, delta=1e-6, alpha=0.05, calibration="classic", sampler=0)


def test_secure_default_uses_the_discrete_gaussian_and_zcdp(net):
    m = GaussOutput(net, 4.0, epsilon=1.0, delta=1e-5, alpha=0.05)
    assert isinstance(m.sampler, SecureSampler) and m.sampler.cryptographic
    assert m.calibration.calibration == "zcdp"
    assert m.calibration.sensitivity >= 0.2 * (1 + 2.0**-10)  # headroom for the rounding to the grid
    assert exact_delta(m.scale, 1.0, 0.2) <= 1e-5
    with pytest.raises(BadInput, match="zcdp"):
        GaussOutput(net, 4.0, epsilon=1.0, delta=1e-5, alpha=0.05, calibration="analytic")


@pytest.mark.parametrize("metric,sens", [("l2", 0.3), ("l1", 0.3), ("linf", 0.3 * math.sqrt(6))])
def test_gauss_input_sensitivity_per_metric(net, metric, sens):
    m = GaussInput(net, epsilon=1.0, delta=1e-5, alpha=0.3, metric=metric, sampler=0)
    assert m.sensitivity == pytest.approx(sens, rel=1e-14) and m.sensitivity >= sens * (1 - 1e-16)
    assert exact_delta(m.scale, 1.0, sens) <= 1e-5
    with pytest.raises(BadInput, match="input dimension"):
        GaussInput(lambda x: x, epsilon=1.0, delta=1e-5, alpha=0.3, metric="linf", sampler=0)


def test_releases_for_ir_torch_and_callable_agree(net):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3)).double()
    ir = from_torch(module)
    x = np.random.default_rng(0).normal(size=(50, 6))
    outs = [LapOutput(model, 2.0, epsilon=1.0, alpha=0.1, sampler=7).release(x)
            for model in (ir, module, lambda z: ir.forward(z))]
    assert outs[0].shape == (50, 3)
    assert np.allclose(outs[0], outs[1], atol=1e-9) and np.allclose(outs[0], outs[2], atol=1e-12)


@pytest.mark.parametrize("cls,dist", [(LapOutput, stats.laplace), (LogisticOutput, stats.logistic), (GaussOutput, stats.norm)])
@pytest.mark.parametrize("sampler", ["numpy", "secure"])
def test_output_noise_distribution(net, cls, dist, sampler):
    """KS of release - f(x) against the calibrated noise; 2000 values, fixed seeds; false alarm 1e-3 each."""
    kwargs = dict(delta=1e-5) if cls is GaussOutput else {}
    src = 3 if sampler == "numpy" else SecureSampler(random.Random(3))
    m = cls(net, 5.0, epsilon=1.0, alpha=0.1, sampler=src, **kwargs)
    x = np.random.default_rng(1).normal(size=(667, 6))
    resid = (m.release(x) - net.forward(x)).ravel()
    assert stats.kstest(resid, dist(scale=m.scale).cdf).pvalue > 1e-3


def test_gauss_input_perturbs_the_input():
    """With the identity as model the release is x + noise: KS against N(0, sigma^2); false alarm 1e-3."""
    m = GaussInput(lambda z: z, epsilon=0.5, delta=1e-5, alpha=0.02, sampler=NumpySampler(4))
    x = np.tile(np.linspace(0, 1, 8), (250, 1))
    resid = (m.release(x) - x).ravel()
    assert stats.kstest(resid, stats.norm(scale=m.scale).cdf).pvalue > 1e-3
    assert m.guarantee_at(0.05).epsilon == chain(m.guarantee, 0.05).epsilon == pytest.approx(1.5)


def _cert(upper, lower=None, output_norm="l2", certified=True, status="certified"):
    """A real global-bound certificate (the protocol's attribute names, no fake)."""
    return GlobalLipschitzResult(lower, upper, status, certified, None, "l2", output_norm, 0.1, method="lipsdp-neuron")


def test_certificate_provenance_is_recorded(net):
    import certify

    cert = certify.global_lipschitz(net, "eclipse-fast")
    m = GaussOutput(net, cert, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    lip = m.guarantee.lipschitz
    assert lip.origin == "certificate" and lip.method == "eclipse-fast" and lip.value == cert.upper
    assert lip.model_hash == net.fingerprint() and m.guarantee.basis == "worst-case" and not m.guarantee.claims
    assert lip.certificate["upper"] == cert.upper and lip.certificate["model_hash"] == net.fingerprint()
    assert lip.certificate["schema"] == "certify.certificate/1" and lip.certificate["status"] == "certified"
    assert m.sensitivity == pytest.approx(0.1 * cert.upper)  # the upper bound, never a lower one
    d = jsonable(m.to_dict())
    assert d["guarantee"]["lipschitz"]["certificate"]["method"] == "eclipse-fast"
    assert d["guarantee"]["basis"] == "worst-case"


def test_a_hand_built_certificate_is_the_users_claim(net):
    """Only certificates certify issued are proofs: one built by hand is recorded as a user claim."""
    m = GaussOutput(net, _cert(3.0, lower=0.5), epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)
    lip = m.guarantee.lipschitz
    assert lip.origin == "user" and not lip.proven and lip.value == 3.0 and m.sensitivity == pytest.approx(0.3)
    assert m.guarantee.basis == "user" and "not verified" in m.guarantee.claims[0]
    assert "CONDITIONAL" in m.guarantee.describe()


class _LooksLikeACertificate:
    """Anything with an `upper` attribute is not a certificate: only the protocol's types are read."""

    upper, lower, output_norm, input_norm, validated = 3.0, 0.5, "l2", "l2", False


@pytest.mark.parametrize("cert,fragment", [
    (_cert(None), "upper bound"),
    (_cert(math.inf), "inf"),
    (_cert(3.0, certified=False, status="time_limit"), "not certified"),
    (_cert(3.0, output_norm="l1"), "l2 output norm"),
    (_LooksLikeACertificate(), "expected a number or a certify certificate"),
    (-1.0, "non-negative"),
    ("3", "expected a number"),
])
def test_unusable_lipschitz_constants_are_refused(net, cert, fragment):
    with pytest.raises(BadInput, match=fragment):
        GaussOutput(net, cert, epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0)


def _l2_to_l1_brute(A):
    """||A||_{l2->l1} = max over sign vectors s of ||A^T s||_2 (dual of linf->l2), by enumeration."""
    return max(np.linalg.norm(A.T @ np.array(s)) for s in itertools.product((-1.0, 1.0), repeat=A.shape[0]))


def test_layer_product_bound_is_exact_for_one_affine_map():
    from models.ir import sequential

    A = np.random.default_rng(5).normal(size=(4, 7))
    lin = sequential([(A, np.zeros(4))])
    assert layer_product_bound(lin, "l2", "l2").value == pytest.approx(np.linalg.svd(A, compute_uv=False)[0], rel=1e-12)
    assert layer_product_bound(lin, "l2", "l1").value == pytest.approx(_l2_to_l1_brute(A), rel=1e-12)


@pytest.mark.parametrize("p,q", [("l2", "l2"), ("l2", "l1"), ("linf", "l1"), ("l1", "l2")])
def test_layer_product_bound_dominates_sampled_ratios(net, p, q):
    """An upper bound: above every sampled difference quotient ||f(x) - f(y)||_q / ||x - y||_p."""
    order = {"l1": 1, "l2": 2, "linf": np.inf}
    bound = layer_product_bound(net, p, q)
    rng = np.random.default_rng(9)
    x, y = rng.normal(size=(4000, 6)), rng.normal(size=(4000, 6)) * 0.01
    ratios = np.linalg.norm(net.forward(x + y) - net.forward(x), ord=order[q], axis=1) / np.linalg.norm(y, ord=order[p], axis=1)
    assert ratios.max() <= bound.value
    assert bound.origin == "layer-product" and (bound.input_norm, bound.output_norm) == (p, q)


def test_lipschitz_source_checks_requested_norms():
    src = lipschitz_source(_cert(2.0, output_norm="l1"), input_norm="l2", output_norm="l1")
    assert src.value == 2.0
    with pytest.raises(BadInput):
        lipschitz_source(_cert(2.0), input_norm="linf", output_norm="l2")


@pytest.mark.parametrize("kwargs,fragment", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1), "epsilon"), (dict(alpha=0.0), "alpha"),
    (dict(delta=0.0), "delta > 0"), (dict(delta=1.0), "delta"), (dict(metric="l3"), "metric"),
])
def test_bad_mechanism_parameters(net, kwargs, fragment):
    args = dict(epsilon=1.0, delta=1e-5, alpha=0.1, sampler=0) | kwargs
    with pytest.raises(BadInput, match=fragment):
        GaussOutput(net, 2.0, **args)


def test_a_local_certificate_only_covers_its_box():
    """f(x) = relu(10 x): its local constant around x = -1 is 0, the global one 10. A mechanism
    calibrated from the local certificate must refuse inputs outside the certified box (there the
    released f(x) + noise would leak: b = 0 at L = 0)."""
    import certify
    from models.ir import sequential

    f = sequential([(np.array([[10.0]]), np.zeros(1)), (np.eye(1), np.zeros(1))])
    local = certify.local_lipschitz(f, [-1.0], 0.5, input_norm="l2", output_norm="l1")
    assert local.upper < 1e-6  # relu is flat on [-1.5, -0.5]
    m = LapOutput(f, local, epsilon=1.0, alpha=0.1, sampler=0)
    assert m.guarantee.lipschitz.domain == ((-1.5,), (-0.5,))
    assert m.release([[-1.2], [-0.7]]).shape == (2, 1)
    for outside in ([0.5], [[-1.0], [1.5]]):
        with pytest.raises(BadInput, match="outside the box"):
            m.release(outside)
    assert "domain" in jsonable(m.to_dict())["guarantee"]["lipschitz"]


def test_margin_certificates_are_refused_for_output_noise(net):
    import certify

    cert = certify.local_lipschitz(net, np.zeros(6), 0.1, input_norm="l2", margin=(0, 1))
    with pytest.raises(BadInput, match="scalar"):
        LapOutput(net, cert, epsilon=1.0, alpha=0.1, sampler=0)


def test_domain_scoped_global_results_carry_their_domain(net):
    """'mip' is the constant over its domain only: the mechanism inherits the box."""
    import certify

    res = certify.global_lipschitz(net, "mip", input_norm="l1", output_norm="l1", domain=(-0.2, 0.2))
    m = LapOutput(net, res, epsilon=1.0, alpha=0.01, metric="l1", sampler=0)
    assert m.guarantee.lipschitz.domain == ((-0.2,) * 6, (0.2,) * 6)
    with pytest.raises(BadInput, match="outside the box"):
        m.release(np.full(6, 0.3))
