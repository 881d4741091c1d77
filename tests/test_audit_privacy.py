"""Regressions for the privacy items of issue 11 (independent audit), against independent oracles:
mpmath (tests/privacy_oracles.py), exact fractions and closed forms, never earlier outputs."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import onnx
import pytest
from onnx import helper

from certify.errors import BadInput
from certify.privacy import EmpiricalSensitivity, GaussInput, GaussOutput, Guarantee, NoisyQuery, chain, perturb_weights
from certify.privacy.accounting import chained_delta, compose
from certify.privacy.calibration import calibrate
from certify.privacy.gaussian import analytic_sigma, pac_sigma, zcdp_sigma
from certify.privacy.params import check_epsilon, up_fraction
from certify.privacy.sampling import SLACK
from models import Network
from models.ir import Affine
from tests.conftest import assert_bad_input
from tests.onnx_builders import make_model
from tests.privacy_oracles import bisect_sigma, cks_min_log_delta

IMAGE = (1, 3, 32, 32)
FEATURES = 3 * 32 * 32


def _image_net() -> Network:
    w = np.random.default_rng(0).normal(size=(10, FEATURES)) / FEATURES
    return Network([Affine(w, np.zeros(10))], input_shape=IMAGE)


# ------------------------------------------------------------------ 1. Gauss-Input dimension
def test_gauss_input_linf_noise_on_an_image_is_calibrated_for_every_feature():
    """The leak: input_dim = 32 (one axis) gave sensitivity 0.1 sqrt(32) = 0.566 instead of
    0.1 sqrt(3072) = 5.54, about 9.8x too little noise. End to end: measure the noise added to a
    (1, 3, 32, 32) image and compare with the oracle sigma for 3072 features."""
    alpha = 0.1
    oracle = float(bisect_sigma(1.0, 1e-5, mp.mpf(alpha) * mp.sqrt(FEATURES)))
    one_axis = float(bisect_sigma(1.0, 1e-5, mp.mpf(alpha) * mp.sqrt(32)))
    assert oracle / one_axis == pytest.approx(math.sqrt(96), rel=1e-9)  # the 9.8x of the report

    identity = lambda z: np.asarray(z).reshape(len(z), -1)  # noqa: E731  (reveals the input noise)
    mech = GaussInput(identity, epsilon=1.0, delta=1e-5, alpha=alpha, metric="linf", input_dim=FEATURES, sampler=0)
    assert mech.sensitivity >= alpha * math.sqrt(FEATURES) and mech.sensitivity == pytest.approx(5.5426, abs=1e-4)
    assert oracle <= mech.scale <= oracle * (1 + 1e-9)
    x = np.random.default_rng(1).uniform(0, 1, IMAGE)
    noise = mech.release(x).reshape(-1) - x.reshape(-1)
    # 3072 draws: the sample std is within 5% of sigma (relative standard error 1.3%)
    assert np.std(noise) == pytest.approx(oracle, rel=0.05)
    assert np.std(noise) > 5 * one_axis

    # the dimension of one axis is refused when the data shows more features per example
    wrong = GaussInput(identity, epsilon=1.0, delta=1e-5, alpha=alpha, metric="linf", input_dim=32, sampler=0)
    with pytest.raises(BadInput, match="3072 features per example"):
        wrong.release(x)


def test_gauss_input_takes_the_dimension_from_the_model_and_checks_it():
    net = _image_net()
    mech = GaussInput(net, epsilon=1.0, delta=1e-5, alpha=0.1, metric="linf", sampler=0)
    assert mech.input_dim == FEATURES
    assert mech.sensitivity >= 0.1 * math.sqrt(FEATURES)
    assert mech.release(np.zeros(IMAGE)).shape == (1, 10)  # image-shaped batches reach the flat IR
    with pytest.raises(BadInput, match="takes 3072 features per example"):
        GaussInput(net, epsilon=1.0, delta=1e-5, alpha=0.1, metric="linf", input_dim=32)
    # the correct product is accepted; a single image without its batch axis is refused with a hint
    assert GaussInput(net, epsilon=1.0, delta=1e-5, alpha=0.1, metric="linf", input_dim=FEATURES, sampler=0)
    with pytest.raises(BadInput, match="batch axis"):
        mech.release(np.zeros(IMAGE[1:]))


def _image_onnx(tmp_path) -> str:
    w = np.random.default_rng(0).normal(size=(FEATURES, 10)).astype(np.float32) / FEATURES
    nodes = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["y"])]
    path = str(tmp_path / "image.onnx")
    onnx.save(make_model(nodes, {"w": w}, IMAGE), path)
    return path


def test_cli_gauss_input_takes_the_dimension_from_the_model(cli, tmp_path):
    path = _image_onnx(tmp_path)
    args = ("calibrate", "gauss-input", "--epsilon", "1", "--delta", "1e-5", "--radius", "0.1", "--metric", "linf")
    out = cli(*args, "--model", path, "--json").json()
    assert out["sensitivity"] >= 0.1 * math.sqrt(FEATURES)
    assert out["scale"] >= float(bisect_sigma(1.0, 1e-5, mp.mpf(0.1) * mp.sqrt(FEATURES)))
    assert_bad_input(cli(*args, "--model", path, "--input-dim", "32"), "3072 features per example")


# ------------------------------------------------------------------ 2. chained_delta at eps = 0
def test_chained_delta_at_zero_epsilon_is_rounded_up():
    """steps * delta was rounded to nearest: below the exact product in some of these 3600 cases."""
    below = 0
    for steps in range(2, 62):
        for delta in np.geomspace(1e-12, 1e-2, 60):
            exact = steps * Fraction(float(delta))
            got = chained_delta(0.0, float(delta), steps)
            assert Fraction(got) >= exact
            assert Fraction(math.nextafter(got, 0.0)) < exact  # and the smallest such float
            below += Fraction(steps * float(delta)) < exact
    assert below > 0  # round-to-nearest would have failed this test


# ------------------------------------------------------------------ 3. GaussOutput vs the CLI
def test_gauss_output_python_and_cli_differ_visibly(cli):
    """Same numbers, sigma 1.0123 in Python (secure sampler: zCDP, Delta (1 + 2^-10)) and 0.9327 on
    the CLI (analytic, continuous noise): both are right for their noise, and both say which."""
    out = cli("calibrate", "gauss-output", "--epsilon", "1", "--delta", "1e-5", "--lipschitz", "5", "--radius", "0.05",
              "--json").json()
    assert out["calibration"] == "analytic" and "zcdp" in out["note"]
    oracle = float(bisect_sigma(1.0, 1e-5, mp.mpf(5) * mp.mpf(0.05)))
    assert oracle <= out["scale"] <= oracle * (1 + 1e-9) and round(out["scale"], 4) == 0.9327

    mech = GaussOutput(lambda z: z, 5.0, epsilon=1.0, delta=1e-5, alpha=0.05)
    assert mech.calibration.calibration == "zcdp" and "zcdp" in repr(mech)
    assert any("certify calibrate" in n for n in mech.to_dict()["notes"])
    sens = mp.mpf(5.0 * 0.05) * (1 + mp.mpf(SLACK))
    assert cks_min_log_delta(sens**2 / (2 * mp.mpf(mech.scale) ** 2), 1.0) <= mp.log(1e-5)
    assert cks_min_log_delta(sens**2 / (2 * mp.mpf(mech.scale * (1 - 1e-8)) ** 2), 1.0) > mp.log(1e-5)
    assert round(mech.scale, 4) == 1.0123
    # the CLI prints the Python default's sigma on request
    z = cli("calibrate", "gauss-output", "--epsilon", "1", "--delta", "1e-5", "--lipschitz", "5", "--radius", "0.05",
            "--calibration", "zcdp", "--json").json()
    assert z["scale"] <= mech.scale and "note" not in z


# ------------------------------------------------------------------ 4. empirical 0, types
def test_empirical_sensitivity_zero_is_refused():
    import torch

    zero = EmpiricalSensitivity(0.0, 0.0, 20, (0.0,) * 20, (0.0,) * 20)
    with pytest.raises(BadInput, match="empirical sensitivity is 0"):
        perturb_weights(torch.nn.Linear(3, 2), epsilon=1.0, sensitivity=zero)
    with pytest.raises(BadInput, match="empirical sensitivity is 0"):
        NoisyQuery("laplace", sensitivity=0.0, epsilon=1.0, empirical=True)
    # a worst-case sensitivity of 0 (a constant query) rightly needs no noise
    assert NoisyQuery("laplace", sensitivity=0.0, epsilon=1.0, sampler=0).release([1.0, 2.0]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("bad", [True, False, np.bool_(True), "1", b"1", None, [1.0], 1j])
def test_parameters_must_be_real_numbers(bad):
    with pytest.raises(BadInput, match="real number"):
        check_epsilon(bad)
    with pytest.raises(BadInput, match="real number"):
        calibrate("laplace", epsilon=bad, sensitivity=1.0)
    if bad is not None:  # (None means "not given" for these two)
        with pytest.raises(BadInput, match="real number"):
            calibrate("gaussian", epsilon=1.0, delta=1e-5, sensitivity=bad)
        with pytest.raises(BadInput, match="real number"):
            calibrate("gaussian", epsilon=1.0, delta=bad, sensitivity=1.0)
    with pytest.raises(BadInput, match="real number"):
        GaussOutput(lambda z: z, 1.0, epsilon=1.0, delta=1e-5, alpha=bad, sampler=0)
    with pytest.raises(BadInput, match="real number"):
        Guarantee(bad, 0.0, 1.0)
    with pytest.raises(BadInput, match="real number"):
        chain(Guarantee(1.0, 0.0, 1.0), bad)


def test_real_number_types_are_accepted():
    for v in (1, 1.0, np.float32(1.0), np.int64(1), Fraction(1), np.array(1.0)):
        assert check_epsilon(v) == 1.0


# ------------------------------------------------------------------ 9. overflow
def test_up_fraction_rounds_past_the_float_range_to_inf():
    assert up_fraction(Fraction(10) ** 400) == math.inf
    assert up_fraction(Fraction(1, 10**400)) == 5e-324  # the smallest positive float, not 0


@pytest.mark.parametrize("argv,fragment", [
    ("calibrate laplace --epsilon 1e-320 --sensitivity 1", "larger epsilon"),
    ("calibrate laplace --epsilon 0.1 --sensitivity 1e308", "smaller sensitivity"),
    ("calibrate logistic --epsilon 1e-320 --sensitivity 1", "larger epsilon"),
    ("calibrate lap-output --epsilon 1 --lipschitz 1e200 --radius 1e200", "L x radius"),
    ("calibrate gauss-output --epsilon 1 --delta 1e-5 --lipschitz 1e200 --radius 1e200", "L x radius"),
    ("chain --epsilon 1e308 --delta 1e-5 --alpha 0.1 --beta 1", "says nothing"),
    ("calibrate gaussian --epsilon 1e-320 --delta 1e-5 --sensitivity 1e308", "larger epsilon"),
])
def test_overflow_is_bad_input(cli, argv, fragment):
    assert_bad_input(cli(*argv.split()), fragment)


def test_chain_and_compose_overflow_in_python():
    with pytest.raises(BadInput, match="says nothing"):
        chain(Guarantee(1e308, 1e-5, 0.1), 1.0)
    with pytest.raises(BadInput, match="says nothing"):
        compose(Guarantee(1e308, 0.0, 1.0), Guarantee(1e308, 0.0, 1.0))


def test_huge_epsilon_gaussian_is_a_sound_sigma(cli):
    """Was "use a larger epsilon" (the PAC formula overflowed at 2 eps); sigma is tiny, not huge."""
    eps, delta = 1e308, 1e-5
    with mp.workdps(60):
        c = mp.sqrt(2 * mp.log(2 / mp.mpf(delta)))
        pac = (c + mp.sqrt(c * c + 2 * mp.mpf(eps))) / (2 * mp.mpf(eps))
    sigma = pac_sigma(eps, delta, 1.0)
    assert pac <= sigma <= pac * (1 + 1e-12)
    # analytic and zCDP: no larger than the (valid) PAC sigma's magnitude, never zero
    assert 0 < analytic_sigma(eps, delta, 1.0) <= sigma
    assert 0 < zcdp_sigma(eps, delta, 1.0) < 1e-150
    out = cli("calibrate", "gaussian", "--epsilon", "1e308", "--delta", "1e-5", "--sensitivity", "1", "--json")
    assert out.code == 0 and 0 < out.json()["scale"] <= sigma


@pytest.mark.parametrize("eps,delta", [(1e-150, 1e-300), (1e-320, 1e-5)])
def test_zcdp_sigma_at_tiny_epsilon_meets_the_conversion(eps, delta):
    """rho = Delta^2 / (2 sigma^2) underflowed to 0 and claimed delta = 0: at eps = delta = 1e-300
    sigma 3.7e161 was returned where the conversion needs far more noise."""
    sigma = zcdp_sigma(eps, delta, 1.0)
    rho = 1 / (2 * mp.mpf(sigma) ** 2)
    assert cks_min_log_delta(rho, eps, dps=400) <= mp.log(delta)
    with pytest.raises(BadInput, match="larger epsilon or delta"):
        zcdp_sigma(1e-300, 1e-300, 1.0)
