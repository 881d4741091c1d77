"""The LipMIP reference suite: c = [1, -1], [0, 1]^n, l_inf input (LipMIP's own values as reference).

LipMIP reports Gurobi's dual bound (`ObjBound`) at Gurobi's default MIPGap of 1e-4, so its values
are upper bounds within ~1e-4 of the true constants (a little more on the largest net, where its
default tolerances let the incumbent overshoot); ours must lie at or below them and within 2e-4.
The two 2-input nets are also checked against exact region enumeration.
"""

from __future__ import annotations

import numpy as np
import pytest

import certify
from models.ir import Affine
from models.zoo import LIPMIP_SUITE, lipmip_suite_path
from tests.lipschitz_oracles import exact_lipschitz

LIPMIP_VALUES = dict(zip(LIPMIP_SUITE, (0.335242, 0.0969398, 0.0746016)))


def _certify(name: str, backend: str = "auto", **kw):
    net = certify.load_onnx(lipmip_suite_path(name))
    n = net.input_dim
    return net, certify.local_lipschitz(net, np.full(n, 0.5), 0.5, margin=(0, 1), backend=backend, **kw)


def _check_against_lipmip(name, cert):
    ref = LIPMIP_VALUES[name]
    assert cert.status == "optimal" and cert.exact
    assert cert.lower <= ref * (1 + 1e-7)
    assert cert.upper == pytest.approx(ref, rel=2e-4)
    assert cert.upper - cert.lower <= 2e-6 * cert.upper


def _region_oracle(net) -> float:
    w = [(layer.weight, layer.bias) for layer in net.fused().layers if isinstance(layer, Affine)]
    return exact_lipschitz(w, np.zeros(2), np.ones(2), "linf", None, target=np.array([1.0, -1.0]))


def test_lipmip_2_16_16_2_against_lipmip_and_enumeration():
    net, cert = _certify(LIPMIP_SUITE[0])
    _check_against_lipmip(LIPMIP_SUITE[0], cert)
    value = _region_oracle(net)
    assert cert.lower == pytest.approx(value, rel=1e-9) and value <= cert.upper


@pytest.mark.parametrize("backend", ["gurobi", "highs"])
def test_lipmip_2_20_20_20_2(backend):
    # the MILP on that back-end (the default method may close the box by its regions first)
    _, cert = _certify(LIPMIP_SUITE[1], backend, method="milp")
    assert cert.backend == backend
    _check_against_lipmip(LIPMIP_SUITE[1], cert)


@pytest.mark.slow
def test_lipmip_2_20_20_20_2_against_enumeration():
    net, cert = _certify(LIPMIP_SUITE[1])
    value = _region_oracle(net)
    assert cert.lower == pytest.approx(value, rel=1e-9) and value <= cert.upper


@pytest.mark.slow
@pytest.mark.parametrize("backend,formulation", [("gurobi", "forward"), ("highs", "forward"), ("cbc", "forward")])
def test_lipmip_10_10_10_10_10_2(backend, formulation):
    _, cert = _certify(LIPMIP_SUITE[2], backend, formulation=formulation)
    _check_against_lipmip(LIPMIP_SUITE[2], cert)
