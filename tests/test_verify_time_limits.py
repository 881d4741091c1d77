"""Time limits of `certify verify` at every stage (issue 29): the bound engine stops tightening at its
deadline (`BoundOptions.deadline`) and keeps sound bounds; a search that closed (unsat) or found a
replayed counterexample (sat) is reported as such even when the deadline passed while it finished;
a search cut open by the deadline is `timeout`, never unsat nor unknown. Deadlines here are fake
(a `past` that answers from a counter) or tiny, never measured against the wall clock."""

from __future__ import annotations

import time

import numpy as np
import pytest

import certify
from models import sequential
from models.zoo import DATA, acasxu_path, acasxu_property_path, random_relu_net
from solvers.bounds import BoundOptions, bound_boxes, relu_blocks
from solvers.runtime import set_command_deadline


def _samples(net, lo, hi, n=2000, seed=0):
    """Pre-activations of every ReLU layer and the outputs at random points of the box (the oracle)."""
    X = np.random.default_rng(seed).uniform(lo, hi, size=(n, lo.size))
    pres, h = [], X
    for layer in net.layers:
        if layer.kind == "affine":
            h = h @ layer.weight.T + layer.bias
            pres.append(h)
        else:
            h = np.maximum(h, 0.0)
    return pres[:-1], pres[-1]


def _contains(nb, pres, out):
    for j, z in enumerate(pres):
        assert np.all(nb.pre_lo[j][0] <= z.min(axis=0)) and np.all(z.max(axis=0) <= nb.pre_hi[j][0]), j
    assert np.all(nb.out_lo[0] <= out.min(axis=0)) and np.all(out.max(axis=0) <= nb.out_hi[0])


@pytest.fixture
def net_box():
    net = random_relu_net((6, 40, 40, 40, 3), seed=5)
    lo, hi = np.full(6, -0.5), np.full(6, 0.5)
    return net, lo, hi


def test_a_passed_deadline_leaves_interval_bounds_which_hold(net_box):
    net, lo, hi = net_box
    blocks = relu_blocks(net)
    cut = bound_boxes(blocks, lo[None], hi[None], BoundOptions(deadline=time.perf_counter() - 1.0))
    interval = bound_boxes(blocks, lo[None], hi[None], BoundOptions(method="interval"))
    full = bound_boxes(blocks, lo[None], hi[None], BoundOptions())
    for j in range(len(cut.pre_lo)):
        assert np.array_equal(cut.pre_lo[j], interval.pre_lo[j]) and np.array_equal(cut.pre_hi[j], interval.pre_hi[j])
    assert np.sum(full.pre_hi[2] - full.pre_lo[2]) < 0.9 * np.sum(cut.pre_hi[2] - cut.pre_lo[2])  # it did cut
    _contains(cut, *_samples(net, lo, hi))


@pytest.mark.parametrize("checks_before_the_deadline", [1, 2, 3, 5, 8])
def test_a_deadline_in_the_middle_of_a_layer_keeps_every_bound_sound(net_box, monkeypatch, checks_before_the_deadline):
    """A fake clock: the deadline 'passes' after a number of checks; with one neuron per block the
    cut falls inside a layer. Each bound lies between the full symbolic one and the interval one."""
    import solvers.bounds.pipeline as pipeline

    net, lo, hi = net_box
    blocks = relu_blocks(net)
    full = bound_boxes(blocks, lo[None], hi[None], BoundOptions())
    calls = {"n": 0}

    def fake_cut(options):
        assert options.deadline == 1.0
        calls["n"] += 1
        return calls["n"] > checks_before_the_deadline

    monkeypatch.setattr(pipeline, "_cut", fake_cut)
    monkeypatch.setattr(pipeline, "CHUNK_WORK", 1.0)  # one neuron per block
    cut = bound_boxes(blocks, lo[None], hi[None], BoundOptions(deadline=1.0))
    for j in range(len(cut.pre_lo)):
        assert np.all(cut.pre_lo[j] <= full.pre_lo[j] + 1e-12) and np.all(cut.pre_hi[j] >= full.pre_hi[j] - 1e-12)
    _contains(cut, *_samples(net, lo, hi))
    assert calls["n"] > checks_before_the_deadline  # the deadline was consulted past the cut


