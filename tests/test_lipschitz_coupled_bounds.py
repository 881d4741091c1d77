"""Phase splits coupled with the input in the Lipschitz tree's node bounds (`LipschitzBab._couple`:
Lagrangian dual bounds, `solvers.bounds.beta.split_layer_bounds`) and in the LPs with split rows
(`LayerLps`, `lp_tighten_layer(split=)`). Oracles: the forward pass of sampled points of the box
that satisfy the split phases (every such point's pre-activations must lie in the bounds; none may
exist when the bounds call the node empty) and the brute-force region enumeration
(`tests.lipschitz_oracles.exact_lipschitz`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certify
import certify.lipschitz.bab as bab
from models.ir import sequential
from solvers.bounds import network_bounds, relu_blocks
from solvers.bounds.beta import clamp_splits, split_input_layer_bounds, split_layer_bounds
from solvers.bounds.lp import LayerLps, lp_tighten_layer
from tests.lipschitz_oracles import exact_lipschitz, jacobian, random_weights

N = 10  # above INPUT_SPLIT_DIM: the tree splits phases, not inputs


def _forward(w, X):
    """Pre-activations of every ReLU layer at the rows of X."""
    zs, h = [], X
    for W, b in w[:-1]:
        z = h @ W.T + b
        zs.append(z)
        h = np.maximum(z, 0.0)
    return zs


def _split_case(seed: int):
    """A random net, box and split: one or two neurons of the first two ReLU layers, unstable on the
    box, fixed to random phases; the split's bounds (symbolic, phases imposed) and sampled points."""
    w = random_weights([N, 6, 6, 6, 2], seed)
    rng = np.random.default_rng(seed)
    center = rng.uniform(-0.5, 0.5, N)
    lo, hi = center - 0.4, center + 0.4
    net = sequential(w)
    root = network_bounds(net, lo, hi, "symbolic")
    fixed = [np.zeros(W.shape[0], dtype=np.int8) for W, _ in w[:-1]]
    for t in (0, 1):
        unstable = np.flatnonzero((root.pre_lo[t] < 0) & (root.pre_hi[t] > 0))
        for i in rng.choice(unstable, size=min(unstable.size, int(rng.integers(0, 2)) + 1), replace=False):
            fixed[t][i] = rng.choice([-1, 1])
    node = network_bounds(net, lo, hi, "symbolic", fixed=fixed, prior=root)
    X = rng.uniform(lo, hi, (40000, N))
    zs = _forward(w, X)
    inside = np.ones(len(X), dtype=bool)
    for z, f in zip(zs, fixed):
        inside &= np.all((f == 0) | (np.sign(z) == f), axis=1)
    return w, net, lo, hi, fixed, node, zs, inside


def _assert_holds(out, zs, inside) -> None:
    """Every sampled point with the split phases has its pre-activations inside the bounds `out`
    (tolerance 1e-9 relative); None (the split called empty) only when no such point was sampled."""
    if out is None:
        assert not inside.any(), "a split with sampled points was called empty"
        return
    for z, l, u in zip(zs, *out):
        tol = 1e-9 * (1 + np.abs(z).max())
        assert np.all(z[inside] >= l - tol) and np.all(z[inside] <= u + tol)


def _coupled(net, lo, hi, fixed, node, split: bool):
    """The layers below the first split re-bounded by LPs, with or without the split rows; None when
    they prove the node empty."""
    blocks = relu_blocks(net)
    pre_lo, pre_hi = [a.copy() for a in node.pre_lo], [a.copy() for a in node.pre_hi]
    lps = LayerLps(blocks, lo, hi, split=list(fixed) if split else None)  # (as the tree does)
    for j in range(1, len(blocks) - 1):
        l, u, _ = lps.tighten(pre_lo[: j + 1], pre_hi[: j + 1], j)
        l = np.where(fixed[j] > 0, np.maximum(l, 0.0), l)
        u = np.where(fixed[j] < 0, np.minimum(u, 0.0), u)
        if np.any(l > u):
            return None
        pre_lo[j], pre_hi[j] = l, u
    return pre_lo, pre_hi


