"""auto's race (`certify.lipschitz.race`): the MILP in a forked child against the region stage and
the tree in this process. Oracle: the exact constant by brute-force region enumeration
(`tests.lipschitz_oracles.exact_lipschitz`); every raced interval must bracket it, and equal it when
closed. Which side wins is made deterministic by crippling the other one (monkeypatched before the
fork, so the child inherits the patch): a crippled side waits for the stop request or the deadline
and then gives the fast bound only. The child must be gone after every return and exception."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import certify
from certify.lipschitz import local
from certify.lipschitz.race import CHILD_DELAY, race_possible
from models.ir import sequential
from solvers.runtime import forkable_cores, interrupted, past
from tests.lipschitz_oracles import exact_lipschitz, random_weights

pytestmark = pytest.mark.skipif(not race_possible(cores=1), reason="the race needs fork (Linux)")

ROOT = Path(__file__).resolve().parents[1]
# 2 inputs, 20 unstable ReLUs (> AUTO_REGIONS_BEFORE_BAB: the race runs), closes in well under a second
W = random_weights([2, 20, 2], 1)
LO, HI = np.full(2, -1.0), np.full(2, 1.0)


@pytest.fixture(scope="module")
def exact() -> float:
    return exact_lipschitz(W, LO, HI, "linf", "l1")


def _brackets(cert, exact: float) -> bool:
    return cert.lower <= exact * (1 + 1e-9) and exact <= cert.upper * (1 + 1e-9)


def _cripple_tree(monkeypatch) -> None:
    """The parent's side does nothing until stopped (or the deadline), then gives the fast bound."""
    real = local.bab_certificate

    def idle(net, box, question, opts, nb, search, budget, fast, live, method):
        while not past(budget.deadline):
            time.sleep(0.01)
        return real(net, box, question, opts, nb, search, budget, fast, live, "bounds")

    monkeypatch.setattr(local, "bab_certificate", idle)
    monkeypatch.setattr(local, "region_stage", lambda *a: (None, a[-1]))


def _cripple_milp(monkeypatch, how: str = "idle") -> None:
    """The child's MILP never gets built: it waits (idle), exits (exit) or runs out of memory."""
    def plan(net, nb, question, opts, budget):
        if how == "exit":
            os._exit(3)
        if how == "memory":
            raise MemoryError("no room for the MILP")
        while not past(budget.deadline):
            time.sleep(0.01)
        raise local._NoTime

    monkeypatch.setattr(local, "_plan", plan)


def _no_children() -> bool:
    return multiprocessing.active_children() == []


def test_raced_interval_is_exact_and_names_the_winner(exact):
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=60, race="on")
    assert cert.race and cert.race["winner"] in ("bab", "milp"), cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact), (cert, exact)
    assert cert.upper <= exact * (1 + 2e-6)
    assert _no_children() and not interrupted()
    assert any(n.startswith("race: the ") for n in cert.notes)


def test_race_off_keeps_the_rule(exact):
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=60, race="off")
    assert not cert.race and cert.method == "bab" and _brackets(cert, exact)


def test_milp_side_wins_when_the_tree_is_crippled(monkeypatch, exact):
    _cripple_tree(monkeypatch)
    t = time.perf_counter()
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=30, race="on")
    assert time.perf_counter() - t < 25  # the parent's side was stopped, not left to the deadline
    assert cert.race["winner"] == "milp" and cert.method == "milp", cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact)
    assert _no_children()
    assert not interrupted()  # the race's own stop request is withdrawn


def test_tree_side_wins_when_the_milp_is_crippled(monkeypatch, exact):
    _cripple_milp(monkeypatch)
    t = time.perf_counter()
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=30, race="on")
    assert time.perf_counter() - t < 25  # the child was ended, not waited for
    assert cert.race["winner"] == "bab" and cert.method == "bab", cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact)
    assert _no_children()


def test_the_parent_side_forks_no_lp_helpers_while_the_child_runs(monkeypatch, exact):
    """The child's MILP has the other core: the parent's side may not fork LP helpers meanwhile
    (`solvers.runtime.cores_taken`); after the race it may again."""
    from solvers.runtime import may_fork_helpers

    seen = []
    real = local.bab_certificate

    def spy(*a, **k):
        seen.append(may_fork_helpers())
        return real(*a, **k)

    monkeypatch.setattr(local, "bab_certificate", spy)
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=30, race="on")
    assert _brackets(cert, exact)
    assert seen == [False], cert.notes
    assert may_fork_helpers() == (forkable_cores() >= 2)


