"""Bounds of one hidden pre-activation under *all* of a node's ReLU splits
(`solvers.bounds.beta.split_neuron_bounds`, the dual bound with an objective term on z_t), against
independent oracles: the exact maximum and minimum of that z over the box restricted to the split
phases by a big-M MILP (scipy's HiGHS, interval big-M constants of its own), and dense sampling.
The search's use of them (`ReluSplitSearch._rebound_under_splits`) is checked by its verdicts
against exact activation-region enumeration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.verify import parse_vnnlib, verify
from solvers.bounds.beta import _Net32, clamp_splits, crown_slopes, dual_upper, multipliers, split_neuron_bounds
from tests.test_relu_split import TOL, _affine_layers, _case, _node_bounds, milp_max
from tests.test_verify_soundness import _property
from tests.vnnlib_oracle import disagreements, exact_max_margin
from models.zoo import random_relu_net


def _target(rng, pl, ph):
    """A random hidden neuron (layer, index), unstable by the node's bounds where one is."""
    t = int(rng.integers(len(pl)))
    unst = np.flatnonzero((pl[t][0] < 0) & (ph[t][0] > 0))
    return t, int(rng.choice(unst)) if unst.size else int(rng.integers(pl[t].shape[1]))


def _sampled_range(net, lo, hi, split, t, i, rng, count=60_000):
    """(min, max) of z_t[i] over samples satisfying every split phase (None: no sample does)."""
    X = rng.uniform(lo, hi, (count, lo.size))
    ok = np.ones(count, dtype=bool)
    a, zs = X, []
    for k, (W, b) in enumerate(_affine_layers(net)[:-1]):
        z = a @ W.T + b
        ok &= np.all((split[k] == 0) | (split[k] * z >= 0), axis=1)
        zs.append(z)
        a = np.maximum(z, 0)
    return (float(zs[t][ok, i].min()), float(zs[t][ok, i].max())) if ok.any() else None


@pytest.mark.parametrize("seed", range(10))
def test_neuron_bounds_hold_against_milp(seed):
    """Optimised and random multipliers: the upper bound is never below the exact maximum of z, the
    lower never above the exact minimum (so an empty claim, lower > upper, only where the MILP finds
    no point); splits of deeper layers than the neuron's included."""
    rng, net, blocks, lo, hi, split = _case(seed, n_in=5, hidden=(9, 8, 7), m=2, p_split=0.35)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:  # the node bounds declare the split set empty: the MILP must find no point
        assert milp_max(net, lo, hi, split, None, None, z_obj=(0, 0, 1.0)) == -np.inf
        return
    _, pl, ph = node
    t, i = _target(rng, pl, ph)
    sp = [s[None] for s in split]
    lower, upper = split_neuron_bounds(blocks, lo[None], hi[None], pl, ph, sp, np.array([t]), np.array([i]))
    top = milp_max(net, lo, hi, split, None, None, z_obj=(t, i, 1.0))
    bottom = -milp_max(net, lo, hi, split, None, None, z_obj=(t, i, -1.0))
    if top == -np.inf:  # empty: any claim holds
        return
    assert upper[0] >= top - TOL * (1 + abs(top)), (upper, top)
    assert lower[0] <= bottom + TOL * (1 + abs(bottom)), (lower, bottom)
    # the dual bound with the objective term is sound for any multipliers
    K = len(pl)
    obj = [None] * K
    obj[t] = np.zeros((1, pl[t].shape[1]))
    obj[t][0, i] = 1.0
    c = np.zeros((1, blocks[-1].weight.shape[0]))
    spf = [s.astype(float) for s in sp]
    for _ in range(5):
        alpha = [rng.random(l.shape) for l in pl]
        beta = [rng.exponential(1.0, l.shape) * (s != 0) for l, s in zip(pl, spf)]
        nus = multipliers(blocks, c, pl, ph, spf, alpha, beta, obj)
        up, _ = dual_upper(blocks, lo[None], hi[None], pl, ph, nus, obj=obj)
        assert up[0] >= top - TOL * (1 + abs(top)), (up, top)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), p_split=st.floats(0.0, 0.7))
def test_neuron_bounds_contain_every_sampled_value(seed, p_split):
    rng, net, blocks, lo, hi, split = _case(seed, n_in=4, hidden=(8, 8, 6), m=2, p_split=p_split)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:
        assert _sampled_range(net, lo, hi, split, 0, 0, rng) is None
        return
    _, pl, ph = node
    t, i = _target(rng, pl, ph)
    lower, upper = split_neuron_bounds(blocks, lo[None], hi[None], pl, ph, [s[None] for s in split],
                                       np.array([t]), np.array([i]), iterations=20)
    seen = _sampled_range(net, lo, hi, split, t, i, rng)
    if seen is not None:
        assert lower[0] - TOL <= seen[0] and seen[1] <= upper[0] + TOL, (lower, upper, seen)


