"""ReLU-split branch-and-bound (beta-CROWN node bounds) against independent oracles.

- Node bounds (`solvers.bounds.beta`): for random small nets, random split assignments and random
  or optimised alpha / beta, the sound dual bound is never below the exact maximum of c . f(x) +
  e . x over the box restricted to the split phases, computed by a big-M MILP (scipy's HiGHS) on
  the network's own layers with independent interval big-M constants (and dense sampling);
  beta = 0 with CROWN's slopes gives CROWN's bound.
- Verdicts (`certify.verify` forced to ReLU splitting by `max_split_dims`): agree with exact
  activation-region enumeration (`tests.vnnlib_oracle`): unsat only when the maximum unsafe margin
  is negative, sat only with a witness the oracle's own evaluator finds unsafe.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds as LinBounds
from scipy.optimize import LinearConstraint, milp

from certify.verify import parse_vnnlib, verify
from certify.verify.relu_lp import clause_lp_bound
from certify.verify.spec import LinearRows
from models.ir import Affine
from models.zoo import random_relu_net
from solvers.bounds import BoundOptions, bound_boxes, relu_blocks
from solvers.bounds.beta import beta_upper, clamp_splits, crown_slopes, dual_upper, multipliers
from solvers.bounds.symbolic import backsubstitute_upper
from tests.test_verify_soundness import _property
from tests.vnnlib_oracle import disagreements, exact_max_margin

TOL = 1e-6


def _affine_layers(net):
    return [(layer.weight, layer.bias) for layer in net.layers if isinstance(layer, Affine)]


def _interval(layers, lo, hi):
    """Plain interval bounds of every hidden pre-activation (independent of solvers.bounds), widened."""
    out = []
    a_lo, a_hi = lo, hi
    for W, b in layers[:-1]:
        Wp, Wn = np.maximum(W, 0), np.minimum(W, 0)
        zl, zu = Wp @ a_lo + Wn @ a_hi + b, Wp @ a_hi + Wn @ a_lo + b
        pad = 1e-6 * (1 + np.abs(zl) + np.abs(zu))
        out.append((zl - pad, zu + pad))
        a_lo, a_hi = np.maximum(zl - pad, 0), np.maximum(zu + pad, 0)
    return out


def milp_max(net, lo, hi, split, c, e, z_obj=None):
    """Exact max of c . f(x) + e . x over the box with the split phases (-inf if infeasible); with
    `z_obj` = (t, i, sign) the max of sign * z_t[i] (a hidden pre-activation) instead."""
    layers = _affine_layers(net)
    bounds = _interval(layers, lo, hi)
    n = lo.size
    sizes = [W.shape[0] for W, _ in layers[:-1]]
    # variables: x, then per hidden layer (z, a, delta)
    offs, k = [], n
    for s in sizes:
        offs.append(k)
        k += 3 * s
    N = k
    lb, ub = np.r_[lo, np.zeros(N - n)], np.r_[hi, np.zeros(N - n)]
    integrality = np.zeros(N)
    rows, rl, ru = [], [], []
    prev = np.arange(n)
    for t, ((W, b), (L, U), s) in enumerate(zip(layers[:-1], bounds, sizes)):
        z, a, d = offs[t] + np.arange(s), offs[t] + s + np.arange(s), offs[t] + 2 * s + np.arange(s)
        lb[z], ub[z] = L, U
        lb[a], ub[a] = 0, np.maximum(U, 0)
        lb[d], ub[d] = 0, 1
        integrality[d] = 1
        sp = split[t]
        lb[z] = np.where(sp > 0, np.maximum(L, 0), lb[z])
        ub[z] = np.where(sp < 0, np.minimum(U, 0), ub[z])
        lb[d] = np.where(sp > 0, 1, lb[d])
        ub[d] = np.where(sp < 0, 0, ub[d])
        for i in range(s):
            r = np.zeros(N)  # z_i - W_i a_prev = b_i
            r[z[i]] = 1.0
            r[prev] -= W[i]
            rows.append(r), rl.append(b[i]), ru.append(b[i])
            r = np.zeros(N)  # a - z >= 0
            r[a[i]], r[z[i]] = 1.0, -1.0
            rows.append(r), rl.append(0.0), ru.append(np.inf)
            r = np.zeros(N)  # a - z - L delta <= -L
            r[a[i]], r[z[i]], r[d[i]] = 1.0, -1.0, -L[i]
            rows.append(r), rl.append(-np.inf), ru.append(-L[i])
            r = np.zeros(N)  # a - U delta <= 0
            r[a[i]], r[d[i]] = 1.0, -max(U[i], 0.0)
            rows.append(r), rl.append(-np.inf), ru.append(0.0)
        prev = a
    if np.any(lb > ub):
        return -np.inf
    W, b = layers[-1]
    obj = np.zeros(N)
    if z_obj is None:
        obj[prev] = c @ W
        obj[:n] += e
    else:
        t, i, sign = z_obj
        obj[offs[t] + i] = sign
        b = np.zeros_like(b)
        c = np.zeros(b.size)
    res = milp(-obj, constraints=LinearConstraint(np.array(rows), rl, ru), integrality=integrality,
               bounds=LinBounds(lb, ub), options={"mip_rel_gap": 0.0, "presolve": True})
    if res.status == 2:  # infeasible
        return -np.inf
    assert res.status == 0, res.message
    return float(-res.fun + c @ b)


def _case(seed, n_in=6, hidden=(10, 8), m=3, p_split=0.3):
    rng = np.random.default_rng(seed)
    net = random_relu_net((n_in, *hidden, m), seed=seed, bias_scale=0.3)
    blocks = relu_blocks(net)
    center = rng.uniform(-0.5, 0.5, n_in)
    lo, hi = center - rng.uniform(0.05, 0.6, n_in), center + rng.uniform(0.05, 0.6, n_in)
    root = bound_boxes(blocks, lo[None], hi[None], BoundOptions())
    split = []
    for l, u in zip(root.pre_lo, root.pre_hi):
        unst = (l[0] < 0) & (u[0] > 0)
        s = np.where(unst & (rng.random(l.shape[1]) < p_split), rng.choice([-1, 1], l.shape[1]), 0)
        split.append(s.astype(np.int8))
    return rng, net, blocks, lo, hi, split


def _node_bounds(blocks, lo, hi, split):
    """Pre-activation bounds valid on the box restricted to the split phases (None: empty)."""
    nb = bound_boxes(blocks, lo[None], hi[None], BoundOptions(), fixed=[s[None] for s in split])
    if nb.empty[0]:
        return None
    pl, ph = clamp_splits(nb.pre_lo, nb.pre_hi, [s[None].astype(float) for s in split])
    return nb, pl, ph


def _sampled_max(net, lo, hi, split, c, e, rng, count=40_000):
    """Largest sampled c . f(x) + e . x among samples satisfying the split phases (-inf: none)."""
    X = rng.uniform(lo, hi, (count, lo.size))
    ok = np.ones(count, dtype=bool)
    a = X
    for t, (W, b) in enumerate(_affine_layers(net)[:-1]):
        z = a @ W.T + b
        ok &= np.all((split[t] == 0) | (split[t] * z >= 0), axis=1)
        a = np.maximum(z, 0)
    vals = net.forward(X) @ c + X @ e
    return float(vals[ok].max()) if ok.any() else -np.inf


@pytest.mark.parametrize("seed", range(8))
def test_dual_bound_with_random_alpha_beta_holds_against_milp(seed):
    rng, net, blocks, lo, hi, split = _case(seed)
    node = _node_bounds(blocks, lo, hi, split)
    c, e = rng.normal(size=(1, 3)), rng.normal(size=(1, lo.size)) * (seed % 2)
    exact = milp_max(net, lo, hi, split, c[0], e[0])
    if node is None:
        assert exact == -np.inf  # bound_boxes declared the split set empty: the MILP agrees
        return
    _, pl, ph = node
    sp = [s[None].astype(float) for s in split]
    for _ in range(5):
        alpha = [rng.random(l.shape) for l in pl]
        beta = [rng.exponential(1.0, l.shape) * (s != 0) for l, s in zip(pl, sp)]
        up, _ = dual_upper(blocks, lo[None], hi[None], pl, ph, multipliers(blocks, c, pl, ph, sp, alpha, beta), e)
        assert up[0] >= exact - TOL * (1 + abs(exact)), (up, exact)
    opt = beta_upper(blocks, lo[None], hi[None], pl, ph, sp, c, e, iterations=30)
    assert opt.upper[0] >= exact - TOL * (1 + abs(exact)), (opt.upper, exact)
    assert opt.upper[0] >= _sampled_max(net, lo, hi, split, c[0], e[0], rng)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), p_split=st.floats(0.0, 0.8), width=st.integers(6, 14))
def test_optimised_bound_never_below_sampled_values(seed, p_split, width):
    rng, net, blocks, lo, hi, split = _case(seed, n_in=7, hidden=(width, width), m=2, p_split=p_split)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:
        assert _sampled_max(net, lo, hi, split, np.ones(2), np.zeros(7), rng) == -np.inf
        return
    _, pl, ph = node
    c = rng.normal(size=(2, 2))
    res = beta_upper(blocks, lo[None], hi[None], [np.repeat(l, 2, 0) for l in pl], [np.repeat(u, 2, 0) for u in ph],
                     [np.repeat(s[None].astype(float), 2, 0) for s in split], c, iterations=15)
    for r in range(2):
        assert res.upper[r] >= _sampled_max(net, lo, hi, split, c[r], np.zeros(7), rng)


@pytest.mark.parametrize("seed", range(6))
def test_beta_zero_with_crown_slopes_is_crown(seed):
    """With beta = 0 and CROWN's adaptive slopes the dual bound is CROWN's back-substitution
    (same relaxation, same multipliers; the triangle's vertices give CROWN's intercepts)."""
    rng, net, blocks, lo, hi, split = _case(seed, p_split=0.0 if seed < 3 else 0.3)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:
        pytest.skip("empty split set")
    nb, pl, ph = node
    c = rng.normal(size=(4, 3))
    live, mags = nb.relaxed
    crown = backsubstitute_upper(live, len(blocks) - 1, c, lo[None], hi[None], mags[-1])[0][0]
    P = c.shape[0]
    pl4, ph4 = [np.repeat(l, P, 0) for l in pl], [np.repeat(u, P, 0) for u in ph]
    sp4 = [np.repeat(s[None].astype(float), P, 0) for s in split]
    alpha = [crown_slopes(l, u) for l, u in zip(pl4, ph4)]
    beta = [np.zeros_like(a) for a in alpha]
    ours, _ = dual_upper(blocks, lo[None], hi[None], pl4, ph4, multipliers(blocks, c, pl4, ph4, sp4, alpha, beta))
    np.testing.assert_allclose(ours, crown, rtol=1e-9, atol=1e-9)
    # and optimising alpha / beta only tightens it (the start is CROWN's choice, kept if no better)
    opt = beta_upper(blocks, lo[None], hi[None], pl4, ph4, sp4, c, iterations=30)
    assert np.all(opt.upper <= crown + 1e-3 * (1 + np.abs(crown)))


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_optimiser_gradient_matches_finite_differences(seed, shared):
    """The optimiser's hand-derived gradient of the dual bound (`beta._Net32`, evaluated here in
    float64) agrees with central differences of the bound itself, and its value with the float64
    evaluator `dual_upper` without the rounding allowance (random slopes, multipliers, splits; one
    box for every problem, its matrix-vector input term, or a box per problem)."""
    from solvers.bounds.beta import _Net32

    rng, net, blocks, lo, hi, split = _case(seed, p_split=0.4)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:
        pytest.skip("empty split set")
    _, pl, ph = node
    P = 3
    pl, ph = [np.repeat(l, P, 0) for l in pl], [np.repeat(u, P, 0) for u in ph]
    sp = [np.repeat(s[None].astype(float), P, 0) for s in split]
    c, e = rng.normal(size=(P, 3)), rng.normal(size=(P, lo.size)) * (seed % 2)  # (e = 0: no input term)
    alpha = [rng.random(l.shape) for l in pl]
    beta = [rng.exponential(1.0, l.shape) * (s != 0) for l, s in zip(pl, sp)]
    box_lo, box_hi = lo[None], hi[None]
    if not shared:  # (the pre-activation bounds need not hold here: both sides evaluate one formula)
        cut = rng.uniform(0.0, 0.3, (2, P, lo.size)) * (hi - lo)
        box_lo, box_hi = lo + cut[0], hi - cut[1]
    f = _Net32(blocks, box_lo, box_hi, pl, ph, sp, c, e, dtype=np.float64)
    val, grads = f.value(alpha, beta)
    ref, _ = dual_upper(blocks, box_lo, box_hi, pl, ph, multipliers(blocks, c, pl, ph, sp, alpha, beta), e,
                        rigorous=False)
    np.testing.assert_allclose(val, ref, rtol=1e-9, atol=1e-9)
    K, h, checked = len(alpha), 1e-6, 0
    for part, X in ((0, alpha), (1, beta)):
        for t in range(K):
            free = ((pl[t] < 0) & (ph[t] > 0)) if part == 0 else (sp[t] != 0)
            for p, i in zip(*np.nonzero(free)):
                step = [[x.copy() for x in X] for _ in range(2)]
                step[0][t][p, i] += h
                step[1][t][p, i] -= h
                fp, fm = (f.value(*((s, beta) if part == 0 else (alpha, s)), gradient=False)[0][p] for s in step)
                assert grads[part * K + t][p, i] == pytest.approx((fp - fm) / (2 * h), rel=1e-4, abs=1e-6)
                checked += 1
    assert checked > 0


@pytest.mark.parametrize("seed", range(6))
def test_rebound_below_a_new_split_changes_no_earlier_layer(seed):
    """A child that splits one more neuron of layer t, re-bounded only from layer t + 1 on
    (`rebound_from`, as the ReLU-split search does), gets exactly the bounds of a full re-bound
    from its parent's: the new phase cannot move layers <= t (up to the clamp of the split neuron)."""
    rng, net, blocks, lo, hi, split = _case(seed, n_in=5, hidden=(9, 8, 7), m=2, p_split=0.3)
    opts = BoundOptions(rows="unstable", symbolic_output=False)
    fixed = [s[None] for s in split]
    parent = bound_boxes(blocks, lo[None], hi[None], opts, fixed=fixed)
    if parent.empty[0]:  # contradictory random phases: start from the unsplit parent
        split = [np.zeros_like(s) for s in split]
        fixed = [s[None] for s in split]
        parent = bound_boxes(blocks, lo[None], hi[None], opts, fixed=fixed)
    checked = 0
    for t, (l, u) in enumerate(zip(parent.pre_lo, parent.pre_hi)):
        free = np.flatnonzero((l[0] < 0) & (u[0] > 0) & (split[t] == 0))
        if not free.size:
            continue
        child = [f.copy() for f in fixed]
        child[t][0, rng.choice(free)] = rng.choice([-1, 1])
        full = bound_boxes(blocks, lo[None], hi[None], opts, parents=parent, fixed=child)
        part = bound_boxes(blocks, lo[None], hi[None], opts, parents=parent, fixed=child, rebound_from=t + 1)
        for a, b in zip(full.pre_lo + full.pre_hi + [full.out_lo, full.out_hi],
                        part.pre_lo + part.pre_hi + [part.out_lo, part.out_hi]):
            np.testing.assert_array_equal(a, b)
        checked += 1
    assert checked > 0