@pytest.mark.parametrize("how, said", [("exit", "exit code 3"), ("memory", "MemoryError")])
def test_a_dead_child_costs_only_its_side(monkeypatch, exact, how, said):
    _cripple_milp(monkeypatch, how)
    real = local.bab_certificate

    def late(*a):  # the tree starts after the child (CHILD_DELAY) has died
        time.sleep(CHILD_DELAY + 1.0)
        return real(*a)

    monkeypatch.setattr(local, "bab_certificate", late)
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=30, race="on")
    assert cert.status == "optimal" and _brackets(cert, exact)
    assert cert.race["child_error"] and said in cert.race["child_error"]
    assert any(said in n for n in cert.notes), cert.notes
    assert _no_children()


def test_deadline_gives_the_combined_sound_interval(monkeypatch, exact):
    _cripple_tree(monkeypatch)
    _cripple_milp(monkeypatch)
    t = time.perf_counter()
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=1.5, race="on")
    assert time.perf_counter() - t < 1.5 + 1.2
    assert cert.status == "time_limit" and _brackets(cert, exact)
    assert cert.race["winner"] is None
    assert _no_children() and not interrupted()


def test_an_exception_in_the_parent_ends_the_child(monkeypatch):
    _cripple_milp(monkeypatch)

    def boom(*a, **k):
        raise RuntimeError("parent side failed")

    monkeypatch.setattr(local, "bab_certificate", boom)
    with pytest.raises(RuntimeError, match="parent side failed"):
        certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=30, race="on")
    assert _no_children()


CTRL_C = textwrap.dedent("""
    import json, multiprocessing, sys, time
    import numpy as np
    import certify
    from certify.lipschitz import local
    from models.ir import sequential
    from solvers.runtime import past
    from tests.lipschitz_oracles import random_weights
    from tests.test_lipschitz_race import W

    real = local.bab_certificate
    def idle(net, box, question, opts, nb, search, budget, fast, live, method):
        while not past(budget.deadline):
            time.sleep(0.01)
        return real(net, box, question, opts, nb, search, budget, fast, live, "bounds")
    def plan(net, nb, question, opts, budget):
        while not past(budget.deadline):
            time.sleep(0.01)
        raise local._NoTime
    local.bab_certificate, local._plan = idle, plan
    local.region_stage = lambda *a: (None, a[-1])
    print("ready", flush=True)
    t = time.perf_counter()
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=60, race="on")
    print(json.dumps({"status": cert.status, "lower": cert.lower, "upper": cert.upper, "wall": time.perf_counter() - t,
                      "children": len(multiprocessing.active_children())}), flush=True)
""")


