"""Slopes optimised on a root and re-used below its splits (`bound_boxes(slopes_out=, row_slopes=)`,
`symbolic.given_slopes_bound`), and the ReLU split's choice of the earliest layer (`_pick_policy`).

Oracles: sampled pre-activations (box corners included) restricted to the child's phases; the
triangle LP over the child's own earlier bounds (scipy), which no choice of slopes can undercut;
exact activation-region enumeration for the verdicts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.verify import parse_vnnlib, verify
from certify.verify.relu_split import ReluSplitSearch
from models.ir import sequential
from models.zoo import random_relu_net
from solvers.bounds import Bounds, relu_blocks
from solvers.bounds.options import BoundOptions
from solvers.bounds.pipeline import bound_boxes
from solvers.bounds.symbolic import backsubstitute_upper, given_slopes_bound
from tests.lipschitz_oracles import random_weights
from tests.test_lipschitz_batch import _triangle_lp_max
from tests.test_verify_soundness import _property
from tests.vnnlib_oracle import exact_max_margin, unsafe_by_oracle

ALPHA = BoundOptions(rows="per-box", lower_slopes="alpha", alpha_steps=20, alpha_work=np.inf, symbolic_output=False)
CROWN = BoundOptions(rows="unstable", symbolic_output=False)


def _root(seed, sizes=(4, 10, 10, 10, 10, 2)):
    weights = random_weights(list(sizes), seed)
    net = sequential(weights)
    lo, hi = np.full((1, sizes[0]), -1.0), np.full((1, sizes[0]), 1.0)
    kept: dict = {}
    root = bound_boxes(relu_blocks(net), lo, hi, ALPHA, slopes_out=kept)
    return weights, net, lo, hi, root, kept


def _children(root, rng, count):
    """`count` children of the root: 1-3 unstable neurons of random layers fixed to random phases."""
    K = len(root.pre_lo)
    fixed = [np.zeros((count, x.shape[1])) for x in root.pre_lo]
    for b in range(count):
        for _ in range(int(rng.integers(1, 4))):
            t = int(rng.integers(0, K - 1))
            unstable = np.flatnonzero((root.pre_lo[t][0] < 0) & (root.pre_hi[t][0] > 0))
            if unstable.size:
                fixed[t][b, rng.choice(unstable)] = rng.choice([-1.0, 1.0])
    parents = Bounds.stack([root.box(0)] * count)
    return fixed, parents


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 100_000))
def test_children_rebound_with_root_slopes_contain_sampled_preactivations(seed):
    """Children re-bounded with the root's slopes: every sampled point of the box with the child's
    phases lies within the child's bounds."""
    weights, net, lo, hi, root, kept = _root(seed % 50)
    assert kept, "the root's optimised slopes were not handed out"
    rng = np.random.default_rng(seed)
    fixed, parents = _children(root, rng, 4)
    blocks = relu_blocks(net)
    lo4, hi4 = np.repeat(lo, 4, axis=0), np.repeat(hi, 4, axis=0)
    reused = bound_boxes(blocks, lo4, hi4, CROWN, parents=parents, fixed=fixed, row_slopes=kept)
    xs = np.vstack([rng.uniform(lo[0], hi[0], (3000, lo.shape[1])), np.where(rng.random((500, lo.shape[1])) < 0.5, lo[0], hi[0])])
    pre = net.preactivations(xs)[: len(reused.pre_lo)]
    for b in range(4):
        inside = np.ones(len(xs), dtype=bool)
        for z, f in zip(pre, fixed):
            inside &= np.all((f[b] == 0) | ((f[b] > 0) & (z >= 0)) | ((f[b] < 0) & (z <= 0)), axis=1)
        if reused.empty[b]:
            assert not inside.any()
            continue
        for j, z in enumerate(pre):
            assert np.all(z[inside] >= reused.pre_lo[j][b] - 1e-12)
            assert np.all(z[inside] <= reused.pre_hi[j][b] + 1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_given_slopes_bound_is_above_the_child_lp_and_is_crown_with_crown_slopes(seed):
    """On a child, the bounds with the root's slopes stay above the triangle LP's optimum over the
    child's earlier bounds (any slopes are a feasible dual point of that LP); given CROWN's own
    slopes they are CROWN's bounds."""
    weights, net, lo, hi, root, kept = _root(seed)
    fixed, parents = _children(root, np.random.default_rng(seed), 1)
    child = bound_boxes(relu_blocks(net), lo, hi, CROWN, parents=parents, fixed=fixed)
    live, mags = child.relaxed
    j = max(kept)
    idx, slopes = kept[j]
    up = given_slopes_bound(live, j, idx, lo, hi, mags[j], (idx, slopes))[0]
    pre_lo, pre_hi = [p[0] for p in child.pre_lo], [p[0] for p in child.pre_hi]
    n = pre_lo[j].size
    for p, i in enumerate(idx):
        for sign, bound in ((1.0, up[p]), (-1.0, up[idx.size + p])):
            c = np.zeros(n)
            c[i] = sign
            lp = _triangle_lp_max(weights, pre_lo, pre_hi, j, c, lo[0], hi[0])
            assert bound >= lp - 1e-7 * (1 + abs(lp))
    own = [np.broadcast_to(r.lo_slope[:, None, :], (1, 2 * idx.size, r.lo_slope.shape[1])) for r in live.relax[:j]]
    C = np.zeros((2 * idx.size, n))
    C[np.arange(idx.size), idx] = 1.0
    C[idx.size + np.arange(idx.size), idx] = -1.0
    np.testing.assert_allclose(given_slopes_bound(live, j, idx, lo, hi, mags[j], (idx, own)),
                               backsubstitute_upper(live, j, C, lo, hi, mags[j])[0], rtol=1e-13, atol=1e-15)


def test_root_slopes_tighten_children_on_average():
    """Over random children of random roots, the re-bound with the root's slopes leaves the later
    layers narrower in total than CROWN's slopes alone (per neuron it may not: CROWN's adaptive
    slopes change with the earlier bounds)."""
    gains = []
    for seed in range(6):
        weights, net, lo, hi, root, kept = _root(seed)
        fixed, parents = _children(root, np.random.default_rng(seed), 4)
        lo4, hi4 = np.repeat(lo, 4, axis=0), np.repeat(hi, 4, axis=0)
        plain = bound_boxes(relu_blocks(net), lo4, hi4, CROWN, parents=parents, fixed=fixed)
        reused = bound_boxes(relu_blocks(net), lo4, hi4, CROWN, parents=parents, fixed=fixed, row_slopes=kept)
        width = lambda nb: sum(float(np.sum(u - l)) for l, u in zip(nb.pre_lo, nb.pre_hi))  # noqa: E731
        gains.append(width(plain) - width(reused))
    assert sum(gains) > 0 and sum(g > 0 for g in gains) >= 4, gains


@pytest.mark.parametrize("policy", ["strong", "early", "early, no root slopes", "trial"])
@pytest.mark.parametrize("sizes", [(3, 8, 8, 8, 2), (4, 10, 6, 6, 3)])
def test_verdicts_with_every_split_policy_agree_with_region_enumeration(monkeypatch, policy, sizes):
    """ReLU splitting with the policy forced (the earliest layer first, or strong branching over all
    layers; the root's slopes re-used or not) or chosen by the root's trial: unsat only where the
    exact maximum margin is negative, sat only with a witness the oracle's own evaluator finds
    unsafe."""
    def forced(self, root):
        self.early_layers = policy.startswith("early")
        if "no root slopes" in policy:
            self.reuse_slopes = False
            self.root_slopes.clear()

    if policy != "trial":
        monkeypatch.setattr(ReluSplitSearch, "_pick_policy", forced)
    outcomes = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
        exact, _ = exact_max_margin(net, lo, hi, G, H, d)
        res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
        if res.upper is not None:
            assert res.upper >= exact - 1e-6
        if res.result == "sat":
            x = np.array(res.counterexample["x"])
            assert unsafe_by_oracle(text, x, net.forward(x)) and exact >= -1e-6
        elif res.result == "unsat":
            assert exact < 1e-6
        outcomes.append(res.result)
    assert "unsat" in outcomes, outcomes


@pytest.mark.parametrize("with_slopes, without, reused", [
    ((1.0, 100), (1.0, 100), False),     # the same bound and unstable neurons: dropped
    ((0.995, 100), (1.0, 100), False),   # within REUSE_GAIN of both: dropped
    ((0.5, 100), (1.0, 100), True),      # a lower margin bound: kept
    ((1.0, 90), (1.0, 100), True),       # fewer unstable neurons: kept
    ((-2.0, 100), (-1.0, 100), True),    # (negative bounds: lower is still better)
])
def test_root_slopes_are_kept_only_when_the_trial_shows_they_tighten(monkeypatch, with_slopes, without, reused):
    """`_pick_policy`'s reuse decision from the trial of the earliest layer's split with and without
    the root's slopes; the root's choice, warm starts and the stuck list come back unchanged, and
    the policy then compares the kept children with strong branching's."""
    search = ReluSplitSearch.__new__(ReluSplitSearch)
    search.root_slopes = {0: {1: "slopes"}}
    search.reuse_slopes, search.stuck, search.cex = True, [], None
    seen = []

    def trial(self, root, choice, warm):
        seen.append((choice, bool(self.root_slopes)))
        root.choice, root.warm = choice, {}  # (as the real trial leaves them: branch() empties the warm starts)
        self.stuck.append("trial child")
        if choice == root.early:
            return with_slopes if self.root_slopes else without
        return (0.75, 100)  # strong branching's split

    monkeypatch.setattr(ReluSplitSearch, "_trial_split", trial)
    root = SimpleNamespace(region=0, choice=(2, 5), early=(0, 1), warm={"w": 1})
    search._pick_policy(root)
    assert seen[:2] == [((0, 1), True), ((0, 1), False)] and seen[2] == ((2, 5), reused)
    assert search.reuse_slopes is reused and bool(search.root_slopes) is reused
    assert (root.choice, root.warm, search.stuck) == ((2, 5), {"w": 1}, [])
    kept = with_slopes if reused else without
    assert search.early_layers is (kept[0] < 0.75)
    assert search.policy_trial == {"early without root slopes": without[0], "early": kept[0], "strong": 0.75}


def test_the_policy_is_tried_without_root_slopes(monkeypatch):
    """A search that keeps no root slopes (`reuse_slopes=False`) still tries the earliest-layer
    policy against strong branching on its refined root (it used to skip the trial), and its
    verdicts still agree with exact region enumeration."""
    searches = []
    init = ReluSplitSearch.__init__

    def no_reuse(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "reuse_slopes": False})
        searches.append(self)

    monkeypatch.setattr(ReluSplitSearch, "__init__", no_reuse)
    sizes = (4, 10, 6, 6, 3)
    tried = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
        exact, _ = exact_max_margin(net, lo, hi, G, H, d)
        before = len(searches)
        res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
        assert res.upper is None or res.upper >= exact - 1e-6
        assert not (res.result == "unsat" and exact >= 1e-6) and not (res.result == "sat" and exact < -1e-6)
        for search in searches[before:]:
            assert not search.root_slopes and "early without root slopes" not in search.policy_trial
            tried += "early" in search.policy_trial
    assert tried >= 1
