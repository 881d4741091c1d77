"""The proof's subtrees on worker processes (`solvers.bab.proof_workers`): the proven bound against
the exact Lipschitz constant by region enumeration (`tests.lipschitz_oracles`, no code shared),
whatever happens to the workers (an error, a death, no fork, the deadline, a stop request), and no
process left behind."""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import certify
import solvers.bab.milp as proof_module
import solvers.bab.proof_workers as workers
from certify.lipschitz.node_bound import clarke_node_bound
from solvers.bab import prove_bound
from solvers.runtime import request_stop, withdraw_stop
from tests.lipschitz_oracles import exact_lipschitz, regions
from tests.test_lipschitz_proof import _setup, _value

P, Q = "linf", "l1"


def case_data():
    """A 2-8-8-2 net's Lipschitz MILP, phase bound and exact constant (in the MILP's units)."""
    w, net, lo, hi, nb, milp, box = _setup([2, 8, 8, 2], 5, P, Q)
    exact = float(np.ldexp(max(_value(w, r, P, Q, None) for r in regions(w, lo, hi)), milp.in_exp + milp.out_exp))
    return milp, clarke_node_bound(net, box, nb, milp, (P, Q), None), exact


@pytest.fixture(scope="module")
def case():
    return case_data()


@pytest.fixture(autouse=True)
def split_early(monkeypatch):
    """Split at the first round (the test nets' proofs take a fraction of a second)."""
    monkeypatch.setattr(proof_module, "PHASE_COST_CAP", math.inf)  # kept however loaded the machine
    monkeypatch.setattr(workers, "SPLIT_AFTER", 0.0)
    monkeypatch.setattr(workers, "SPLIT_LATE", 0.0)
    _EARLIER[:] = _all_children()


_EARLIER: list[int] = []  # children this process had before the test (other tests' helpers)


def _children() -> list[int]:
    """This process's live (unreaped) children started during the test."""
    return [p for p in _all_children() if p not in _EARLIER]


def _all_children() -> list[int]:
    """This process's live (unreaped) children, from /proc."""
    out = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with open(task / "children") as f:
            out += [int(p) for p in f.read().split()]
    return out


def _assert_closed_at(res, exact: float) -> None:
    target = exact * (1 + 1e-9)
    assert res.complete and res.stop == "closed"
    assert exact * (1 - 1e-12) <= res.bound <= target * (1 + 1e-6)


def _proves_the_constant(case, note: str = "worker process") -> None:
    """The proof at the constant closes there, says `note`, and leaves no process behind."""
    milp, phase, exact = case
    res = prove_bound(milp.model, exact * (1 + 1e-9), phase_bound=phase, workers=2)
    _assert_closed_at(res, exact)
    assert any(note in n for n in res.notes)
    assert _children() == []


def test_subtrees_on_workers_close_at_the_exact_constant(case):
    _proves_the_constant(case)


def test_batched_subtrees_on_workers_close_at_the_exact_constant(case, monkeypatch):
    """With batched rounds (the root's phase bound made to look costly), the workers search their
    subtrees in batched rounds too (a subtree searched otherwise fails its worker, which the
    proof's notes would say), and the proof still closes at the exact constant."""
    monkeypatch.setattr(proof_module, "PHASE_BATCH_RATIO", 0.0)
    real = workers.branch_and_bound

    def engine(*args, batch=1, **kw):  # (inherited by the forked workers)
        if not callable(batch) or batch() != proof_module.BATCH:
            raise AssertionError("a subtree searched one node per round")
        return real(*args, batch=batch, **kw)

    monkeypatch.setattr(workers, "branch_and_bound", engine)
    milp, phase, exact = case
    res = prove_bound(milp.model, exact * (1 + 1e-9), phase_bound=phase, workers=2)
    _assert_closed_at(res, exact)
    assert any("worker process" in n for n in res.notes)
    assert not any("failed" in n for n in res.notes), res.notes
    assert _children() == []


def test_workers_only_join_when_available(case):
    """`available` says 1 until the proof has run a while: the second worker starts later, and the
    result is the same."""
    milp, phase, exact = case
    t0 = time.perf_counter()
    res = prove_bound(milp.model, exact * (1 + 1e-9), phase_bound=phase, workers=2,
                      available=lambda: 2 if time.perf_counter() - t0 > 0.05 else 1)
    _assert_closed_at(res, exact)


def test_a_failing_worker_leaves_its_subtrees_to_the_parent(case, monkeypatch):
    parent = os.getpid()
    real = proof_module._MilpProof.fresh

    def broken(self):
        if os.getpid() != parent:
            raise MemoryError("no room for the worker's LP")
        return real(self)

    monkeypatch.setattr(proof_module._MilpProof, "fresh", broken)
    _proves_the_constant(case, "a proof worker failed (MemoryError")