@given(seed=st.integers(0, 100_000))
@settings(max_examples=30, deadline=None)
def test_split_rows_keep_every_point_where_the_phases_hold(seed):
    w, net, lo, hi, fixed, node, zs, inside = _split_case(seed)
    if node is None:  # the symbolic bounds already prove the split empty
        assert not inside.any()
        return
    _assert_holds(_coupled(net, lo, hi, fixed, node, split=True), zs, inside)


def test_split_rows_tighten_the_layers_below():
    """Over 20 random splits the rows z >= 0 / z <= 0 make the LP bounds strictly tighter somewhere or
    prove the split empty. (Not everywhere: a neuron the rows make stable is encoded as y = z without
    a row z >= 0, which can loosen a later layer's LP; the tree keeps the tighter of its bounds.)"""
    tighter = 0
    for seed in range(20):
        _, net, lo, hi, fixed, node, _, _ = _split_case(seed)
        if node is None:
            continue
        plain, coupled = _coupled(net, lo, hi, fixed, node, split=False), _coupled(net, lo, hi, fixed, node, split=True)
        if plain is None:
            assert coupled is None
            continue
        if coupled is None:
            tighter += 1
            continue
        tighter += any(np.any(lc > lp + 1e-6) or np.any(uc < up - 1e-6)
                       for lc, uc, lp, up in zip(*coupled, *plain))
    assert tighter >= 5


@pytest.mark.parametrize("seed,cut_rounds", [(1, 0), (2, 0), (3, 1), (4, 1)])
def test_extended_layer_lps_bound_like_fresh_encodings(seed, cut_rounds):
    """`LayerLps`, extending one encoding layer by layer, gives the bounds of `lp_tighten_layer`
    encoding the layers above from scratch for each layer (the same LPs, rows in another order),
    split rows and ideal cuts included."""
    w, net, lo, hi, fixed, node, zs, inside = _split_case(seed)
    if node is None:
        return
    blocks = relu_blocks(net)
    pre_lo, pre_hi = [a.copy() for a in node.pre_lo], [a.copy() for a in node.pre_hi]
    lps = LayerLps(blocks, lo, hi, cut_rounds, split=list(fixed))
    for j in range(1, len(blocks) - 1):
        fresh = lp_tighten_layer(blocks, pre_lo[: j + 1], pre_hi[: j + 1], j, lo, hi, cut_rounds=cut_rounds,
                                 split=list(fixed[:j]))
        l, u, n = lps.tighten(pre_lo[: j + 1], pre_hi[: j + 1], j)
        assert n == fresh[2]
        for a, b in ((l, fresh[0]), (u, fresh[1])):
            assert np.allclose(a, b, rtol=1e-7, atol=1e-9)
        pre_lo[j], pre_hi[j] = np.maximum(l, fresh[0]), np.minimum(u, fresh[1])
        if np.any(pre_lo[j] > pre_hi[j]):
            return
    with pytest.raises(ValueError, match="increasing order"):
        lps.tighten(pre_lo, pre_hi, 1)


