"""One runtime contract for every command (issue 27): Ctrl-C and time limits, end to end.

- Ctrl-C at any moment (start-up, bound computation, inside HiGHS, Gurobi, CBC, SCS) exits with
  130 within about a second of the signal; stdout is then empty (with "interrupted (no result)" on
  stderr) or exactly one JSON object with status interrupted whose interval is sound (checked here
  against sampled Jacobian norms and the replayed witness); never a traceback; no solver chatter on
  stdout.
- `--time-limit` is the whole command's wall-clock budget, process start included: a command that
  cannot finish stops within a second or two of it with a sound partial result (status time_limit).

Signals are sent at moments read from /proc/PID/maps (a solver's shared library is mapped once the
command reaches it), not after fixed sleeps, so the tests hold on a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from models import load_onnx
from models.onnx_export import save_onnx
from models.zoo import acasxu_path, lipmip_suite_path, random_relu_net
from tests.processes import mapped_files

REPO = Path(__file__).resolve().parents[1]
_SCRIPT = Path(sys.executable).parent / "certify"
CERTIFY = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "certify.cli"]
#: seconds allowed from SIGINT to exit (the contract says about a second)
SIGINT_ALLOWANCE = 1.5
#: seconds allowed beyond --time-limit (the contract says about a second)
LIMIT_ALLOWANCE = 2.0

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc (Linux)")

LIPMIP = str(lipmip_suite_path("lipmip_10-10-10-10-10-2"))
ACAS33 = str(acasxu_path(3, 3))


@dataclass
class Stopped:
    code: int
    out: str
    err: str
    after: float  # seconds from SIGINT to exit (inf when the signal was never sent)

    def result(self) -> dict | None:
        """The one JSON object on stdout, or None for an empty stdout."""
        if not self.out.strip():
            return None
        text = self.out.strip()
        assert "\n" not in text, self.out[:2000]  # exactly one line: one object, nothing else
        return json.loads(text)


def interrupt(argv: list[str], when: str | None, delay: float = 0.0, timeout: float = 300.0) -> Stopped:
    """Run certify, wait until a mapped file's path contains `when` (None: right away), sleep
    `delay`, send SIGINT and wait for the exit."""
    proc = subprocess.Popen(CERTIFY + [str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        t_end = time.monotonic() + timeout
        while when is not None and when not in mapped_files(proc.pid):
            assert proc.poll() is None, f"certify ended before {when!r} was loaded: {proc.communicate()}"
            assert time.monotonic() < t_end, f"{when!r} never loaded"
            time.sleep(0.005)
        time.sleep(delay)
        assert proc.poll() is None, f"certify ended before the signal: {proc.communicate()}"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
        return Stopped(proc.returncode, out, err, time.monotonic() - sent)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def check_contract(run: Stopped, command: str) -> dict | None:
    """Exit 130 soon after the signal, no traceback, and stdout empty or one interrupted result."""
    assert run.code == 130, (run.code, run.err[-2000:])
    assert run.after <= SIGINT_ALLOWANCE, (run.after, run.err[-2000:])
    assert "Traceback" not in run.err and "KeyboardInterrupt" not in run.err, run.err[-2000:]
    result = run.result()
    if result is None:
        assert f"certify {command}: interrupted (no result)" in run.err, run.err[-2000:]
    else:
        assert result["status"] == "interrupted" and result["certified"] is True, result
    return result


# ----------------------------------------------------------------------------- oracles
def _linf_to_l1(J: np.ndarray) -> float:
    """||J||_{linf->l1} = max over output signs v of ||J^T v||_1 (few outputs)."""
    m = J.shape[0]
    signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * m)).reshape(m, -1)
    return float(np.abs(J.T @ signs).sum(axis=0).max())


def check_local_interval(result: dict, path: str, samples: int = 300) -> None:
    """lower <= upper; sampled Jacobian norms <= upper; lower replayed at the witness."""
    net = load_onnx(path)
    lo, hi = np.array(result["box"]["lo"]), np.array(result["box"]["hi"])
    assert result["lower"] <= result["upper"] and np.isfinite(result["upper"])
    rng = np.random.default_rng(0)
    best = max(_linf_to_l1(net.jacobian(x)) for x in rng.uniform(lo, hi, (samples, lo.size)))
    assert best <= result["upper"] * (1 + 1e-9), (best, result["upper"])
    if result.get("witness") is not None:
        w = np.array(result["witness"])
        assert np.all(w >= lo) and np.all(w <= hi)
        assert result["lower"] <= _linf_to_l1(net.jacobian(w)) * (1 + 1e-9) + 1e-12, result["lower"]


# ----------------------------------------------------------------------------- fast (default run)
def test_ctrl_c_during_start_up_is_one_line_and_130():
    """Once certify's code runs (numpy loads after the CLI took over Ctrl-C) a Ctrl-C is one line."""
    run = interrupt(["lipschitz", LIPMIP, "--center", ",".join(["0"] * 10), "--radius", "1", "--json"],
                    "_multiarray_umath")
    check_contract(run, "lipschitz")


