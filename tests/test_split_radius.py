"""The linf radius by a bisection of verifications (`certify.robustness.split_radius`): the interval
against the exact radius of an independent oracle (activation regions, one LP per region and
class), counterexamples replayed in the test's own float64 pass and onnxruntime, the probe
property's box and clauses against the flip definition, and the choice between it and the MILP."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certify
import certify.robustness.radius as radius_module
from certify.robustness.question import Classifier, FlipQuestion
from certify.robustness.split_radius import BISECT_GAP, flip_spec
from models.ir import sequential
from tests.robustness_oracles import exact_radius, radius_case, flips, forward, onnxruntime_outputs, small_classifier
# the small nets of the exact-radius tests (and their ONNX files: a fixture)
from tests.test_robustness_radius import DOMAIN, NETS, onnx_nets  # noqa: F401


@pytest.fixture
def always_bisect(monkeypatch):
    """Every net counts as image-sized: the bisection runs on nets small enough for the oracle."""
    monkeypatch.setattr(radius_module, "SPLIT_UNSTABLE", -1)
    monkeypatch.setattr(radius_module, "SPLIT_INPUTS", 0)


@pytest.mark.parametrize("k", range(len(NETS)))
@pytest.mark.parametrize("targeted", [False, True])
@pytest.mark.parametrize("domain", [None, DOMAIN])
def test_bisection_brackets_the_exact_radius(onnx_nets, always_bisect, k, targeted, domain):
    w, path, x0 = onnx_nets[k]
    c, target, oracle = radius_case(w, x0, "linf", targeted, domain)
    cert = certify.robustness_radius(path, x0, target_class=target, domain=domain, time_limit=30)
    why = (oracle, cert.lower, cert.upper, cert.status, cert.notes, cert.solver)
    assert cert.method == "relu-split" and cert.certified, why
    assert cert.fast_lower <= cert.lower <= oracle + 1e-12, why  # every probe's unsat is a proof
    if not math.isfinite(oracle):  # nothing flips within the domain: the cover radius is proven
        assert cert.upper is None and cert.status == "robust_within", why
        return
    assert cert.upper >= oracle - 1e-9, why
    probes = cert.solver["bisection"]["probes"]
    assert any(p["result"] == "unsat" for p in probes), why
    if cert.status == "open_gap":  # the bisection ran to its gap (small nets decide every probe)
        assert cert.upper - cert.lower <= 2 * BISECT_GAP * cert.upper, why
    # the counterexample flips in the test's own float64 pass and in onnxruntime, at its distance
    x = np.asarray(cert.counterexample)
    assert flips(forward(w, x), c, target) and flips(onnxruntime_outputs(path, x), c, target)
    assert np.max(np.abs(x - x0)) <= cert.upper
    if domain is not None:
        assert np.all(x >= domain[0]) and np.all(x <= domain[1])


def test_only_the_chosen_features_move(onnx_nets, always_bisect):
    w, path, x0 = onnx_nets[1]
    oracle = exact_radius(w, x0, "linf", features=[0, 2])
    cert = certify.robustness_radius(path, x0, features=[0, 2], time_limit=30)
    assert cert.method == "relu-split"
    assert cert.lower <= oracle + 1e-12 and cert.upper >= oracle - 1e-9
    assert cert.upper - cert.lower <= 2 * BISECT_GAP * cert.upper
    assert cert.counterexample[1] == x0[1]


def test_a_short_time_limit_keeps_a_sound_interval(onnx_nets, always_bisect):
    w, path, x0 = onnx_nets[0]
    oracle = exact_radius(w, x0, "linf")
    t = time.perf_counter()
    cert = certify.robustness_radius(path, x0, time_limit=1.0)
    assert time.perf_counter() - t < 3.0
    assert cert.lower <= oracle + 1e-12
    assert cert.upper is None or cert.upper >= oracle - 1e-9
    # stopped by the time limit (less than a probe's time left counts too), or ran to its gap
    assert cert.status in ("time_limit", "open_gap"), (cert.status, cert.solver)
    if cert.status == "open_gap":
        assert cert.upper - cert.lower <= 2 * BISECT_GAP * cert.upper


@settings(max_examples=30, deadline=None)
@given(k=st.integers(0, len(NETS) - 1), radius=st.floats(1e-6, 2.0), targeted=st.booleans(),
       domain=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_probe_property_is_the_flip_within_the_ball(k, radius, targeted, domain, seed):
    """The box of the probe's property contains the whole linf ball (corners included, within the
    domain; fixed features pinned), and its clauses hold exactly where the class flips."""
    sizes, net_seed, x0 = NETS[k]
    w = small_classifier(sizes, net_seed)
    net = sequential(w)
    c = int(np.argmax(forward(w, x0)))
    target = (c + 1) % sizes[-1] if targeted else None
    dom = DOMAIN if domain else None
    q = FlipQuestion.of(Classifier.of(net), x0, target_class=target, domain=dom, features=[0, 1])
    spec = flip_spec(q, radius)
    rng = np.random.default_rng(seed)
    x0 = np.asarray(x0, dtype=np.float64)
    corners = x0 + radius * rng.choice([-1.0, 1.0], size=(16, x0.size))
    inside = x0 + radius * rng.uniform(-1.0, 1.0, size=(16, x0.size))
    for x in np.vstack([corners, inside]):
        x[2:] = x0[2:]  # (only features 0 and 1 move)
        if dom is not None:
            x = np.clip(x, *dom)
        assert all(d.contains_input(x) for d in spec.disjuncts)
    ys = rng.standard_normal((64, sizes[-1]))
    for y in ys:
        in_spec = any(d.satisfied(x0, y) for d in spec.disjuncts)
        assert in_spec == flips(y, c, target)
    for d in spec.disjuncts:  # nothing else moves
        assert np.all(d.lo[2:] == x0[2:]) and np.all(d.hi[2:] == x0[2:])


def test_small_nets_keep_the_milp_and_large_boxes_bisect():
    """The choice: a 2-6-6-3 net (12 ReLUs) stays with the exact MILP; a 20-150-150-3 net around
    a point with a wide domain has hundreds of unstable ReLUs: bisection, its lower bound below
    every flip that sampling finds."""
    w, x0 = small_classifier((2, 6, 6, 3), 0), np.array([0.1, -0.2])
    assert certify.robustness_radius(sequential(w), x0, backend="highs").method == "milp"
    big = small_classifier((20, 150, 150, 3), 3)
    x0 = np.random.default_rng(3).uniform(-0.5, 0.5, 20)
    c = int(np.argmax(forward(big, x0)))
    cert = certify.robustness_radius(sequential(big), x0, domain=(-3.0, 3.0), time_limit=8)
    assert cert.method == "relu-split" and cert.lower > 0
    assert cert.lower >= cert.fast_lower
    # an independent search: uniform points in the ball of the upper bound; every flip among them
    # lies at least `lower` away
    rng = np.random.default_rng(0)
    reach = cert.upper if cert.upper is not None else 3.0
    X = np.clip(x0 + reach * rng.uniform(-1, 1, (20000, 20)), -3.0, 3.0)
    flipped = [x for x in X if flips(forward(big, x), c)]
    assert all(np.max(np.abs(x - x0)) >= cert.lower for x in flipped)
    if cert.upper is not None:
        x = np.asarray(cert.counterexample)
        assert flips(forward(big, x), c) and np.max(np.abs(x - x0)) <= cert.upper


def test_cli_prints_the_bisection(cli, onnx_nets, always_bisect):
    w, path, x0 = onnx_nets[1]
    point = ",".join(map(str, x0))
    oracle = exact_radius(w, x0, "linf")
    text = cli("radius", path, "--point", point, "--time-limit", "20")
    assert text.code == 0, text.err
    assert "bisection" in text.out and "verification probe(s)" in text.out
    d = cli("radius", path, "--point", point, "--time-limit", "20", "--json").json()
    assert d["method"] == "relu-split" and d["lower"] <= oracle + 1e-12 <= d["upper"] + 2e-12
    assert all(p["result"] in ("sat", "unsat", "timeout", "unknown") for p in d["solver"]["bisection"]["probes"])


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 1.0), st.lists(st.floats(1.001, 4.0), max_size=4), st.floats(1.0, 5.0), st.integers(0, 3))
def test_probes_name_their_front(lower, factors, spread, turn):
    """A lower-front probe lies between the proven bound and the smallest undecided probe (root LPs
    on: it is meant to prove); an upper-front one inside a gap between undecided probes and the best
    counterexample (root LPs off: it looks for a closer counterexample)."""
    from certify.robustness.split_radius import _next_probe

    base = lower + 0.01
    undecided = sorted({base * f for f in factors})
    best = (undecided[-1] if undecided else base) * spread + 1e-3
    probe = _next_probe(lower, undecided, best, first=False, turn=turn)
    if probe is None:
        return
    r, front = probe
    cap = min(undecided + [best])
    points = undecided + [best]
    if front == "lower":
        assert lower < r < cap
    else:
        assert front == "upper"
        assert any(a < r < b for a, b in zip(points, points[1:]))
    assert _next_probe(lower, undecided, best, first=True, turn=turn) == (best, "first")