def _dual_coupled(net, lo, hi, fixed, node, split: bool = True, iterations: int = 30):
    """The layers below the first split re-bounded by `split_layer_bounds` (a batch of one node, as
    the tree does it), with or without the split phases as constraints (without: the same clamped
    bounds, no multipliers); None when they prove the node empty."""
    blocks = relu_blocks(net)
    phases = [f[None] if split else np.zeros((1, f.size)) for f in fixed]
    pre_lo, pre_hi = clamp_splits([a[None].copy() for a in node.pre_lo], [a[None].copy() for a in node.pre_hi],
                                  [f[None] for f in fixed])
    if split:  # the first layer under every split (the same layer's and deeper ones), as the tree does
        depth = max(t for t, f in enumerate(fixed) if np.any(f)) + 1
        l, u = split_input_layer_bounds(blocks, lo[None], hi[None], pre_lo, pre_hi, phases, depth, iterations)
        (pre_lo[0],), (pre_hi[0],) = clamp_splits([l], [u], [fixed[0][None]])
        if np.any(pre_lo[0] > pre_hi[0]):
            return None
    for j in range(1, len(blocks) - 1):
        l, u = split_layer_bounds(blocks, lo[None], hi[None], pre_lo, pre_hi, phases, j, iterations)
        (pre_lo[j],), (pre_hi[j],) = clamp_splits([l], [u], [fixed[j][None]])
        if np.any(pre_lo[j] > pre_hi[j]):
            return None
    return [a[0] for a in pre_lo], [a[0] for a in pre_hi]


@given(seed=st.integers(0, 100_000), iterations=st.sampled_from([0, 3, 30]))
@settings(max_examples=40, deadline=None)
def test_dual_split_bounds_keep_every_point_where_the_phases_hold(seed, iterations):
    """Whatever the optimiser reached (0 steps: CROWN's slopes, no multipliers), the bounds are sound."""
    w, net, lo, hi, fixed, node, zs, inside = _split_case(seed)
    if node is None:
        assert not inside.any()
        return
    _assert_holds(_dual_coupled(net, lo, hi, fixed, node, iterations=iterations), zs, inside)


def test_first_layer_bounds_under_the_splits_are_sound_and_tighter():
    """`split_input_layer_bounds`: every sampled point of the box with the split phases (of the first
    and the second ReLU layer) has its first-layer pre-activations inside the bounds, and over 20
    random splits they are strictly tighter than the clamped symbolic bounds somewhere (the splits
    of the first layer itself and of the deeper one restrict x)."""
    tighter = 0
    for seed in range(20):
        w, net, lo, hi, fixed, node, zs, inside = _split_case(seed)
        if node is None:
            continue
        blocks = relu_blocks(net)
        pre_lo, pre_hi = clamp_splits([a[None] for a in node.pre_lo], [a[None] for a in node.pre_hi], [f[None] for f in fixed])
        l, u = split_input_layer_bounds(blocks, lo[None], hi[None], pre_lo, pre_hi, [f[None] for f in fixed], 2)
        z = zs[0][inside]
        tol = 1e-9 * (1 + np.abs(zs[0]).max())
        assert np.all(z >= l[0] - tol) and np.all(z <= u[0] + tol), seed
        assert not np.any(l[0] > u[0]) or not inside.any()
        tighter += bool(np.any(l[0] > pre_lo[0][0] + 1e-6) or np.any(u[0] < pre_hi[0][0] - 1e-6))
    assert tighter >= 5


def test_dual_split_constraints_tighten_the_layers_below():
    """Over 20 random splits the phases' multipliers make the bounds strictly tighter somewhere or
    prove the split empty. (Not everywhere: the slopes are optimised along with the multipliers,
    and the steps may end elsewhere than without them.)"""
    tighter = 0
    for seed in range(20):
        _, net, lo, hi, fixed, node, _, inside = _split_case(seed)
        if node is None:
            continue
        plain, coupled = _dual_coupled(net, lo, hi, fixed, node, split=False), _dual_coupled(net, lo, hi, fixed, node)
        if plain is None:
            assert coupled is None and not inside.any()
            continue
        if coupled is None:
            tighter += 1
            continue
        tighter += any(np.any(lc > lp + 1e-6) or np.any(uc < up - 1e-6) for lc, uc, lp, up in zip(*coupled, *plain))
    assert tighter >= 5