def test_empty_split_set_bounds_to_minus_infinity():
    """Crossing bounds (an infeasible phase assignment) make the dual bound -inf, and only then."""
    _, net, blocks, lo, hi, split = _case(3)
    nb = bound_boxes(blocks, lo[None], hi[None], BoundOptions())
    pl, ph = [l.copy() for l in nb.pre_lo], [u.copy() for u in nb.pre_hi]
    ph[0][0, 0], pl[0][0, 0] = -1.0, 1.0  # contradictory bounds on one neuron
    sp = [np.zeros_like(l) for l in pl]
    nus = multipliers(blocks, np.ones((1, 3)), pl, ph, sp, [crown_slopes(l, u) for l, u in zip(pl, ph)], sp)
    assert dual_upper(blocks, lo[None], hi[None], pl, ph, nus)[0][0] == -np.inf
    nus = multipliers(blocks, np.ones((1, 3)), nb.pre_lo, nb.pre_hi, sp, [crown_slopes(l, u) for l, u in zip(nb.pre_lo, nb.pre_hi)], sp)
    assert np.isfinite(dual_upper(blocks, lo[None], hi[None], nb.pre_lo, nb.pre_hi, nus)[0][0])


@pytest.mark.parametrize("seed", range(5))
def test_lp_finisher_is_exact_when_every_phase_is_fixed(seed):
    """With every unstable neuron split, the clause LP is the exact maximum margin of that
    activation region (the MILP with those phases): never below it, and not above it beyond
    the LP's tolerance."""
    rng, net, blocks, lo, hi, split = _case(seed, p_split=1.0)
    node = _node_bounds(blocks, lo, hi, split)
    H = rng.normal(size=(1, 3))
    G = rng.normal(size=(1, lo.size)) * (seed % 2)
    exact_lhs = milp_max(net, lo, hi, split, -H[0], -G[0])  # max of -(G x + H y)
    d = np.array([rng.normal()])
    rows = LinearRows(G, H, d, np.zeros(1, dtype=bool))
    if node is None:
        assert exact_lhs == -np.inf
        return
    _, pl, ph = node
    bound, x = clause_lp_bound(blocks, lo, hi, [l[0] for l in pl], [u[0] for u in ph], split, rows)
    exact = d[0] + exact_lhs
    if exact_lhs == -np.inf:
        assert bound < 0
        return
    assert bound >= exact - TOL * (1 + abs(exact))
    assert bound <= exact + 1e-5 * (1 + abs(exact))
    assert x is not None and np.all(x >= lo) and np.all(x <= hi)


