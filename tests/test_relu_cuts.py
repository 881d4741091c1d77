"""The ideal ReLU cuts (`solvers.lp.relu_cuts`) and the cut finisher of the ReLU-split search.

Oracles: true network points (sampled inputs and box corners, the encoding's variables filled in
from the forward pass), the exact maximum of each cut's left side over the big-M MILP (scipy's
HiGHS MILP, integrality kept), the split-restricted MILP of `tests.test_relu_split.milp_max`
(its own interval bounds and encoding), and exact region enumeration for the verdicts."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import Bounds as LinBounds
from scipy.optimize import LinearConstraint, milp

import certify.verify.relu_split as relu_split
from certify.verify.relu_lp import clause_lp_bound
from certify.verify.spec import LinearRows
from models.ir import Affine
from models.zoo import random_relu_net
from solvers.bounds import BoundOptions, bound_boxes, relu_blocks
from solvers.lp import MilpBuilder, SafeLp, encode_relu_network
from solvers.lp.relu_cuts import neuron_cuts
from tests.test_relu_split import _case, _node_bounds, _verdict, milp_max

TOL = 1e-7


def _encoded(seed, sizes=(4, 8, 8, 2)):
    rng = np.random.default_rng(seed)
    net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
    blocks = relu_blocks(net)
    c = rng.uniform(-0.5, 0.5, sizes[0])
    lo, hi = c - rng.uniform(0.1, 0.8, sizes[0]), c + rng.uniform(0.1, 0.8, sizes[0])
    nb = bound_boxes(blocks, lo[None], hi[None], BoundOptions())
    pl, ph = [l[0] for l in nb.pre_lo], [u[0] for u in nb.pre_hi]
    b = MilpBuilder()
    enc = encode_relu_network(b, blocks, lo, hi, pl, ph, relaxation="bigm")
    model = b.build()
    return rng, net, blocks, lo, hi, pl, ph, enc, model


def _point(net, enc, model, x):
    """The encoding's variables at the network's true evaluation at x."""
    v = np.zeros(model.num_vars)
    v[enc.x] = x
    a = x
    for j, (layer, d) in enumerate(zip([L for L in net.layers if isinstance(L, Affine)][:-1], enc.delta)):
        z = layer.weight @ a + layer.bias
        a = np.maximum(z, 0.0)
        for k in np.flatnonzero(d >= 0):
            v[d[k]] = float(z[k] > 0)
            v[enc.post[j].coef[k].indices[0]] = a[k]
    return v


def _cuts_at_random_points(rng, blocks, lo, hi, pl, ph, enc, model, count=12):
    """Cuts separated at random points of the LP box (fractional binaries): validity must not
    depend on where a cut was separated."""
    vmax = np.maximum(np.abs(model.col_lo), np.abs(model.col_hi))
    rows, rhs = [], []
    for _ in range(count):
        v = rng.uniform(model.col_lo, model.col_hi)
        cut = neuron_cuts(enc, blocks, lo, hi, pl, ph, v, vmax)
        if cut is not None:
            rows.append(cut[0].toarray())
            rhs.append(cut[1])
    return (np.vstack(rows), np.concatenate(rhs)) if rows else (np.zeros((0, model.num_vars)), np.zeros(0))


@pytest.mark.parametrize("seed", range(6))
def test_every_cut_holds_at_true_network_points(seed):
    rng, net, blocks, lo, hi, pl, ph, enc, model = _encoded(seed)
    R, r = _cuts_at_random_points(rng, blocks, lo, hi, pl, ph, enc, model)
    assert R.shape[0] > 0  # random points violate some cut
    corners = np.array(list(itertools.product(*zip(lo, hi))))
    X = np.vstack([corners, rng.uniform(lo, hi, (3000, lo.size))])
    V = np.array([_point(net, enc, model, x) for x in X])
    assert np.all(V @ R.T <= r + 1e-12), float((V @ R.T - r).max())


@pytest.mark.parametrize("seed", range(4))
def test_every_cut_holds_at_the_exact_milp_maximum_of_its_left_side(seed):
    """max over the big-M MILP (integrality kept, scipy's solver) of each cut's left side is at
    most its right side."""
    rng, net, blocks, lo, hi, pl, ph, enc, model = _encoded(seed, sizes=(3, 6, 6, 2))
    R, r = _cuts_at_random_points(rng, blocks, lo, hi, pl, ph, enc, model, count=4)
    A = model.A.toarray()
    cons = LinearConstraint(A, model.row_lo, model.row_hi)
    for row, rhs in list(zip(R, r))[:25]:
        res = milp(-row, constraints=cons, integrality=model.integer.astype(int),
                   bounds=LinBounds(model.col_lo, model.col_hi), options={"mip_rel_gap": 0.0})
        assert res.status == 0, res.message
        assert -res.fun <= rhs + 1e-7 * (1 + abs(rhs)), (-res.fun, rhs)


def _bounds_with_and_without_cuts(seed):
    """(exact split-restricted maximum, plain LP bound, bound with cuts, the LP's x) of a random
    row over a random split node, or None when the node is empty."""
    rng, net, blocks, lo, hi, split = _case(seed, n_in=5, hidden=(12, 10), p_split=0.2)
    node = _node_bounds(blocks, lo, hi, split)
    if node is None:
        return None
    _, pl, ph = node
    pl, ph = [l[0] for l in pl], [u[0] for u in ph]
    H = rng.normal(size=(1, 3))
    rows = LinearRows(np.zeros((1, lo.size)), H, np.array([0.0]), np.zeros(1, dtype=bool))
    exact = milp_max(net, lo, hi, split, -H[0], np.zeros(lo.size))
    plain, _ = clause_lp_bound(blocks, lo, hi, pl, ph, split, rows)
    cut, x = clause_lp_bound(blocks, lo, hi, pl, ph, split, rows, cut_rounds=10)
    return exact, plain, cut, x, lo, hi


@pytest.mark.parametrize("seed", range(8))
def test_cut_rounds_bound_between_the_split_milp_and_the_lp(seed):
    """With cuts the clause bound stays above the exact split-restricted maximum (an independent
    MILP) and never above the plain LP's."""
    case = _bounds_with_and_without_cuts(seed)
    if case is None:
        return
    exact, plain, cut, x, lo, hi = case
    assert cut >= exact - TOL * (1 + abs(exact))
    assert cut <= plain + 1e-9 * (1 + abs(plain))
    assert x is None or (np.all(x >= lo) and np.all(x <= hi))


def test_cuts_tighten_some_node():
    gains = [c[1] - c[2] for c in map(_bounds_with_and_without_cuts, range(8)) if c is not None]
    assert max(gains) > 1e-3, gains


def test_the_lp_with_cuts_stays_a_relaxation_of_the_encoding():
    """Adding the cuts to the LP never cuts off the true maximiser: its bound stays above the
    best sampled network value of the objective."""
    rng, net, blocks, lo, hi, pl, ph, enc, model = _encoded(3, sizes=(4, 10, 10, 2))
    vmax = np.maximum(np.abs(model.col_lo), np.abs(model.col_hi))
    obj = enc.output.widened(model.num_vars)[[0]].toarray().ravel()
    lp = SafeLp(model)
    for _ in range(6):
        out = lp.maximize(obj, float(enc.output.const[0]))
        cut = neuron_cuts(enc, blocks, lo, hi, pl, ph, out.x, vmax)
        if cut is None:
            break
        lp.add_rows(cut[0], np.full(cut[1].size, -np.inf), cut[1])
    best = lp.maximize(obj, float(enc.output.const[0])).bound
    X = rng.uniform(lo, hi, (20000, lo.size))
    assert best >= float(net.forward(X)[:, 0].max()) - 1e-9


@pytest.mark.parametrize("sizes", [(3, 8, 8, 2), (4, 10, 6, 3), (2, 6, 6, 6, 2)])
def test_verdicts_hold_with_the_cut_finisher_on_every_node(monkeypatch, sizes):
    """The finisher tried on every node about to be split: verdicts and sound bounds still agree
    with exact region enumeration, and it does run."""
    monkeypatch.setattr(relu_split.ReluSplitSearch, "_worth_cutting", lambda self, bound: True)
    searches = []
    init = relu_split.ReluSplitSearch.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        searches.append(self)

    monkeypatch.setattr(relu_split.ReluSplitSearch, "__init__", record)
    for seed in range(8):
        _verdict(seed, sizes)
    assert sum(s.cut_tries for s in searches) > 0


def _policy(**state):
    base = dict(cut_share=relu_split.CUT_SHARE, cut_tries=0, cut_closed=0, cut_seconds=0.0, cut_drops=[],
                level_drop=0.01, node_seconds=0.05, _started=time.perf_counter() - 100.0)
    return SimpleNamespace(**{**base, **state})


def test_the_finisher_is_tried_where_it_should_close_a_costly_subtree():
    worth = relu_split.ReluSplitSearch._worth_cutting
    assert worth(_policy(), 5.0)  # calibration: the first try whatever the bound
    done = dict(cut_tries=10, cut_closed=9, cut_seconds=5.0, cut_drops=[0.02, 0.05])
    assert not worth(_policy(**done), 0.06)  # above every drop the cuts achieved: would not close
    assert worth(_policy(**done), 0.04)  # 4^4 nodes of branching at 0.05 s: 12.8 s against 0.5 s a try
    assert not worth(_policy(**done, level_drop=0.1), 0.04)  # branching closes it in a level or two
    # over its share of the time (90% times its closing rate: 10 of 12 tries here)
    assert not worth(_policy(**done, _started=time.perf_counter() - 5.0), 0.04)
    failing = dict(cut_tries=40, cut_closed=0, cut_seconds=10.0, cut_drops=[0.05])
    assert not worth(_policy(**failing), 0.04)  # a finisher that never closes gets ~2% of 100 s
