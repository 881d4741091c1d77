"""Local Lipschitz at scale (method bounds / bab / auto) against independent oracles.

Oracles: activation-region enumeration with one LP per partial pattern (tests/lipschitz_oracles),
Jacobians sampled in the box (a lower bound), the naive product of layer norms computed here,
and the exact MILP (a second, independent method) on the LipMIP suite and a digits net.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certify
from models.box import Box
from models.ir import Affine, sequential
from models.zoo import LIPMIP_SUITE, lipmip_suite_path
from solvers.runtime import Budget
from tests.lipschitz_oracles import exact_lipschitz, opnorm, random_weights, regions

NORMS = ["linf", "l1", "l2"]
NETS = {"a": ([2, 6, 6, 2], 3), "b": ([3, 5, 4, 3], 11), "c": ([4, 4, 4, 4, 2], 7)}


@lru_cache(maxsize=None)
def _case(name: str):
    sizes, seed = NETS[name]
    w = random_weights(sizes, seed)
    lo, hi = np.full(sizes[0], -0.7), np.full(sizes[0], 0.9)
    return w, sequential(w), lo, hi


@lru_cache(maxsize=None)
def _exact(name: str, p: str, q: str | None, target: tuple | None = None) -> float:
    w, _, lo, hi = _case(name)
    return exact_lipschitz(w, lo, hi, p, q, target=None if target is None else np.array(target))


def _naive(weights, p, q) -> float:
    """||W_K||_{inf->q} prod ||W_k||_{inf->inf} ||W_0||_{p->inf}: ReLU slopes lie in [0, 1]."""
    W0 = weights[0][0]
    val = {"linf": np.abs(W0).sum(axis=1).max(), "l1": np.abs(W0).max(), "l2": np.linalg.norm(W0, axis=1).max()}[p]
    for W, _ in weights[1:-1]:
        val *= np.abs(W).sum(axis=1).max()
    return float(val * opnorm(weights[-1][0], "linf", q))


def _run(name, method, p, q, target=None, time_limit=20.0):
    _, net, lo, hi = _case(name)
    kw = {"target": np.array(target)} if target is not None else {"output_norm": q}
    return certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, method=method,
                                   time_limit=time_limit, **kw)


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("p", NORMS)
@pytest.mark.parametrize("q", NORMS)
def test_fast_bound_is_sound_and_below_the_naive_product(name, p, q):
    w = _case(name)[0]
    cert = _run(name, "bounds", p, q)
    true = _exact(name, p, q)
    assert cert.method == "bounds" and cert.certified
    assert cert.lower <= true * (1 + 1e-9) + 1e-12 <= cert.upper * (1 + 1e-9) + 2e-12
    assert cert.upper <= _naive(w, p, q) * (1 + 1e-9)


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("p,q", [("linf", "l1"), ("l1", "linf"), ("linf", "linf"), ("l1", "l1"), ("l2", "l1"),
                                 ("linf", "l2")])
def test_bab_closes_to_the_exact_constant(name, p, q):
    """Region enumeration gives the exact value; the BaB interval must contain it and close on it."""
    cert = _run(name, "bab", p, q)
    true = _exact(name, p, q)
    assert cert.method == "bab"
    assert cert.lower <= true * (1 + 1e-9) + 1e-12 <= cert.upper * (1 + 1e-9) + 2e-12
    assert cert.status == "optimal", cert
    assert cert.upper <= true * (1 + 2e-6) + 1e-12
    assert cert.proof["complete"]


@pytest.mark.parametrize("p", NORMS)
def test_bab_on_targets_and_margins(p):
    c = (0.4, -1.1, 0.8)
    cert = _run("b", "bab", p, None, target=c)
    true = _exact("b", p, None, c)
    assert cert.lower <= true * (1 + 1e-9) + 1e-12 <= cert.upper * (1 + 1e-9) + 2e-12
    assert cert.status == "optimal" and cert.upper <= true * (1 + 2e-6)


@pytest.mark.parametrize("extra", ["node_lp", "milp_finish"])
def test_bab_value_does_not_depend_on_the_lp_and_milp_finishers(extra):
    """LP node bounds and the MILP finisher only speed the tree up: on or off, the same value."""
    from certify.lipschitz.bab import lipschitz_bab
    from certify.lipschitz.options import NormQuestion
    from certify.lipschitz.witness import WitnessSearch

    _, net, lo, hi = _case("c")
    true = _exact("c", "linf", "l1")
    box = Box.from_bounds(lo, hi)
    values = []
    for on in (True, False):
        question = NormQuestion.of(net, "linf", "l1")
        budget = Budget(60.0)
        search = WitnessSearch(net, box, question, budget)
        search.sample()
        out = lipschitz_bab(net, box, question, search, budget, **{extra: on})
        assert out.stop in ("closed", "gap")
        assert out.lower <= true * (1 + 1e-9) <= out.upper * (1 + 1e-9)
        values.append(out.upper)
    assert values[0] == pytest.approx(values[1], rel=2e-6)


def test_strong_input_splits_keep_the_exact_value_and_pick_the_best_input(monkeypatch):
    """Strong input splits (every input tried where the heuristic's split stalled) only change the
    tree: on or off, the BaB closes on the exact constant. The split they pick covers the node and
    its worse half is no worse than the halves along any other input, bounded independently."""
    from certify.lipschitz import bab as bab_module
    from certify.lipschitz.options import NormQuestion
    from certify.lipschitz.witness import WitnessSearch

    _, net, lo, hi = _case("c")
    true = _exact("c", "linf", "l1")
    box = Box.from_bounds(lo, hi)
    seen = []
    for on in (True, False):
        monkeypatch.setattr(bab_module, "STRONG_INPUTS", on)
        question = NormQuestion.of(net, "linf", "l1")
        budget = Budget(60.0)
        search = WitnessSearch(net, box, question, budget)
        search.sample()
        problem = bab_module.LipschitzBab(net, box, question, search, node_lp=False, budget=budget)
        assert problem.strong == on
        if on:  # record the strong splits made during the run
            many = problem.branch_many
            problem.branch_many = lambda items, level: seen.append((items, many(items, level))) or seen[-1][1]
        res = bab_module.branch_and_bound(problem, gap=1e-6, deadline=budget.deadline, lower=search.lower,
                                          batch=bab_module.BATCH)
        assert res.stop in ("closed", "gap")
        assert max(res.lower, search.lower) <= true * (1 + 1e-9) <= res.upper * (1 + 1e-9)
        assert res.upper <= true * (1 + 2e-6)
    monkeypatch.setattr(bab_module, "STRONG_INPUTS", True)
    checked = 0
    for items, groups in seen:
        for (node, nb), children in zip(items, groups):
            if not children or not isinstance(children[0][1], bab_module.NodeBound):
                continue  # not a strong split
            (left, bl), (right, br) = children
            k = int(np.flatnonzero(left.hi != node.hi)[0])
            assert np.array_equal(left.lo, node.lo) and np.array_equal(right.hi, node.hi)
            assert left.hi[k] == right.lo[k] and np.array_equal(np.delete(left.hi, k), np.delete(node.hi, k))
            for other in problem._wide_inputs(node):
                halves = problem.bound_many(list(problem._halves(node, nb, other)))
                # (the witness probes are random: bounds of the same box agree to the linear bounds' work cap)
                assert max(bl.upper, br.upper) <= max(h.upper for h in halves) * (1 + 1e-9) + 1e-12
            checked += 1
            if checked >= 5:
                return
    assert checked, "no strong split was made"


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 5), depth=st.integers(1, 3), width=st.integers(2, 8),
       m=st.integers(1, 4), p=st.sampled_from(NORMS), q=st.sampled_from(NORMS), radius=st.floats(0.01, 2.0),
       method=st.sampled_from(["bounds", "bab"]))
def test_sandwich_sampled_jacobians_fast_and_naive(seed, n, depth, width, m, p, q, radius, method):
    w = random_weights([n] + [width] * depth + [m], seed)
    net = sequential(w)
    rng = np.random.default_rng(seed)
    center = rng.uniform(-1, 1, n)
    cert = certify.local_lipschitz(net, center, radius, input_norm=p, output_norm=q, method=method, time_limit=5.0)
    X = rng.uniform(center - radius, center + radius, size=(100, n))
    sampled = max(opnorm(net.jacobian(x), p, q) for x in X)
    assert sampled <= cert.upper * (1 + 1e-9) + 1e-12
    assert cert.lower <= cert.upper <= _naive(w, p, q) * (1 + 1e-9) + 1e-12
    if method == "bab" and n <= 3 and depth * width <= 12:
        exact = exact_lipschitz(w, center - radius, center + radius, p, q)
        assert cert.lower <= exact * (1 + 1e-9) + 1e-12 <= cert.upper * (1 + 1e-9) + 2e-12


def _lipmip(name):
    net = certify.load_onnx(lipmip_suite_path(name))
    return net, np.full(net.input_dim, 0.5)


@pytest.mark.parametrize("name", LIPMIP_SUITE[:2])
def test_bab_matches_the_milp_on_the_lipmip_suite(name):
    net, c = _lipmip(name)
    milp = certify.local_lipschitz(net, c, 0.5, margin=(0, 1), method="milp", backend="highs")
    bab = certify.local_lipschitz(net, c, 0.5, margin=(0, 1), method="bab", time_limit=60)
    assert milp.status == "optimal" and bab.status == "optimal"
    # each interval contains the other's proven lower value and the two close on the same number
    assert bab.upper >= milp.lower * (1 - 1e-9) and milp.upper >= bab.lower * (1 - 1e-9)
    assert bab.upper == pytest.approx(milp.upper, rel=2e-6)
    if name == LIPMIP_SUITE[0]:
        w = [(layer.weight, layer.bias) for layer in net.fused().layers if isinstance(layer, Affine)]
        value = exact_lipschitz(w, np.zeros(2), np.ones(2), "linf", None, target=np.array([1.0, -1.0]))
        assert bab.lower <= value * (1 + 1e-9) and value <= bab.upper * (1 + 1e-9)


def test_digits_net_bounds_are_above_the_exact_milp():
    net, x = _digits()
    milp = certify.local_lipschitz(net, x, 0.02, domain=(0, 1), method="milp", backend="highs", time_limit=60)
    assert milp.status == "optimal"
    for method in ("bounds", "bab"):
        cert = certify.local_lipschitz(net, x, 0.02, domain=(0, 1), method=method, time_limit=10)
        assert cert.upper >= milp.lower * (1 - 1e-9)
        assert cert.lower <= milp.upper * (1 + 1e-9)


def test_auto_picks_bab_for_few_inputs_the_milp_for_few_unstable_neurons_and_bab_beyond():
    _, net, lo, hi = _case("a")
    # few unstable neurons: the box's activation regions are enumerated first; else two inputs:
    # the branch-and-bound splits them (l2 keeps its exact MIQP or interpolation)
    assert certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2).method in ("regions", "bab")
    assert certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm="l2").method != "bab"
    wide = sequential(random_weights([10, 6, 6, 2], 3))
    cert = certify.local_lipschitz(wide, np.zeros(10), 0.3, race="off")  # (the rule; raced, the tree may win)
    assert cert.unstable <= 60 and cert.method in ("regions", "milp")
    w = random_weights([5, 60, 60, 3], 2)
    big = sequential(w)
    cert = certify.local_lipschitz(big, np.zeros(5), 1.0, time_limit=2)
    assert cert.unstable > 60 and cert.method == "bab"
    # an explicit back-end asks for the MILP
    assert certify.local_lipschitz(big, np.zeros(5), 1.0, time_limit=2, backend="highs").method == "milp"


def test_anytime_interval_never_worse_than_the_fast_bound():
    """Under a tiny time limit every method still returns at most the fast bound, and a sound one."""
    w = random_weights([5, 40, 40, 3], 4)
    net = sequential(w)
    fast = certify.local_lipschitz(net, np.zeros(5), 0.5, method="bounds")
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(300, 5))
    sampled = max(opnorm(net.jacobian(x), "linf", "l1") for x in X)
    for method in ("milp", "bab"):
        cert = certify.local_lipschitz(net, np.zeros(5), 0.5, method=method, time_limit=1.0, backend="auto")
        assert sampled <= cert.upper * (1 + 1e-9)
        assert cert.upper <= fast.upper * (1 + 1e-12)
        assert cert.status in ("optimal", "time_limit", "open_gap")


def _digits():
    from models.zoo.digits import digits_data, digits_net

    return digits_net(), digits_data().x_test[0]
