"""`certify calibrate` and `certify chain`: values against formulas and oracles written here."""

from __future__ import annotations

import math

import pytest
from tests.conftest import assert_bad_input
from tests.privacy_oracles import bisect_sigma, exact_delta

KEYS = {"mechanism", "scale", "epsilon", "delta", "sensitivity", "calibration"}


def test_calibrate_laplace_and_logistic(cli):
    for mech in ("laplace", "logistic"):
        r = cli("calibrate", mech, "--epsilon", "0.5", "--sensitivity", "3", "--json")
        assert r.code == 0, r.err
        out = r.json()
        assert KEYS <= out.keys()
        assert out["scale"] == 6.0 and out["delta"] == 0.0 and out["sensitivity"] == 3.0
        assert out["mechanism"] == mech and out["parameter"] == ("b" if mech == "laplace" else "s")


def test_calibrate_gaussian_analytic_against_bisection(cli):
    out = cli("calibrate", "gaussian", "--epsilon", "2", "--delta", "1e-7", "--sensitivity", "0.4", "--json").json()
    assert out["calibration"] == "analytic" and out["parameter"] == "sigma"
    assert out["scale"] == pytest.approx(float(bisect_sigma(2.0, 1e-7, 0.4)), rel=1e-10)
    assert exact_delta(out["scale"], 2.0, 0.4) <= 1e-7


def test_calibrate_classic_and_pac_by_hand(cli):
    out = cli("calibrate", "gaussian", "--epsilon", "0.5", "--delta", "1e-5", "--sensitivity", "2",
              "--calibration", "classic", "--json").json()
    assert out["scale"] == pytest.approx(math.sqrt(2 * math.log(1.25e5)) * 2 / 0.5, rel=1e-14)
    out = cli("calibrate", "gaussian", "--epsilon", "3", "--delta", "1e-5", "--sensitivity", "1",
              "--calibration", "pac", "--json").json()
    c = math.sqrt(2 * math.log(2e5))
    assert out["scale"] == pytest.approx((c + math.sqrt(c * c + 6)) / 6, rel=1e-14)


def test_calibrate_output_mechanisms_from_lipschitz_and_radius(cli):
    out = cli("calibrate", "lap-output", "--epsilon", "0.5", "--lipschitz", "12", "--radius", "0.1", "--json").json()
    assert out["sensitivity"] == pytest.approx(1.2) and out["sensitivity"] >= 12 * 0.1
    assert out["scale"] == pytest.approx(2.4) and out["radius"] == 0.1
    assert out["lipschitz"] == {"value": 12.0, "input_norm": "l2", "output_norm": "l1", "origin": "user",
                                "proven": False}
    # a typed constant is the user's claim: the calibration says it rests on it
    assert out["basis"] == "user" and "not verified" in out["conditional_on"][0]
    out = cli("calibrate", "gauss-output", "--epsilon", "1", "--delta", "1e-5", "--lipschitz", "5",
              "--radius", "0.05", "--json").json()
    assert out["scale"] == pytest.approx(float(bisect_sigma(1.0, 1e-5, 0.25)), rel=1e-10)
    out = cli("calibrate", "gauss-input", "--epsilon", "1", "--delta", "1e-5", "--radius", "0.1", "--metric", "linf",
              "--input-dim", "64", "--json").json()
    assert out["sensitivity"] == pytest.approx(0.8) and exact_delta(out["scale"], 1.0, 0.8) <= 1e-5


def test_calibrate_human_output(cli):
    r = cli("calibrate", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "1")
    assert r.code == 0 and "sigma = 3.73063" in r.out