def _verdict(seed, sizes):
    rng = np.random.default_rng(seed)
    net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
    text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
    exact, _ = exact_max_margin(net, lo, hi, G, H, d)
    res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
    if res.details.get("search"):
        assert res.details["search"]["bounder"] == "beta-crown-relu-split"
    why = disagreements(res, exact, text, net, lo, hi, TOL)
    assert not why, why
    return res.result


@pytest.mark.parametrize("sizes", [(3, 8, 8, 2), (4, 10, 6, 3), (2, 6, 6, 6, 2)])
def test_relu_split_verdicts_agree_with_region_enumeration(sizes):
    outcomes = [_verdict(seed, sizes) for seed in range(8)]
    assert "unsat" in outcomes, outcomes  # the ReLU split proves properties, not only bounds them


def test_low_dimensional_inputs_keep_input_splitting():
    net = random_relu_net((3, 8, 2), seed=1)
    text, *_ = _property(np.random.default_rng(1), net, 3, 2)
    res = verify(net, parse_vnnlib(text), timeout=10, attack_seconds=0.0)
    if res.details.get("search"):
        assert res.details["search"]["bounder"] == "symbolic-batched"


# ---------------------------------------------------------------- open nodes within the memory budget
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e39, 1e39, allow_nan=False), min_size=1, max_size=30))
def test_float32_storage_rounds_outward(values):
    from certify.verify.relu_split import _outward32

    a = np.array(values, dtype=np.float64)
    down, up = _outward32(a, -np.inf), _outward32(a, np.inf)
    assert down.dtype == np.float32 and up.dtype == np.float32
    assert np.all(down.astype(np.float64) <= a) and np.all(up.astype(np.float64) >= a)
    finite = np.abs(a) < 3e38
    # at most one float32 step away (the nearest float32 is at most half a step off)
    assert np.all(np.nextafter(down[finite], np.float32(np.inf)).astype(np.float64) >= a[finite])
    assert np.all(np.nextafter(up[finite], np.float32(-np.inf)).astype(np.float64) <= a[finite])


