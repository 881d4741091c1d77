"""A layer's LPs shared with a forked worker (`solvers.bounds.lp.share_neurons`, `LayerLps.tighten(
workers=2)`): the bounds are those of one process, sound for sampled points (the oracle: forward
passes of 40,000 points of the box), and a worker that fails or dies leaves its neurons to the
parent."""

from __future__ import annotations

import os

import numpy as np
import pytest

import solvers.bounds.lp as lp_mod
import solvers.runtime as rt
from models.ir import sequential
from solvers.bounds import network_bounds, relu_blocks
from solvers.bounds.lp import LayerLps
from solvers.runtime import forkable_cores
from tests.lipschitz_oracles import random_weights

pytestmark = pytest.mark.skipif(forkable_cores() < 2, reason="needs fork and two cores")


def _case(seed: int = 0):
    w = random_weights([8, 40, 40, 40, 3], seed)
    rng = np.random.default_rng(seed)
    center = rng.uniform(-0.5, 0.5, 8)
    lo, hi = center - 0.5, center + 0.5
    net = sequential(w)
    root = network_bounds(net, lo, hi, "symbolic")
    X = rng.uniform(lo, hi, (40000, 8))
    zs, h = [], X
    for W, b in w[:-1]:
        zs.append(h @ W.T + b)
        h = np.maximum(zs[-1], 0.0)
    return net, lo, hi, root, zs


def _layers(net, lo, hi, root, workers: int, cut_rounds: int = 0):
    """Every ReLU layer after the first tightened in order; (bounds per layer, LPs per layer)."""
    blocks = relu_blocks(net)
    pre_lo, pre_hi = [a.copy() for a in root.pre_lo], [a.copy() for a in root.pre_hi]
    lps = LayerLps(blocks, lo, hi, cut_rounds)
    counts = []
    for j in range(1, len(blocks) - 1):
        l, u, n = lps.tighten(pre_lo[: j + 1], pre_hi[: j + 1], j, workers=workers)
        pre_lo[j], pre_hi[j] = l, u
        counts.append(n)
    return pre_lo, pre_hi, counts


class _CountForks:
    def __init__(self, monkeypatch):
        monkeypatch.setattr(lp_mod, "SHARE_SECONDS", 0.0)  # (this small net's LPs take milliseconds)
        monkeypatch.setattr(lp_mod, "may_fork_helpers", lambda: True)  # (whatever ran before in this process)
        self.n = 0
        counter = self

        class Counted(rt.Forked):
            def __init__(self, *a, **k):
                counter.n += 1
                super().__init__(*a, **k)

        monkeypatch.setattr(rt, "Forked", Counted)  # (the worker is a `runtime.ReportingWorker`)


@pytest.mark.parametrize("cut_rounds", [0, 1])
def test_shared_layer_lps_bound_like_one_process_and_hold_every_sampled_point(monkeypatch, cut_rounds):
    net, lo, hi, root, zs = _case(cut_rounds)
    forks = _CountForks(monkeypatch)
    one = _layers(net, lo, hi, root, workers=1, cut_rounds=cut_rounds)
    assert forks.n == 0
    two = _layers(net, lo, hi, root, workers=2, cut_rounds=cut_rounds)
    assert forks.n >= 1, "no layer had enough unstable neurons to share: the case does not test sharing"
    assert two[2] == one[2]  # the worker's LPs are counted
    for j in range(1, len(zs)):
        assert np.allclose(two[0][j], one[0][j], rtol=1e-6, atol=1e-8)
        assert np.allclose(two[1][j], one[1][j], rtol=1e-6, atol=1e-8)
        z = zs[j]
        tol = 1e-9 * (1 + np.abs(z).max())
        assert np.all(z >= two[0][j] - tol) and np.all(z <= two[1][j] + tol)
        # tighter than the symbolic bounds they started from somewhere (the LPs did work)
    assert any(np.any(two[1][j] < root.pre_hi[j] - 1e-9) for j in range(1, len(zs)))


@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_failed_worker_leaves_its_neurons_to_the_parent(monkeypatch, how):
    net, lo, hi, root, _ = _case(2)
    one = _layers(net, lo, hi, root, workers=1)
    parent, real = os.getpid(), lp_mod.SafeLp

    def safe_lp(model):
        if os.getpid() != parent:  # in the worker
            if how == "dies":
                os._exit(3)
            raise RuntimeError("worker LP refused")
        return real(model)

    monkeypatch.setattr(lp_mod, "SafeLp", safe_lp)
    forks = _CountForks(monkeypatch)
    two = _layers(net, lo, hi, root, workers=2)
    assert forks.n >= 1
    for j in range(1, len(one[0])):
        assert np.allclose(two[0][j], one[0][j], rtol=1e-6, atol=1e-8)
        assert np.allclose(two[1][j], one[1][j], rtol=1e-6, atol=1e-8)


def test_no_fork_inside_a_forked_worker(monkeypatch):
    net, lo, hi, root, _ = _case(3)
    forks = _CountForks(monkeypatch)
    monkeypatch.setattr(lp_mod, "may_fork_helpers", lambda: False)  # (a worker: `pool_worker` ran)
    _layers(net, lo, hi, root, workers=2)
    assert forks.n == 0


def _may_fork(index, item):  # (a batch task: runs in the pool's spawned workers)
    from solvers.runtime import may_fork_helpers

    return {"may_fork": may_fork_helpers()}


def test_batch_pool_workers_fork_no_helpers(tmp_path):
    """A batch's pool workers share the machine: their LP stages stay in one process each."""
    from certify.batch import run_batch
    from solvers.runtime import may_fork_helpers

    assert may_fork_helpers()  # (this process may: the pytest worker is not marked)
    rows = run_batch(_may_fork, [0, 1], workers=2, progress=False)
    assert [r["may_fork"] for r in sorted(rows, key=lambda r: r["index"])] == [False, False]


def test_no_helpers_while_another_process_has_the_cores():
    from solvers.runtime import cores_taken, may_fork_helpers

    assert may_fork_helpers()
    with cores_taken():
        assert not may_fork_helpers()
        with cores_taken():
            assert not may_fork_helpers()
        assert not may_fork_helpers()
    assert may_fork_helpers()


def test_an_error_here_ends_the_worker(monkeypatch):
    """This process's half raising (e.g. out of memory) still ends and reaps the worker."""
    forks = _CountForks(monkeypatch)
    ended = []
    parent = os.getpid()

    def run(neurons):
        if os.getpid() == parent:
            raise MemoryError("no room here")
        return [(int(i), 0.0, 1.0) for i in neurons]

    class Fresh:
        solves = 0

    real = rt.Forked.end
    monkeypatch.setattr(rt.Forked, "end", lambda self: (ended.append(self.pid), real(self))[1])
    with pytest.raises(MemoryError):
        lp_mod.share_neurons(np.arange(10), run, lambda: Fresh(), 2, None)
    assert forks.n == 1 and len(ended) == 1