def test_blocks_under_a_far_deadline_change_no_bound(net_box, monkeypatch):
    import solvers.bounds.pipeline as pipeline

    net, lo, hi = net_box
    blocks = relu_blocks(net)
    whole = bound_boxes(blocks, lo[None], hi[None], BoundOptions())
    monkeypatch.setattr(pipeline, "CHUNK_WORK", 1.0)
    blocked = bound_boxes(blocks, lo[None], hi[None], BoundOptions(deadline=time.perf_counter() + 3600))
    for j in range(len(whole.pre_lo)):
        np.testing.assert_allclose(blocked.pre_lo[j], whole.pre_lo[j], rtol=0, atol=1e-12)
        np.testing.assert_allclose(blocked.pre_hi[j], whole.pre_hi[j], rtol=0, atol=1e-12)


class _Late:
    """A node bounder that returns only after the run's deadline has passed (a slow root bound)."""

    name = "late"

    def __init__(self, inner, seconds: float) -> None:
        self.inner, self.seconds = inner, seconds

    def __call__(self, region, lo, hi, states=None):
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            time.sleep(0.01)
        return self.inner(region, lo, hi, states)


def _net_1d():
    """y = relu(x) - relu(-x) / 2 (a hidden ReLU layer: the attack's region LP needs one): y = x / 2
    for x < 0, y = x for x >= 0, in [-0.5, 1] on [-1, 1]."""
    return sequential([(np.array([[1.0], [-1.0]]), np.zeros(2)), (np.array([[1.0, -0.5]]), np.zeros(1))])


def _prop(bound: str):
    return certify.parse_vnnlib("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (>= X_0 -1))\n"
                                f"(assert (<= X_0 1))\n(assert {bound})")


def test_a_root_begun_just_before_the_deadline_may_finish_within_the_grace(monkeypatch):
    """A root bound begun after the deadline (loading took the whole time limit) finishes within
    the grace and closes (unsat); without a grace it is cut to interval pre-activation bounds, which
    do not close it: timeout."""
    import certify.verify.verifier as verifier

    from certify.verify.node_bounds import BatchedSymbolicBounds

    net = random_relu_net((3, 40, 40, 40, 2), seed=2)
    lo, hi = np.full(3, -0.3), np.full(3, 0.3)

    def prop(t):
        return certify.parse_vnnlib(
            "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const X_2 Real)\n"
            "(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
            + "".join(f"(assert (>= X_{i} -0.3))\n(assert (<= X_{i} 0.3))\n" for i in range(3))
            + f"(assert (>= (- Y_0 Y_1) {t!r}))")

    # upper bounds of y_0 - y_1 over the box: the root bound cut at once, and the full one (tighter)
    region = prop(0.0).regions()[0]
    u_cut = BatchedSymbolicBounds(net, deadline=time.perf_counter() - 1)(region, lo[None], hi[None]).margin_upper[0, 0]
    u_full = BatchedSymbolicBounds(net)(region, lo[None], hi[None]).margin_upper[0, 0]
    assert u_full < u_cut - 0.1
    t = float(0.5 * (u_full + u_cut))  # y_0 - y_1 >= t: empty (sampled below), proven by the full bound only
    X = np.random.default_rng(0).uniform(lo, hi, size=(5000, 3))
    Y = np.array([net.forward(x) for x in X])
    assert np.max(Y[:, 0] - Y[:, 1]) < t
    spec = prop(t)
    try:
        set_command_deadline(time.perf_counter() - 1.0)
        monkeypatch.setattr(verifier, "BOUND_GRACE", 30.0)  # (generous here: the test must not time itself)
        graced = certify.verify(net, spec, timeout=60)
        monkeypatch.setattr(verifier, "BOUND_GRACE", 0.0)
        cut = certify.verify(net, spec, timeout=60)
    finally:
        set_command_deadline(None)
    assert graced.result == "unsat" and cut.result == "timeout"