@given(seed=st.integers(0, 100_000))
@settings(max_examples=30, deadline=None)
def test_nearer_side_bounds_are_the_two_sided_bounds_on_that_side(seed):
    """`split_layer_bounds(nearer_side=True)` (the tree's last ReLU layer, whose bounds only give
    the Jacobian's slopes): each unstable neuron is bounded on the side nearer 0 only, with the
    bound the two-sided call computes there (the same problem; the rows do not mix), the other
    side kept as given, and every sampled point with the split phases inside."""
    w, net, lo, hi, fixed, node, zs, inside = _split_case(seed)
    if node is None:
        assert not inside.any()
        return
    blocks = relu_blocks(net)
    phases = [f[None] for f in fixed]
    pre_lo, pre_hi = clamp_splits([a[None].copy() for a in node.pre_lo], [a[None].copy() for a in node.pre_hi], phases)
    j = len(blocks) - 2
    l2, u2 = split_layer_bounds(blocks, lo[None], hi[None], pre_lo, pre_hi, phases, j, 20)
    l1, u1 = split_layer_bounds(blocks, lo[None], hi[None], pre_lo, pre_hi, phases, j, 20, nearer_side=True)
    unst = (pre_lo[j][0] < 0) & (pre_hi[j][0] > 0)
    up = unst & (pre_hi[j][0] <= -pre_lo[j][0])
    down = unst & ~up
    tol = 1e-5 * (1 + np.abs(pre_hi[j]).max() + np.abs(pre_lo[j]).max())
    assert np.allclose(u1[0][up], u2[0][up], rtol=1e-5, atol=tol) and np.all(l1[0][up] == pre_lo[j][0][up])
    assert np.allclose(l1[0][down], l2[0][down], rtol=1e-5, atol=tol) and np.all(u1[0][down] == pre_hi[j][0][down])
    assert np.all(l1[0][~unst] == pre_lo[j][0][~unst]) and np.all(u1[0][~unst] == pre_hi[j][0][~unst])
    z = zs[j][inside]
    ztol = 1e-9 * (1 + np.abs(zs[j]).max())
    assert np.all(z >= l1[0] - ztol) and np.all(z <= u1[0] + ztol)


@pytest.mark.parametrize("floats", [None, 1])
def test_dual_split_bounds_of_a_batch_are_each_nodes_own(monkeypatch, floats):
    """Nodes bounded together (different boxes and phases of one net) get the bounds each gets
    alone: the problems do not mix, also when they go in batches of one problem pair each."""
    import solvers.bounds.beta as beta

    w = random_weights([N, 6, 6, 6, 2], 7)
    net, blocks = sequential(w), relu_blocks(sequential(w))
    rng = np.random.default_rng(7)
    los, his, pls, phs, fxs = [], [], [], [], []
    for _ in range(4):
        center = rng.uniform(-0.5, 0.5, N)
        lo, hi = center - 0.4, center + 0.4
        root = network_bounds(net, lo, hi, "symbolic")
        fixed = [np.zeros(W.shape[0], dtype=np.int8) for W, _ in w[:-1]]
        unstable = np.flatnonzero((root.pre_lo[0] < 0) & (root.pre_hi[0] > 0))
        fixed[0][unstable[: 2]] = rng.choice([-1, 1], size=min(2, unstable.size))
        pl, ph = clamp_splits(root.pre_lo, root.pre_hi, fixed)
        los.append(lo), his.append(hi), pls.append(pl), phs.append(ph), fxs.append(fixed)
    stack = lambda arrays: [np.stack(a) for a in zip(*arrays)]  # noqa: E731
    alone = [split_layer_bounds(blocks, los[b][None], his[b][None], [a[None] for a in pls[b]],
                                [a[None] for a in phs[b]], [f[None] for f in fxs[b]], 1) for b in range(4)]
    if floats is not None:
        monkeypatch.setattr(beta, "SPLIT_LAYER_FLOATS", floats)
    l, u = split_layer_bounds(blocks, np.stack(los), np.stack(his), stack(pls), stack(phs), stack(fxs), 1)
    assert any(np.any(l[b] > pls[b][1] + 1e-9) or np.any(u[b] < phs[b][1] - 1e-9) for b in range(4))  # (not vacuous)
    for b, (lb, ub) in enumerate(alone):
        assert np.allclose(l[b], lb[0], rtol=1e-6, atol=1e-9) and np.allclose(u[b], ub[0], rtol=1e-6, atol=1e-9)


