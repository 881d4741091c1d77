"""Regressions for `certify global` from issue 11: SDP memory (item 7), Ctrl-C in SCS (item 7),
the fallback shown in the text output (item 12) and the ignored --domain (item 13)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from certify.errors import BadInput
from certify.lipschitz.global_bounds import global_lipschitz
from models.onnx_export import save_onnx
from models.zoo import lipmip_suite_path, random_relu_net
from models.memory import TooLarge, available_bytes
from tests.conftest import assert_bad_input
from tests.processes import mapped_files

NET = lipmip_suite_path("lipmip_2-16-16-2")
CERTIFY = [sys.executable, "-m", "certify.cli"]
needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc (Linux)")


@pytest.fixture(scope="module")
def mnist_like():
    """The issue's 784-1024-1024-10 net (LipSDP-Neuron grew past 24 GB on it)."""
    return random_relu_net([784, 1024, 1024, 10], seed=0)


def test_lipsdp_that_does_not_fit_is_refused_before_it_is_built(mnist_like, monkeypatch):
    monkeypatch.setattr("models.memory.available_bytes", lambda: 2**30)
    with pytest.raises(TooLarge, match=r"1808 x 1808 .* about 1\.\d+ GB .* more than the memory budget of 0\.537 GB \(half of the 1\.07 GB "
                       r"of memory available\).*eclipse-fast.*CERTIFY_MEMORY_LIMIT"):
        global_lipschitz(mnist_like, "lipsdp-neuron")
    assert issubclass(TooLarge, BadInput)  # exit 2 in the CLI
    # "all" skips the SDPs that do not fit and still answers with the methods that do
    out = global_lipschitz(mnist_like, "all")
    assert set(out.skipped) == {"lipsdp-layer", "lipsdp-neuron", "mip"}
    assert "1808 x 1808" in out.skipped["lipsdp-neuron"]
    assert {r.method for r in out.results} == {"naive", "eclipse-fast"}


_MEASURE = """
import numpy as np
import solvers.sdp.lipsdp as L
from solvers.sdp.chain import WeightChain

def status(field):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith(field + ":"))

rng = np.random.default_rng(0)
chain = WeightChain.from_weights([rng.normal(size=(512, 256)), rng.normal(size=(10, 512))])
chain.reduced_input()
options = L._solver_options
L._solver_options = lambda *a: {**options(*a), "max_iters": 3}
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak (VmHWM) to the current RSS: import peaks do not count
before = status("VmRSS")
L.solve_lipsdp(chain, "neuron")
print(status("VmHWM") - before, L.estimate_bytes(chain))
"""


@needs_proc
def test_memory_estimate_covers_the_measured_peak():
    """The oracle is the process's own peak RSS: building and solving a 256-512-10 LipSDP-Neuron
    (a 768 x 768 inequality) stays under the estimate. With diag(lambda) @ W it took about 1.4 GB."""
    out = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    measured, estimate = (int(v) for v in out.stdout.split()[-2:])
    assert 0 < measured <= estimate, (measured, estimate)