@pytest.mark.parametrize("sizes", [(3, 8, 8, 2), (4, 10, 6, 3), (2, 6, 6, 6, 2)])
def test_verdicts_hold_with_open_nodes_compacted_every_round(monkeypatch, sizes):
    from certify.verify import relu_split

    calls = []

    def compact_always(self):
        nodes = [e[2] for e in self.frontier.open_entries()]
        if nodes:
            self._compact(nodes)
            calls.append(len(nodes))

    monkeypatch.setattr(relu_split.ReluSplitSearch, "_check_memory", compact_always)
    outcomes = [_verdict(seed, sizes) for seed in range(8)]  # (checked against region enumeration)
    assert "unsat" in outcomes, outcomes
    assert calls, "no search had open nodes to compact"


def test_open_nodes_over_the_memory_budget_end_unknown_with_a_note(monkeypatch):
    from certify.verify import relu_split

    monkeypatch.setattr(relu_split, "MEASURE_FROM", 1)
    monkeypatch.setattr(relu_split, "work_left", lambda *a, **k: (64.0, "test"))  # a 32-byte share
    # (a tree that grows to the memory check: no cut finisher, tested in test_relu_cuts)
    monkeypatch.setattr(relu_split.ReluSplitSearch, "_worth_cutting", lambda self, bound: False)
    found = None
    for seed in range(40):  # a property the root does not decide
        rng = np.random.default_rng(seed)
        sizes = (4, 12, 12, 2)
        net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
        res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
        if any("memory budget" in n for n in res.notes):
            found = (res, net, lo, hi, G, H, d)
            break
    assert found is not None, "no search reached the memory check"
    res, net, lo, hi, G, H, d = found
    assert res.result == "unknown"
    assert any("compacted" in n for n in res.notes)
    exact, _ = exact_max_margin(net, lo, hi, G, H, d)
    assert res.upper is None or res.upper >= exact - TOL  # the bound it reports still holds
    from models import memory

    assert memory._reserved[0] == 0.0  # the open nodes' bytes were released with the search