def test_deeper_splits_tighten_an_earlier_layer_and_prove_phases():
    """The node's own bounds of a layer ignore the half-spaces of later splits; these bounds see
    them: over random nodes some neuron's interval shrinks, and some unstable neuron is proven of
    one phase, each claim checked against the MILP's exact range."""
    shrunk = proven = 0
    for seed in range(40):
        rng, net, blocks, lo, hi, split = _case(seed, n_in=4, hidden=(8, 8, 6), m=2, p_split=0.0)
        node = _node_bounds(blocks, lo, hi, split)
        _, pl, ph = node
        # split only the deepest layer's unstable neurons: every effect on layers 0, 1 comes from them
        deep = np.flatnonzero((pl[2][0] < 0) & (ph[2][0] > 0))
        if not deep.size:
            continue
        split[2][rng.choice(deep, size=min(2, deep.size), replace=False)] = rng.choice([-1, 1], min(2, deep.size))
        pl, ph = clamp_splits(pl, ph, [s[None].astype(float) for s in split])
        t = int(rng.integers(2))
        unst = np.flatnonzero((pl[t][0] < 0) & (ph[t][0] > 0))
        if not unst.size:
            continue
        m = unst.size
        lower, upper = split_neuron_bounds(blocks, lo[None], hi[None], [np.repeat(a, m, 0) for a in pl],
                                           [np.repeat(a, m, 0) for a in ph], [np.repeat(s[None], m, 0) for s in split],
                                           np.full(m, t), unst)
        for k, i in enumerate(unst):
            top = milp_max(net, lo, hi, split, None, None, z_obj=(t, i, 1.0))
            if top == -np.inf:
                break
            bottom = -milp_max(net, lo, hi, split, None, None, z_obj=(t, i, -1.0))
            assert lower[k] <= bottom + TOL * (1 + abs(bottom)) and upper[k] >= top - TOL * (1 + abs(top))
            shrunk += bool(upper[k] < ph[t][0, i] - 1e-6 or lower[k] > pl[t][0, i] + 1e-6)
            proven += bool(upper[k] <= 0 or lower[k] >= 0)
    assert shrunk > 0 and proven > 0, (shrunk, proven)


@pytest.mark.parametrize("seed", range(3))
def test_optimiser_gradient_with_an_objective_term(seed):
    """The optimiser's value and hand-derived gradient with an objective term on a hidden layer
    (float64): the value equals `dual_upper` without allowance, the gradient central differences."""
    node = None
    while node is None:  # (a case whose split set the node bounds do not declare empty)
        rng, net, blocks, lo, hi, split = _case(seed, p_split=0.4)
        node = _node_bounds(blocks, lo, hi, split)
        seed += 1000
    _, pl, ph = node
    P = 2
    pl, ph = [np.repeat(l, P, 0) for l in pl], [np.repeat(u, P, 0) for u in ph]
    sp = [np.repeat(s[None].astype(float), P, 0) for s in split]
    obj = [None, rng.normal(size=(P, pl[1].shape[1]))]
    c = np.zeros((P, 3))
    alpha = [rng.random(l.shape) for l in pl]
    beta = [rng.exponential(1.0, l.shape) * (s != 0) for l, s in zip(pl, sp)]
    f = _Net32(blocks, lo[None], hi[None], pl, ph, sp, c, None, dtype=np.float64, obj=obj)
    val, grads = f.value(alpha, beta)
    ref, _ = dual_upper(blocks, lo[None], hi[None], pl, ph, multipliers(blocks, c, pl, ph, sp, alpha, beta, obj),
                        rigorous=False, obj=obj)
    np.testing.assert_allclose(val, ref, rtol=1e-9, atol=1e-9)
    h, checked = 1e-6, 0
    for t in range(len(alpha)):
        for p, i in list(zip(*np.nonzero((pl[t] < 0) & (ph[t] > 0))))[:6]:
            step = [[a.copy() for a in alpha] for _ in range(2)]
            step[0][t][p, i] += h
            step[1][t][p, i] -= h
            fp, fm = (f.value(s, beta, gradient=False)[0][p] for s in step)
            assert grads[t][p, i] == pytest.approx((fp - fm) / (2 * h), rel=1e-4, abs=1e-6)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("on, min_nodes", [(False, 100), (True, 100), (True, 10**12)])
