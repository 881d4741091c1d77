"""Node bounds on two cores (`solvers.bab.bound_worker`): the worker's bounds are used as they are,
its lower bounds never; a worker that fails or hangs costs only its nodes' time. In the Lipschitz
tree the interval still contains the exact constant (activation-region enumeration, an
independent oracle) whether half of the nodes are bounded on the second core or not."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from certify.lipschitz import bab
from certify.lipschitz.options import NormQuestion
from certify.lipschitz.witness import WitnessSearch
from models.box import Box
from models.ir import sequential
from solvers.bab.bound_worker import JOIN, BoundWorker
from solvers.bab.engine import NodeBound
from solvers.runtime import Budget
from tests.lipschitz_oracles import exact_lipschitz, random_weights

FORKS = hasattr(os, "fork")  # a BoundWorker forks wherever it can
FORK = BoundWorker.possible()  # ... and the tree starts one only where a helper may take another core


def _bound(nodes):
    """Node bounds that say which process computed them (and claim a lower bound)."""
    return [NodeBound(float(n), lower=float(n), data=os.getpid()) for n in nodes]


def test_half_of_a_batch_is_bounded_in_the_worker_without_its_lower_bounds():
    shared = []
    worker = BoundWorker(_bound, lambda: ("witness", os.getpid()), shared.append, time.perf_counter() + 30)
    try:
        out = worker.bound_many([1, 2, 3, 4, 5], _bound)
    finally:
        worker.close()
    assert [nb.upper for nb in out] == [1.0, 2.0, 3.0, 4.0, 5.0]  # in order, each its own node's
    here = [nb.data == os.getpid() for nb in out]
    if not FORKS:
        assert all(here) and worker.failure == "fork failed"
        return
    assert here == [True, True, False, False, False]
    assert [nb.lower for nb in out[2:]] == [-math.inf] * 3  # the worker's lower bounds are dropped
    assert [nb.lower for nb in out[:2]] == [1.0, 2.0]
    assert shared and shared[0][0] == "witness" and shared[0][1] != os.getpid()
    assert worker.nodes == 3 and worker.failure == "closed"


def _failing(nodes):
    raise RuntimeError("bound failed in the worker")


def test_a_failing_worker_hands_its_nodes_back_and_gets_no_more():
    worker = BoundWorker(_failing, lambda: None, lambda x: None, time.perf_counter() + 30)
    try:
        first = worker.bound_many([1, 2, 3, 4], _bound)
        assert [nb.upper for nb in first] == [1.0, 2.0, 3.0, 4.0]
        assert all(nb.data == os.getpid() for nb in first)
        assert not worker.alive
        if FORKS:
            assert "bound failed in the worker" in worker.failure
        again = worker.bound_many([5, 6], _bound)
        assert [nb.data for nb in again] == [os.getpid()] * 2
    finally:
        worker.close()


def _hanging(nodes):
    time.sleep(60)
    return _bound(nodes)


def test_a_hanging_worker_is_given_up_shortly_after_the_deadline():
    deadline = time.perf_counter() + 0.5
    worker = BoundWorker(_hanging, lambda: None, lambda x: None, deadline)
    try:
        t = time.perf_counter()
        out = worker.bound_many([1, 2], _bound)
        waited = time.perf_counter() - t
    finally:
        worker.close()
    assert [nb.upper for nb in out] == [1.0, 2.0] and all(nb.data == os.getpid() for nb in out)
    assert not worker.alive
    assert waited <= 0.5 + JOIN + 2.0  # (a loaded machine: a loose margin)
    if FORKS:
        assert worker.failure == "late past the deadline"


@pytest.mark.parametrize("sizes, seed, fail", [([12, 7, 7, 2], 5, False), ([12, 7, 7, 2], 5, True),
                                               ([3, 6, 5, 3], 11, False), ([14, 7, 6, 5], 2, False)])
def test_the_tree_on_two_cores_contains_the_exact_constant(monkeypatch, sizes, seed, fail):
    """Phase splits (12 inputs) and input splits (3): the interval holds the region-enumeration
    value with the worker bounding nodes, and also when it fails at its first batch; with 14
    inputs and 5 outputs the output functionals are bounded one by one, the children capped by
    their parents' bounds (`clarke_functional_bounds(caps=)`)."""
    monkeypatch.setattr(bab, "FORK_AFTER", 0.0)
    if fail:
        monkeypatch.setattr(bab.LipschitzBab, "_bound_in_worker", lambda self, nodes: _failing(nodes))
    w = random_weights(sizes, seed)
    lo, hi = np.zeros(sizes[0]), np.full(sizes[0], 0.6)
    true = exact_lipschitz(w, lo, hi, "linf", "l1")
    net = sequential(w)
    box = Box.from_bounds(lo, hi)
    question = NormQuestion.of(net, "linf", "l1")
    budget = Budget(60.0)
    search = WitnessSearch(net, box, question, budget)
    search.sample()
    out = bab.lipschitz_bab(net, box, question, search, budget)
    assert out.lower <= true * (1 + 1e-9) + 1e-12 <= out.upper * (1 + 1e-9) + 2e-12
    assert out.stop in ("closed", "gap") and out.upper <= true * (1 + 2e-6) + 1e-12
    if not FORK:
        assert out.worker_nodes == 0
    elif fail:
        assert out.worker_nodes == 0 and "bound failed in the worker" in out.worker_failure
    else:
        assert out.worker_nodes > 0 and out.worker_failure is None


def test_ctrl_c_to_the_process_group_during_a_two_core_tree(tmp_path):
    """`certify lipschitz --method bab` on a 30-input net (phase splits, nodes bounded on both
    cores), SIGINT to the whole group mid-tree: exit 130 within about a second, one JSON result
    whose interval holds the Jacobian norms sampled here (lower bounds of the constant), and no
    process of the group left."""
    import json
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from tests.lipschitz_oracles import jacobian, write_onnx

    w = random_weights([30, 40, 40, 5], 2)
    path = write_onnx(w, tmp_path / "net.onnx")
    centre = np.full(30, 0.5)
    root = Path(__file__).resolve().parents[1]
    script = Path(sys.executable).parent / "certify"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "certify.cli"]
    proc = subprocess.Popen(cmd + ["lipschitz", path, "--center", ",".join(["0.5"] * 30), "--radius", "0.3",
                                   "--method", "bab", "--time-limit", "120", "--json"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(6.0)
        assert proc.poll() is None, proc.communicate()
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        after = time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    assert after <= 2.5 and "Traceback" not in err, (after, err[-2000:])
    res = json.loads(out)
    assert res["status"] == "interrupted"
    if FORK:
        assert any("computed on a second core" in n for n in res["notes"]), res["notes"]
    sampled = 0.0  # ||J||_{linf -> l1} >= ||J^T s||_1 for every sign vector s, at every sampled point
    signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * 5)).reshape(5, -1).T
    for x in np.random.default_rng(0).uniform(centre - 0.3, centre + 0.3, (300, 30)):
        pattern, h = [], x
        for W, b in w[:-1]:
            z = W @ h + b
            pattern.append((z > 0).astype(float))
            h = np.maximum(z, 0.0)
        sampled = max(sampled, float(np.abs(jacobian(w, pattern).T @ signs.T).sum(axis=0).max()))
    assert res["lower"] <= res["upper"] and sampled <= res["upper"] * (1 + 1e-9)
    time.sleep(0.3)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nobody of the group is left
