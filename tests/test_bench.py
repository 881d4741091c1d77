"""`certify bench`: the documented files, independent checks of the numbers it reports (LipMIP's
published value, a second back-end, sampled Jacobian norms), skipped rows for back-ends that
cannot run, the user's own models, resuming, and bad input."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from tests.conftest import assert_bad_input

ROOT = Path(__file__).resolve().parents[1]


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _sampled_lower(net, center, radius, n=400, seed=1) -> float:
    """max over random points of ||J(x)||_{linf->l1} (each a true lower bound of the constant)."""
    from itertools import product

    rng = np.random.default_rng(seed)
    signs = np.array(list(product((-1.0, 1.0), repeat=net.output_dim)))
    best = 0.0
    for x in center + rng.uniform(-radius, radius, (n, net.input_dim)):
        J = net.jacobian(x)
        best = max(best, float(np.max(np.abs(signs @ J).sum(axis=1))))
    return best


def test_quick_lipschitz_suite_writes_the_documented_files_with_checked_numbers(tmp_path, cli):
    from certify.bench.runner import COLUMNS

    out = tmp_path / "bench"
    r = cli("bench", "lipschitz", "--quick", "--out", out, "--json", "--no-progress")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["runs"] > 10 and doc["errors"] == 0
    rows = _rows(out / "runs.csv")
    assert list(rows[0]) == list(COLUMNS)
    documented = (ROOT / "docs" / "bench.md").read_text()
    assert all(f"`{c}`" in documented for c in COLUMNS), "every CSV column is documented in docs/bench.md"
    machine = json.loads((out / "machine.json").read_text())
    for key in ("cpu_model", "logical_cores", "memory_gb", "python", "solvers", "packages", "backends"):
        assert key in machine
    assert machine["solvers"]["highs"]
    assert (out / "summary.md").read_text().startswith("# certify bench")
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert {"runtime_vs_size.png", "cactus.png", "ablation.png"} <= {p.name for p in pngs}

    ran = [x for x in rows if x["status"] not in ("skipped",)]
    for x in ran:
        assert float(x["lower"]) <= float(x["upper"]) * (1 + 1e-9)
    # LipMIP's published value of its 2-16-16-2 net (c = [1, -1], [0, 1]^2) lies in every interval
    lipmip = [x for x in ran if x["instance"] == "lipmip_2-16-16-2"]
    assert lipmip
    for x in lipmip:
        assert float(x["lower"]) <= 0.335242 * (1 + 1e-5) and float(x["upper"]) >= 0.335242 * (1 - 1e-5)
    # every back-end that closed an instance agrees with every other one (a second solver as oracle)
    by_instance: dict[str, list[float]] = {}
    for x in ran:
        if x["method"] == "milp" and x["status"] == "optimal" and not x["variant"]:
            by_instance.setdefault(x["instance"], []).append(float(x["upper"]))
    assert any(len(v) >= 2 for v in by_instance.values())
    for vals in by_instance.values():
        assert max(vals) <= min(vals) * (1 + 1e-6)
    # every certified upper bound is at least the sampled Jacobian norms of the same net and box
    from certify.bench.suites.lipschitz import random_net

    for x in ran:
        if x["instance"].startswith("random_"):
            shape = tuple(int(v) for v in x["instance"].split("_")[1].split("-"))
            center = np.random.default_rng(0).standard_normal(shape[0])
            assert float(x["upper"]) >= _sampled_lower(random_net(shape, 0), center, 0.1) * (1 - 1e-9)


def test_an_unavailable_backend_gives_a_skipped_row_with_the_reason(tmp_path, monkeypatch):
    from certify.bench import run_bench, runner

    real = runner.backend_status
    monkeypatch.setattr(runner, "backend_status",
                        lambda name: (False, "not installed on this test machine") if name == "cbc" else real(name))
    result = run_bench(["global"], quick=True, methods=["mip"], out=tmp_path, progress=False)
    rows = {r["backend"]: r for r in result.rows}
    assert rows["cbc"]["status"] == "skipped" and "not installed on this test machine" in rows["cbc"]["note"]
    assert rows["highs"]["status"] == "optimal"
    csv_rows = _rows(tmp_path / "runs.csv")
    assert [r["status"] for r in csv_rows if r["backend"] == "cbc"] == ["skipped"]
    assert "skipped" in (tmp_path / "summary.md").read_text()


def test_a_model_beyond_a_backends_licence_is_skipped_not_failed(tmp_path):
    from certify.bench import Case, run_bench, suite
    from certify.errors import BadInput

    def too_big(time_limit):
        raise BadInput("backend gurobi cannot solve this model: 2400 variables beyond the size-limited licence")

    @suite("_test_licence", "test only")
    def _build(cfg):
        return [Case("big", "test", "lipschitz", "highs", "milp", too_big)]

    try:
        result = run_bench(["_test_licence"], out=tmp_path, time_limit=1.0, progress=False)
    finally:
        from certify.bench.cases import SUITES

        SUITES.pop("_test_licence", None)
    assert result.rows[0]["status"] == "skipped" and "size-limited" in result.rows[0]["note"]


def test_own_models_with_points_and_methods(tmp_path, cli):
    from models.zoo import lipmip_suite_path

    path = lipmip_suite_path("lipmip_2-16-16-2")
    r = cli("bench", "--models", path, "--question", "lipschitz", "--methods", "bab,bounds", "--domain", "0,1",
            "--points", "2", "--radius", "0.1", "--out", tmp_path, "--json", "--no-progress")
    assert r.code == 0, r.err
    rows = _rows(tmp_path / "runs.csv")
    assert {(x["instance"], x["method"]) for x in rows} == {(f"lipmip_2-16-16-2_x{k}", m) for k in (0, 1)
                                                          for m in ("bab", "bounds")}
    for k in (0, 1):
        bab = next(x for x in rows if x["instance"].endswith(f"x{k}") and x["method"] == "bab")
        bounds = next(x for x in rows if x["instance"].endswith(f"x{k}") and x["method"] == "bounds")
        assert bab["status"] == "optimal"
        assert float(bounds["upper"]) >= float(bab["lower"]) * (1 - 1e-9)  # a bound never below the exact value


def test_resume_reuses_finished_runs_and_refuses_other_settings(tmp_path, cli):
    args = ("bench", "global", "--quick", "--methods", "naive,eclipse-fast", "--out", tmp_path, "--json", "--no-progress")
    first = cli(*args)
    assert first.code == 0, first.err
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    again = cli(*args, "--resume")
    assert again.code == 0
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines  # nothing ran twice
    other = cli("bench", "global", "--quick", "--methods", "naive", "--out", tmp_path, "--resume", "--no-progress")
    assert_bad_input(other, "other settings")


def test_listing_the_suites(cli):
    r = cli("bench")
    assert r.code == 0 and "lipschitz" in r.out and "verify" in r.out
    doc = cli("bench", "--list", "--json").json()
    assert {"lipschitz", "global", "privacy", "radius", "verify", "ptr", "utility"} <= set(doc["suites"])


@pytest.mark.parametrize("argv, fragments", [
    (("bench", "nosuch"), ("unknown benchmark suite", "lipschitz")),
    (("bench", "global", "--repeat", "0"), ("--repeat",)),
    (("bench", "global", "--backends", "cplex"), ("unknown back-end", "highs")),
    (("bench", "global", "--time-limit", "-1"), ("--time-limit",)),
    (("bench", "--models", "/nonexistent/model.onnx"), ("does not exist",)),
    (("bench", "global", "--models", "x.onnx"), ("not both",)),
    (("bench", "--models", "/nonexistent", "--question", "verify"), ("invalid choice",)),
])
def test_bad_input_exits_2_with_one_line(cli, tmp_path, argv, fragments):
    r = cli(*argv, "--out", tmp_path)
    assert r.code == 2 and "Traceback" not in r.err
    for f in fragments:
        assert f.lower() in r.err.lower(), (f, r.err)


@given(st.lists(st.floats(0.001, 100.0), min_size=1, max_size=7), st.lists(st.booleans(), min_size=7, max_size=7))
def test_aggregate_medians_lie_in_the_range_and_count_solved_runs(seconds, solved):
    from certify.bench.tables import aggregate

    rows = [{"suite": "s", "instance": "i", "family": "f", "question": "q", "backend": "highs", "method": "milp",
             "variant": "", "seconds": t, "status": "optimal" if ok else "time_limit", "solved": ok, "bound": 1.0}
            for t, ok in zip(seconds, solved)]
    (rec,) = aggregate(rows)
    assert rec["min_seconds"] <= rec["median_seconds"] <= rec["max_seconds"]
    assert rec["solved"] == sum(solved[:len(seconds)]) and rec["runs"] == len(seconds)
    assert re.fullmatch(r"[a-z_/]+", rec["status"])
