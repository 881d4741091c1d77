"""`certify verify` end to end: the VNN-COMP test nets, a fast ACAS Xu subset against the VNN-COMP
ground truth, the instance runner, and the answers for timeouts and unsupported splitting.

Oracles: the ground truth of VNN-COMP 2022 (ACAS Xu) or dense sampling (test nets); every `sat`
witness is re-run in onnxruntime by the test itself and checked with the test's own VNNLIB
evaluator (`tests.vnnlib_oracle`).
"""

from __future__ import annotations

import csv
import re

import jsonschema
import numpy as np
import pytest

import certify
from certify.certificate import load_schema
from models import load_onnx, sequential
from models.zoo import DATA, acasxu_path, acasxu_property_path
from tests.conftest import assert_bad_input
from tests.onnx_builders import ort_forward
from tests.vnnlib_oracle import unsafe_by_oracle

TEST = DATA / "vnncomp_test"
GROUND_TRUTH = {(r["onnx"], r["vnnlib"]): r["expected"] for r in csv.DictReader(open(DATA / "acasxu" / "ground_truth.csv"))}


def _check_witness(onnx_path, vnnlib_path, x, input_shape) -> None:
    """The witness is unsafe in onnxruntime (float32, as the VNN-COMP checker runs it)."""
    y = ort_forward(str(onnx_path), np.asarray(x), input_shape)
    assert unsafe_by_oracle(open(vnnlib_path).read(), x, y)


def _parse_witness(text: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = re.findall(r"\((X|Y)_(\d+) ([^()\s]+)\)", text)
    x = np.array([float(v) for k, _, v in pairs if k == "X"])
    y = np.array([float(v) for k, _, v in pairs if k == "Y"])
    return x, y


# ----------------------------------------------------------------------------- VNN-COMP test nets
@pytest.mark.parametrize("onnx, vnnlib, expected", [
    ("test_nano", "test_nano", "unsat"), ("test_tiny", "test_tiny", "unsat"), ("test_small", "test_small", "unsat"),
    ("test_sat", "test_prop", "sat"), ("test_unsat", "test_prop", "unsat"),
])
def test_vnncomp_test_nets(cli, onnx, vnnlib, expected):
    model, prop = TEST / f"{onnx}.onnx", TEST / f"{vnnlib}.vnnlib"
    r = cli("verify", model, prop, "--timeout", "30")
    assert r.code == 0, r.err
    lines = r.out.strip().splitlines()
    assert lines[0] == expected
    net = load_onnx(model)
    spec = certify.load_vnnlib(prop)
    if expected == "sat":
        x, y = _parse_witness("\n".join(lines[1:]))
        _check_witness(model, prop, x, net.input_shape)
        # the witness's outputs are onnxruntime's at x (what the checker recomputes), close to the IR's
        assert y.tolist() == ort_forward(str(model), x, net.input_shape).astype(np.float64).tolist()
        np.testing.assert_allclose(y, net.forward(x), rtol=1e-5, atol=1e-6)
    else:  # dense sampling finds no unsafe point
        lo, hi = spec.hull()
        X = np.random.default_rng(0).uniform(lo, hi, (20000, net.input_dim))
        Y = net.forward(X)
        text = prop.read_text()
        assert not any(unsafe_by_oracle(text, x, y) for x, y in zip(X[:2000], Y[:2000]))
        for d in spec.disjuncts:
            assert np.all(d.margin(X, Y) < 0)


def test_json_output_follows_the_certificate_protocol(cli):
    r = cli("verify", TEST / "test_sat.onnx", TEST / "test_prop.vnnlib", "--json", "--timeout", "30")
    assert r.code == 0, r.err
    d = r.json()
    jsonschema.validate(d, load_schema())
    assert d["kind"] == "verification" and d["result"] == "sat" and d["status"] == "optimal"
    assert set(d["counterexample"]) == {"x", "y"} and d["lower"] >= 0
    assert d["replay"]["margin_onnxruntime"] >= 0 and d["seconds"] > 0 and d["nodes"] >= 0
    shape = load_onnx(TEST / "test_sat.onnx").input_shape
    _check_witness(TEST / "test_sat.onnx", TEST / "test_prop.vnnlib", np.array(d["counterexample"]["x"]), shape)
    r = cli("verify", TEST / "test_unsat.onnx", TEST / "test_prop.vnnlib", "--json", "--timeout", "30")
    d = r.json()
    jsonschema.validate(d, load_schema())
    assert d["result"] == "unsat" and d["counterexample"] is None and d["upper"] < 0 and d["lower"] <= d["upper"]


# ----------------------------------------------------------------------------- ACAS Xu subset
ACAS_FAST = [
    (2, 1, 2), (1, 7, 3), (1, 9, 4), (4, 5, 2),  # sat (found by the attack)
    (5, 3, 2),  # sat in an unsafe set of ~1e-4 (dense sampling + LP polish)
    (1, 9, 1), (2, 4, 3), (3, 3, 4), (1, 4, 3), (2, 9, 4),  # unsat (closed by splitting)
    (3, 3, 2),  # unsat, the hardest of the benchmark (needs the three lower-slope passes)
]


@pytest.mark.parametrize("i, j, k", ACAS_FAST)
def test_acasxu_fast_subset_matches_ground_truth(i, j, k):
    onnx, prop = acasxu_path(i, j), acasxu_property_path(k)
    expected = GROUND_TRUTH[(onnx.name, prop.name)]
    res = certify.verify(onnx, prop, timeout=116)
    assert res.result == expected, (res.result, expected, res.notes)
    assert res.status == "optimal" and res.certified
    if expected == "sat":
        _check_witness(onnx, prop, np.array(res.counterexample["x"]), [1, 1, 1, 5])
        assert res.lower >= 0
    else:
        assert res.upper < 0 and (res.lower is None or res.lower <= res.upper)


@pytest.mark.slow
@pytest.mark.parametrize("i, j, k", [(1, 1, 6), (3, 3, 9), (2, 9, 8), (4, 5, 10), (1, 2, 3), (1, 1, 4)])
def test_acasxu_other_properties_match_ground_truth(i, j, k):
    onnx, prop = acasxu_path(i, j), acasxu_property_path(k)
    expected = GROUND_TRUTH[(onnx.name, prop.name)]
    res = certify.verify(onnx, prop, timeout=120)
    assert res.result in (expected, "timeout"), (res.result, expected)
    if res.result == "sat":
        _check_witness(onnx, prop, np.array(res.counterexample["x"]), [1, 1, 1, 5])


def test_timeout_is_never_a_proof():
    # property 5 on N_1_1 holds but needs many more nodes than 0.5 s allows here
    res = certify.verify(acasxu_path(1, 1), acasxu_property_path(5), timeout=0.5)
    assert res.result == "timeout" and res.status == "time_limit" and res.counterexample is None
    assert res.upper is None or res.upper >= 0  # nothing proven below 0 yet
    assert res.vnncomp_text() == "timeout"


def test_too_many_dimensions_for_input_splitting_split_relus_instead():
    # property 5 on N_1_1 holds; with 5 free inputs above max_split_dims the search splits ReLUs
    res = certify.verify(acasxu_path(1, 1), acasxu_property_path(5), timeout=20, max_split_dims=2)
    assert res.details["search"]["bounder"] == "beta-crown-relu-split"
    assert any("ReLU splitting" in n for n in res.notes)
    assert res.result in ("unsat", "timeout"), res.result
    if res.result == "unsat":
        assert res.upper is not None and res.upper <= 0


def test_python_network_without_onnx_source_is_replayed_on_an_export():
    w, b = -0.7, 0.2
    net = sequential([(np.array([[w]]), np.array([b]))])
    text = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (>= X_0 -1))\n(assert (<= X_0 1))\n"
            f"(assert (>= Y_0 {float(abs(w) * 0.5 + b)!r}))")
    res = certify.verify(net, certify.parse_vnnlib(text), timeout=30)
    assert res.result == "sat" and any("float64 ONNX export" in n for n in res.notes)
    assert res.counterexample["y"][0] >= abs(w) * 0.5 + b


