"""Verification's input splitting and PTR's split decisions run on the one search loop
(`solvers.bab.branch_and_bound`): their answers must agree with independent exact oracles.

On 2-input ReLU nets the oracles enumerate the activation regions (one LP per region):
`tests.vnnlib_oracle.exact_max_margin` for the largest unsafe margin M*, and
`tests.lipschitz_oracles.exact_lipschitz` for the local constant L*. Thresholds a little on each
side of the exact value must be decided both ways (sat/unsat, reject/accept), every certified
interval must contain the exact value, and a search stopped by its deadline keeps a sound bound.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from certify.ptr.decide import ACCEPT, REJECT, UNDECIDED
from certify.ptr.split import SplitDecider
from certify.verify import parse_vnnlib, verify
from models.box import Box
from models.ir import sequential
from tests.lipschitz_oracles import exact_lipschitz, random_weights
from tests.vnnlib_oracle import exact_max_margin

TOL = 1e-6  # LP tolerance of the oracles
GAP = 0.02  # thresholds this far from the exact value must be decided


def _margin_property(lo: np.ndarray, hi: np.ndarray, c: float) -> str:
    """Unsafe: x in [lo, hi] and y0 - y1 >= c (the row -y0 + y1 <= -c)."""
    text = "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
    text += "".join(f"(assert (>= X_{i} {float(lo[i])!r}))\n(assert (<= X_{i} {float(hi[i])!r}))\n" for i in range(2))
    return text + f"(assert (<= (+ (* -1 Y_0) (* 1 Y_1)) {-c!r}))\n"


def _box(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 + seed)
    c = rng.uniform(-0.5, 0.5, 2)
    return c - 0.5, c + 0.5


@pytest.mark.parametrize("seed", range(4))
def test_verification_search_agrees_with_region_enumeration(seed):
    weights = random_weights((2, 8, 6, 2), seed)
    net = sequential(weights)
    lo, hi = _box(seed)
    H, G = np.array([[-1.0, 1.0]]), np.zeros((1, 2))
    top, regions = exact_max_margin(net, lo, hi, G, H, np.zeros(1))  # max of y0 - y1 over the box
    assert regions >= 2
    for c, expected in ((top - GAP, "sat"), (top + GAP, "unsat")):
        res = verify(net, parse_vnnlib(_margin_property(lo, hi, c)), timeout=30, seed=seed, attack_seconds=0.0)
        assert res.result == expected, (seed, c, top, res.result)
        exact = top - c
        if res.upper is not None:
            assert res.upper >= exact - TOL, (res.upper, exact)
        if res.lower is not None:
            assert res.lower <= exact + TOL, (res.lower, exact)


def test_verification_search_stopped_at_its_deadline_keeps_a_sound_bound():
    weights = random_weights((2, 16, 16, 2), 7)
    net = sequential(weights)
    lo, hi = _box(7)
    top, _ = exact_max_margin(net, lo, hi, np.zeros((1, 2)), np.array([[-1.0, 1.0]]), np.zeros(1))
    c = top + 1e-7  # unsat by a hair: the search cannot close every node in a few rounds
    res = verify(net, parse_vnnlib(_margin_property(lo, hi, c)), timeout=0.3, attack_seconds=0.0)
    assert res.result in ("timeout", "unsat")
    assert res.upper is not None and res.upper >= top - c - TOL


@pytest.mark.parametrize("seed", range(4))
def test_split_decisions_agree_with_region_enumeration(seed):
    weights = random_weights((2, 6, 5, 2), seed)
    net = sequential(weights)
    lo, hi = _box(seed)
    exact = exact_lipschitz(weights, lo, hi, "linf", "l1")
    decider = SplitDecider(net, "linf", "l1")
    box = Box.from_bounds(lo, hi)
    for proposal, expected in ((exact * (1 - GAP), REJECT), (exact * (1 + GAP), ACCEPT)):
        d = decider.decide(box, proposal, time.perf_counter() + 30)
        assert d.decision == expected, (seed, proposal, exact, d)
        assert d.lower <= exact * (1 + 1e-9) + TOL
        if d.decision == ACCEPT:
            assert exact <= d.upper <= proposal
        else:  # the witness is replayed: its constant is attained, so it is at most L*
            assert proposal < d.lower and d.witness is not None and np.all((lo <= d.witness) & (d.witness <= hi))


def test_split_decision_stopped_by_its_budget_keeps_a_sound_bound():
    weights = random_weights((2, 16, 16, 2), 3)
    net = sequential(weights)
    lo, hi = _box(3)
    exact = exact_lipschitz(weights, lo, hi, "linf", "l1")
    decider = SplitDecider(net, "linf", "l1")
    box = Box.from_bounds(lo, hi)
    for deadline, max_nodes in ((time.perf_counter() - 1.0, 20000), (None, 3)):
        d = decider.decide(box, exact * (1 + 1e-9), deadline, max_nodes=max_nodes)
        assert d.decision == UNDECIDED and d.stop in ("time_limit", "node_limit"), d
        assert d.upper >= exact * (1 - 1e-9) and d.lower <= exact * (1 + 1e-9)


class _LooseChildren:
    """max of f(x) = -(x - 0.3)^2 on [0, 1] by bisection, bounded by f's exact max over each
    interval plus `slack`, where every child is bounded `loose` times worse than a sound bound
    needs (as when a cheaper bound is used at the deadline). Children are subsets of their
    parent, so the parent's bound holds for them and the engine keeps the tighter of the two."""

    def __init__(self, loose: float) -> None:
        self.loose = loose

    @staticmethod
    def exact(lo: float, hi: float) -> float:
        x = min(max(0.3, lo), hi)
        return -(x - 0.3) ** 2

    def root(self):
        return (0.0, 1.0, 0)

    def bound(self, node):
        from solvers.bab import NodeBound

        lo, hi, depth = node
        sound = self.exact(lo, hi) + (hi - lo)  # a sound, slowly tightening bound
        mid = 0.5 * (lo + hi)
        return NodeBound(sound + (self.loose if depth else 0.0), -(mid - 0.3) ** 2)

    def branch(self, node, nb, prune_level):
        lo, hi, depth = node
        mid = 0.5 * (lo + hi)
        return [((lo, mid, depth + 1), None), ((mid, hi, depth + 1), None)]


@pytest.mark.parametrize("batch", [1, 4])
def test_children_keep_their_parents_bound(batch):
    from solvers.bab import branch_and_bound

    def many(nodes):
        return [problem.bound(n) for n in nodes]

    problem = _LooseChildren(loose=5.0)
    if batch > 1:
        problem.bound_many = many
    root_bound = problem.bound(problem.root()).upper  # 1.0: the exact max 0 plus the width 1
    res = branch_and_bound(problem, max_nodes=40, batch=batch)
    # every child is bounded 5 above sound, yet no answer is worse than the root's bound
    assert 0.0 <= res.upper <= root_bound
    assert res.lower <= 0.0  # the true maximum is 0 (at x = 0.3)
    assert res.upper >= 0.0
