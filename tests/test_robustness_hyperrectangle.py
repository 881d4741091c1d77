"""Robustness hyperrectangles: every corner and random interior point keeps the class (float64 and
onnxruntime), each side pushed out by 1e-3 is refuted by a replayed point (unless at the domain
edge), fixed features stay fixed, and the LDP utility reads the certificate."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

import certify
from certify.errors import BadInput
from tests.lipschitz_oracles import write_onnx
from tests.robustness_oracles import flips, forward, onnxruntime_outputs, small_classifier

PUSH = 1e-3


@pytest.fixture(scope="module")
def net2d(tmp_path_factory):
    """Three classes share the unit square."""
    w = small_classifier((2, 8, 8, 3), 0, spread=6.0)
    return w, write_onnx(w, tmp_path_factory.mktemp("hr") / "net2d.onnx")


def _keeps(w, path, X, c) -> bool:
    """Strictly class c (no tie) at every row of X, in float64 and in onnxruntime."""
    for x in X:
        for y in (forward(w, x), onnxruntime_outputs(path, x)):
            if flips(y, c) or int(np.argmax(y)) != c:
                return False
    return True


def _check(cert, w, path, x0, domain=(0.0, 1.0)):
    lo, hi = cert.box.lo, cert.box.hi
    c = cert.predicted_class
    assert np.all(lo <= x0) and np.all(x0 <= hi) and np.all(lo >= domain[0]) and np.all(hi <= domain[1])
    corners = np.array(list(product(*zip(lo, hi))))
    inside = np.random.default_rng(0).uniform(lo, hi, (40, lo.size))
    assert _keeps(w, path, np.vstack([corners, inside]), c)
    for side in cert.sides:
        i, inner, outer = side["feature"], side["inner"], side["outer"]
        edge = domain[0] if side["side"] == "lower" else domain[1]
        if inner == edge:
            continue
        # pushed out by PUSH, the box holds the side's replayed counterexample
        x = np.asarray(side["counterexample"])
        assert abs(outer - inner) <= PUSH and x[i] == outer
        pushed_lo, pushed_hi = lo.copy(), hi.copy()
        if side["side"] == "lower":
            pushed_lo[i] = inner - PUSH
        else:
            pushed_hi[i] = inner + PUSH
        assert np.all(pushed_lo <= x) and np.all(x <= pushed_hi)
        assert flips(forward(w, x), c) and flips(onnxruntime_outputs(path, x), c)


@pytest.mark.parametrize("x0", [[0.64, 0.27], [0.04, 0.02], [0.81, 0.91]])
def test_hyperrectangle_is_proven_and_maximal(net2d, x0):
    w, path = net2d
    x0 = np.array(x0)
    cert = certify.robustness_hyperrectangle(path, x0, backend="highs")
    assert cert.status == "certified" and cert.certified
    _check(cert, w, path, x0)
    # the start box (the linf radius box, strictly inside the proven ball) lies inside
    r = cert.lower * (1 - 1e-12)
    assert np.all(cert.box.lo <= np.maximum(x0 - r, 0)) and np.all(cert.box.hi >= np.minimum(x0 + r, 1))
    pairs, outer = cert.pairs("box"), cert.pairs("outer")
    assert len(pairs) == 2 and all(o[0] <= p[0] <= p[1] <= o[1] for p, o in zip(pairs, outer))


def test_fixed_features_and_a_wider_domain(tmp_path):
    w = small_classifier((3, 8, 3), 2, spread=4.0)
    path = write_onnx(w, tmp_path / "net3.onnx")
    x0 = np.array([0.4, 0.7, 0.2])
    cert = certify.robustness_hyperrectangle(path, x0, features=[0, 2], domain=(-1, 2), backend="highs")
    assert cert.box.lo[1] == cert.box.hi[1] == 0.7 and cert.outer_box.lo[1] == cert.outer_box.hi[1] == 0.7
    assert [s["feature"] for s in cert.sides] == [0, 0, 2, 2]
    _check(cert, w, path, x0, domain=(-1, 2))


def test_fast_only_box_is_still_proven(net2d):
    w, path = net2d
    x0 = np.array([0.64, 0.27])
    fast = certify.robustness_hyperrectangle(path, x0, exact=False)
    lo, hi = fast.box.lo, fast.box.hi
    inside = np.random.default_rng(1).uniform(lo, hi, (40, 2))
    assert _keeps(w, path, np.vstack([np.array(list(product(*zip(lo, hi)))), inside]), fast.predicted_class)
    assert fast.status in ("open_gap", "certified")
    for side in fast.sides:  # a side's counterexample, when the attack found one, lies beyond it
        if side["counterexample"] is not None:
            assert side["outer"] <= side["inner"] if side["side"] == "lower" else side["outer"] >= side["inner"]


def test_utility_reads_the_hyperrectangle(net2d):
    from certify.ldp import make_mechanism, utility

    w, path = net2d
    cert = certify.robustness_hyperrectangle(path, [0.64, 0.27], backend="highs")
    u = utility(make_mechanism("pm", 4.0), cert)
    assert 0 < u.rho < 1 and "certified box" in u.basis and np.array_equal(u.lo, cert.box.lo)


def test_bad_input(net2d):
    w, path = net2d
    with pytest.raises(BadInput, match="domain"):
        certify.robustness_hyperrectangle(path, [0.5, 0.5], domain=None)
    with pytest.raises(BadInput, match="outside the domain"):
        certify.robustness_hyperrectangle(path, [1.5, 0.5])
    with pytest.raises(BadInput, match="given twice"):
        certify.robustness_hyperrectangle(path, [0.5, 0.5], features=[0, 0])
