"""The MILP's independent proof with node bounds of fixed phases (`certify.lipschitz.node_bound`),
and the incumbent replayed before the proof; oracles: activation-region enumeration."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import certify
import solvers.milp.sound as sound
from certify.lipschitz.node_bound import clarke_node_bound
from models.box import Box
from models.ir import sequential
import solvers.bab.milp as proof_module
from solvers.bab import prove_bound
from solvers.bounds import network_bounds
from solvers.milp.lipschitz import build_lipschitz_milp
from tests.lipschitz_oracles import jacobian, opnorm, random_weights, regions


def _setup(sizes, seed, p, q, target=None, radius=None):
    w = random_weights(sizes, seed)
    net = sequential(w)
    lo, hi = np.full(sizes[0], -0.6), np.full(sizes[0], 0.8)
    if radius is not None:  # a smaller box (many inputs: fewer regions to enumerate)
        lo, hi = np.full(sizes[0], 0.1 - radius), np.full(sizes[0], 0.1 + radius)
    nb = network_bounds(net, lo, hi, "symbolic")
    milp = build_lipschitz_milp(net, nb, p, q, target)
    box = Box.around((lo + hi) / 2, (hi - lo) / 2, dim=sizes[0])
    return w, net, lo, hi, nb, milp, box


def _value(w, pattern, p, q, target):
    J = jacobian(w, pattern)
    if target is None:
        return opnorm(J, p, q)
    g = J.T @ target
    return {"linf": np.abs(g).sum(), "l1": np.abs(g).max()}[p]


@pytest.mark.parametrize("seed,p,q,target", [(0, "linf", "l1", None), (1, "l1", "linf", None),
                                             (2, "linf", "linf", None), (3, "linf", None, np.array([1.0, -1.0])),
                                             (4, "l1", None, np.array([0.5, 2.0]))])
def test_phase_bound_covers_every_region_of_the_fixed_phases(seed, p, q, target):
    """For random nodes (random binaries fixed), the bound is at least the exact norm of every
    full-dimensional activation region whose pattern agrees with the fixed phases, and -inf only
    when no region does."""
    _check_phase_bound_covers_regions([2, 6, 6, 2], seed, p, q, target)


@pytest.mark.parametrize("seed,q,target", [(8, "l1", None), (7, None, np.array([1.0, -1.0]))])
def test_phase_bound_without_linear_passes_covers_every_region(seed, q, target):
    """With more linf inputs than enumerated directions (MAX_SIGN_OUTPUTS) the node bound skips
    the linear bounds of the Jacobian passes (interval arithmetic only): still at least every
    agreeing region's exact norm (region enumeration)."""
    from solvers.bounds.jacobian import MAX_SIGN_OUTPUTS

    _check_phase_bound_covers_regions([MAX_SIGN_OUTPUTS + 1, 4, 4, 2], seed, "linf", q, target, radius=0.15)


def _check_phase_bound_covers_regions(sizes, seed, p, q, target, radius=None):
    w, net, lo, hi, nb, milp, box = _setup(sizes, seed, p, q, target, radius)
    bound = clarke_node_bound(net, box, nb, milp, (p, q), target)
    regs = regions(w, lo, hi)
    deltas = milp.forward.delta
    cols = np.concatenate([d[d >= 0] for d in deltas])
    assert cols.size >= 3  # the case has unstable neurons to fix
    rng = np.random.default_rng(seed)
    exp = milp.in_exp + milp.out_exp
    B = 24
    col_lo = np.repeat(milp.model.col_lo[None], B, axis=0)
    col_hi = np.repeat(milp.model.col_hi[None], B, axis=0)
    for b in range(1, B):  # node 0 is the root
        fix = rng.choice(cols, size=rng.integers(1, cols.size + 1), replace=False)
        val = rng.integers(0, 2, fix.size).astype(float)
        col_lo[b, fix] = col_hi[b, fix] = val
    values = bound(col_lo, col_hi)
    for b in range(B):
        agree = [r for r in regs if all(
            np.all(r[j][d >= 0][col_lo[b, d[d >= 0]] >= 0.5] == 1) and np.all(r[j][d >= 0][col_hi[b, d[d >= 0]] <= 0.5] == 0)
            for j, d in enumerate(deltas))]
        best = max((_value(w, r, p, q, target) for r in agree), default=-np.inf)
        assert values[b] >= np.ldexp(best, exp) * (1 - 1e-12), (b, values[b], best)
        if agree:
            assert np.isfinite(values[b])