def test_held_bytes_count_against_a_set_budget_until_released(monkeypatch):
    from models import memory

    monkeypatch.setenv(memory.ENV_VAR, "1G")
    before = memory.work_left()[0]
    hold = memory.Holding()
    hold.set(3e8)
    assert memory.work_left()[0] == pytest.approx(before - 3e8)
    hold.set(1e8)  # (a new measurement replaces the old one)
    assert memory.work_left()[0] == pytest.approx(before - 1e8)
    assert not memory.fits(before - 0.5e8)
    hold.release()
    assert memory.work_left()[0] == pytest.approx(before)


def test_open_nodes_are_held_while_the_search_runs_and_released_after(monkeypatch):
    from certify.verify import relu_split
    from models import memory

    held = []
    original = memory.Holding.set

    def record(self, nbytes):
        held.append(nbytes)
        original(self, nbytes)

    monkeypatch.setattr(relu_split, "MEASURE_FROM", 1)
    monkeypatch.setattr(relu_split, "work_left", lambda *a, **k: (1e12, "test"))  # never compacts
    monkeypatch.setattr(memory.Holding, "set", record)
    for seed in range(40):  # searches with open nodes for a few rounds (estimates between measurements)
        rng = np.random.default_rng(seed)
        net = random_relu_net((4, 12, 12, 2), seed=seed, bias_scale=0.3)
        text, *_ = _property(rng, net, 4, 2)
        res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
        assert not any("compacted" in n for n in res.notes)
        if len([h for h in held if h > 0]) > relu_split.MEASURE_EVERY:
            break
    assert any(h > 0 for h in held), "no search held open nodes"
    assert held[-1] == 0 and memory._reserved[0] == 0.0


