"""`certify calibrate --model`: the certified constant bounds sampled gradients, the scale follows."""

from __future__ import annotations

import numpy as np
import pytest

from models import load_onnx, save_onnx
from models.zoo import random_relu_net
from solvers.norms import operator_norm
from tests.conftest import assert_bad_input


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "r.onnx"
    save_onnx(random_relu_net((3, 12, 10, 4), seed=3), path)
    return path


def _max_sampled_norm(net, p, q, n=400):
    xs = np.random.default_rng(0).uniform(-3, 3, (n, net.input_dim))
    return max(operator_norm(net.jacobian(x), p, q) for x in xs)


@pytest.mark.parametrize("mechanism,metric,q", [("lap-output", "linf", "l1"), ("gauss-output", "l2", "l2"),
                                                ("logistic-output", "l1", "l1")])
def test_model_constant_bounds_gradients_and_sets_the_scale(cli, model_path, mechanism, metric, q):
    args = ["calibrate", mechanism, "--model", model_path, "--epsilon", "0.8", "--radius", "0.1", "--metric", metric, "--json"]
    if mechanism == "gauss-output":
        args += ["--delta", "1e-6"]
    r = cli(*args)
    assert r.code == 0, r.err
    out = r.json()
    lip = out["lipschitz"]
    assert lip["origin"] == "certificate" and lip["certificate"]["certified"] is True
    assert (lip["input_norm"], lip["output_norm"]) == (metric, q)
    net = load_onnx(model_path)
    assert _max_sampled_norm(net, metric, q) <= lip["value"]
    assert out["sensitivity"] >= lip["value"] * 0.1
    if mechanism != "gauss-output":
        assert out["scale"] == pytest.approx(lip["value"] * 0.1 / 0.8, rel=1e-12)
        assert out["scale"] >= lip["value"] * 0.1 / 0.8


def test_model_option_refusals(cli, model_path):
    assert_bad_input(cli("calibrate", "gauss-input", "--model", model_path, "--epsilon", "1", "--delta", "1e-5",
                         "--radius", "0.1", "--lipschitz-method", "mip"), "output mechanisms")
    assert_bad_input(cli("calibrate", "lap-output", "--model", model_path, "--lipschitz", "2", "--epsilon", "1",
                         "--radius", "0.1"), "not both")
    assert_bad_input(cli("calibrate", "lap-output", "--lipschitz-method", "mip", "--lipschitz", "2", "--epsilon", "1",
                         "--radius", "0.1"), "apply to --model")
    assert_bad_input(cli("calibrate", "lap-output", "--model", model_path, "--lipschitz-method", "mip", "--epsilon", "1",
                         "--radius", "0.1", "--metric", "linf"), "--domain")


def test_model_constant_over_a_domain_by_mip(cli, tmp_path):
    """The exact constant over [0, 1]^n: above every sampled gradient in the box, below the global bound."""
    path = tmp_path / "small.onnx"
    save_onnx(random_relu_net((2, 6, 5, 3), seed=8), path)
    base = ["calibrate", "lap-output", "--model", path, "--epsilon", "2", "--radius", "0.1", "--metric", "linf", "--json"]
    exact = cli(*base, "--lipschitz-method", "mip", "--domain", "0,1").json()
    glob = cli(*base).json()
    net = load_onnx(path)
    xs = np.random.default_rng(1).uniform(0, 1, (500, 2))
    sampled = max(operator_norm(net.jacobian(x), "linf", "l1") for x in xs)
    L = exact["lipschitz"]["value"]
    assert exact["lipschitz"]["certificate"]["status"] == "optimal"
    assert sampled <= L <= glob["lipschitz"]["value"] * (1 + 1e-12)
    assert exact["scale"] == pytest.approx(L * 0.1 / 2, rel=1e-12)
    # the constant holds on [0, 1]^2 only, and the calibration says so; the global one holds everywhere
    assert exact["lipschitz"]["domain"] == {"lo": [0.0, 0.0], "hi": [1.0, 1.0]} and "domain" not in glob["lipschitz"]