@pytest.mark.slow
def test_proof_with_phase_bounds_closes_at_the_exact_constant_with_fewer_lps(monkeypatch):
    """The proof at the exact constant (region enumeration) as target closes; with the phase
    bounds children close without an LP, and the proven bound stays at least the constant."""
    monkeypatch.setattr(proof_module, "PHASE_COST_CAP", math.inf)  # kept however loaded the machine
    p, q = "linf", "l1"
    w, net, lo, hi, nb, milp, box = _setup([2, 8, 8, 2], 5, p, q)
    exact = max(_value(w, r, p, q, None) for r in regions(w, lo, hi))
    target = float(np.ldexp(exact, milp.in_exp + milp.out_exp)) * (1 + 1e-9)
    plain = prove_bound(milp.model, target)
    fast = prove_bound(milp.model, target, phase_bound=clarke_node_bound(net, box, nb, milp, (p, q), None))
    for res in (plain, fast):
        assert res.complete
        assert target * (1 - 1e-8) <= res.bound <= target * (1 + 1e-6)
        assert res.bound >= np.ldexp(exact, milp.in_exp + milp.out_exp) * (1 - 1e-12)
    assert fast.lp_solves < plain.lp_solves  # children closed by their phase bounds need no LP


def test_proof_with_interval_phase_bounds_closes_at_the_exact_constant(monkeypatch):
    """Many linf inputs (the node bound without linear passes): the proof at the exact constant
    (region enumeration) closes with fewer LPs than the LP-only proof, and proves at least the
    constant; at a target 10% below it the bound proven is still at least the constant."""
    from solvers.bounds.jacobian import MAX_SIGN_OUTPUTS

    monkeypatch.setattr(proof_module, "PHASE_COST_CAP", math.inf)  # kept however loaded the machine
    p, q = "linf", "l1"
    w, net, lo, hi, nb, milp, box = _setup([MAX_SIGN_OUTPUTS + 1, 4, 4, 2], 6, p, q, radius=0.15)
    exact = np.ldexp(max(_value(w, r, p, q, None) for r in regions(w, lo, hi)), milp.in_exp + milp.out_exp)
    phase = clarke_node_bound(net, box, nb, milp, (p, q), None)
    target = float(exact) * (1 + 1e-9)
    plain = prove_bound(milp.model, target)
    fast = prove_bound(milp.model, target, phase_bound=phase)
    for res in (plain, fast):
        assert res.complete
        assert exact * (1 - 1e-12) <= res.bound <= target * (1 + 1e-6)
    assert fast.lp_solves < plain.lp_solves
    low = prove_bound(milp.model, float(exact) * 0.9, phase_bound=phase)
    assert low.bound >= exact * (1 - 1e-12)


def test_incumbents_are_replayed_before_the_proof(monkeypatch):
    """The solver's point raises the lower bound before the proof runs (a proof cut short by the
    deadline once left the incumbent unreplayed)."""
    events = []
    real = sound.prove_bound

    def proof(*args, **kw):
        events.append("proof")
        return real(*args, **kw)

    monkeypatch.setattr(sound, "prove_bound", proof)
    w = random_weights([10, 6, 6, 2], 3)
    net = sequential(w)
    from certify.lipschitz.witness import WitnessSearch

    real_replay = WitnessSearch.replay

    def replay(self, *args, **kw):
        events.append("replay")
        return real_replay(self, *args, **kw)

    monkeypatch.setattr(WitnessSearch, "replay", replay)
    cert = certify.local_lipschitz(net, np.zeros(10), 0.3, method="milp", backend="highs")
    assert cert.status == "optimal" and "proof" in events
    assert "replay" in events[: events.index("proof")]