def test_tree_with_coupled_nodes_contains_the_exact_constant(monkeypatch):
    """The phase-split tree on a 10-input net closes at the exact constant, and its nodes' layers
    were re-bounded with their split phases."""
    calls = []
    real = bab.split_layer_bounds

    def spy(blocks, lo, hi, pre_lo, pre_hi, split, j, *a, **k):
        calls.append(any(np.any(s) for s in split[:j]))
        return real(blocks, lo, hi, pre_lo, pre_hi, split, j, *a, **k)

    monkeypatch.setattr(bab, "split_layer_bounds", spy)
    w = random_weights([N, 6, 6, 2], 3)
    center = np.random.default_rng(3).uniform(-0.5, 0.5, N)
    cert = certify.local_lipschitz(sequential(w), center, 0.3, method="bab", time_limit=120)
    exact = exact_lipschitz(w, center - 0.3, center + 0.3, "linf", "l1")
    assert cert.lower <= exact * (1 + 1e-9) and exact <= cert.upper * (1 + 1e-9)
    assert cert.status == "optimal", cert.notes
    assert any(calls)


def _ascent_share(monkeypatch, improves: bool, rounds: int = 60) -> float:
    """The share of time `_search_more` gives a stub ascent (it sleeps through its slot, raising the
    lower bound or not) while the tree works 10 ms between calls, on a 20-input box."""
    import time

    import certify.lipschitz.witness as witness
    from certify.lipschitz.options import NormQuestion
    from certify.lipschitz.witness import WitnessSearch
    from models.box import Box
    from solvers.runtime import Budget

    def stub(search, until, seed=0, box=None):
        time.sleep(max(until - time.perf_counter(), 0.0))
        if improves:
            search.lower += 1.0

    monkeypatch.setattr(witness, "smooth_ascent", stub)
    monkeypatch.setattr(bab, "ASCENT_SLOT", 0.01)
    net = sequential(random_weights([20, 4, 2], 0))
    box = Box.from_bounds(np.zeros(20), np.ones(20))
    question = NormQuestion.of(net, "linf", "l1")
    budget = Budget(60.0)
    problem = bab.LipschitzBab(net, box, question, WitnessSearch(net, box, question, budget), budget=budget)
    problem.started = time.perf_counter()
    for _ in range(rounds):
        time.sleep(0.01)
        problem._search_more(box.lo, box.hi)
    return problem.search_seconds / (time.perf_counter() - problem.started)


def test_fruitless_ascents_back_off(monkeypatch):
    """Slots that raise the lower bound keep ASCENT_SHARE of the time; slots that do not halve it,
    down to ASCENT_SHARE / 2**ASCENT_BACKOFF (shares measured by the clock: loose margins)."""
    full = _ascent_share(monkeypatch, improves=True)
    least = bab.ASCENT_SHARE * 0.5**bab.ASCENT_BACKOFF
    backed = _ascent_share(monkeypatch, improves=False)
    assert 0.7 * bab.ASCENT_SHARE <= full <= 1.3 * bab.ASCENT_SHARE + 0.05
    assert 0.5 * least <= backed <= 1.5 * least + 0.05 < full