def test_ctrl_c_stops_both_sides_with_a_sound_interval(exact):
    """SIGINT to the whole process group (a terminal's Ctrl-C reaches both processes)."""
    import json

    proc = subprocess.Popen([sys.executable, "-c", CTRL_C], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(2.0)  # bounds, sampling and the fork done; both sides idle
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    r = json.loads(out.strip().splitlines()[-1])
    assert r["status"] == "interrupted" and r["children"] == 0
    assert r["lower"] <= exact * (1 + 1e-9) <= r["upper"] * (1 + 1e-9) * (1 + 1e-9)
    assert r["wall"] < 20


def test_a_killed_parent_leaves_no_orphan():
    """SIGKILL to the parent (no clean-up runs): the kernel ends the child (PR_SET_PDEATHSIG)."""
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)
    children: list[int] = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        end = time.time() + 15
        while not children and time.time() < end:
            time.sleep(0.2)
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
                children = [int(c) for c in fh.read().split()]
        assert children, "the race's child never started"
        proc.kill()
        proc.wait(10)
        end = time.time() + 5
        while time.time() < end and any(_alive(c) for c in children):
            time.sleep(0.05)
        assert not any(_alive(c) for c in children)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for c in children:  # (only when the test failed: the child of this very test)
            if _alive(c):
                os.kill(c, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """A running process (a zombie left to init counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# 10 inputs (more than AUTO_BAB_INPUTS: the MILP's box) and a few unstable ReLUs (the region stage
# goes first): the question `race="auto"` races
W10 = random_weights([10, 6, 6, 2], 4)
C10, R10 = np.full(10, 0.1), 0.3


@pytest.fixture(scope="module")
def exact10() -> float:
    return exact_lipschitz(W10, C10 - R10, C10 + R10, "linf", "l1")


def test_auto_races_where_the_region_stage_goes_before_the_milp():
    """One hidden layer, 10 inputs, a few unstable ReLUs: the region stage goes first and races the
    MILP; with two hidden layers (W10) the tree races it instead."""
    if not race_possible():
        pytest.skip("one core: auto keeps its rule")
    W = random_weights([10, 12, 2], 4)
    exact = exact_lipschitz(W, C10 - R10, C10 + R10, "linf", "l1")
    cert = certify.local_lipschitz(sequential(W), C10, R10, time_limit=60)
    assert 0 < cert.unstable <= 16
    assert cert.race and cert.race["parent"] == "regions" and cert.race["winner"] in ("regions", "milp"), cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact) and cert.upper <= exact * (1 + 2e-6)
    assert _no_children()


def test_auto_races_the_tree_against_the_milp_on_nets_with_two_hidden_layers(exact10):
    if not race_possible():
        pytest.skip("one core: auto keeps its rule")
    cert = certify.local_lipschitz(sequential(W10), C10, R10, time_limit=60)
    assert 0 < cert.unstable <= 16
    assert cert.race and cert.race["parent"] == "bab" and cert.race["winner"] in ("bab", "milp"), cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact10) and cert.upper <= exact10 * (1 + 2e-6)
    assert _no_children()


def test_after_a_failed_region_stage_the_milp_closes_alone(monkeypatch):
    W = random_weights([10, 12, 2], 5)  # (one hidden layer: the region stage goes first)
    exact = exact_lipschitz(W, C10 - R10, C10 + R10, "linf", "l1")
    monkeypatch.setattr(local, "region_stage", lambda *a: (None, a[-1]))
    cert = certify.local_lipschitz(sequential(W), C10, R10, time_limit=60, race="on")
    assert cert.race["winner"] == "milp" and cert.method == "milp", cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact) and cert.upper <= exact * (1 + 2e-6)
    assert _no_children() and not interrupted()


def test_auto_races_the_phase_splitting_tree_where_no_region_stage_goes_first(monkeypatch, exact10):
    """Without the region stage (as on boxes with more unstable ReLUs), where the rule picks the
    MILP on a box whose inputs the tree does not split, auto races the MILP against the tree."""
    if not race_possible():
        pytest.skip("one core: auto keeps its rule")
    monkeypatch.setattr(local, "_regions_first", lambda *a: False)
    cert = certify.local_lipschitz(sequential(W10), C10, R10, time_limit=60)
    assert cert.race and cert.race["parent"] == "bab" and cert.race["winner"] in ("bab", "milp"), cert.notes
    assert cert.status == "optimal" and _brackets(cert, exact10) and cert.upper <= exact10 * (1 + 2e-6)
    assert _no_children()
    monkeypatch.setattr(local, "AUTO_MILP_UNSTABLE", 0)  # the rule's own pick is the tree: no race
    cert = certify.local_lipschitz(sequential(W10), C10, R10, time_limit=60)
    assert not cert.race and cert.method == "bab" and _brackets(cert, exact10)


def test_auto_leaves_the_input_splitting_tree_alone(exact):
    cert = certify.local_lipschitz(sequential(W), np.zeros(2), 1.0, time_limit=60)
    assert not cert.race and cert.method == "bab" and cert.status == "optimal" and _brackets(cert, exact)


def test_a_failed_fork_falls_back_to_the_rule(monkeypatch, exact10):
    def no_fork(self):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing.get_context("fork").Process, "start", no_fork)
    before = signal.getsignal(signal.SIGINT)  # (whatever the test process had: it is restored)
    cert = certify.local_lipschitz(sequential(W10), C10, R10, time_limit=60, race="on")
    assert not cert.race and cert.status == "optimal" and _brackets(cert, exact10)
    assert _no_children() and signal.getsignal(signal.SIGINT) is before
