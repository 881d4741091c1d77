"""`method="auto"`'s measured rule (region stage before the input-splitting branch-and-bound, and
before the MILP for l1/linf norms, only with few untied unstable ReLUs): what it picks, and that its interval holds the exact constant
(independent oracle: `tests.lipschitz_oracles.exact_lipschitz`, a brute-force region enumeration)
and is no wider than that of the single method it picks."""

from __future__ import annotations

import numpy as np
import pytest

import certify
from certify.lipschitz.options import AUTO_REGIONS_BEFORE_BAB
from models.ir import sequential
from tests.lipschitz_oracles import exact_lipschitz, random_weights, sampled_unstable


def _contains(cert, exact: float) -> bool:
    return cert.lower <= exact * (1 + 1e-9) and exact <= cert.upper * (1 + 1e-9)


def test_many_unstable_relus_on_two_inputs_go_to_the_branch_and_bound():
    w = random_weights([2, 20, 2], 1)
    lo, hi = np.full(2, -1.0), np.full(2, 1.0)
    assert sampled_unstable(w, lo, hi) > AUTO_REGIONS_BEFORE_BAB  # (so the rule has something to decide)
    net = sequential(w)
    exact = exact_lipschitz(w, lo, hi, "linf", "l1")
    auto = certify.local_lipschitz(net, np.zeros(2), 1.0, time_limit=60)
    bab = certify.local_lipschitz(net, np.zeros(2), 1.0, method="bab", time_limit=60)
    assert auto.method == "bab" and auto.status == "optimal", auto.notes
    assert _contains(auto, exact) and _contains(bab, exact)
    assert auto.upper - auto.lower <= (bab.upper - bab.lower) + 1e-9 * exact


@pytest.mark.parametrize("norms", [("linf", "l1"), ("l1", "linf"), ("linf", "linf")])
def test_few_unstable_relus_are_enumerated_first(norms):
    w = random_weights([3, 5, 4, 2], 7)
    lo, hi = np.full(3, -0.6), np.full(3, 0.6)
    assert 0 < sampled_unstable(w, lo, hi) <= AUTO_REGIONS_BEFORE_BAB
    exact = exact_lipschitz(w, lo, hi, *norms)
    auto = certify.local_lipschitz(sequential(w), np.zeros(3), 0.6, input_norm=norms[0], output_norm=norms[1])
    assert auto.method == "regions" and auto.status == "optimal", auto.notes
    assert _contains(auto, exact)
    assert auto.upper <= exact * (1 + 1e-6)


def test_tied_neurons_do_not_count_against_the_region_stage():
    """Every hidden neuron doubled exactly (x2 copies, read with weight 0 by the next layer: the
    same function, and ties the enumeration never branches on): twice the unstable count, the
    same regions, still enumerated."""
    base = random_weights([2, 5, 4, 2], 11)
    lo, hi = np.full(2, -1.0), np.full(2, 1.0)
    w = []
    for k, (W, b) in enumerate(base):
        if k > 0:  # the layer reads the doubled previous layer [h, 2h] as W h + 0 (2h)
            W = np.hstack([W, np.zeros_like(W)])
        if k < len(base) - 1:
            W, b = np.vstack([W, 2.0 * W]), np.concatenate([b, 2.0 * b])
        w.append((W, b))
    doubled = sampled_unstable(w, lo, hi)
    assert doubled % 2 == 0 and doubled // 2 <= AUTO_REGIONS_BEFORE_BAB < doubled
    exact = exact_lipschitz(base, lo, hi, "linf", "l1")
    auto = certify.local_lipschitz(sequential(w), np.zeros(2), 1.0)
    assert auto.method == "regions" and auto.status == "optimal", auto.notes
    assert _contains(auto, exact)


def test_demo_comparison_line_is_measured_in_the_run(capsys):
    """`make demo`'s comparison: each method's certificate seconds from this run (none quoted), and
    its ratio to the fastest of them."""
    import re

    from certify.demo import demo_lipschitz_methods

    demo_lipschitz_methods(("bounds", "bab"), time_limit=60)
    rows = re.findall(r"--method (\w+)\s+([\d.]+) s\s+\(([\d.]+)x the fastest\)", capsys.readouterr().out)
    assert [r[0] for r in rows] == ["bounds", "bab"]
    seconds = [float(r[1]) for r in rows]
    assert all(s > 0 for s in seconds)
    m = min(seconds)
    for s, ratio in zip(seconds, (float(r[2]) for r in rows)):
        # seconds are printed to 0.01 and ratios to 0.1: the ratio of the unrounded times lies in
        # the range the printed seconds allow, and the printed ratio within 0.05 of it
        low, high = (s - 0.005) / (m + 0.005), (s + 0.005) / max(m - 0.005, 1e-9)
        assert low - 0.05 - 1e-9 <= ratio <= high + 0.05 + 1e-9, (s, m, ratio)