def test_a_stalled_ascent_hands_its_slot_to_one_flip_walk_per_witness(monkeypatch):
    import certify.lipschitz.witness as witness
    from certify.lipschitz.options import NormQuestion
    from certify.lipschitz.witness import WitnessSearch
    from models.box import Box
    from solvers.runtime import Budget

    calls = {"ascent": 0, "flips": 0}

    def ascent(search, until, seed=0, box=None):
        calls["ascent"] += 1

    def flips(search, free, until):
        calls["flips"] += 1
        assert sum(int(f.sum()) for f in free) == root.num_unstable
        return False

    monkeypatch.setattr(witness, "smooth_ascent", ascent)
    monkeypatch.setattr(witness, "flip_search", flips)
    net = sequential(random_weights([20, 6, 6, 2], 0))
    box = Box.from_bounds(np.zeros(20), np.ones(20))
    root = network_bounds(net, box.lo, box.hi, "symbolic")
    question = NormQuestion.of(net, "linf", "l1")
    budget = Budget(60.0)
    search = WitnessSearch(net, box, question, budget)
    problem = bab.LipschitzBab(net, box, question, search, root_bounds=root, budget=budget)
    import time

    def slot():  # (the tree works between slots: the stubs take no time, the share always allows one)
        time.sleep(0.02)
        problem._search_more(box.lo, box.hi)

    for _ in range(4):
        slot()
    assert calls == {"ascent": 3, "flips": 1}  # the first slot's ascent found nothing: one walk, then ascents
    search.lower += 1.0  # a new witness: one more walk from it
    slot()
    assert calls["flips"] == 2


@pytest.mark.parametrize("inputs, fruitless, climbs, walks", [
    (20, 0, 0, True), (20, bab.ASCENT_BACKOFF, 0, False), (8, bab.ASCENT_BACKOFF, 0, True),
    (20, 0, bab.CLIMB_PATIENCE - 1, True), (20, 0, bab.CLIMB_PATIENCE, False), (8, 0, bab.CLIMB_PATIENCE, True)])
def test_walks_across_regions_stop_on_high_dimensional_boxes_once_the_ascent_backed_off(
        monkeypatch, inputs, fruitless, climbs, walks):
    """Every batch of nodes walks across activation regions from its best probes, except on
    high-dimensional boxes (more than `witness.ASCENT_DIM` free inputs) once the ascent has found
    nothing ASCENT_BACKOFF times in a row or CLIMB_PATIENCE walks in a row raised nothing (a walk
    that raises nothing counts one more); the nodes' bounds stay sound either way (above the
    Jacobian norms at sampled points of the box)."""
    from certify.lipschitz.options import NormQuestion
    from certify.lipschitz.witness import WitnessSearch
    from models.box import Box
    from solvers.runtime import Budget

    calls = []
    monkeypatch.setattr(bab, "climb", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(bab.LipschitzBab, "_search_more", lambda self, lo, hi: None)
    w = random_weights([inputs, 5, 5, 2], 3)
    net = sequential(w)
    box = Box.from_bounds(np.zeros(inputs), np.ones(inputs))
    question = NormQuestion.of(net, "linf", "l1")
    budget = Budget(60.0)
    problem = bab.LipschitzBab(net, box, question, WitnessSearch(net, box, question, budget), node_lp=False,
                               root_bounds=network_bounds(net, box.lo, box.hi, "symbolic"), budget=budget)
    problem.fruitless, problem.climbs_fruitless = fruitless, climbs
    root = problem.root()
    children = [c for c, _ in problem.branch(root, problem.bound(root), -np.inf)]
    bounds = problem.bound_many(children)
    assert bool(calls) == walks
    if walks:  # (the stub raises nothing)
        assert problem.climbs_fruitless == climbs + 1
    sampled = 0.0  # ||J||_{linf -> l1} = max over sign vectors s of ||J^T s||_1 (2 outputs)
    for x in np.random.default_rng(0).uniform(box.lo, box.hi, (500, inputs)):
        pattern, h = [], x
        for W, b in w[:-1]:
            z = W @ h + b
            pattern.append((z > 0).astype(float))
            h = np.maximum(z, 0.0)
        J = jacobian(w, pattern)
        sampled = max(sampled, max(np.abs(J.T @ np.array(s)).sum() for s in ((1.0, 1.0), (1.0, -1.0))))
    assert max(b.upper for b in bounds) >= sampled > 0
