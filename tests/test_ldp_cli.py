"""`certify utility`: JSON values against the API and hand-derived formulas; bad inputs exit 2."""

from __future__ import annotations

import math

import pytest
from tests.conftest import assert_bad_input

from certify.ldp import make_mechanism, rho


def test_utility_json_matches_the_api(cli):
    r = cli("utility", "pm", "--epsilon", "2", "--point", "0.79,0.3", "--box", "0.63:1,0:1", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert {"rho", "mechanism", "epsilon"} <= out.keys()
    assert out["rho"] == rho(make_mechanism("pm", 2.0), ([0.63, 0.0], [1.0, 1.0]), point=[0.79, 0.3])
    assert out["mechanism"] == "pm" and out["epsilon"] == 2.0 and out["record_epsilon"] == 4.0


def test_target_rho_laplace_is_ln5_over_theta(cli):
    out = cli("utility", "laplace", "--target-rho", "0.8", "--point", "0.5", "--box", "0.2:0.8", "--json").json()
    assert abs(out["epsilon"] - math.log(5) / 0.3) <= 1e-9 and out["rho"] >= 0.8


def test_indicator_gaussian_krr_and_clip_options(cli):
    pm = cli("utility", "pm", "--epsilon", "1", "--point", "0.5", "--box", "0.3:0.7", "--json").json()
    ind = cli("utility", "pm", "--epsilon", "1", "--point", "0.5", "--box", "0.3:0.7", "--delta", "0.1", "--json").json()
    assert ind["rho"] == pytest.approx(0.1 + 0.9 * pm["rho"]) and ind["record_delta"] == 0.1
    g = cli("utility", "gaussian", "--epsilon", "3", "--delta", "1e-4", "--calibration", "pac", "--point", "0.5",
            "--box", "0.3:0.7", "--json").json()
    c = math.sqrt(2 * math.log(2e4))
    assert g["sigma"] == pytest.approx((c + math.sqrt(c * c + 6)) / 6, rel=1e-13) and g["calibration"] == "pac"
    k = cli("utility", "krr", "--epsilon", "1", "--k", "11", "--point", "0.5", "--box", "0.3:0.7", "--json").json()
    assert k["rho"] == pytest.approx((math.e + 4) / (10 + math.e))
    edge = ("--epsilon", "2", "--point", "0.9", "--box", "0.8:1", "--json")
    clipped = cli("utility", "laplace", *edge).json()["rho"]
    raw = cli("utility", "laplace", *edge, "--no-clip").json()["rho"]
    assert clipped == pytest.approx(1 - 0.5 * math.exp(-0.2)) and raw == pytest.approx(1 - 0.5 * math.exp(-0.2) - 0.5 * math.exp(-0.2))


def test_compare_all_and_human_output(cli):
    out = cli("utility", "all", "--epsilon", "2", "--point", "0.5", "--box", "0.2:0.8", "--json").json()
    assert out["best"] == "pm" and len(out["rows"]) == 5
    r = cli("utility", "sw", "--epsilon", "2", "--point", "0.5", "--box", "0.2:0.8")
    assert r.code == 0 and "rho = 0.82706706" in r.out


@pytest.mark.parametrize("argv,fragment", [
    (("pm", "--epsilon", "0"), "epsilon"),
    (("pm", "--epsilon", "-1"), "epsilon"),
    (("gaussian", "--epsilon", "1"), "delta"),
    (("gaussian", "--epsilon", "1", "--delta", "1.5"), "delta"),
    (("pm", "--epsilon", "1", "--delta", "-0.2"), "delta"),
    (("nope", "--epsilon", "1"), "unknown mechanism"),
    (("pm", "--epsilon", "1", "--box", "0.6:0.4"), "lo > hi"),
    (("pm", "--epsilon", "1", "--box", "-0.5:0.6"), "domain"),
    (("pm", "--epsilon", "1", "--box", "0.6:0.9"), "contain the point"),
    (("pm", "--epsilon", "1", "--box", "0.1:0.9,0:1"), "intervals"),
    (("pm", "--epsilon", "1", "--box", "a:b"), "two numbers"),
    (("sw", "--target-rho", "0.9999"), "not reached"),
    (("pm", "--target-rho", "1.5"), "target rho"),
    (("pm", "--epsilon", "1", "--calibration", "pac"), "gaussian"),
])
def test_bad_inputs_exit_2(cli, argv, fragment):
    extra = () if "--box" in argv else ("--box", "0.2:0.8")
    assert_bad_input(cli("utility", *argv, "--point", "0.5", *extra), fragment)


def test_features_option_leaves_the_others_untouched(cli):
    out = cli("utility", "sw", "--epsilon", "2", "--point", "0.5,0.1", "--box", "0.2:0.8,0.1:0.1", "--features", "0",
              "--json").json()
    assert out["features"] == [0] and out["rho"] == rho(make_mechanism("sw", 2.0), ([0.2], [0.8]), point=[0.5])
    assert out["record_epsilon"] == 2.0
