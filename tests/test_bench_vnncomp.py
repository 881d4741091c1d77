"""`certify bench verify` on VNN-COMP families read from a data folder (certify/bench/suites/vnncomp.py):
a tiny fake family whose answers are known by construction (an output bound far outside the net's
range: unsat; far inside it: sat), counted against a truth.csv and a tools.csv written here; the
cactus plot, the --json report, the per-instance cap and the refusals when the data is missing."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import assert_bad_input

PNG = b"\x89PNG\r\n\x1a\n"


def _vnnlib(path: Path, n_in: int, n_out: int, output_assert: str) -> None:
    lines = [f"(declare-const X_{i} Real)" for i in range(n_in)] + [f"(declare-const Y_{j} Real)" for j in range(n_out)]
    for i in range(n_in):
        lines += [f"(assert (>= X_{i} -1.0))", f"(assert (<= X_{i} 1.0))"]
    lines.append(f"(assert {output_assert})")
    path.write_text("\n".join(lines) + "\n")


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture
def family(tmp_path, monkeypatch):
    """A fake `mnist_fc` family: one 2-4-2 net, four instances with answers known independently."""
    from models.onnx_export import save_onnx
    from models.zoo import random_relu_net

    monkeypatch.delenv("CERTIFY_VNNCOMP_DATA", raising=False)
    base = tmp_path / "data" / "mnist_fc"
    (base / "onnx").mkdir(parents=True)
    (base / "vnnlib").mkdir()
    net = random_relu_net((2, 4, 2), seed=3)
    save_onnx(net, base / "onnx" / "tiny.onnx")
    # |y_0| <= sum |W2| (sum |W1| + |b1|) + |b2| over [-1, 1]^2: an independent bound of the output range
    W1, W2 = net.layers[0].weight, net.layers[2].weight
    reach = float(np.abs(W2).sum() * (np.abs(W1).sum() + np.abs(net.layers[0].bias).sum()) + np.abs(net.layers[2].bias).sum())
    big = 10.0 * reach + 10.0
    _vnnlib(base / "vnnlib" / "unsat.vnnlib", 2, 2, f"(>= Y_0 {big})")      # y_0 never reaches it
    _vnnlib(base / "vnnlib" / "sat.vnnlib", 2, 2, f"(>= Y_0 {-big})")       # every point is a counterexample
    _vnnlib(base / "vnnlib" / "unsat_b.vnnlib", 2, 2, f"(<= Y_1 {-big})")   # y_1 never goes that low
    _vnnlib(base / "vnnlib" / "sat_b.vnnlib", 2, 2, f"(<= Y_1 {big})")
    truth = [["onnx/tiny.onnx", "vnnlib/unsat.vnnlib", 300, "unsat", 0.5, "tool_a", 1],
             ["onnx/tiny.onnx", "vnnlib/sat.vnnlib", 300, "sat", 0.7, "tool_a", 2],
             ["onnx/tiny.onnx", "vnnlib/unsat_b.vnnlib", 300, "sat", 1.0, "tool_b", 1],  # a wrong truth: certify's
             ["onnx/tiny.onnx", "vnnlib/sat_b.vnnlib", 300, "unknown", "", "", 0]]        # unsat is counted wrong
    _write_csv(base / "truth.csv", ["onnx", "vnnlib", "timeout", "truth", "best_time", "best_tool", "n_tools_solved"],
               truth)
    tools = [["onnx/tiny.onnx", "vnnlib/unsat.vnnlib", "tool_a", "unsat", 0.5, 10, 1],
             ["onnx/tiny.onnx", "vnnlib/sat.vnnlib", "tool_a", "sat", 200.0, 10, 1],   # correct, beyond a 5 s cap
             ["onnx/tiny.onnx", "vnnlib/unsat_b.vnnlib", "tool_a", "timeout", "", 0, 0],
             ["onnx/tiny.onnx", "vnnlib/unsat.vnnlib", "tool_b", "sat", 0.1, -100, 0],   # wrong
             ["onnx/tiny.onnx", "vnnlib/sat.vnnlib", "tool_b", "unknown", "", 0, 0],
             ["onnx/tiny.onnx", "vnnlib/unsat_b.vnnlib", "tool_b", "sat", 1.0, 10, 1]]
    _write_csv(base / "tools.csv", ["onnx", "vnnlib", "tool", "result", "time", "score", "correct"], tools)
    return tmp_path / "data"


def test_a_fake_family_is_counted_against_its_truth_and_plotted(family, tmp_path, cli):
    out = tmp_path / "out"
    r = cli("bench", "verify", "--families", "mnist_fc", "--vnncomp-data", family, "--time-limit", "5",
            "--out", out, "--json", "--no-progress")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["schema"] == "certify.bench/1" and doc["errors"] == 0 and doc["runs"] == 4
    with open(out / "runs.csv", newline="") as fh:
        status = {row["instance"].split("_tiny_")[1]: row["status"] for row in csv.DictReader(fh)}
    assert status == {"unsat": "unsat", "sat": "sat", "unsat_b": "WRONG", "sat_b": "sat"}
    fam = doc["reports"]["verify"]["families"]["mnist_fc"]
    assert (fam["instances"], fam["decidable"], fam["solved"], fam["wrong"], fam["unchecked"]) == (4, 3, 2, 1, 1)
    assert (fam["sat"], fam["unsat"], fam["time_cap"]) == (1, 1, 5.0)
    assert fam["tools"]["tool_a"] == {"solved": 2, "solved_within_cap": 1, "wrong": 0}
    assert fam["tools"]["tool_b"] == {"solved": 1, "solved_within_cap": 1, "wrong": 1}
    assert (fam["best_tool"], fam["best_tool_solved"], fam["best_tool_solved_within_cap"]) == ("tool_a", 2, 1)
    plot = Path(doc["files"]["vnncomp_cactus"])
    assert plot == out / "vnncomp_cactus.png" and plot.read_bytes()[:8] == PNG
    summary = (out / "summary.md").read_text()
    assert "## VNN-COMP 2022 families" in summary and "| mnist_fc | 4 | 2 / 3 (1/1) | 1 | 1 |" in summary


def test_each_instance_runs_with_its_timeout_capped_by_the_time_limit(family, tmp_path, monkeypatch):
    import certify.verify.instances as instances
    from certify.bench import run_bench

    seen = []
    real = instances.run_instance

    def spy(inst, benchmark, *, timeout=None, **kw):
        seen.append((inst.timeout, timeout))
        return real(inst, benchmark, timeout=timeout, **kw)

    monkeypatch.setattr(instances, "run_instance", spy)
    run_bench(["verify"], time_limit=3.0, out=tmp_path / "o", progress=False,
              options={"vnncomp_data": str(family), "families": ["mnist_fc"]})
    assert seen == [(300.0, 3.0)] * 4


def test_the_data_folder_from_the_environment_adds_its_families(family, monkeypatch):
    from certify.bench.cases import SuiteConfig
    from certify.bench.suites.verify import families

    assert families(SuiteConfig()) == ["acasxu"]  # no data folder: the shipped ACAS Xu only
    monkeypatch.setenv("CERTIFY_VNNCOMP_DATA", str(family))
    assert families(SuiteConfig()) == ["acasxu", "mnist_fc"]  # (oval21 is not in the fake folder)


def test_missing_data_is_refused_with_what_to_do(family, tmp_path, cli):
    no_data = cli("bench", "verify", "--families", "oval21", "--out", tmp_path / "a", "--no-progress")
    assert_bad_input(no_data, "--vnncomp-data", "CERTIFY_VNNCOMP_DATA")
    missing_family = cli("bench", "verify", "--families", "oval21", "--vnncomp-data", family, "--out", tmp_path / "b")
    assert_bad_input(missing_family, str(family / "oval21"))
    not_a_folder = cli("bench", "verify", "--vnncomp-data", tmp_path / "nowhere", "--out", tmp_path / "c")
    assert_bad_input(not_a_folder, "nowhere", "not a directory")
    other_suite = cli("bench", "global", "--vnncomp-data", family, "--out", tmp_path / "d")
    assert_bad_input(other_suite, "verify suite")
    unknown = cli("bench", "verify", "--families", "cifar2020", "--out", tmp_path / "e")
    assert_bad_input(unknown, "cifar2020", "mnist_fc")