@pytest.mark.parametrize("launcher", [["-m", "certify.cli"], [str(_SCRIPT)]])
def test_ctrl_c_before_the_cli_handler_is_one_line_and_130(launcher):
    """A Ctrl-C in the first ~0.1 s (imports of certify and certify.cli, before `_main` installs the
    CLI's handler) printed a KeyboardInterrupt traceback, or was lost in an import lock's callback and
    the command ran to its end. The interpreter's command line is set to the CLI's, then certify is
    imported and SIGINT sent at once: the same line and exit code as any other interrupted start-up."""
    probe = ("import os, signal, sys, time\n"
             f"sys.orig_argv[:] = [sys.executable] + {launcher!r} + ['lipschitz', 'm.onnx', '--json']\n"
             "import certify\n"
             "os.kill(os.getpid(), signal.SIGINT)\n"
             "time.sleep(30)\n"
             "print('not stopped')\n")
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert (p.returncode, p.stdout, p.stderr) == (130, "", "certify lipschitz: interrupted (no result)\n")
    assert time.monotonic() - t < 20


def test_importing_certify_leaves_ctrl_c_alone():
    """Only the CLI process takes SIGINT early: a library import keeps Python's handler."""
    import certify._startup as S

    probe = "import signal, certify; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.stdout.strip() == "True", p.stderr
    assert S.cli_arguments(["python", "-m", "certify.cli", "radius", "x"]) == ["radius", "x"]
    assert S.cli_arguments(["python", "-mcertify.cli", "inspect"]) == ["inspect"]
    assert S.cli_arguments(["/venv/bin/python", "/venv/bin/certify", "ptr"]) == ["ptr"]
    for other in (["python", "-m", "pytest", "tests"], ["python", "-c", "import certify"], ["python", "run.py"],
                  ["python", "-m", "certify.demo"], ["python"]):
        assert S.cli_arguments(other) is None, other


def test_ctrl_c_during_lp_bound_tightening_prints_the_sound_interval():
    """ACAS Xu 3_3 over a wide box: LP tightening (HiGHS) ignored Ctrl-C for minutes."""
    run = interrupt(["lipschitz", ACAS33, "--center", "0,0,0,0,0", "--radius", "0.5", "--method", "milp",
                     "--backend", "highs", "--json"], "highspy", delay=0.5)
    result = check_contract(run, "lipschitz")
    assert result is not None, run.err
    check_local_interval(result, ACAS33, samples=200)


