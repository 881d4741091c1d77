"""Exact robustness radii against an independent oracle (activation regions, one LP/QP per region
and class), counterexamples replayed in onnxruntime, the fast bound below the exact radius."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import certify
from certify.errors import BadInput
from certify.robustness import RobustnessRadius, radius_batch
from models.ir import sequential
from tests.lipschitz_oracles import write_onnx
from tests.robustness_oracles import exact_radius, radius_case, flips, forward, onnxruntime_outputs, small_classifier

# (sizes, seed, point): one and two hidden layers, 3 and 4 classes
NETS = [((2, 6, 6, 3), 0, [0.1, -0.2]), ((3, 8, 4), 1, [0.14, 0.45, -0.3])]
DOMAIN = (-1.0, 1.0)


@pytest.fixture(scope="module")
def onnx_nets(tmp_path_factory):
    out = []
    for sizes, seed, x0 in NETS:
        w = small_classifier(sizes, seed)
        out.append((w, write_onnx(w, tmp_path_factory.mktemp("rb") / f"net{seed}.onnx"), np.array(x0)))
    return out


def _check_counterexample(cert, path, w, x0, target=None):
    """The counterexample flips in float64 (the test's own forward pass) and in onnxruntime, and
    its distance is the certificate's upper bound."""
    x = np.asarray(cert.counterexample)
    c = cert.predicted_class
    assert flips(forward(w, x), c, target) and flips(onnxruntime_outputs(path, x), c, target)
    d = np.abs(x - x0)
    dist = {"linf": d.max(), "l1": d.sum(), "l2": np.sqrt((d * d).sum())}[cert.input_norm]
    assert dist <= cert.upper <= dist * (1 + 1e-12) + 1e-300


@pytest.mark.parametrize("k", range(len(NETS)))
@pytest.mark.parametrize("norm", ["linf", "l1"])
@pytest.mark.parametrize("targeted", [False, True])
@pytest.mark.parametrize("domain", [None, DOMAIN])
def test_radius_matches_region_enumeration(onnx_nets, k, norm, targeted, domain):
    w, path, x0 = onnx_nets[k]
    c, target, oracle = radius_case(w, x0, norm, targeted, domain)
    cert = certify.robustness_radius(path, x0, norm=norm, target_class=target, domain=domain, backend="highs")
    assert cert.predicted_class == c and cert.certified
    assert cert.fast_lower <= oracle + 1e-12  # the fast bound is a lower bound
    if math.isfinite(oracle):
        assert cert.status == "optimal" and cert.exact
        assert abs(cert.lower - oracle) <= 1e-6 and abs(cert.upper - oracle) <= 1e-6
        assert cert.lower <= oracle + 1e-9 and cert.radius == cert.upper
        _check_counterexample(cert, path, w, x0, target)
    else:  # no flip in the domain at all
        assert cert.status == "robust_within" and cert.upper is None and cert.counterexample is None


@pytest.mark.parametrize("method", ["auto", "equivalence"])
def test_l2_radius_is_exact_by_miqp_or_a_sound_interval(onnx_nets, method):
    w, path, x0 = onnx_nets[0]
    oracle = exact_radius(w, x0, "l2")
    cert = certify.robustness_radius(path, x0, norm="l2", l2_method=method)
    assert cert.lower <= oracle + 1e-9 and cert.upper >= oracle - 1e-9
    _check_counterexample(cert, path, w, x0)
    if cert.method == "miqp":  # Gurobi licensed and the model in size: exact
        assert cert.status == "optimal" and abs(cert.lower - oracle) <= 1e-6 and abs(cert.upper - oracle) <= 1e-6
    else:
        assert cert.method == "equivalence" and any("sound, not exact" in n for n in cert.notes)
    assert method == "auto" or cert.method == "equivalence"


def test_only_the_chosen_features_move(onnx_nets):
    w, path, x0 = onnx_nets[1]
    oracle = exact_radius(w, x0, "linf", features=[0, 2])
    cert = certify.robustness_radius(path, x0, features=[0, 2], backend="highs")
    assert abs(cert.lower - oracle) <= 1e-6 and abs(cert.upper - oracle) <= 1e-6
    assert cert.counterexample[1] == x0[1] and cert.features == [0, 2]
    assert cert.box.lo[1] == cert.box.hi[1] == x0[1]


def test_max_radius_below_and_above_the_radius(onnx_nets):
    w, path, x0 = onnx_nets[0]
    oracle = exact_radius(w, x0, "linf")
    inside = certify.robustness_radius(path, x0, max_radius=0.5 * oracle, backend="highs")
    assert inside.status == "robust_within" and inside.lower == 0.5 * oracle and inside.upper is None
    assert inside.radius is None and inside.to_dict()["radius"] is None
    beyond = certify.robustness_radius(path, x0, max_radius=2 * oracle, backend="highs")
    assert beyond.status == "optimal" and abs(beyond.upper - oracle) <= 1e-6


def test_fast_bound_only_is_sound_and_returned_first(onnx_nets):
    w, path, x0 = onnx_nets[1]
    oracle = exact_radius(w, x0, "l1")
    fast = certify.robustness_radius(path, x0, norm="l1", exact=False)
    assert 0 < fast.lower <= oracle + 1e-12 and fast.upper >= oracle - 1e-9
    assert fast.status == "open_gap" and fast.solver["nodes"] == 0
    events = []
    certify.robustness_radius(path, x0, norm="l1", backend="highs", progress=events.append)
    stages = [e.stage for e in events]
    assert stages[0] == "fast bound" and events[0].lower == fast.lower
    assert all(e.lower <= oracle + 1e-9 <= e.upper + 2e-9 for e in events)  # every interval is sound


def test_lipschitz_margin_radius_is_sound_and_no_looser_than_the_interval_gradient(onnx_nets):
    """The Lipschitz-margin argument alone (the fast bound's second proof) certifies no radius
    beyond the exact one (region enumeration), for every norm, with and without fixed inputs;
    its gradient bound is never looser than the interval adjoint pass of the same slopes (computed
    here) and is strictly tighter somewhere on these nets."""
    from certify.robustness.fast import FastBounds
    from certify.robustness.question import Classifier, FlipQuestion
    from solvers.bounds.jacobian import jacobian_maps, switched_pass_bounds
    from solvers.norms import dual, vector_norm

    tighter = 0
    for w, path, x0 in onnx_nets:
        for norm in ("linf", "l1", "l2"):
            for features in (None, [0, 1]):
                oracle = exact_radius(w, x0, norm, features=features)
                q = FlipQuestion.of(Classifier.of(path), x0, features=features)
                fast = FastBounds(q)
                for scale in (0.25, 1.0, 4.0):
                    r = scale * oracle
                    nb = fast.network_bounds(q.box(r))
                    lip = fast.lipschitz_radius(nb, norm)
                    assert min(r, lip) <= oracle + 1e-12
                    maps, phases = jacobian_maps(fast.weights, nb.phases(), "backward")
                    interval = math.inf
                    for row, m0 in zip(q.flip.C, fast.margin0):
                        g = switched_pass_bounds(maps, phases, row, row)
                        G = np.maximum(np.abs(g.out_lo), np.abs(g.out_hi))[q.movable]
                        interval = min(interval, m0 / vector_norm(G, dual(norm)))
                    assert lip >= interval * (1 - 1e-9)
                    tighter += lip > interval * (1 + 1e-6)
    assert tighter > 0


def test_a_short_time_limit_keeps_a_sound_interval(onnx_nets):
    w, path, x0 = onnx_nets[0]
    oracle = exact_radius(w, x0, "l1")
    cert = certify.robustness_radius(path, x0, norm="l1", time_limit=0.05, attack_seconds=0.01, backend="highs")
    assert cert.lower <= oracle + 1e-9
    assert cert.upper is None or cert.upper >= oracle - 1e-9
    assert cert.status in ("time_limit", "optimal", "open_gap")


@pytest.mark.parametrize("time_limit", [0.03, 0.06, 0.1, 0.15, 0.3])
def test_per_class_milps_cut_short_stay_sound(time_limit):
    """Time limits that end the per-class MILPs part-way: the interval is still sound, and a
    status other than optimal says why."""
    w = small_classifier((3, 8, 4), 1)
    x0 = np.array([0.14, 0.45, -0.3])
    oracle = exact_radius(w, x0, "l1", domain=DOMAIN)
    cert = certify.robustness_radius(sequential(w), x0, norm="l1", domain=DOMAIN, time_limit=time_limit,
                                     attack_seconds=0.0, backend="highs")
    why = (oracle, cert.lower, cert.upper, cert.status, cert.notes, cert.solver)
    assert cert.lower <= oracle + 1e-9 and (cert.upper is None or cert.upper >= oracle - 1e-9), why
    if cert.status == "optimal":
        assert abs(cert.lower - oracle) <= 1e-6, why
    else:
        assert cert.status == "time_limit", why


def test_a_tie_at_the_point_is_a_flip():
    # two logits equal at x0 = 0: f_0 = x_0, f_1 = -x_0 (ties count as flips)
    net = sequential([(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.zeros(2))])
    cert = certify.robustness_radius(net, [0.0, 0.3])
    assert cert.lower == cert.upper == 0.0 and cert.status == "optimal"
    assert cert.counterexample.tolist() == [0.0, 0.3]
    # a linear classifier: the radius is the distance to the hyperplane x_0 = 0
    away = certify.robustness_radius(net, [0.25, 0.3], backend="highs")
    assert abs(away.upper - 0.25) <= 1e-9 and away.lower <= 0.25


def test_float32_model_counterexamples_flip_in_onnxruntime(tmp_path):
    """A float32 ONNX model: onnxruntime computes in float32, certify's proof in exact arithmetic
    on the same (float32-rounded) weights; the counterexample must flip in both."""
    from models.onnx_export import to_onnx

    w = small_classifier((4, 10, 10, 3), 4)
    path = tmp_path / "net32.onnx"
    path.write_bytes(to_onnx(sequential(w), "float32").SerializeToString())
    x0 = np.array([0.2, -0.1, 0.4, 0.05])
    cert = certify.robustness_radius(str(path), x0, domain=(-1, 1), backend="highs")
    assert cert.status == "optimal"
    y = onnxruntime_outputs(path, cert.counterexample)
    assert flips(y, cert.predicted_class) and np.all(np.abs(cert.counterexample) <= 1)
    assert np.max(np.abs(cert.counterexample - x0)) <= cert.upper


@pytest.mark.slow
def test_digits_float32_model(tmp_path):
    from models.onnx_export import to_onnx
    from models.zoo import digits_net
    from models.zoo.digits import digits_data

    net = digits_net((16,), seed=1)
    path = tmp_path / "digits32.onnx"
    path.write_bytes(to_onnx(net, "float32").SerializeToString())
    for x0 in digits_data().x_test[:3]:
        cert = certify.robustness_radius(str(path), x0, domain=(0, 1), time_limit=60)
        assert cert.status == "optimal" and cert.fast_lower <= cert.lower
        assert flips(onnxruntime_outputs(path, cert.counterexample), cert.predicted_class)


def test_bad_input_is_refused(onnx_nets):
    w, path, x0 = onnx_nets[0]
    cases = [(dict(point=[0.1, 0.2, 0.3]), "has 3 values"), (dict(norm="l3"), "unknown norm"),
             (dict(max_radius=-1), "max radius"), (dict(target_class=3), "out of range"),
             (dict(target_class=1.5), "integer"), (dict(features=[0, 5]), "out of range"),
             (dict(domain=(0.5, 1.0)), "outside the domain"), (dict(time_limit=0), "time limit")]
    for kwargs, message in cases:
        args = dict(point=x0) | kwargs
        with pytest.raises(BadInput, match=message):
            certify.robustness_radius(path, args.pop("point"), **args)
    scalar = sequential([(np.ones((1, 2)), np.zeros(1))])
    with pytest.raises(BadInput, match="at least 2"):
        certify.robustness_radius(scalar, [0.0, 0.0])
    c = int(np.argmax(forward(w, x0)))
    with pytest.raises(BadInput, match="predicted"):
        certify.robustness_radius(path, x0, target_class=c)


def test_batch_is_resumable(onnx_nets, tmp_path):
    w, path, x0 = onnx_nets[0]
    points = np.array([x0, x0 + 0.05, x0 - 0.05])
    out = tmp_path / "radii.jsonl"
    rows = radius_batch(path, points, out=out, backend="highs", progress=False)
    assert [r["index"] for r in rows] == [0, 1, 2]
    for r, p in zip(rows, points):
        assert abs(r["upper"] - exact_radius(w, p, "linf")) <= 1e-6 and r["status"] == "optimal"
    lines = out.read_text().splitlines()
    again = radius_batch(path, points, out=out, backend="highs", progress=False)
    assert out.read_text().splitlines() == lines and [r["upper"] for r in again] == [r["upper"] for r in rows]
    assert json.loads(lines[0])["kind"] == "robustness_radius"


def test_certificates_follow_the_protocol(onnx_nets):
    import jsonschema

    from certify.certificate import load_schema

    w, path, x0 = onnx_nets[0]
    cert = certify.robustness_radius(path, x0, backend="highs")
    assert isinstance(cert, RobustnessRadius)
    d = cert.to_dict()
    jsonschema.validate(d, load_schema())
    assert d["witness"] == d["counterexample"] and d["radius"] == d["upper"]
    # the box is strictly inside the proven ball
    assert np.max(np.maximum(cert.box.hi - x0, x0 - cert.box.lo)) < cert.lower


def test_a_stop_request_returns_the_sound_interval(onnx_nets):
    """Ctrl-C (here: `request_stop` from the progress callback once the MILP runs) stops the solve."""
    from solvers.runtime import interruptible, request_stop

    w, path, x0 = onnx_nets[0]
    oracle = exact_radius(w, x0, "l1")

    def stop(ev):
        if ev.stage in ("solve", "proof", "milp"):
            request_stop()

    try:
        cert = certify.robustness_radius(path, x0, norm="l1", backend="highs", progress=stop)
        assert cert.status in ("interrupted", "optimal") and cert.lower <= oracle + 1e-9 <= cert.upper + 2e-9
        stopped = certify.robustness_radius(path, x0, norm="l1", backend="highs",
                                            progress=lambda ev: request_stop() if ev.stage == "fast bound" else None)
        assert stopped.status == "interrupted" and stopped.lower <= oracle + 1e-9
    finally:
        with interruptible():  # clears the stop request for the tests that follow
            pass