def test_verdicts_with_and_without_the_rebound_under_splits(monkeypatch, on, min_nodes):
    """ReLU-split verdicts of the second search (the tree again from the refined root, every node's
    neurons bounded under all of its splits; here right after the root, `PLAIN_SHARE` 0) and
    without one, against exact activation-region enumeration (verdicts, counterexamples, and the
    upper bound of the margin); with it the search proves some property unsat and reports the
    restart and the neurons it bounded; none where the nodes' estimated cost at the root leaves no
    time for `DEEP_MIN_NODES` of them (the first search then keeps the whole time)."""
    import certify.verify.relu_split as relu_split

    monkeypatch.setattr(relu_split, "PLAIN_SHARE", 0.0)
    monkeypatch.setattr(relu_split, "DEEP_MIN_NODES", min_nodes)
    results, bounded, again = [], 0, 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        sizes = (3, 8, 8, 8, 2)
        net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
        exact, _ = exact_max_margin(net, lo, hi, G, H, d)
        res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0,
                     second_search=on)
        why = disagreements(res, exact, text, net, lo, hi, TOL)
        assert not why, why
        results.append(res.result)
        bounded += any(n.startswith("node bounds under all splits") for n in res.notes)
        again += any(n.startswith("searched again from the refined root") for n in res.notes)
    assert "unsat" in results, results
    second = on and min_nodes < 10**12
    assert (bounded > 0) == second and (again > 0) == second, (bounded, again)


