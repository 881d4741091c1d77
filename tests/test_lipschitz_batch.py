"""Batched Lipschitz branch-and-bound pieces against independent oracles.

- the Clarke-Jacobian bound with meets of the forward and backward passes: every Jacobian whose
  slopes lie in the given intervals (vertices and random interior choices, multiplied out here)
  has an operator norm (brute force, tests/lipschitz_oracles) at most the bound;
- its batched form agrees with the box-by-box one;
- pre-activation bounds with per-box rows and three lower slopes (or optimised ones) contain
  sampled pre-activations; optimised slopes give bounds between the LP relaxation's optimum
  (scipy) and the fixed slopes' bounds;
- the engine with batched rounds keeps a sound upper bound on a problem with a known maximum;
- the bound on node boxes is at least the exact constant from region enumeration.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.ir import sequential
from solvers.bab import NodeBound, branch_and_bound
from solvers.bounds import BoundOptions, Bounds, bound_boxes, network_bounds, relu_blocks
from solvers.bounds.jacobian import clarke_norm_bound, clarke_norm_bound_batch
from solvers.phases import ACTIVE, INACTIVE
from tests.lipschitz_oracles import exact_lipschitz, jacobian, opnorm, random_weights

PAIRS = [("linf", "l1"), ("l1", "linf"), ("linf", "linf"), ("l1", "l1")]


def _slope_boxes(rng, sizes):
    """Random slope intervals within [0, 1]: fixed 0 or 1, free [0, 1], or a sub-interval."""
    s_lo, s_hi = [], []
    for n in sizes[1:-1]:
        kind = rng.integers(0, 4, n)
        a, b = np.sort(rng.uniform(0, 1, (2, n)), axis=0)
        lo = np.select([kind == 0, kind == 1, kind == 2], [0.0, 1.0, 0.0], a)
        hi = np.select([kind == 0, kind == 1, kind == 2], [0.0, 1.0, 1.0], b)
        s_lo.append(lo)
        s_hi.append(hi)
    return s_lo, s_hi


def _jac(weights, slopes):
    return jacobian([(W, None) for W in weights], slopes)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), depth=st.integers(1, 5), width=st.integers(2, 7), n=st.integers(1, 4),
       m=st.integers(1, 4), pair=st.sampled_from(PAIRS))
def test_clarke_bound_covers_every_jacobian_in_the_slope_box(seed, depth, width, n, m, pair):
    rng = np.random.default_rng(seed)
    sizes = [n] + [width] * depth + [m]
    weights = [w for w, _ in random_weights(sizes, seed)]
    s_lo, s_hi = _slope_boxes(rng, sizes)
    bound = clarke_norm_bound(weights, s_lo, s_hi, *pair)
    worst = 0.0
    for k in range(60):
        if k < 20:  # vertices of the slope box
            slopes = [np.where(rng.random(lo.size) < 0.5, lo, hi) for lo, hi in zip(s_lo, s_hi)]
        else:
            slopes = [rng.uniform(lo, hi) for lo, hi in zip(s_lo, s_hi)]
        worst = max(worst, opnorm(_jac(weights, slopes), *pair))
    assert worst <= bound * (1 + 1e-12) + 1e-12


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 100_000), depth=st.integers(2, 5), batch=st.integers(1, 6))
def test_batched_clarke_bound_matches_box_by_box(seed, depth, batch):
    rng = np.random.default_rng(seed)
    sizes = [5] + [6] * depth + [3]
    weights = [w for w, _ in random_weights(sizes, seed)]
    boxes = [_slope_boxes(rng, sizes) for _ in range(batch)]
    stacked = clarke_norm_bound_batch(weights, [np.stack([b[0][j] for b in boxes]) for j in range(depth)],
                                      [np.stack([b[1][j] for b in boxes]) for j in range(depth)], "linf", "l1")
    for b, (lo, hi) in enumerate(boxes):
        if all(np.array_equal(x, y) for x, y in zip(lo, hi)):
            continue  # one Jacobian: the box-by-box bound takes its certified norm instead
        # (a batch leaves out the neurons dead on all of its boxes, a box alone those dead on it: the
        # same Jacobians, rounding allowances over sums of different lengths)
        assert stacked[b] == pytest.approx(clarke_norm_bound(weights, lo, hi, "linf", "l1"), rel=1e-9)


def _sub_boxes(weights, seed, n, r, min_width, count, slopes):
    """`count` random sub-boxes of [-r, r]^n bounded in one batch from the root's symbolic bounds."""
    net = sequential(weights)
    rng = np.random.default_rng(seed)
    root_lo, root_hi = np.full(n, -r), np.full(n, r)
    root = network_bounds(net, root_lo, root_hi, "symbolic")
    lo = rng.uniform(root_lo, root_hi - r / 2, (count, n))
    hi = lo + rng.uniform(min_width, r / 2, (count, n))
    nb = bound_boxes(relu_blocks(net), lo, hi, _options(slopes), parents=Bounds.stack([root] * count))
    pre_lo, pre_hi = nb.pre_lo, nb.pre_hi
    return lo, hi, pre_lo, pre_hi, net