def test_time_limit_counts_from_process_start(tmp_path):
    """A 0.5 s limit holds for the whole command, imports and model loading included."""
    t = time.monotonic()
    proc = subprocess.run(CERTIFY + ["lipschitz", ACAS33, "--center", "0,0,0,0,0", "--radius", "0.5", "--method",
                                     "milp", "--backend", "highs", "--time-limit", "3", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    wall = time.monotonic() - t
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "time_limit" and not result["exact"]
    assert wall <= 3 + LIMIT_ALLOWANCE, wall
    check_local_interval(result, ACAS33, samples=100)


def test_ctrl_c_while_a_long_result_is_printed_keeps_it_whole(tmp_path):
    """The output went through a raw file under a text wrapper: a write to a full pipe that a
    signal cut short dropped the rest of the JSON (65,537 of 81,616 bytes arrived)."""
    path = tmp_path / "wide.onnx"
    save_onnx(random_relu_net([2, 4, 6000], seed=0), str(path))
    proc = subprocess.Popen(CERTIFY + ["eval", str(path), "--input", "0.5,0.5", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        t_end = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < t_end:  # blocked on the full pipe: mid-result
            try:
                with open(f"/proc/{proc.pid}/wchan") as fh:
                    if "pipe" in fh.read():
                        break
            except OSError:
                pass
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err  # the result was complete: printing it is not an interruption
    assert len(json.loads(out)["output"]) == 6000 and "Traceback" not in err


def test_bad_time_limit_is_refused(cli):
    r = cli("lipschitz", LIPMIP, "--center", ",".join(["0"] * 10), "--radius", "1", "--time-limit", "-1")
    assert r.code == 2 and "time limit --time-limit must be a positive number" in r.err
    r = cli("verify", LIPMIP, "p.vnnlib", "--time-limit", "0")
    assert r.code == 2 and "time limit --timeout must be a positive number" in r.err


def test_stop_request_in_process_gives_130_and_the_interval(cli, monkeypatch):
    """In process (no watchdog): a Ctrl-C seen by a solver ends the command with 130 and its result."""
    import solvers.runtime as R

    real = R.Budget.stage

    def stage(self, fraction):  # the first stage deadline asked for: as if Ctrl-C came then
        R.request_stop()
        return real(self, fraction)

    monkeypatch.setattr(R.Budget, "stage", stage)
    r = cli("lipschitz", LIPMIP, "--center", ",".join(["0"] * 10), "--radius", "1", "--backend", "highs", "--json")
    assert r.code == 130, r.err
    result = r.json()
    assert result["status"] == "interrupted"
    check_local_interval(result, LIPMIP, samples=200)


def test_command_deadline_bounds_every_budget():
    from solvers import runtime as R

    try:
        R.set_command_deadline(time.perf_counter() + 0.5)
        b = R.Budget(100.0)
        assert b.remaining() <= 0.5 and b.deadline == R.command_deadline()
        assert R.Budget(None).deadline == R.command_deadline()
        R.set_command_deadline(time.perf_counter() - 1.0)
        assert b.expired() and R.past() and R.time_left() == 0.0
    finally:
        R.set_command_deadline(None)
    assert not R.Budget(None).expired() and R.Budget(None).deadline is None and not R.past()


def test_bounds_without_a_deadline_of_their_own_obey_the_command_deadline():
    """Local Lipschitz bounds pass no deadline to the bound engine: the symbolic back-substitution of
    a CIFAR-style conv net ran 12 minutes past `--time-limit 60`. Past the command deadline the
    symbolic step is cut (interval bounds, sound: checked on sampled pre-activations), as it is past
    a deadline of the options' own."""
    from solvers import runtime as R
    from solvers.bounds import network_bounds

    net = random_relu_net([6, 40, 40, 3], seed=2)
    lo, hi = np.full(6, -0.5), np.full(6, 0.5)
    interval = network_bounds(net, lo, hi, "interval")
    symbolic = network_bounds(net, lo, hi, "symbolic")
    assert np.sum(symbolic.pre_hi[1] - symbolic.pre_lo[1]) < np.sum(interval.pre_hi[1] - interval.pre_lo[1])
    try:
        R.set_command_deadline(time.perf_counter() - 1.0)
        cut = network_bounds(net, lo, hi, "symbolic")
    finally:
        R.set_command_deadline(None)
    for a, b in zip(cut.pre_lo + cut.pre_hi, interval.pre_lo + interval.pre_hi):
        np.testing.assert_array_equal(a, b)
    ys = net.forward(np.random.default_rng(0).uniform(lo, hi, (500, 6)))
    assert np.all(cut.out_lo <= ys) and np.all(ys <= cut.out_hi)


def test_witness_sampling_stops_at_the_command_deadline():
    """`sample_lower` kept evaluating points past the deadline until one was differentiable (each a
    pass over a 7 GB net): past the deadline it evaluates none (lower bound 0, no witness)."""
    import certify.lipschitz.replay as replay
    from solvers import runtime as R

    net = random_relu_net([4, 8, 2], seed=0)
    calls = []
    real = replay.differentiable_point

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    lo, hi = np.full(4, -1.0), np.full(4, 1.0)
    try:
        replay.differentiable_point = counted
        R.set_command_deadline(time.perf_counter() - 1.0)
        assert replay.sample_lower(net, lo, hi, "linf", "l1", None) == (0.0, None)
        assert calls == []
        R.set_command_deadline(None)
        best, pt = replay.sample_lower(net, lo, hi, "linf", "l1", None)
        assert pt is not None and len(calls) == 33  # without a deadline: the centre and 32 samples
    finally:
        replay.differentiable_point = real
        R.set_command_deadline(None)


def test_nested_interruptible_keeps_a_stop_request():
    """A Ctrl-C during model loading (the CLI's scope) is not cleared by the command's own scope."""
    from solvers import runtime as R

    with R.interruptible():
        R.request_stop()
        with R.interruptible():
            assert R.interrupted()
        assert R.interrupted()
    assert not R.past()  # outside any scope a left-over request stops nothing
    with R.interruptible():  # a new outermost scope starts afresh
        assert not R.interrupted() and not R.past()


def test_the_watchdog_prints_the_certified_interval_reached_when_a_solver_ignores_ctrl_c():
    """A solver that does not stop within the grace period: the watchdog prints the last certified
    interval of the command's progress events (schema-valid, status interrupted) on its stdout."""
    import argparse

    import jsonschema

    from certify.certificate import load_schema
    from certify.cli.progress import LiveResult, partial_certificate
    from solvers import runtime as R

    args = argparse.Namespace(json=True, progress=False)
    live = LiveResult(args, lambda ev: partial_certificate("local_lipschitz", ev, scope="box", box=None,
                                                           input_norm="linf", output_norm="l1"))
    read, write = os.pipe()
    try:
        R.set_result_fd(write)
        assert not R._write_partial()  # no event yet: nothing to print ("no result")
        live(R.Progress(2.5, 1.25, 7.5, "solve"))
        assert R._write_partial()
        os.close(write)
        write = None
        out = json.loads(os.read(read, 1 << 16))
    finally:
        R.set_result_fd(None)
        live.close()
        os.close(read)
        if write is not None:
            os.close(write)
    jsonschema.validate(out, load_schema())
    assert (out["lower"], out["upper"], out["status"], out["certified"]) == (1.25, 7.5, "interrupted", True)
    assert R._PARTIAL is None  # withdrawn when the command ends

_STUCK_STAGE = """
import sys, time
from solvers import runtime as R
partial = sys.argv[1] == "partial"
with R.watchdog("stuck"):
    R.set_result_fd(1)
    if partial:
        R.offer_partial(lambda: '{"status": "%s", "lower": 1.0, "upper": 2.0}\\n' % R.stop_reason())
    R.set_command_deadline(time.perf_counter() + 0.3)
    end = time.perf_counter() + 30
    while time.perf_counter() < end:  # a stage that polls nothing (model loading, a long C call)
        time.sleep(0.01)
print("finished")
"""


@pytest.mark.parametrize("partial", [True, False])
def test_the_watchdog_ends_a_stage_that_ignores_the_time_limit(partial):
    """A stage that never checks the command deadline: the watchdog ends the command
    OVERRUN_GRACE after it (exit 124) with the partial result, status time_limit, or "no result"."""
    from solvers.runtime import OVERRUN_GRACE, TIME_LIMIT_EXIT

    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _STUCK_STAGE, "partial" if partial else "none"],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
    wall = time.perf_counter() - t0
    assert proc.returncode == TIME_LIMIT_EXIT, proc.stderr
    assert 0.3 + OVERRUN_GRACE <= wall < 0.3 + OVERRUN_GRACE + 10  # not the stage's 30 s (start-up under load)
    assert "finished" not in proc.stdout
    assert "time limit" in proc.stderr and proc.stderr.count("\n") == 1
    if partial:
        assert json.loads(proc.stdout) == {"status": "time_limit", "lower": 1.0, "upper": 2.0}
    else:
        assert proc.stdout == "" and "no result" in proc.stderr


# ----------------------------------------------------------------------------- slow: every back-end
def _gurobi_usable() -> bool:
    try:
        from solvers.milp.gurobi import licence
    except ImportError:
        return False
    return licence().usable


@pytest.mark.slow
@pytest.mark.gurobi
def test_ctrl_c_inside_gurobi_is_130_and_one_json_object():
    """Gurobi printed "Interrupt request received" on stdout before the JSON and exited 0."""
    if not _gurobi_usable():
        pytest.skip("Gurobi is not usable here")
    run = interrupt(["lipschitz", LIPMIP, "--center", ",".join(["0"] * 10), "--radius", "1", "--backend", "gurobi",
                     "--json"], "libgurobi", delay=3.0)
    result = check_contract(run, "lipschitz")
    assert result is not None, run.err
    check_local_interval(result, LIPMIP)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["highs", "cbc"])
def test_ctrl_c_inside_the_milp_back_end(backend):
    run = interrupt(["lipschitz", LIPMIP, "--center", ",".join(["0"] * 10), "--radius", "1", "--backend", backend,
                     "--json"], "highspy", delay=6.0)
    result = check_contract(run, "lipschitz")
    assert result is not None, run.err
    check_local_interval(result, LIPMIP)
    if backend == "cbc":  # the CBC process does not outlive certify
        time.sleep(0.3)
        left = subprocess.run(["pgrep", "-f", "certify-cbc-"], capture_output=True, text=True).stdout.split()
        assert not left, left


@pytest.mark.slow
@pytest.mark.gurobi
def test_ctrl_c_inside_gurobi_radius_l1():
    if not _gurobi_usable():
        pytest.skip("Gurobi is not usable here")
    run = interrupt(["radius", ACAS33, "--point", "0.1,0.1,0.1,0.1,0.1", "--norm", "l1", "--json"], "libgurobi",
                    delay=3.0)
    result = check_contract(run, "radius")
    if result is not None:
        assert result["lower"] <= (result["upper"] if result["upper"] is not None else np.inf)


@pytest.fixture(scope="module")
def mnist_like(tmp_path_factory):
    """784-512-512-10 (random weights): nothing on it finishes in a few seconds."""
    d = tmp_path_factory.mktemp("mnist")
    net = random_relu_net([784, 512, 512, 10], seed=0)
    path = d / "mnist784.onnx"
    save_onnx(net, str(path))
    x = np.random.default_rng(0).uniform(0, 1, 784)
    np.save(d / "x.npy", x)
    return net, str(path), f"@{d / 'x.npy'}"


@pytest.mark.slow
def test_ctrl_c_inside_scs_prints_the_norm_product(mnist_like):
    net, path, _ = mnist_like
    run = interrupt(["global", path, "--method", "lipsdp-layer", "--json"], "_scs_direct", delay=1.0)
    result = check_contract(run, "global")
    assert result is not None, run.err
    rng = np.random.default_rng(1)  # a global l2 bound is at least ||J(x)||_2 anywhere
    best = max(float(np.linalg.norm(net.jacobian(x), 2)) for x in rng.uniform(-1, 1, (50, 784)))
    assert best <= result["upper"]


@pytest.mark.slow
@pytest.mark.parametrize("argv,when,delay", [
    (["lipschitz", "{path}", "--center", "{x}", "--radius", "0.01", "--method", "bounds", "--json"], "highspy", 2.0),
    (["ptr", "{path}", "--point", "{x}", "--radius", "0.01", "--epsilon", "1", "--delta", "1e-5", "--proposal",
      "200", "--seed", "0", "--json"], "onnxruntime", 3.0),
    (["hyperrectangle", "{path}", "--point", "{x}", "--json"], "onnxruntime", 3.0),
    (["radius", "{path}", "--point", "{x}", "--json"], "onnxruntime", 3.0),
])
def test_ctrl_c_on_a_large_net(mnist_like, argv, when, delay):
    _, path, x = mnist_like
    run = interrupt([a.format(path=path, x=x) for a in argv], when, delay=delay)
    check_contract(run, argv[0])


# ----------------------------------------------------------------------------- slow: time limits
LIMIT = 5.0


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["global", "{path}", "--method", "lipsdp-neuron"],
    ["global", "{path}", "--method", "lipsdp-layer"],
    ["lipschitz", "{path}", "--center", "{x}", "--radius", "0.01", "--method", "milp"],
    ["lipschitz", "{path}", "--center", "{x}", "--radius", "0.01"],
    ["lipschitz", "{path}", "--center", "{x}", "--radius", "0.01", "--method", "bounds"],
    ["radius", "{path}", "--point", "{x}"],
    ["hyperrectangle", "{path}", "--point", "{x}"],
    ["ptr", "{path}", "--point", "{x}", "--radius", "0.01", "--epsilon", "1", "--delta", "1e-5", "--proposal", "200",
     "--seed", "0"],
    ["utility", "{path}", "--mechanism", "laplace", "--epsilon", "1", "--point", "{x}"],
    ["calibrate", "lap-output", "--epsilon", "1", "--model", "{path}", "--radius", "0.1", "--metric", "linf",
     "--lipschitz-method", "mip", "--domain", "0,1"],
    ["verify", ACAS33, str(REPO / "models/zoo/data/acasxu/prop_2.vnnlib")],
])
def test_time_limit_is_the_whole_command(mnist_like, argv):
    _, path, x = mnist_like
    t = time.monotonic()
    proc = subprocess.run(CERTIFY + [a.format(path=path, x=x) for a in argv] + ["--time-limit", str(LIMIT), "--json"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    wall = time.monotonic() - t
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert wall <= LIMIT + LIMIT_ALLOWANCE, (argv[0], wall)
    result = json.loads(proc.stdout)
    if argv[0] == "calibrate":  # the noise scale of a proven (if loose) constant
        assert result["lipschitz"]["proven"] and np.isfinite(result["lipschitz"]["value"]) and result["scale"] > 0
        return
    status = result["robustness_box"]["status"] if argv[0] == "utility" else result["status"]
    if "bounds" in argv and wall < LIMIT:  # the fast bound alone may finish in time (then open, not exact)
        assert status in ("time_limit", "open_gap"), status
    else:
        assert status == "time_limit", (argv[0], status)
    if argv[0] == "ptr":
        assert result["refusal"] and result["guarantee"] is None  # undecided: nothing released
