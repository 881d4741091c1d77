"""Start-up stays light: help and eval never import the heavy solver stacks; a small Lipschitz
question imports only what it uses (HiGHS for its LPs, onnx and onnxruntime for the model and its
check), not the MILP back-ends' or the SDP's stacks, nor numpy's test/f2py tooling that scipy's
array-API layer would otherwise pull in (models/scipy_import.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from models.zoo import vnncomp_test_path

HEAVY = ("scipy.stats", "scipy.optimize", "cvxpy", "torch", "gurobipy", "highspy", "pulp", "sklearn",
         "matplotlib", "distributed", "mpmath")
PROBE = """
import sys, runpy
sys.argv = ["certify"] + {args!r}
try:
    runpy.run_module("certify.cli", run_name="__main__")
except SystemExit:
    pass
print("LOADED=" + ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--help"], ["lipschitz", "--help"], ["calibrate", "--help"], ["ptr", "--help"],
                                  ["report", "--help"], ["bench", "--help"],
                                  ["eval", vnncomp_test_path("test_small"), "--input", "0.5"]])
def test_cli_start_up_imports_no_heavy_module(args):
    p = subprocess.run([sys.executable, "-c", PROBE.format(args=[str(a) for a in args], heavy=HEAVY)],
                       capture_output=True, text=True, timeout=120)
    loaded = [line for line in p.stderr.splitlines() if line.startswith("LOADED=")]
    assert loaded and loaded[-1] == "LOADED=", p.stderr[-2000:]


# what the small-net Lipschitz path must not load: solver stacks it does not use, and the numpy
# submodules only scipy's namespace clone imports (about 0.1 s of a 1 s call)
SMALL_LIPSCHITZ_UNUSED = ("scipy.stats", "scipy.optimize", "cvxpy", "torch", "pulp", "sklearn", "matplotlib",
                          "mpmath", "numpy.f2py", "numpy.testing", "numpy.polynomial")


def test_small_lipschitz_question_imports_only_what_it_uses():
    from models.zoo import lipmip_suite_path

    args = ["lipschitz", str(lipmip_suite_path("lipmip_2-16-16-2")), "--center", "0.5,0.5", "--radius", "0.5",
            "--margin", "0,1", "--json"]
    p = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=SMALL_LIPSCHITZ_UNUSED + ("highspy",))],
                       capture_output=True, text=True, timeout=300)
    loaded = [line for line in p.stderr.splitlines() if line.startswith("LOADED=")]
    # the probe itself is live: the LPs of this question did load HiGHS
    assert loaded and loaded[-1] == "LOADED=highspy", p.stderr[-2000:]
    assert '"status": "optimal"' in p.stdout, p.stdout[-2000:]


def test_light_scipy_import_restores_numpy_namespace():
    """The light import leaves numpy's `__all__` and `dir` as they were, and a skipped submodule
    still loads on first use (run in a fresh interpreter: scipy must not be imported yet)."""
    code = """
import numpy as np, sys
before_all, before_dir = list(np.__all__), dir(np)
from models.scipy_import import import_scipy
sp = import_scipy("scipy.sparse")
assert "numpy.f2py" not in sys.modules and "numpy.testing" not in sys.modules, "clone imported them"
assert list(np.__all__) == before_all and dir(np) == before_dir
assert sp.csr_matrix(np.eye(2)).nnz == 2
np.testing.assert_equal(1, 1)  # loads lazily, as before
print("OK")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "OK", p.stderr[-2000:]