def _options(slopes) -> BoundOptions:
    """slopes: 1 or 3 fixed lower slopes, or "alpha" (three, then optimised per row)."""
    lower = {1: "crown", 3: "best-of-three", "alpha": "alpha"}[slopes]
    return BoundOptions(lower_slopes=lower, alpha_steps=10, rows="per-box", symbolic_output=False)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("pair", PAIRS[:2])
def test_node_bounds_contain_the_exact_constant(seed, pair):
    """Sub-boxes bounded in one batch: each bound is at least the box's exact constant."""
    weights = random_weights([3, 6, 6, 6, 2], seed)
    lo, hi, pre_lo, pre_hi, _ = _sub_boxes(weights, seed, 3, 0.65, 0.05, 4, 3)
    W = [w for w, _ in weights]
    ph = [np.where(u <= 0, INACTIVE, np.where(lo_ >= 0, ACTIVE, 0)) for lo_, u in zip(pre_lo, pre_hi)]
    upper = clarke_norm_bound_batch(W, [np.where(p == ACTIVE, 1.0, 0.0) for p in ph],
                                    [np.where(p == INACTIVE, 0.0, 1.0) for p in ph], *pair)
    for b in range(4):
        assert exact_lipschitz(weights, lo[b], hi[b], *pair) <= upper[b] * (1 + 1e-9) + 1e-12


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 100_000), slopes=st.sampled_from([1, 3, "alpha"]))
def test_per_box_pre_bounds_contain_sampled_preactivations(seed, slopes):
    weights = random_weights([4, 8, 8, 8, 3], seed)
    lo, hi, pre_lo, pre_hi, net = _sub_boxes(weights, seed, 4, 1.0, 0.01, 5, slopes)
    rng = np.random.default_rng(seed + 1)
    for b in range(5):
        xs = np.vstack([rng.uniform(lo[b], hi[b], (200, 4)), np.where(rng.random((50, 4)) < 0.5, lo[b], hi[b])])
        for x in xs:
            for j, z in enumerate(net.preactivations(x)[: len(pre_lo)]):
                assert np.all(z >= pre_lo[j][b] - 1e-12) and np.all(z <= pre_hi[j][b] + 1e-12)