def _separable_net(n_hidden: int, seed: int, n: int = 10):
    """n inputs; hidden neuron k reads input k mod n alone, with its kink inside [-1, 1] (every one
    unstable on the box, no two tied). With c = e_0 - e_1 the gradient is separable,
    g_i(x_i) = sum over the neurons k of input i of v_k a_k [a_k x_i + b_k > 0] (v = W2^T c), so the
    exact constant over [-1, 1]^n for the linf input norm (||g||_1) is the sum over inputs of the
    largest |g_i| over the segments between that input's kinks: the closed-form oracle."""
    rng = np.random.default_rng(seed)
    a = rng.choice([-1.0, 1.0], n_hidden) * rng.uniform(0.5, 1.5, n_hidden)
    b = -a * rng.uniform(-0.8, 0.8, n_hidden)  # kink at x = -b/a inside (-0.8, 0.8)
    W1 = np.zeros((n_hidden, n))
    W1[np.arange(n_hidden), np.arange(n_hidden) % n] = a
    W2 = rng.standard_normal((2, n_hidden))
    v = W2[0] - W2[1]
    exact = 0.0
    for i in range(n):
        ks = np.flatnonzero(np.arange(n_hidden) % n == i)
        cuts = np.concatenate([[-1.0, 1.0], -b[ks] / a[ks]]) if ks.size else np.array([-1.0, 1.0])
        cuts = np.unique(cuts)
        mids = 0.5 * (cuts[:-1] + cuts[1:])
        exact += max((abs(sum(v[k] * a[k] for k in ks if a[k] * x + b[k] > 0)) for x in mids), default=0.0)
    return sequential([(W1, b), (W2, np.zeros(2))]), exact


@pytest.mark.parametrize("n_hidden, first", [(12, "regions"), (24, "milp")])
def test_region_stage_before_the_milp_only_with_few_unstable_relus(n_hidden, first, monkeypatch):
    """More than 8 inputs (no input splits), l1/linf: the region stage before the MILP only up to
    AUTO_REGIONS_BEFORE_MILP unstable ReLUs; above it auto goes to the MILP at once (the stage is
    not even tried: it ran 3 s there before). Race off: which side of auto's race closes first
    depends on the machine's load (the tree won it once under `pytest -n 2`)."""
    import certify.lipschitz.local as local
    from certify.lipschitz.options import AUTO_REGIONS_BEFORE_MILP

    calls = []
    stage = local.region_stage
    monkeypatch.setattr(local, "region_stage", lambda *a, **k: calls.append(1) or stage(*a, **k))
    net, exact = _separable_net(n_hidden, 3)
    auto = certify.local_lipschitz(net, np.zeros(10), 1.0, margin=(0, 1), time_limit=60, race="off")
    assert auto.unstable == n_hidden and (n_hidden > AUTO_REGIONS_BEFORE_MILP) == (first == "milp")
    assert len(calls) == (first == "regions")
    assert auto.method == first and auto.status == "optimal", auto.notes
    assert _contains(auto, exact) and auto.upper <= exact * (1 + 1e-6)


def test_image_sized_boxes_go_to_the_branch_and_bound():
    """More than AUTO_MILP_INPUTS free inputs: auto leaves the MILP out even with few unstable
    ReLUs (above the region stage's limit), the tree closes the separable net at its closed form."""
    from certify.lipschitz.options import AUTO_MILP_INPUTS, AUTO_MILP_UNSTABLE, AUTO_REGIONS_BEFORE_MILP

    n = AUTO_MILP_INPUTS + 20
    net, exact = _separable_net(24, 3, n)
    auto = certify.local_lipschitz(net, np.zeros(n), 1.0, margin=(0, 1), time_limit=60)
    assert AUTO_REGIONS_BEFORE_MILP < auto.unstable == 24 <= AUTO_MILP_UNSTABLE
    assert auto.method == "bab" and auto.status == "optimal", auto.notes
    assert _contains(auto, exact) and auto.upper <= exact * (1 + 1e-6)
