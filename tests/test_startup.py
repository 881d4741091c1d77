"""Start-up stays light: help and eval never import the heavy solver stacks."""

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