def _triangle_lp_max(weights, pre_lo, pre_hi, j, c, lo, hi) -> float:
    """max c . z_j over the box under the triangle relaxation of every ReLU before layer j, with
    the given bounds (scipy's LP: the oracle any choice of lower slopes can only over-estimate)."""
    from scipy.optimize import linprog

    n = lo.size
    sizes = [w.shape[0] for w, _ in weights[:j]]
    # variables: x, then per layer t < j its pre-activation z_t and post-activation a_t
    off, z_at, a_at = n, [], []
    for s in sizes:
        z_at.append(off)
        a_at.append(off + s)
        off += 2 * s
    A_eq, b_eq, A_ub, b_ub = [], [], [], []
    bounds = [(lo[i], hi[i]) for i in range(n)] + [(None, None)] * (off - n)
    for t, (W, b) in enumerate(weights[:j]):
        prev = list(range(n)) if t == 0 else list(range(a_at[t - 1], a_at[t - 1] + W.shape[1]))
        for i in range(W.shape[0]):
            row = np.zeros(off)
            row[z_at[t] + i] = 1.0
            row[prev] -= W[i]
            A_eq.append(row)
            b_eq.append(b[i])
            l, u, z, a = pre_lo[t][i], pre_hi[t][i], z_at[t] + i, a_at[t] + i
            if u <= 0 or l >= 0:  # stable: a = 0 or a = z
                row = np.zeros(off)
                row[a] = 1.0
                if l >= 0:
                    row[z] = -1.0
                A_eq.append(row)
                b_eq.append(0.0)
                continue
            for coef_a, coef_z, rhs in ((-1.0, 0.0, 0.0), (-1.0, 1.0, 0.0), (1.0, -u / (u - l), -u * l / (u - l))):
                row = np.zeros(off)
                row[a], row[z] = coef_a, coef_z
                A_ub.append(row)
                b_ub.append(rhs)
    W, b = weights[j]
    obj = np.zeros(off)
    obj[a_at[j - 1]: a_at[j - 1] + W.shape[1]] = c @ W
    res = linprog(-obj, A_ub=np.array(A_ub) if A_ub else None, b_ub=b_ub or None, A_eq=np.array(A_eq), b_eq=b_eq,
                  bounds=bounds, method="highs")
    assert res.status == 0
    return float(-res.fun + c @ b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optimised_slopes_lie_between_the_lp_relaxation_and_fixed_slopes(seed):
    """Rows of the last ReLU layer's pre-activations: with optimised lower slopes every bound is
    at least the triangle LP's optimum over the same earlier bounds (CROWN with any slopes is a
    feasible dual point of that LP), and on these random nets some row's bound is strictly below
    the three fixed slopes' bound (the optimiser moves)."""
    from solvers.bounds.symbolic import backsubstitute_upper, best_of_slopes, optimized_slopes_bound

    weights = random_weights([3, 10, 10, 10, 2], seed)
    net = sequential(weights)
    lo, hi = np.full((1, 3), -1.0), np.full((1, 3), 1.0)
    nb = bound_boxes(relu_blocks(net), lo, hi, _options("alpha"))
    pre_lo, pre_hi, (live, mags) = nb.pre_lo, nb.pre_hi, nb.relaxed
    j = 2
    n = weights[j][0].shape[0]
    C = np.vstack([np.eye(n), -np.eye(n)])
    fixed = best_of_slopes(live, j, C, lo, hi, mags[j], backsubstitute_upper(live, j, C, lo, hi, mags[j])[0])
    alpha = optimized_slopes_bound(live, j, C, lo, hi, mags[j], 10)
    lp = np.array([_triangle_lp_max(weights, [p[0] for p in pre_lo], [p[0] for p in pre_hi], j, c, lo[0], hi[0])
                   for c in C])
    assert np.all(alpha[0] >= lp - 1e-7 * (1 + np.abs(lp)))
    assert np.any(alpha[0] < fixed[0] - 1e-6 * (1 + np.abs(fixed[0])))


class _Interval:
    """Maximise f(x) = sin(5x) + x / 2 on [0, 3] with the Lipschitz bound f(mid) + 5.5 (b - a) / 2."""

    f = staticmethod(lambda x: math.sin(5 * x) + x / 2)

    def root(self):
        return (0.0, 3.0)

    def _bound(self, node):
        a, b = node
        mid = (a + b) / 2
        return NodeBound(self.f(mid) + 5.5 * (b - a) / 2 + 1e-12, self.f(mid), leaf=b - a < 1e-9)

    bound = _bound

    def bound_many(self, nodes):
        return [self._bound(n) for n in nodes]

    def branch(self, node, nb, prune_level):
        a, b = node
        mid = (a + b) / 2
        return [((a, mid), None), ((mid, b), None)]


class _StrongInterval(_Interval):
    """`_Interval` whose `branch_many` tries cuts at 1/3 and 1/2 and returns the better pair bounded
    (children bounded while branching, recorded by the engine as they come)."""

    def branch_many(self, items, prune_level):
        out = []
        for (a, b), _ in items:
            pairs = [[(a, c), (c, b)] for c in (a + (b - a) / 3, (a + b) / 2)]
            bounded = [[(n, self._bound(n)) for n in pair] for pair in pairs]
            out.append(min(bounded, key=lambda pair: max(nb.upper for _, nb in pair)))
        return out


@pytest.mark.parametrize("problem,batch", [(_Interval, 1), (_Interval, 4), (_Interval, 16), (_StrongInterval, 2),
                                           (_StrongInterval, 16)])
@pytest.mark.parametrize("max_nodes", [7, 50, None])
def test_batched_engine_keeps_a_sound_upper_bound(problem, batch, max_nodes):
    true = max(_Interval.f(x) for x in np.linspace(0, 3, 300_001))
    res = branch_and_bound(problem(), gap=1e-6, max_nodes=max_nodes, batch=batch)
    assert res.lower <= true + 1e-9 and res.upper >= true - 1e-9
    assert res.nodes > 1
    if max_nodes is None:
        assert res.complete and res.upper - res.lower <= 1e-5


class _SideSearch(_Interval):
    """`_Interval` whose node bounds vouch for no value: the values it evaluates are reported only
    through `attained()` (a search beside the tree, as the Lipschitz witnesses are)."""

    def __init__(self):
        self.best = -math.inf

    def _bound(self, node):
        nb = _Interval._bound(self, node)
        self.best = max(self.best, nb.lower)
        return NodeBound(nb.upper, leaf=nb.leaf)

    bound = _bound

    def bound_many(self, nodes):
        return [self._bound(n) for n in nodes]

    def attained(self):
        return self.best


@pytest.mark.parametrize("batch", [1, 8])
def test_engine_prunes_and_stops_on_values_attained_beside_the_tree(batch):
    true = max(_Interval.f(x) for x in np.linspace(0, 3, 300_001))
    full = branch_and_bound(_SideSearch(), gap=1e-6, batch=batch)
    assert full.stop == "gap" and true - 1e-5 <= full.lower <= true + 1e-9 <= full.upper + 2e-9
    # a decision "max <= target?": a value above the target ends the search early ...
    below = branch_and_bound(_SideSearch(), target=true - 0.05, gap=1e-6, batch=batch, stop_above=True)
    assert below.stop == "above" and below.lower > true - 0.05 and below.nodes < full.nodes
    assert below.upper >= true - 1e-9
    # ... and never fires when the maximum is below the target: every node closes under it
    above = branch_and_bound(_SideSearch(), target=true + 0.05, gap=1e-6, batch=batch, stop_above=True)
    assert above.stop in ("closed", "gap") and true - 1e-9 <= above.upper <= true + 0.05


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 100_000), slopes=st.sampled_from([1, 3, "alpha"]))
def test_fixed_phase_pre_bounds_contain_the_points_where_the_phases_hold(seed, slopes):
    """Boxes with ReLU phases fixed (some against a phase the root proves: empty parts): bounds
    contain the pre-activations of every sampled point where the fixed phases hold, and a box
    flagged empty has no such point."""
    n, count = 3, 6
    weights = random_weights([n, 6, 6, 6, 2], seed)
    net = sequential(weights)
    rng = np.random.default_rng(seed)
    root_lo, root_hi = np.full(n, -0.8), np.full(n, 0.8)
    root = network_bounds(net, root_lo, root_hi, "symbolic")
    lo = rng.uniform(root_lo, root_hi - 0.4, (count, n))
    hi = lo + rng.uniform(0.05, 0.4, (count, n))
    flat_lo, flat_hi = np.concatenate(root.pre_lo), np.concatenate(root.pre_hi)
    fixed = np.zeros((count, flat_lo.size), dtype=np.int8)
    for b in range(count):
        idx = rng.choice(flat_lo.size, size=3, replace=False)
        fixed[b, idx] = rng.choice([-1, 1], size=3)
    stable_active = np.flatnonzero(flat_lo > 0)
    if stable_active.size:  # the last box assumes a provably active neuron inactive: empty
        fixed[-1, stable_active[0]] = -1
    per_layer = np.split(fixed, np.cumsum([len(l) for l in root.pre_lo])[:-1], axis=1)
    bounder = bound_boxes(relu_blocks(net), lo, hi, _options(slopes), parents=Bounds.stack([root] * count),
                          fixed=per_layer)
    pre_lo, pre_hi = bounder.pre_lo, bounder.pre_hi
    if stable_active.size:
        assert bounder.empty[-1]
    for b in range(count):
        xs = np.vstack([rng.uniform(lo[b], hi[b], (400, n)), np.where(rng.random((100, n)) < 0.5, lo[b], hi[b])])
        for x in xs:
            zs = net.preactivations(x)[: len(pre_lo)]
            z = np.concatenate(zs)
            if np.any((fixed[b] > 0) & (z < 0)) or np.any((fixed[b] < 0) & (z > 0)):
                continue  # the fixed phases do not hold at x
            assert not bounder.empty[b]
            for j, zj in enumerate(zs):
                assert np.all(zj >= pre_lo[j][b] - 1e-12) and np.all(zj <= pre_hi[j][b] + 1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_bab_with_batched_phase_splits_closes_to_the_exact_constant(seed):
    """Ten inputs (beyond input splitting): every branching fixes ReLU phases, bounded in batches."""
    import certify

    weights = random_weights([10, 5, 5, 2], seed)
    net = sequential(weights)
    lo, hi = np.full(10, -0.3), np.full(10, 0.4)
    exact = exact_lipschitz(weights, lo, hi, "linf", "l1")
    cert = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm="linf", output_norm="l1",
                                   method="bab", time_limit=60)
    assert cert.lower <= exact * (1 + 1e-9) and cert.upper >= exact * (1 - 1e-9)
    assert cert.status == "optimal" and cert.upper <= exact * (1 + 1e-5)