def test_a_closed_search_is_unsat_even_when_the_deadline_passed_during_the_root():
    from certify.verify.node_bounds import BatchedSymbolicBounds

    net = _net_1d()  # y in [-0.5, 1]: y >= 100 is impossible
    res = certify.verify(net, _prop("(>= Y_0 100)"), timeout=0.2, attack_seconds=0.01,
                         bounder=_Late(BatchedSymbolicBounds(net), 0.4))
    assert res.result == "unsat" and res.status == "optimal" and res.upper < 0
    assert res.seconds > 0.2  # (the deadline had passed: the closed search is still the answer)


def test_a_counterexample_found_after_the_deadline_is_sat():
    from certify.verify.node_bounds import BatchedSymbolicBounds

    net = _net_1d()  # y >= -100 everywhere: the root's center is a counterexample
    res = certify.verify(net, _prop("(>= Y_0 -100)"), timeout=0.2, attack_seconds=0.0,
                         bounder=_Late(BatchedSymbolicBounds(net), 0.4))
    assert res.result == "sat" and res.details.get("found_by") == "search"
    assert res.counterexample["y"][0] >= -100


def test_an_open_root_cut_by_the_deadline_is_timeout_not_unknown():
    from certify.verify.node_bounds import BatchedSymbolicBounds

    net = acasxu_path(1, 1)
    spec = certify.load_vnnlib(acasxu_property_path(5))
    onnx = certify.load_onnx(net)
    # above max_split_dims with a given bounder (no ReLU splitting) the root is bounded only: open,
    # not splittable
    late = certify.verify(net, spec, timeout=0.2, attack_seconds=0.01, max_split_dims=2,
                          bounder=_Late(BatchedSymbolicBounds(onnx), 0.4))
    assert late.result == "timeout" and late.status == "time_limit" and (late.upper is None or late.upper >= 0)
    on_time = certify.verify(net, spec, timeout=60, attack_seconds=0.01, max_split_dims=2,
                             bounder=BatchedSymbolicBounds(onnx))
    assert on_time.result == "unknown"  # the same root within the limit: nothing more to do


def test_a_command_deadline_passed_before_the_run_still_bounds_the_root():
    """The CLI's whole-command deadline passed during model loading: the run does the cheapest work
    (no attack, interval root bounds) and reports a root that closes as unsat, else timeout."""
    try:
        set_command_deadline(time.perf_counter() - 1.0)
        closed = certify.verify(_net_1d(), _prop("(>= Y_0 100)"), timeout=60)
        open_ = certify.verify(acasxu_path(1, 1), acasxu_property_path(5), timeout=60)
    finally:
        set_command_deadline(None)
    assert closed.result == "unsat" and closed.details["attack"]["points"] <= 1  # the root's center only
    assert open_.result == "timeout" and open_.status == "time_limit" and open_.nodes <= 1


def test_the_vnncomp_test_instances_keep_their_answers_with_the_deadline_checks():
    base = DATA / "vnncomp_test"
    assert certify.verify(base / "test_sat.onnx", base / "test_prop.vnnlib", timeout=20).result == "sat"
    assert certify.verify(base / "test_unsat.onnx", base / "test_prop.vnnlib", timeout=20).result == "unsat"


def test_a_refusal_during_an_instance_run_is_an_error_row_with_its_message(monkeypatch, tmp_path):
    """A bound too large for the memory budget refused mid-run (exit 2 for one property) is, in an
    instance list, that instance's `error` row with the refusal's one-line message (not an
    "internal error"), and the run goes on."""
    import certify.verify.instances as instances
    from models.memory import TooLarge

    def refuse(*args, **kwargs):
        raise TooLarge("too large: needs 9 GB for symbolic (CROWN) bounds of layer 2, but the budget is 1 GB")

    monkeypatch.setattr(instances, "verify", refuse)
    base = DATA / "vnncomp_test"
    inst = instances.Instance("test_nano.onnx", "test_nano.vnnlib", 10.0, base / "test_nano.onnx",
                              base / "test_nano.vnnlib", 1)
    r, cert = instances.run_instance(inst, "test")
    assert r.result == "error" and cert is None and r.message.startswith("too large: needs 9 GB")