def test_chain_by_hand(cli):
    out = cli("chain", "--epsilon", "1", "--delta", "1e-5", "--alpha", "0.1", "--beta", "0.35", "--json").json()
    assert out["epsilon"] == pytest.approx(4.0) and out["radius"] == 0.35 and out["steps"] == 4
    assert out["delta"] == pytest.approx(1e-5 * (math.e**4 - 1) / (math.e - 1), rel=1e-12)
    out = cli("chain", "--epsilon", "0.5", "--alpha", "0.2", "--beta", "0.2", "--json").json()
    assert out == {"schema": "certify.chain/1", "epsilon": 0.5, "delta": 0.0, "radius": 0.2, "steps": 1}
    r = cli("chain", "--epsilon", "1", "--delta", "1e-3", "--alpha", "0.1", "--beta", "3")
    assert r.code == 0 and "vacuous" in r.out


@pytest.mark.parametrize("argv,fragments", [
    (["calibrate", "laplace", "--epsilon", "0", "--sensitivity", "1"], ["epsilon", "positive"]),
    (["calibrate", "laplace", "--epsilon", "-1", "--sensitivity", "1"], ["epsilon", "positive"]),
    (["calibrate", "gaussian", "--epsilon", "1", "--delta", "1", "--sensitivity", "1"], ["delta", "[0, 1)"]),
    (["calibrate", "gaussian", "--epsilon", "1", "--delta", "-0.1", "--sensitivity", "1"], ["delta", "[0, 1)"]),
    (["calibrate", "gaussian", "--epsilon", "1", "--delta", "0", "--sensitivity", "1"], ["delta > 0"]),
    (["calibrate", "gaussian", "--epsilon", "1", "--sensitivity", "1"], ["--delta"]),
    (["calibrate", "laplace", "--epsilon", "1", "--sensitivity", "-2"], ["sensitivity", "non-negative"]),
    (["calibrate", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "1", "--calibration", "classic"],
     ["classic", "epsilon < 1", "--calibration analytic"]),
    (["calibrate", "laplace", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "1"], ["pure", "delta"]),
    (["calibrate", "laplace", "--epsilon", "1", "--sensitivity", "1", "--calibration", "pac"], ["gaussian"]),
    (["calibrate", "lap-output", "--epsilon", "1", "--radius", "0.1"], ["--lipschitz"]),
    (["calibrate", "lap-output", "--epsilon", "1", "--sensitivity", "1", "--lipschitz", "2", "--radius", "0.1"], ["not both"]),
    (["calibrate", "gauss-input", "--epsilon", "1", "--delta", "1e-5", "--lipschitz", "2", "--radius", "0.1"], ["no --lipschitz"]),
    (["calibrate", "gauss-output", "--epsilon", "1", "--delta", "1e-5", "--lipschitz", "2", "--radius", "0"], ["radius"]),
    (["calibrate", "gauss-input", "--epsilon", "1", "--delta", "1e-5", "--radius", "0.1", "--metric", "linf"], ["--input-dim"]),
    (["calibrate", "laplace", "--epsilon", "nan", "--sensitivity", "1"], ["epsilon"]),
    (["calibrate", "exponential", "--epsilon", "1", "--sensitivity", "1"], ["invalid choice"]),
    (["chain", "--epsilon", "1", "--delta", "1e-5", "--alpha", "0.1", "--beta", "0"], ["beta", "positive"]),
    (["chain", "--epsilon", "1", "--delta", "1.5", "--alpha", "0.1", "--beta", "1"], ["delta"]),
    (["chain", "--epsilon", "1", "--alpha", "-0.1", "--beta", "1"], ["alpha"]),
    (["chain", "--epsilon", "1", "--delta", "1e-5", "--alpha", "1e-300", "--beta", "1e300"], ["too many steps"]),
    (["calibrate", "gauss-input", "--epsilon", "1", "--delta", "1e-5", "--radius", "0.1", "--metric", "linf",
      "--input-dim", "16", "--sensitivity", "0.001"], ["not both"]),
    (["calibrate", "gaussian", "--epsilon", "1e-12", "--delta", "1e-30", "--sensitivity", "1e300"], ["float64 range"]),
])
def test_bad_input_exits_2_with_reason(cli, argv, fragments):
    assert_bad_input(cli(*argv), *fragments)