def test_refined_roots_stay_sound_and_tighten(monkeypatch):
    """Open roots refined with slopes optimised on every layer (`_refine_roots`; the first pass made
    to keep fixed slopes everywhere by a zero work cap): the root margin bound never rises and stays
    at or above the exact maximum margin by region enumeration; on some of the nets it falls."""
    import time

    import solvers.bounds.alpha as alpha
    from certify.verify.attack import Falsifier
    from certify.verify.relu_split import ReluSplitSearch
    from models.onnx_reference import resolve_model

    monkeypatch.setattr(alpha, "WORK", 0.0)
    gains = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        net = random_relu_net((3, 8, 8, 8, 2), seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, 3, 2)
        exact, _ = exact_max_margin(net, lo, hi, G, H, d)
        net, reference, _, _ = resolve_model(net, None)
        search = ReluSplitSearch(Falsifier(net, parse_vnnlib(text), reference, seed), net)
        search.deadline = time.perf_counter() + 30.0
        roots = search.roots()
        search._refined = True
        first = search.bound_many(roots)
        if search.cex is not None or first[0].leaf:
            continue  # (closed or falsified by the first pass: nothing to refine)
        before = first[0].upper
        assert search._refine_roots(roots)
        after = search.bound_many(roots)[0].upper
        if search.cex is not None:  # a corner of the refined linear bounds falsified it
            assert search.cex.margin <= exact + TOL and exact >= -TOL
            continue
        assert exact - TOL <= after <= before, (seed, exact, after, before)
        gains.append(before - after)
    assert len(gains) >= 3 and max(gains) > 0.0, gains