@pytest.mark.parametrize("seed,p,q,target", [(0, "linf", "l1", None), (3, "linf", None, np.array([1.0, -1.0]))])
def test_a_costly_phase_bound_is_dropped_after_the_root_and_the_proof_stays_sound(seed, p, q, target):
    """A phase bound costing far more than an LP (here made slow) is used at the root only; the
    LP-only tree still closes at the exact constant (region enumeration) and, at a target 10%
    below it, proves no less than the constant."""
    w, net, lo, hi, nb, milp, box = _setup([2, 6, 6, 2], seed, p, q, target)
    exact = np.ldexp(max(_value(w, r, p, q, target) for r in regions(w, lo, hi)), milp.in_exp + milp.out_exp)
    phase = clarke_node_bound(net, box, nb, milp, (p, q), target)
    calls = []

    def slow(col_lo, col_hi):
        calls.append(col_lo.shape[0])
        time.sleep(0.2)
        return phase(col_lo, col_hi)

    for tgt in (float(exact) * (1 + 1e-9), float(exact) * 0.9):
        calls.clear()
        res = prove_bound(milp.model, tgt, phase_bound=slow)
        assert calls == [1, 1] and any("phase bounds off" in n for n in res.notes)  # (the root's, timed twice)
        assert res.bound >= exact * (1 - 1e-12)
        if tgt > exact:
            assert res.complete and res.bound <= exact * (1 + 1e-6)


def test_a_phase_bound_slow_only_on_its_first_call_stays_on(monkeypatch):
    """The root's first phase bound may carry one-time costs: the probe times a second one, so a
    bound slow only once is kept past the root; the proof closes at the exact constant (region
    enumeration). (The cap is raised so that a loaded machine's timing of the second call, 6.8
    LPs once in CI, cannot turn the bounds off; the first call's 0.5 s stays far above it.)"""
    import solvers.bab.milp as proof

    monkeypatch.setattr(proof, "PHASE_COST_CAP", 20.0)
    w, net, lo, hi, nb, milp, box = _setup([2, 6, 6, 2], 0, "linf", "l1")
    exact = np.ldexp(max(_value(w, r, "linf", "l1", None) for r in regions(w, lo, hi)), milp.in_exp + milp.out_exp)
    phase = clarke_node_bound(net, box, nb, milp, ("linf", "l1"), None)
    calls = []

    def first_slow(col_lo, col_hi):
        calls.append(col_lo.shape[0])
        if len(calls) == 1:
            time.sleep(0.5)
        return phase(col_lo, col_hi)

    res = prove_bound(milp.model, float(exact) * (1 + 1e-9), phase_bound=first_slow)
    assert not any("phase bounds off" in n for n in res.notes), res.notes
    assert len(calls) > 2  # (used below the root)
    assert res.complete and exact * (1 - 1e-12) <= res.bound <= exact * (1 + 1e-6)


@pytest.mark.parametrize("batch", [1, 8])
def test_batched_phase_bounds_close_at_the_exact_constant(monkeypatch, batch):
    """Several nodes branched per round (the root's phase bound made to look costly), their
    children's phase bounds from one call: the proof at the exact constant (region enumeration)
    closes and at a target 10% below it proves no less than the constant, as with one node per
    round; batched, the calls do hold more than one branching's two children."""
    monkeypatch.setattr(proof_module, "PHASE_COST_CAP", math.inf)  # kept however loaded the machine
    monkeypatch.setattr(proof_module, "BATCH", 8)
    monkeypatch.setattr(proof_module, "PHASE_BATCH_RATIO", 0.0 if batch > 1 else math.inf)
    p, q = "linf", "l1"
    w, net, lo, hi, nb, milp, box = _setup([2, 8, 8, 2], 9, p, q)
    exact = np.ldexp(max(_value(w, r, p, q, None) for r in regions(w, lo, hi)), milp.in_exp + milp.out_exp)
    phase = clarke_node_bound(net, box, nb, milp, (p, q), None)
    sizes = []

    def spy(col_lo, col_hi):
        sizes.append(col_lo.shape[0])
        return phase(col_lo, col_hi)

    done = prove_bound(milp.model, float(exact) * (1 + 1e-9), phase_bound=spy)
    assert done.complete and exact * (1 - 1e-12) <= done.bound <= exact * (1 + 1e-6)
    assert (max(sizes) == 2) if batch == 1 else (max(sizes) > 2)
    low = prove_bound(milp.model, float(exact) * 0.9, phase_bound=spy, deadline=time.perf_counter() + 30)
    assert low.bound >= exact * (1 - 1e-12)