def test_second_search_over_two_input_regions(monkeypatch):
    """A property over two input boxes (a disjunction: two regions, two roots): the second search
    re-searches only the roots left open, so the answer's upper bound must still cover the roots
    closed at the root (their bounds), checked against the exact margin over both boxes."""
    import certify.verify.relu_split as relu_split

    monkeypatch.setattr(relu_split, "PLAIN_SHARE", 0.0)
    monkeypatch.setattr(relu_split, "DEEP_MIN_NODES", 0)
    results = []
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        sizes = (3, 8, 8, 2)
        net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
        lo2 = lo + (hi - lo) * rng.uniform(0.0, 0.6, lo.size)  # (a sub-box: another root, often closed at once)
        hi2 = lo2 + 0.3 * (hi - lo)
        boxes = [(lo, hi), (lo2, hi2)]
        head = [line for line in text.splitlines() if line.startswith("(declare-const")]
        clause = [line for line in text.splitlines() if line.startswith("(assert (and")]
        regions = " ".join("(and " + " ".join(f"(>= X_{i} {float(a[i])!r}) (<= X_{i} {float(b[i])!r})"
                                              for i in range(sizes[0])) + ")" for a, b in boxes)
        text2 = "\n".join(head + [f"(assert (or {regions}))"] + clause) + "\n"
        exact = max(exact_max_margin(net, a, b, G, H, d)[0] for a, b in boxes)
        res = verify(net, parse_vnnlib(text2), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
        why = disagreements(res, exact, text2, net, np.minimum(lo, lo2), np.maximum(hi, hi2), TOL)
        assert not why, why
        results.append(res.result)
    assert "unsat" in results, results


@pytest.mark.parametrize("seed", range(4))
def test_layer_bounds_under_all_splits_hold_against_milp(seed):
    """`split_layer_bounds_all` (a whole layer of a node, in batches of a few problems): each
    neuron's bounds contain its exact range over the split set (big-M MILP), and never widen the
    given ones."""
    from solvers.bounds.beta import split_layer_bounds_all

    node = None
    while node is None:  # (a case whose split set the node bounds do not declare empty)
        rng, net, blocks, lo, hi, split = _case(seed, n_in=5, hidden=(9, 8, 7), m=2, p_split=0.35)
        node = _node_bounds(blocks, lo, hi, split)
        seed += 1000
    _, pl, ph = node
    sp = [s[None] for s in split]
    for j in range(len(pl)):
        l, u = split_layer_bounds_all(blocks, lo[None], hi[None], pl, ph, sp, j, iterations=30, floats=200)
        assert np.all(l >= pl[j]) and np.all(u <= ph[j])
        for i in np.flatnonzero((pl[j][0] < 0) & (ph[j][0] > 0)):
            top = milp_max(net, lo, hi, split, None, None, z_obj=(j, i, 1.0))
            if top == -np.inf:
                return
            bottom = -milp_max(net, lo, hi, split, None, None, z_obj=(j, i, -1.0))
            assert u[0, i] >= top - TOL * (1 + abs(top)) and l[0, i] <= bottom + TOL * (1 + abs(bottom)), (j, i)


@pytest.mark.parametrize("seed", range(6))
def test_optimiser_on_the_live_sub_network_matches_the_whole(monkeypatch, seed):
    """`optimise` drops the neurons every problem has inactive (their multipliers are 0 and the
    bound does not depend on their slopes): the bounds it reaches must be those of the optimiser on
    the whole network (the same steps up to the products' rounding order), and both at least the
    exact maximum (a big-M MILP)."""
    import solvers.bounds.beta as beta_mod
    import solvers.bounds.live as live_mod

    rng, net, blocks, lo, hi, split = _case(seed, n_in=5, hidden=(12, 10, 8), m=2, p_split=0.4)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:
        return
    _, pl, ph = node
    c = np.vstack([rng.normal(size=2), rng.normal(size=2)])
    live = beta_mod._live_neurons(blocks, pl, ph, [s[None] for s in split], None, c)
    P = c.shape[0]
    args = (blocks, lo[None], hi[None], [a.repeat(P, 0) for a in pl], [a.repeat(P, 0) for a in ph],
            [np.repeat(s[None].astype(float), P, 0) for s in split], c)
    monkeypatch.setattr(live_mod, "LIVE_SHARE", 1.0)
    compact = beta_mod.beta_upper(*args, iterations=25).upper
    monkeypatch.setattr(live_mod, "LIVE_SHARE", 0.0)
    whole = beta_mod.beta_upper(*args, iterations=25).upper
    assert np.allclose(compact, whole, rtol=1e-4, atol=1e-6 * max(1.0, float(np.abs(whole).max())))
    for k in range(P):
        top = milp_max(net, lo, hi, split, c[k], np.zeros(lo.size))
        assert compact[k] >= top - TOL and whole[k] >= top - TOL
    if live is not None:  # (the case has dead neurons: the compact path ran)
        assert sum(x.size for x in live) < sum(a.shape[1] for a in ph)


@pytest.mark.parametrize("seed", range(6))
def test_bounds_without_output_term_drop_the_last_layers_unsplit_neurons(monkeypatch, seed):
    """With c = 0 (a hidden neuron bounded under all splits: `split_neuron_bounds`) the last ReLU
    layer of the sub-network has g = 0, so only its split neurons carry a multiplier: the optimiser
    keeps just those there (`_live_neurons`), skips the products with c, and reaches the bounds of
    the optimiser on the whole network; both contain the neuron's exact range (big-M MILP)."""
    import solvers.bounds.beta as beta_mod
    import solvers.bounds.live as live_mod

    for attempt in range(50):  # a non-empty node split below its first layer, with an unstable first-layer neuron
        rng, net, blocks, lo, hi, split = _case(seed + 1000 * attempt, n_in=5, hidden=(12, 10, 8), m=2, p_split=0.4)
        node = _node_bounds(blocks, lo, hi, split)
        deep = [t for t, s in enumerate(split) if np.any(s)]
        if node is None or not deep or max(deep) == 0:
            continue
        _, pl, ph = node
        unst = np.flatnonzero((pl[0][0] < 0) & (ph[0][0] > 0))
        if unst.size and milp_max(net, lo, hi, split, None, None, z_obj=(0, int(unst[0]), 1.0)) > -np.inf:
            break
    else:
        raise AssertionError("no case")
    deepest, i = max(deep), int(unst[0])
    sp = [s[None] for s in split]
    monkeypatch.setattr(live_mod, "LIVE_SHARE", 1.0)
    live = beta_mod._live_neurons(blocks[: deepest + 2], pl[: deepest + 1], ph[: deepest + 1],
                                  [s.astype(float) for s in sp[: deepest + 1]],
                                  [np.eye(pl[0].shape[1])[[i]]] + [None] * deepest, np.zeros((1, 1)))
    assert live is not None and set(live[deepest]) <= set(np.flatnonzero(split[deepest]))
    runs = {}
    for share in (1.0, 0.0):
        monkeypatch.setattr(live_mod, "LIVE_SHARE", share)
        runs[share] = split_neuron_bounds(blocks, lo[None], hi[None], pl, ph, sp, np.array([0]), np.array([i]))
    (lc, uc), (lw, uw) = runs[1.0], runs[0.0]
    scale = max(1.0, float(np.abs(uw).max()), float(np.abs(lw).max()))
    assert np.allclose(uc, uw, rtol=1e-4, atol=1e-6 * scale) and np.allclose(lc, lw, rtol=1e-4, atol=1e-6 * scale)
    top = milp_max(net, lo, hi, split, None, None, z_obj=(0, i, 1.0))
    bottom = -milp_max(net, lo, hi, split, None, None, z_obj=(0, i, -1.0))
    assert uc[0] >= top - TOL * (1 + abs(top)) and lc[0] <= bottom + TOL * (1 + abs(bottom))