def _limit_address_space(limit: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def test_cli_refuses_the_issue_net_under_an_address_space_limit(tmp_path, mnist_like):
    """The CLI run of the report, with 1.6 GB of address space: exit 2 naming the SDP, never a
    MemoryError (exit 1) or the kernel's OOM kill (exit 137)."""
    path = tmp_path / "mnist_like.onnx"
    save_onnx(mnist_like, path, dtype="float32")
    out = subprocess.run(CERTIFY + ["global", str(path), "--method", "lipsdp-neuron"], capture_output=True, text=True,
                         timeout=600, preexec_fn=_limit_address_space(1600 * 2**20))
    assert out.returncode == 2, out.stderr
    assert re.fullmatch(r"certify global: error: lipsdp-neuron solves an SDP with a 1808 x 1808 .*eclipse-fast.*\n",
                        out.stderr), out.stderr


def test_available_memory_is_known_here():
    free = available_bytes()
    assert free is not None and free > 0


def test_scs_interrupt_stops_the_command(monkeypatch):
    """SCS catches SIGINT and returns status "interrupted", which cvxpy reported as a solver
    failure: the piece was retried and the command went on. It must stop: the stop request is
    certify's (exit 130 in the CLI) and the pieces take their proven norm products."""
    from cvxpy.reductions.solvers.solving_chain import SolvingChain

    from solvers.runtime import interrupted, interruptible

    calls = []
    monkeypatch.setattr(SolvingChain, "solve_via_data",
                        lambda *a, **k: calls.append(1) or {"info": {"status": "interrupted", "status_val": -5}})
    net = random_relu_net([4, 8, 8, 3], seed=0)
    with interruptible():
        result = global_lipschitz(net, "lipsdp-neuron")
        assert interrupted()
    assert len(calls) == 1  # not retried with other margins nor split
    assert result.status == "interrupted" and result.certified
    assert result.upper >= global_lipschitz(net, "naive").upper * (1 - 1e-12)  # the norm product


@needs_proc
def test_sigint_stops_a_long_sdp_with_exit_130(tmp_path):
    """Ctrl-C during the SCS solve: exit 130 within about a second, no traceback; stdout holds the
    sound partial result (status interrupted: the proven norm product) or nothing."""
    path = tmp_path / "wide.onnx"
    save_onnx(random_relu_net([300, 600, 10], seed=0), path, dtype="float32")
    proc = subprocess.Popen(CERTIFY + ["global", str(path), "--method", "lipsdp-neuron", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # the model is being loaded once onnxruntime is mapped: inside the command
            if "onnxruntime" in mapped_files(proc.pid) or proc.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(5)  # into the SDP (build ~1 s, then SCS for minutes)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=300)
        after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert after <= 1.5 and "Traceback" not in err, (after, err)
    if out:
        result = json.loads(out)
        assert result["status"] == "interrupted" and result["certified"] and "\n" not in out.strip()
    else:
        assert err == "certify global: interrupted (no result)\n"


def test_fallback_is_visible_in_the_text_output(cli, monkeypatch):
    """The JSON said "fallback" while the text said "(validated)"."""
    monkeypatch.setattr("solvers.sdp.lipsdp_piece", lambda *a, **k: (lambda sub: (None, "forced failure")))
    data = cli("global", NET, "--method", "lipsdp-neuron", "--json").json()
    assert data["status"] == "fallback"
    text = cli("global", NET, "--method", "lipsdp-neuron")
    assert text.code == 0 and "FALLBACK" in text.out and "validated" not in text.out
    assert "(certified" not in text.out


@pytest.mark.parametrize("method", ["naive", "eclipse-fast"])
def test_domain_unused_by_a_method_is_said(cli, method):
    data = cli("global", NET, "--method", method, "--domain", "0,1", "--json").json()
    assert any("not used by " + method in n for n in data["notes"])
    text = cli("global", NET, "--method", method, "--domain", "0,1").out
    assert "note: the domain is not used by " + method in text
    assert cli("global", NET, "--method", method, "--json").json()["notes"] == []


def test_domain_used_by_mip_only_in_all(cli):
    text = cli("global", NET, "--method", "all", "--domain", "0,1", "--input-norm", "linf", "--output-norm", "l1").out
    assert "only mip uses --domain" in text
    assert np.isfinite(cli("global", NET, "--method", "mip", "--domain", "0,1", "--input-norm", "linf",
                           "--output-norm", "l1", "--json").json()["upper"])


def test_bad_sdp_memory_is_exit_2_through_calibrate(cli, monkeypatch):
    monkeypatch.setattr("models.memory.available_bytes", lambda: 2**20)
    assert_bad_input(cli("calibrate", "gauss-output", "--model", NET, "--epsilon", "1", "--delta", "1e-5",
                         "--radius", "0.1", "--lipschitz-method", "lipsdp-neuron"), "memory", "eclipse-fast")