# ----------------------------------------------------------------------------- instance lists
def test_instances_csv_writes_vnncomp_rows_and_resumes(cli, tmp_path):
    out = tmp_path / "results.csv"
    r = cli("verify", "--instances", TEST / "test_instances.csv", "--out", out, "--timeout", "30")
    assert r.code == 0, r.err
    rows = list(csv.reader(open(out)))
    assert [(row[1], row[2], row[4]) for row in rows] == [
        ("test_nano.onnx", "test_nano.vnnlib", "unsat"), ("test_tiny.onnx", "test_tiny.vnnlib", "unsat"),
        ("test_small.onnx", "test_small.vnnlib", "unsat"), ("test_sat.onnx", "test_prop.vnnlib", "sat"),
        ("test_unsat.onnx", "test_prop.vnnlib", "unsat")]
    assert all(row[0] == "vnncomp_test" and float(row[3]) >= 0 and float(row[5]) >= 0 for row in rows)
    again = cli("verify", "--instances", TEST / "test_instances.csv", "--out", out, "--timeout", "30", "--json")
    assert again.code == 0 and again.json()["skipped"] == 5 and again.json()["run"] == 0
    assert len(list(csv.reader(open(out)))) == 5


def test_instances_csv_errors(cli, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a.onnx,b.vnnlib,60\nc.onnx,d.vnnlib\n")
    assert_bad_input(cli("verify", "--instances", bad), "bad.csv:2", "expected 3 columns")
    missing = tmp_path / "missing.csv"
    missing.write_text("nothing.onnx,nothing.vnnlib,5\n")
    r = cli("verify", "--instances", missing, "--json")
    assert r.code == 0 and r.json()["results"] == {"error": 1} and "does not exist" in r.err
    assert_bad_input(cli("verify", TEST / "test_nano.onnx"), "needs MODEL and PROPERTY")
    assert_bad_input(cli("verify", TEST / "test_nano.onnx", TEST / "test_nano.vnnlib", "--timeout", "0"), "--timeout")


@pytest.mark.parametrize("option, value, says", [
    ("second_search", "no", "second_search must be True or False"),
    ("root_lp", 1, "root_lp must be True or False"),
    ("max_split_dims", 2.5, "max_split_dims must be an integer >= 0"),
    ("batch_size", 0, "batch_size must be an integer >= 1"),
    ("batch_size", True, "batch_size must be an integer >= 1"),
    ("attack_seconds", float("nan"), "attack_seconds must be None or a non-negative number"),
    ("attack_seconds", -1.0, "attack_seconds must be None or a non-negative number")])
def test_verify_refuses_option_values_it_would_misread(option, value, says):
    """A truthy string for a switch, a float count or a NaN budget: a one-line BadInput naming the
    option, before the model is even read (the path does not exist)."""
    from certify.errors import BadInput

    with pytest.raises(BadInput, match=re.escape(says)):
        certify.verify("no-such-model.onnx", "no-such.vnnlib", timeout=5, **{option: value})
