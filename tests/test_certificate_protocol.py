"""Every result type follows one certificate protocol, and its JSON validates against the schema."""

from __future__ import annotations

import math

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certify
from certify.certificate import SCHEMA, Certificate, Status, load_schema
from certify.robustness.classifiers.linear import LinearRobustness
from certify.lipschitz.certificate import LipschitzCertificate
from certify.lipschitz.global_result import GlobalLipschitzComparison, GlobalLipschitzResult
from certify.verify.result import VerificationResult
from models.box import Box
from models.zoo import random_relu_net, vnncomp_test_path

VALIDATOR = jsonschema.Draft202012Validator(load_schema())
NUMBER = st.one_of(st.none(), st.floats(allow_nan=False), st.just(math.inf))
NORM = st.sampled_from([None, "l1", "l2", "linf"])


@st.composite
def boxes(draw):
    n = draw(st.integers(1, 5))
    lo = np.array(draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n)))
    width = np.array(draw(st.lists(st.floats(0, 1e3), min_size=n, max_size=n)))
    return draw(st.sampled_from([None, Box.from_bounds(lo, lo + width), Box.around(lo, width + 1.0)]))


def _check(cert: Certificate) -> dict:
    """The protocol: attributes, statuses from one set, JSON equal to the attributes and valid."""
    assert isinstance(cert, Certificate) and cert.status in Status.ALL
    d = cert.to_dict()
    VALIDATOR.validate(d)
    assert d["schema"] == SCHEMA and d["kind"] == cert.KIND
    assert d["certified"] is cert.certified and d["status"] == cert.status and d["exact"] is cert.exact
    assert d["scope"] == ("global" if cert.box is None else "box")
    for side in ("lower", "upper"):
        v = getattr(cert, side)
        assert (d[side] is None) if v is None else (d[side] == v or (not math.isfinite(v) and isinstance(d[side], str)))
    assert not hasattr(cert, "validated")  # one word for "proven": certified
    return d


@settings(max_examples=60, deadline=None)
@given(NUMBER, NUMBER, st.sampled_from(sorted(Status.ALL - {"probabilistic"})), st.booleans(), boxes(), NORM, NORM)
def test_generated_results_of_every_type_follow_the_protocol(lower, upper, status, certified, box, p, q):
    common = dict(lower=lower, upper=upper, status=status, certified=certified, box=box, input_norm=p,
                  output_norm=q, seconds=0.5, notes=["a note"])
    _check(LipschitzCertificate(**common, witness=np.zeros(2)))
    _check(GlobalLipschitzResult(**common, method="naive"))
    _check(LinearRobustness(**common, predicted_class=0))


def test_probabilistic_results_are_never_certified():
    with pytest.raises(ValueError):
        GlobalLipschitzResult(None, 1.0, "probabilistic", True)
    with pytest.raises(ValueError):
        GlobalLipschitzResult(None, 1.0, "no-such-status", True)


def test_results_of_the_engines_follow_the_protocol():
    net = random_relu_net((3, 6, 2), seed=1)
    local = certify.local_lipschitz(net, np.zeros(3), 0.2, backend="highs")
    d = _check(local)
    assert d["box"]["center"] == [0.0, 0.0, 0.0] and d["box"]["radius"] == 0.2
    assert d["proof"]["complete"] and local.exact
    naive = certify.global_lipschitz(net, "naive")
    _check(naive)
    both = certify.global_lipschitz(net, "all", input_norm="linf", output_norm="l1", domain=(-1, 1))
    assert isinstance(both, GlobalLipschitzComparison)
    _check(both)
    for r in both.results:
        _check(r)
    small = certify.load_onnx(vnncomp_test_path("test_small"))
    spec = certify.load_vnnlib(str(vnncomp_test_path("test_small")).replace(".onnx", ".vnnlib"))
    verdict = certify.verify(small, spec, timeout=20)
    assert isinstance(verdict, VerificationResult)
    _check(verdict)


def test_global_fallbacks_are_visible_in_the_protocol():
    """A fallback (proven, weaker method) is still certified, with its own status."""
    r = GlobalLipschitzResult(None, 2.0, Status.FALLBACK, True, method="lipsdp-neuron")
    assert _check(r)["status"] == "fallback" and not r.exact
