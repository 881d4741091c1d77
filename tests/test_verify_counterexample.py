"""Counterexample replay (IR and onnxruntime, no tolerance), the witness format, the result type."""

from __future__ import annotations

import re

import jsonschema
import numpy as np
import pytest
from onnx import helper

from certify.certificate import load_schema
from certify.verify import VerificationResult, check_counterexample, format_witness, parse_vnnlib
from certify.verify.counterexample import representable_point
from models.onnx_reference import OnnxReference
from models import load_onnx, sequential
from tests.onnx_builders import make_model, save

ONE_D = "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (>= X_0 0))\n(assert (<= X_0 1))\n"


def _identity_float32(tmp_path):
    """y = x as a float32 ONNX model (Gemm with weight 1)."""
    model = make_model([helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1)],
                       {"W": np.ones((1, 1), np.float32), "b": np.zeros(1, np.float32)}, [1, 1], [1, 1])
    path = save(model, tmp_path)
    net = load_onnx(path)
    return net, OnnxReference.from_file(path, net)


def test_point_unsafe_in_float64_but_not_in_onnxruntime_is_rejected(tmp_path):
    net, ref = _identity_float32(tmp_path)
    assert ref.dtype == np.float32
    spec = parse_vnnlib(ONE_D + "(assert (<= Y_0 0.1))")
    # float32(0.1) > 0.1: the runtime computes y > 0.1, so x = 0.1 is safe there
    assert np.float64(np.float32(0.1)) > 0.1
    assert net.forward(np.array([0.1]))[0] <= 0.1
    assert check_counterexample(net, spec, np.array([0.1]), ref) is None
    cex = check_counterexample(net, spec, np.array([0.05]), ref)
    assert cex is not None and cex.x[0] == np.float64(np.float32(0.05))  # moved to a float32 value
    assert cex.y_runtime[0] <= 0.1 and cex.margin >= 0 and cex.margin_runtime >= 0


class _ShiftedRuntime:
    """A stand-in runtime that disagrees with the IR by a constant."""

    dtype = np.float64

    def __init__(self, net, shift):
        self.net, self.shift = net, shift

    def __call__(self, x):
        return self.net.forward(x) + self.shift


def test_runtime_disagreement_rejects_and_agreement_accepts():
    net = sequential([(np.array([[2.0]]), np.array([0.0]))])
    spec = parse_vnnlib(ONE_D + "(assert (>= Y_0 1.5))")
    x = np.array([0.9])
    assert check_counterexample(net, spec, x, _ShiftedRuntime(net, -0.5)) is None
    cex = check_counterexample(net, spec, x, _ShiftedRuntime(net, 0.0))
    assert cex is not None and cex.y[0] == 1.8
    # outside the input box or non-finite: never a counterexample
    assert check_counterexample(net, spec, np.array([1.0000001]), _ShiftedRuntime(net, 0.0)) is None
    assert check_counterexample(net, spec, np.array([np.nan]), _ShiftedRuntime(net, 0.0)) is None


def test_strict_rows_need_strict_satisfaction():
    net = sequential([(np.array([[1.0]]), np.array([0.0]))])
    ref = _ShiftedRuntime(net, 0.0)
    assert check_counterexample(net, parse_vnnlib(ONE_D + "(assert (< Y_0 0.5))"), np.array([0.5]), ref) is None
    assert check_counterexample(net, parse_vnnlib(ONE_D + "(assert (<= Y_0 0.5))"), np.array([0.5]), ref) is not None


def test_representable_point_stays_in_the_box():
    spec = parse_vnnlib("(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
                        "(assert (>= X_0 0.1))(assert (<= X_0 0.1))(assert (>= X_1 0.1))(assert (<= X_1 0.2))(assert (<= Y_0 0))")
    d = spec.disjuncts[0]
    p = representable_point(np.array([0.1, 0.1]), d, np.float32)
    # X_0's box [0.1, 0.1] holds no float32 value: it keeps 0.1; X_1 moves up to a float32 inside
    assert p[0] == 0.1 and p[1] >= 0.1 and p[1] == np.float64(np.float32(p[1])) and d.contains_input(p)


def test_witness_format_round_trips():
    x, y = np.array([0.1, -2.5e-07, 3.0]), np.array([1.0 / 3.0])
    text = format_witness(x, y)
    assert text.startswith("((X_0 ") and text.endswith(")")
    pairs = re.findall(r"\((X|Y)_(\d+) ([^()\s]+)\)", text)
    assert [(k, int(i)) for k, i, _ in pairs] == [("X", 0), ("X", 1), ("X", 2), ("Y", 0)]
    assert [float(v) for *_, v in pairs] == [*x.tolist(), *y.tolist()]


def test_verification_result_invariants_and_schema():
    schema = load_schema()
    sat = VerificationResult.build("sat", lower=0.1, upper=None, counterexample={"x": [0.0], "y": [1.0]}, nodes=3)
    unsat = VerificationResult.build("unsat", lower=-1.0, upper=-0.5)
    timeout = VerificationResult.build("timeout", lower=None, upper=2.0)
    unknown = VerificationResult.build("unknown", lower=None, upper=None)
    for r, status in ((sat, "optimal"), (unsat, "optimal"), (timeout, "time_limit"), (unknown, "open_gap")):
        d = r.to_dict()
        jsonschema.validate(d, schema)
        assert d["kind"] == "verification" and d["status"] == status
    assert sat.vnncomp_text().splitlines()[0] == "sat" and "(X_0 0.0)" in sat.vnncomp_text()
    assert unsat.vnncomp_text() == "unsat" and unsat.witness is None
    with pytest.raises(ValueError):
        VerificationResult.build("sat", lower=0.0, upper=None)  # sat without a counterexample
    with pytest.raises(ValueError):
        VerificationResult(lower=None, upper=None, status="optimal", result="timeout")
