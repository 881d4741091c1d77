"""The ReLU split on two processes (`certify.verify.split_workers`): verdicts against exact region
enumeration with the open nodes shared at once, a failing or dying worker, counterexamples found
by the worker, and no worker left behind."""

from __future__ import annotations

import os

import numpy as np
import pytest

from certify.verify import parse_vnnlib, relu_split, split_workers, verify
from models.zoo import random_relu_net
from solvers.runtime import REPORT_JOIN
from tests.test_relu_split import _verdict
from tests.test_verify_soundness import _property
from tests.vnnlib_oracle import exact_max_margin, unsafe_by_oracle

TOL = 1e-6
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _children() -> set[int]:
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as fh:
            return {int(p) for p in fh.read().split()}
    except OSError:
        return set()


@pytest.fixture
def share_at_once(monkeypatch):
    """Split as soon as two nodes are open; record every split's notes."""
    monkeypatch.setattr(split_workers, "SPLIT_AFTER", 0.0)
    monkeypatch.setattr(split_workers, "SPLIT_OPEN", 2)
    monkeypatch.setattr(split_workers, "forkable_cores", lambda: 2)
    # (trees that grow: the cut finisher, which closes nodes before they split, is tested in test_relu_cuts)
    monkeypatch.setattr(relu_split.ReluSplitSearch, "_worth_cutting", lambda self, bound: False)
    before = _children()
    yield
    assert _children() <= before, "a split worker was left running"


SIZES = (4, 10, 8, 2)


def _run(seed, sizes=SIZES):
    """verify's answer, and the exact maximum margin (region enumeration, seconds on some nets) only
    for the runs that shared their open nodes."""
    rng = np.random.default_rng(seed)
    net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
    text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
    res = verify(net, parse_vnnlib(text), timeout=20, seed=seed, max_split_dims=0, attack_seconds=0.0)
    shared = any("2 processes" in n for n in res.notes)
    exact = exact_max_margin(net, lo, hi, G, H, d)[0] if shared else None
    return res, exact, text, net


def _check(res, exact, text, net) -> None:
    if res.result == "unsat":
        assert exact < TOL, exact
    if res.result == "sat":
        x = np.array(res.counterexample["x"])
        assert unsafe_by_oracle(text, x, net.forward(x)) and exact >= -TOL
    if res.upper is not None:
        assert res.upper >= exact - TOL, (res.upper, exact)


@pytest.mark.parametrize("sizes", [(3, 8, 8, 2), (4, 10, 6, 3), (2, 6, 6, 6, 2)])
def test_verdicts_with_the_open_nodes_shared_agree_with_region_enumeration(share_at_once, sizes):
    outcomes = [_verdict(seed, sizes) for seed in range(8)]  # (each checked against the exact maximum)
    assert "unsat" in outcomes, outcomes


def test_shared_searches_happen_and_count_both_halves(share_at_once):
    shared = 0
    for seed in range(12):
        res, exact, text, net = _run(seed)
        if exact is not None:
            shared += 1
            _check(res, exact, text, net)
    assert shared >= 3, shared


def _raising(conn, *args):
    conn.send(("error", "MemoryError: test"))
    conn.close()


def _dying(conn, *args):
    os._exit(3)


@pytest.mark.parametrize("worker, note, seeds, at_least", [
    (_raising, "(it failed: MemoryError: test)", 12, 3),
    (_dying, "(it ended early)", 8, 2),
])
def test_a_failing_or_dying_worker_leaves_its_half_to_the_parent(share_at_once, monkeypatch, worker, note, seeds,
                                                                  at_least):
    monkeypatch.setattr(split_workers, "_worker", worker)
    seen = 0
    for seed in range(seeds):
        res, exact, text, net = _run(seed)
        if exact is not None:
            seen += 1
            if res.result != "sat":  # (a counterexample in this half makes the other one moot)
                assert any("searched here" in n and note in n for n in res.notes), res.notes
            _check(res, exact, text, net)
    assert seen >= at_least, seen


def test_a_counterexample_found_by_the_worker_is_replayed_and_reported(share_at_once, monkeypatch):
    """Every open subtree goes to the worker: a sat answer after the split can only come from it."""
    monkeypatch.setattr(split_workers, "_deal", lambda entries: ([], list(entries)))
    sat = unsat = 0
    for seed in range(30):
        res, exact, text, net = _run(seed)
        if exact is None:
            continue
        _check(res, exact, text, net)
        sat += res.result == "sat"
        unsat += res.result == "unsat"
        if sat and unsat >= 2:
            break
    assert sat >= 1 and unsat >= 1, (sat, unsat)


_CTRL_C = """
import json, sys
import numpy as np
from certify.verify import parse_vnnlib, split_workers, verify
from models.zoo import random_relu_net
from solvers.runtime import interruptible

split_workers.SPLIT_AFTER, split_workers.SPLIT_OPEN = 0.0, 2
split_workers.forkable_cores = lambda: 2
net = random_relu_net((12, 40, 40, 40, 2), seed=3)
lo, hi = -np.ones(12), np.ones(12)
# y0 above the largest sampled value by a little: far from decided by the root's bounds
ys = net.forward_batch(np.random.default_rng(0).uniform(lo, hi, (20000, 12))) if hasattr(net, "forward_batch") else \
    np.array([net.forward(x) for x in np.random.default_rng(0).uniform(lo, hi, (4000, 12))])
from solvers.bounds import bound_boxes, relu_blocks
top = float(bound_boxes(relu_blocks(net), lo[None], hi[None]).out_hi[0, 0])  # the root's sound bound
t = float(ys[:, 0].max() + 0.05 * (top - ys[:, 0].max()))
text = "".join(f"(declare-const X_{i} Real)\\n" for i in range(12)) + "(declare-const Y_0 Real)\\n(declare-const Y_1 Real)\\n"
text += "".join(f"(assert (>= X_{i} -1))\\n(assert (<= X_{i} 1))\\n" for i in range(12))
text += f"(assert (>= Y_0 {t!r}))\\n"
print("ready", flush=True)
with interruptible():
    res = verify(net, parse_vnnlib(text), timeout=60, max_split_dims=0, attack_seconds=0.0)
print(json.dumps({"result": res.result, "notes": res.notes, "seconds": res.seconds}), flush=True)
"""


def test_ctrl_c_to_the_process_group_stops_both_halves():
    """A real Ctrl-C (SIGINT to the whole group) after the split: the answer comes within a second
    or two, and no worker outlives it."""
    import json
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C], cwd=root, stdout=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(4.0)
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert time.perf_counter() - t0 < 2 * REPORT_JOIN + 1.5
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["result"] in ("timeout", "unknown"), res
    assert any("2 processes" in n for n in res["notes"]), res["notes"]
    assert res["seconds"] < 20
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nobody of the group is left