def test_a_worker_dying_inside_a_subtree_does_not_lose_it(case, monkeypatch):
    """A worker killed in the middle of its subtree (os._exit after a few node bounds): the subtree
    is searched again here and the proof still closes at the constant."""
    parent = os.getpid()
    real = proof_module._MilpProof.bound
    calls = [0]

    def dying(self, node):
        if os.getpid() != parent:
            calls[0] += 1
            if calls[0] > 3:
                os._exit(3)
        return real(self, node)

    monkeypatch.setattr(proof_module._MilpProof, "bound", dying)
    _proves_the_constant(case)


def test_no_fork_means_the_parent_proves_everything(case, monkeypatch):
    def no_fork(self, target, args):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(workers.Forked, "__init__", no_fork)
    _proves_the_constant(case, "subtrees on 0 worker process(es)")


def test_the_deadline_stops_the_workers_with_a_sound_bound(case):
    """A target below the constant cannot close: the deadline ends the proof (within its grace),
    the bound is still at least the constant."""
    milp, phase, exact = case
    t0 = time.perf_counter()
    res = prove_bound(milp.model, exact * 0.5, phase_bound=phase, workers=2, deadline=t0 + 0.4)
    assert time.perf_counter() - t0 < 0.4 + workers.JOIN + workers.PROGRESS_EVERY + 0.5
    assert res.bound >= exact * (1 - 1e-12)
    if not res.complete:
        assert res.stop == "time_limit"
    assert _children() == []


def test_a_stop_request_reaches_the_workers(case, monkeypatch):
    """A stop requested in this process (as auto's race stops its losing side) is passed on: the
    workers report their bounds and go, the bound is at least the constant."""
    milp, phase, exact = case
    real = proof_module._MilpProof.bound

    def slow(self, node):  # (a proof that would run for a minute)
        time.sleep(0.02)
        return real(self, node)

    monkeypatch.setattr(proof_module._MilpProof, "bound", slow)
    timer = threading.Timer(0.5, request_stop)
    t0 = time.perf_counter()
    timer.start()
    try:
        res = prove_bound(milp.model, exact * 0.5, phase_bound=phase, workers=2)
    finally:
        timer.cancel()
        withdraw_stop()
    # (sooner than the JOIN + PROGRESS_EVERY after which workers that did not stop are ended)
    assert time.perf_counter() - t0 < 0.5 + workers.JOIN
    assert res.stop == "interrupted" and not res.complete
    assert res.bound >= exact * (1 - 1e-12)
    assert _children() == []


@pytest.mark.parametrize("seed", [3, 4])
def test_local_lipschitz_with_a_parallel_proof_brackets_the_exact_constant(seed):
    """End to end (`method="milp"`, HiGHS, two threads: the proof splits at once): the certified
    interval contains the exact constant and closes to the gap."""
    from tests.lipschitz_oracles import random_weights
    from models.ir import sequential

    w = random_weights([2, 8, 8, 2], seed)
    center, radius = np.array([0.1, -0.2]), 0.7
    exact = exact_lipschitz(w, center - radius, center + radius, P, Q)
    cert = certify.local_lipschitz(sequential(w), center, radius, input_norm=P, output_norm=Q, method="milp",
                                   backend="highs", threads=2)
    assert cert.status == "optimal"
    assert any("subtrees on 2 worker process(es)" in n for n in cert.notes)
    assert cert.lower <= exact * (1 + 1e-9) and exact <= cert.upper * (1 + 1e-12)
    assert cert.upper <= exact * (1 + 1e-4)


_CTRL_C = """
import json, math, sys, time
import numpy as np
import solvers.bab.milp as proof_module
import solvers.bab.proof_workers as workers
from solvers.bab import prove_bound
from solvers.runtime import interruptible
from tests.test_proof_workers import case_data

proof_module.PHASE_COST_CAP = math.inf
workers.SPLIT_AFTER = workers.SPLIT_LATE = 0.0
milp, phase, exact = case_data()
real = proof_module._MilpProof.bound

def slow(self, node):
    time.sleep(0.02)
    return real(self, node)

proof_module._MilpProof.bound = slow
with interruptible():
    print("ready", flush=True)
    res = prove_bound(milp.model, exact * 0.5, phase_bound=phase, workers=2)
print(json.dumps({"bound": res.bound, "exact": exact, "stop": res.stop, "notes": res.notes}), flush=True)
"""


def test_ctrl_c_to_the_process_group_stops_the_workers(tmp_path):
    """A real Ctrl-C (SIGINT to the whole group, as a terminal sends it) while workers search: the
    proof returns "interrupted" with a bound at least the constant, soon, and no worker outlives it."""
    import json
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C], cwd=root, stdout=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.5)  # (the split happens at the first round; workers are searching by now)
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert time.perf_counter() - t0 < workers.JOIN + workers.PROGRESS_EVERY
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["stop"] == "interrupted"
    assert res["bound"] >= res["exact"] * (1 - 1e-12)
    assert any("worker process" in n for n in res["notes"])
    assert not any("failed" in n for n in res["notes"])
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nobody of the group is left
