"""The sound-solve policy end to end: time budget, Ctrl-C, early licence refusal, status rules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import certify
from models.onnx_export import save_onnx
from models.zoo import random_relu_net
from tests.conftest import assert_bad_input


def _samples(net, lo, hi, n=4000, seed=0):
    """Largest ||J(x)||_{linf->l1} over random points: an independent lower oracle."""
    rng = np.random.default_rng(seed)
    best = 0.0
    for x in rng.uniform(lo, hi, (n, lo.size)):
        J = net.jacobian(x)
        signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * J.shape[1])).reshape(J.shape[1], -1)
        best = max(best, float(np.abs(J @ signs).sum(axis=0).max()))
    return best


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory):
    """A net whose HiGHS solve takes well over 10 s (about 40 binaries after LP bounds)."""
    path = tmp_path_factory.mktemp("slow") / "slow.onnx"
    net = random_relu_net((5, 32, 32, 32, 2), seed=0)
    save_onnx(net, str(path))
    return net, str(path)


def test_ctrl_c_prints_the_sound_interval_and_exits_130(slow_model):
    net, path = slow_model
    cmd = [sys.executable, "-m", "certify.cli", "lipschitz", path, "--center", "0,0,0,0,0", "--radius", "0.5",
           "--backend", "highs", "--json", "--progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(9.0)
    assert proc.poll() is None, "the solve ended before Ctrl-C: pick a slower model"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-500:]
    cert = json.loads(out)
    assert cert["status"] == "interrupted" and cert["certified"] is True
    oracle = _samples(net, -0.5 * np.ones(5), 0.5 * np.ones(5), n=300)
    assert cert["lower"] <= cert["upper"] and np.isfinite(cert["upper"])
    assert oracle <= cert["upper"] * (1 + 1e-9)
    assert "certified [" in err  # the live status line was shown


def test_time_limit_covers_every_stage(slow_model):
    net, _ = slow_model
    t = time.perf_counter()
    cert = certify.local_lipschitz(net, np.zeros(5), 0.5, backend="highs", time_limit=4)
    elapsed = time.perf_counter() - t
    assert elapsed <= 4 + 2.0, elapsed
    assert cert.status == "time_limit" and cert.lower <= cert.upper
    assert _samples(net, -0.5 * np.ones(5), 0.5 * np.ones(5), n=300) <= cert.upper * (1 + 1e-9)


def test_explicit_gurobi_is_refused_before_any_bounds(cli, tmp_path):
    """A 784-256-256-10 net does not fit the size-limited licence: refused in about a second
    (before the bounds, which take much longer), exit 2."""
    pytest.importorskip("gurobipy")
    from solvers.milp.gurobi import licence

    if not licence().restricted:
        pytest.skip("an unrestricted Gurobi licence solves any size")
    path = tmp_path / "wide.onnx"
    save_onnx(random_relu_net((784, 256, 256, 10), seed=0), str(path))
    center = tmp_path / "c.npy"
    np.save(center, np.full(784, 0.5))
    t = time.perf_counter()
    r = cli("lipschitz", str(path), "--center", f"@{center}", "--radius", "0.05", "--backend", "gurobi")
    assert_bad_input(r, "licence")
    assert time.perf_counter() - t < 20


def test_a_loose_mip_gap_never_reports_optimal():
    """--mip-gap 0.5: a result that closes only to the requested gap is open_gap, not optimal."""
    net = random_relu_net((3, 8, 8, 2), seed=2)
    cert = certify.local_lipschitz(net, np.zeros(3), 0.5, backend="highs", mip_gap=0.5)
    if cert.status == "optimal":
        assert cert.upper - cert.lower <= 1.5e-6 * cert.upper
    else:
        assert cert.status == "open_gap"


@pytest.mark.parametrize("gap", [1.0, 5.0, -0.1])
def test_mip_gap_outside_zero_one_is_refused(gap):
    with pytest.raises(certify.BadInput, match="mip gap"):
        certify.local_lipschitz(random_relu_net((2, 3, 1), seed=0), np.zeros(2), 0.1, mip_gap=gap)


def test_negative_radius_message_is_plain():
    with pytest.raises(certify.BadInput) as exc:
        certify.local_lipschitz(random_relu_net((2, 3, 1), seed=0), np.zeros(2), -0.1)
    assert "radius must be positive, got -0.1" in str(exc.value) and "array" not in str(exc.value)


def test_progress_callback_sees_a_shrinking_certified_interval():
    net = random_relu_net((3, 8, 8, 2), seed=2)
    events = []
    cert = certify.local_lipschitz(net, np.zeros(3), 0.5, backend="highs", progress=events.append)
    assert events and events[-1].stage == "done"
    uppers = [e.upper for e in events if np.isfinite(e.upper)]
    assert uppers and all(u >= cert.upper * (1 - 1e-12) for u in uppers)
    assert all(e.lower <= e.upper for e in events)


if os.name != "posix":  # pragma: no cover
    pytestmark = pytest.mark.skip("signals")


def test_a_model_highs_rejects_gets_a_proven_bound_and_a_note():
    """HiGHS refuses coefficients >= 1e15 at passModel: the answer is discarded with a note (not
    "interrupted"), and the bound still comes from the proof (here: the box bound, sound)."""
    import scipy.sparse as sp

    from solvers.lp import MilpModel
    from solvers.milp.sound import sound_solve
    from solvers.runtime import Budget

    # max x + y  s.t.  1e16 x - 1e16 y <= 0,  x, y in [0, 1], y integer: optimum 2
    model = MilpModel(np.array([1.0, 1.0]), "max", sp.csr_matrix([[1e16, -1e16]]), np.array([-np.inf]),
                      np.array([0.0]), np.zeros(2), np.ones(2), np.array([False, True]))
    res = sound_solve(model, Budget(30), backend="highs")
    assert any("highs failed" in n for n in res.notes), res.notes
    assert res.bound >= 2.0 and res.status in ("optimal", "time_limit")


def test_a_budget_spent_before_the_solve_is_a_time_limit_not_optimal():
    """With no time left for the solver the proof may still close the bound, but there is no
    incumbent: the status says the time ran out (a caller needing a witness must not read
    "optimal"), and the bound stays sound."""
    import scipy.sparse as sp

    from solvers.lp import MilpModel
    from solvers.milp.sound import sound_solve
    from solvers.runtime import Budget

    # max x + y  s.t.  x - y <= 0.5,  x, y in [0, 1], y integer: optimum 2 (x = y = 1)
    model = MilpModel(np.array([1.0, 1.0]), "max", sp.csr_matrix([[1.0, -1.0]]), np.array([-np.inf]),
                      np.array([0.5]), np.zeros(2), np.ones(2), np.array([False, True]))
    # 0.6 of the ~0.0165 s left is below the solver's 0.01 s floor; the proof of a 2-variable
    # model still fits in the rest
    res = sound_solve(model, Budget(0.0165), backend="highs")
    assert "no time left for the MILP solve" in res.notes
    assert res.status == "time_limit" and res.incumbent is None and res.bound >= 2.0
    assert sound_solve(model, Budget(30), backend="highs").status == "optimal"
