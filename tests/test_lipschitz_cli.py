"""`certify lipschitz` end to end (oracles: region enumeration, closed forms) and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from models.zoo import LIPMIP_SUITE, lipmip_suite_path
from tests.conftest import assert_bad_input
from tests.lipschitz_oracles import exact_lipschitz, random_weights, write_onnx

KEYS = {"lower", "upper", "status", "backend", "seconds", "witness", "input_norm", "output_norm"}


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    w = random_weights([3, 5, 4, 2], 11)
    path = write_onnx(w, tmp_path_factory.mktemp("lip") / "small.onnx")
    return w, path


def test_json_matches_region_enumeration(cli, small_model):
    w, path = small_model
    r = cli("lipschitz", path, "--center", "0.1,-0.2,0.3", "--radius", "0.6", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert KEYS <= set(out)
    lo, hi = np.array([0.1, -0.2, 0.3]) - 0.6, np.array([0.1, -0.2, 0.3]) + 0.6
    value = exact_lipschitz(w, lo, hi, "linf", "l1")
    assert out["status"] == "optimal" and out["exact"] is True
    assert out["lower"] == pytest.approx(value, rel=1e-6) and value <= out["upper"] <= value * (1 + 1e-5)
    assert out["input_norm"] == "linf" and out["output_norm"] == "l1"
    assert len(out["witness"]) == 3


def test_domain_margin_norms_backend(cli, small_model):
    w, path = small_model
    r = cli("lipschitz", path, "--center", "-0.2,0.9,0.5", "--radius", "0.5", "--domain", "0,1", "--margin", "1,0",
            "--input-norm", "l1", "--backend", "highs", "--json")
    assert r.code == 0, r.err
    out = r.json()
    lo, hi = np.array([0.0, 0.4, 0.0]), np.array([0.3, 1.0, 1.0])
    assert out["box"]["lo"] == pytest.approx(lo) and out["box"]["hi"] == pytest.approx(hi)
    value = exact_lipschitz(w, lo, hi, "l1", None, target=np.array([-1.0, 1.0]))
    # the back-end named, unless the default method closed the box by enumerating its regions
    assert out["backend"] == ("none" if out["method"] == "regions" else "highs")
    assert out["margin"] == [1, 0] and out["output_norm"] is None
    assert out["lower"] == pytest.approx(value, rel=1e-6) and value <= out["upper"]


def test_human_output_and_time_limit(cli):
    path = lipmip_suite_path(LIPMIP_SUITE[2])
    r = cli("lipschitz", path, "--center", ",".join(["0.5"] * 10), "--radius", "0.5", "--margin", "0,1",
            "--time-limit", "0.5", "--backend", "highs")
    assert r.code == 0, r.err
    assert "interval" in r.out and "time_limit" in r.out and "witness" in r.out


@pytest.mark.parametrize(
    "args,fragments",
    [
        (["--center", "0,0,0", "--radius", "0"], ["radius", "positive"]),
        (["--center", "0,0,0", "--radius", "-1"], ["radius"]),
        (["--center", "0,0", "--radius", "1"], ["--center has 2 values", "3 inputs"]),
        (["--center", "0,0,0", "--radius", "1", "--input-norm", "l3"], ["unknown input norm"]),
        (["--center", "0,0,0", "--radius", "1", "--output-norm", "max2"], ["unknown output norm"]),
        (["--center", "0,0,0", "--radius", "1", "--margin", "0,5"], ["margin", "0..1"]),
        (["--center", "0,0,0", "--radius", "1", "--margin", "0,0"], ["margin"]),
        (["--center", "0,0,0", "--radius", "1", "--domain", "1,0"], ["domain"]),
        (["--center", "5,5,5", "--radius", "1", "--domain", "0,1"], ["does not meet the domain"]),
        (["--center", "0,0,0", "--radius", "1", "--time-limit", "-3"], ["time limit"]),
        (["--center", "0,0,0", "--radius", "1,2"], ["radius has 2 values"]),
    ],
)
def test_bad_input_exits_2(cli, small_model, args, fragments):
    _, path = small_model
    assert_bad_input(cli("lipschitz", path, *args), *fragments)


@pytest.mark.gurobi
def test_model_too_large_for_restricted_gurobi(cli, tmp_path):
    from solvers.milp.gurobi import licence

    w = random_weights([8, 160, 160, 2], 3, bias=0.0)  # ~2200 constraints
    path = write_onnx(w, tmp_path / "wide.onnx")
    args = ["--center", ",".join(["0"] * 8), "--radius", "2", "--bounds", "interval", "--time-limit", "1"]
    r = cli("lipschitz", path, *args, "--backend", "gurobi")
    if not licence().restricted:
        assert r.code == 0
        return
    assert_bad_input(r, "gurobi", "size-limited", "--backend highs")
    r = cli("lipschitz", path, *args, "--method", "milp", "--json")  # auto falls back to HiGHS and says so
    assert r.code == 0, r.err
    out = r.json()
    assert out["backend"] == "highs" and any("size-limited" in n for n in out["notes"])
    assert out["lower"] <= out["upper"]


@pytest.mark.parametrize("method", ["bab", "bounds"])
def test_methods_on_the_cli_bracket_region_enumeration(cli, small_model, method):
    w, path = small_model
    r = cli("lipschitz", path, "--center", "0.1,-0.2,0.3", "--radius", "0.6", "--method", method, "--json")
    assert r.code == 0, r.err
    out = r.json()
    lo, hi = np.array([0.1, -0.2, 0.3]) - 0.6, np.array([0.1, -0.2, 0.3]) + 0.6
    value = exact_lipschitz(w, lo, hi, "linf", "l1")
    assert out["method"] == method and out["lower"] <= value * (1 + 1e-9) and value <= out["upper"] * (1 + 1e-9)
    if method == "bab":
        assert out["status"] == "optimal" and out["proof"]["complete"]
    text = cli("lipschitz", path, "--center", "0.1,-0.2,0.3", "--radius", "0.6", "--method", method, "--no-progress")
    assert text.code == 0 and ("branch-and-bound" if method == "bab" else "Jacobian bound") in text.out
    assert cli("lipschitz", path, "--center", "0", "--radius", "1", "--method", "exhaustive").code == 2
