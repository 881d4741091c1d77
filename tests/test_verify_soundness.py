"""Soundness fuzz: random small nets and random box properties against exact region enumeration.

The oracle (`tests.vnnlib_oracle.exact_max_margin`) computes the exact maximum unsafe margin M* by
one LP per activation region. Every answer must agree with it: `sat` needs M* >= 0 and a witness
that the oracle's own formula evaluator finds unsafe at f(x); `unsat` needs M* < 0; the certified
interval must contain M*. Properties are tuned so that M* lands near 0 (both answers occur).
"""

from __future__ import annotations

import numpy as np
import pytest

from certify.verify import parse_vnnlib, verify
from certify.verify.node_bounds import BatchedSymbolicBounds, SymbolicRowBounds
from models.zoo import random_relu_net
from tests.vnnlib_oracle import disagreements, exact_max_margin

TOL = 1e-6  # LP tolerance of the oracle


def _property(rng, net, n_in, n_out):
    """A random sub-box of [-1, 1]^n and one clause of 1-2 output rows (sometimes an input row),
    with right-hand sides at sampled quantiles so the unsafe set is small or empty."""
    c = rng.uniform(-0.5, 0.5, n_in)
    r = rng.uniform(0.05, 0.5, n_in)
    lo, hi = np.clip(c - r, -1, 1), np.clip(c + r, -1, 1)
    k = int(rng.integers(1, 3))
    H = rng.integers(-1, 2, (k, n_out)).astype(float)
    H[np.all(H == 0, axis=1), 0] = 1.0
    G = np.zeros((k, n_in))
    if rng.random() < 0.3:
        G[0] = rng.integers(-1, 2, n_in)
    X = rng.uniform(lo, hi, (2000, n_in))
    vals = X @ G.T + net.forward(X) @ H.T
    d = np.quantile(vals, rng.uniform(0.0, 0.03), axis=0) + rng.normal(0, 0.02, k)
    d = np.round(d, 6)

    def term(row_g, row_h):
        parts = [f"(* {v:g} X_{i})" for i, v in enumerate(row_g) if v] + [f"(* {v:g} Y_{j})" for j, v in enumerate(row_h) if v]
        return parts[0] if len(parts) == 1 else "(+ " + " ".join(parts) + ")"

    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(n_in))
    text += "".join(f"(declare-const Y_{j} Real)\n" for j in range(n_out))
    text += "".join(f"(assert (>= X_{i} {float(lo[i])!r}))\n(assert (<= X_{i} {float(hi[i])!r}))\n" for i in range(n_in))
    text += "(assert (and " + " ".join(f"(<= {term(G[i], H[i])} {float(d[i])!r})" for i in range(k)) + "))\n"
    return text, lo, hi, G, H, d


def _check_case(seed: int, sizes: tuple[int, ...], per_box: bool = False) -> str:
    rng = np.random.default_rng(seed)
    net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
    text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
    exact, regions = exact_max_margin(net, lo, hi, G, H, d)
    bounder = SymbolicRowBounds(net) if per_box else None
    res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, bounder=bounder, attack_seconds=0.0 if per_box else None)
    assert regions >= 1
    why = disagreements(res, exact, text, net, lo, hi, TOL)
    assert not why, why
    return res.result


@pytest.mark.parametrize("sizes", [(2, 6, 6, 2), (3, 5, 4, 2), (2, 8, 1), (1, 4, 4, 1)])
def test_random_nets_and_properties_agree_with_region_enumeration(sizes):
    outcomes = [_check_case(seed, sizes) for seed in range(6)]
    assert set(outcomes) <= {"sat", "unsat"}, outcomes  # tiny nets are always decided


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [(2, 10, 10, 3), (4, 8, 8, 2), (3, 6, 6, 6, 2)])
def test_more_random_nets_agree_with_region_enumeration(sizes):
    outcomes = [_check_case(100 + seed, sizes) for seed in range(15)]
    assert "sat" in outcomes and "unsat" in outcomes


def test_per_box_bounder_plugs_into_the_search():
    """The pluggable node bounder: `solvers.bounds.network_bounds` per box (no split hints: the
    search's gradient rule decides) gives answers that agree with the oracle too."""
    outcomes = [_check_case(seed, (2, 6, 6, 2), per_box=True) for seed in range(6)]
    assert set(outcomes) == {"sat", "unsat"}, outcomes


def test_fuzz_exercises_both_answers():
    outcomes = [_check_case(seed, (2, 6, 6, 2)) for seed in range(6, 18)]
    assert "sat" in outcomes and "unsat" in outcomes, outcomes


@pytest.mark.parametrize("seed", range(4))
def test_batched_bounds_equal_per_box_bounds_and_hold_on_samples(seed):
    """The batched bounder is the per-box symbolic bounds vectorised: same values at the root,
    and sound (never above a sampled row value) on random sub-boxes with inherited bounds."""
    rng = np.random.default_rng(seed)
    net = random_relu_net((3, 12, 12, 12, 3), seed=seed, bias_scale=0.2)
    text, lo, hi, *_ = _property(rng, net, 3, 3)
    region = parse_vnnlib(text).regions()[0]
    batched, single = BatchedSymbolicBounds(net), SymbolicRowBounds(net)
    root = batched(region, lo[None], hi[None])
    ref = single(region, lo[None], hi[None])
    np.testing.assert_allclose(root.margin_upper, ref.margin_upper, rtol=1e-9, atol=1e-12)
    # children of the root with the root's state: bounds still hold on sampled points
    mids = rng.uniform(lo, hi, (8, 3))
    los = np.where(rng.random((8, 3)) < 0.5, lo, mids)
    his = np.where(los == lo, mids, hi)
    kids = batched(region, los, his, [root.states[0]] * 8)
    clause = region.clauses[0]
    for b in range(8):
        X = rng.uniform(los[b], his[b], (500, 3))
        margins = clause.margin(X, net.forward(X))
        assert np.all(margins <= kids.margin_upper[b, 0])
        assert kids.margin_upper[b, 0] <= root.margin_upper[0, 0] + 1e-12 or not kids.infeasible[b, 0]
