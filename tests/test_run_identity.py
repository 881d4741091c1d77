"""One run identity for every resumable output (issue 26, point 4): `certify radius --points --out`,
`certify report`, `certify bench` and `certify verify --instances --out` resume only the run that
wrote their output; another run is refused (exit 2, naming what differs) or, with --overwrite,
started afresh; rows are never mixed.

Oracles: onnxruntime's predicted class and a direct single-point run for radius rows, a fresh run
into a new output for overwritten ones, direct `certify verify` runs for instance rows, and counts
of task calls for resumed runs."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from certify.batch import run_batch
from certify.errors import BadInput
from certify.runs import RunIdentity, claim_file, item_sha256, sidecar
from models.zoo import DATA, random_relu_net
from tests.conftest import assert_bad_input
from tests.lipschitz_oracles import random_weights, write_onnx
from tests.robustness_oracles import onnxruntime_outputs


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> SimpleNamespace:
    d = tmp_path_factory.mktemp("runs")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (3, 2)), rng.uniform(-1, 1, (3, 2))
    np.savetxt(d / "a.csv", a, delimiter=",")  # %.18e: the values read back exactly
    np.savetxt(d / "b.csv", b, delimiter=",")
    return SimpleNamespace(model=write_onnx(random_weights((2, 8, 2), 1), d / "m.onnx"),
                           other=write_onnx(random_weights((2, 8, 2), 2), d / "other.onnx"),
                           a=a, b=b, pa=d / "a.csv", pb=d / "b.csv")


def _radius(cli, model, points, out, *extra):
    return cli("radius", model, "--points", points, "--out", out, "--no-exact", "--json", *extra)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _count_calls(monkeypatch, module, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda i, *a, **k: calls.append(i) or real(i, *a, **k))
    return calls


# --------------------------------------------------------------------------------------- radius
def test_points_of_another_file_are_refused_and_overwrite_gives_their_rows(cli, files, tmp_path):
    """The reproduction of issue 26: points a.csv then b.csv with the same --out."""
    out = tmp_path / "r.jsonl"
    assert _radius(cli, files.model, files.pa, out).code == 0
    before = out.read_text()
    refused = _radius(cli, files.model, files.pb, out)
    assert_bad_input(refused, "another points file", "row 0 differs", "--overwrite")
    assert out.read_text() == before  # nothing appended, nothing mixed
    r = _radius(cli, files.model, files.pb, out, "--overwrite")
    assert r.code == 0, r.err
    rows = r.json()["rows"]  # --json: one object (issue 27)
    assert [row["point"] for row in rows] == [row["point"] for row in _lines(out)] == files.b.tolist()
    for i, (row, x) in enumerate(zip(rows, files.b)):
        assert row["index"] == i
        assert row["predicted_class"] == int(np.argmax(onnxruntime_outputs(files.model, x)))
        single = cli("radius", files.model, "--point=" + ",".join(map(repr, x.tolist())), "--no-exact", "--json").json()
        assert (row["lower"], row["upper"], row["status"]) == (single["lower"], single["upper"], single["status"])


@pytest.mark.parametrize("change, named", [
    ("row", ("another points file", "row 1 differs")),
    ("setting", ("other settings", "norm", "linf", "l1")),
    ("model", ("another model",)),
])
def test_radius_batch_of_another_run_is_refused_or_started_afresh(cli, files, tmp_path, change, named):
    out = tmp_path / "r.jsonl"
    assert _radius(cli, files.model, files.pa, out).code == 0
    before = out.read_text()
    model, points, extra = files.model, files.pa, ()
    if change == "row":
        changed = files.a.copy()
        changed[1, 0] += 1e-9
        points = tmp_path / "changed.csv"
        np.savetxt(points, changed, delimiter=",")
    elif change == "setting":
        extra = ("--norm", "l1")
    else:
        model = files.other
    assert_bad_input(_radius(cli, model, points, out, *extra), *named)
    assert out.read_text() == before
    fresh = _radius(cli, model, points, out, *extra, "--overwrite")
    reference = _radius(cli, model, points, tmp_path / "reference.jsonl", *extra)
    assert fresh.code == reference.code == 0
    keys = ("index", "point", "predicted_class", "lower", "upper", "status", "input_norm", "model")
    assert [{k: r[k] for k in keys} for r in _lines(out)] == [{k: r[k] for k in keys}
                                                            for r in _lines(tmp_path / "reference.jsonl")]


def test_identical_rerun_resumes_without_recomputing(cli, files, tmp_path, monkeypatch):
    import certify.robustness.batch as batch

    out = tmp_path / "summary.csv"  # a .csv summary: its journal summary.csv.jsonl is what resumes
    first = cli("radius", files.model, "--points", files.pa, "--out", out, "--no-exact", "--json")
    assert first.code == 0, first.err
    journal = tmp_path / "summary.csv.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    calls = _count_calls(monkeypatch, batch, "_radius_task")
    again = cli("radius", files.model, "--points", files.pa, "--out", out, "--no-exact", "--json")
    assert again.code == 0 and calls == [] and again.out == first.out
    journal.write_text("".join(lines[:2]) + lines[2][:30])  # killed while writing the last row
    resumed = cli("radius", files.model, "--points", files.pa, "--out", out, "--no-exact", "--json")
    assert resumed.code == 0 and calls == [2]
    keys = ("index", "point", "lower", "upper", "status")
    assert [{k: x[k] for k in keys} for x in resumed.json()["rows"]] == [{k: x[k] for k in keys} for x in first.json()["rows"]]
    assert len(list(csv.reader(open(out)))) == 4


def test_results_without_identity_are_refused_unless_overwrite(cli, files, tmp_path):
    out = tmp_path / "r.jsonl"
    assert _radius(cli, files.model, files.pa, out).code == 0
    sidecar(out).unlink()  # as written by an older certify
    assert_bad_input(_radius(cli, files.model, files.pa, out), "no run identity", "r.jsonl.run.json", "--overwrite")
    assert _radius(cli, files.model, files.pa, out, "--overwrite").code == 0
    assert sidecar(out).exists() and len(_lines(out)) == 3


def test_bad_out_values_exit_2(cli, files, tmp_path):
    points = tmp_path / "points.jsonl"
    points.write_text("".join(json.dumps(list(x)) + "\n" for x in files.a))
    text = points.read_text()
    # the user's own files are never results files: refused even with --overwrite, left untouched
    assert_bad_input(_radius(cli, files.model, points, points, "--overwrite"), "not a results file")
    assert points.read_text() == text
    table = tmp_path / "a.csv"
    shutil.copy(files.pa, table)
    assert_bad_input(_radius(cli, files.model, files.pa, table, "--overwrite"), "not a radius results table")
    assert table.read_bytes() == files.pa.read_bytes()
    assert_bad_input(_radius(cli, files.model, files.pa, tmp_path), "is a directory")
    assert_bad_input(_radius(cli, files.model, files.pa, table / "r.jsonl"), "cannot write")  # under a file
    assert_bad_input(cli("radius", files.model, "--points", files.pa, "--overwrite"), "--overwrite applies to --out")
    assert_bad_input(cli("report", files.model, "--data", files.pa, "--radius", "0.1", "--out", table),
                     "not a directory")
    assert_bad_input(cli("report", files.model, "--data", files.pa, "--radius", "0.1", "--out", table / "d"),
                     "cannot write")
    listing = DATA / "vnncomp_test" / "test_instances.csv"
    assert_bad_input(cli("verify", "--instances", listing, "--out", tmp_path), "is a directory")
    assert_bad_input(cli("verify", "--instances", listing, "--out", files.model), "not a results file")
    assert_bad_input(cli("bench", "global", "--quick", "--out", table), "not a directory")


# ---------------------------------------------------------------------------------------- report
REPORT = dict(epsilon=1.0, delta=1e-3, curve=0, progress=False, time_limit=30, step_time_limit=5, html=False)


def test_report_resumes_only_its_own_run(tmp_path, monkeypatch, cli, files):
    import certify.report.build as build
    from certify.report import comparable, sensitivity_report

    net, x = random_relu_net([2, 8, 2], 3), np.random.default_rng(5).uniform(-1, 1, (4, 2))
    out = tmp_path / "report"
    first = sensitivity_report(net, x, 0.1, out=str(out), **REPORT)
    calls = _count_calls(monkeypatch, build, "certify_point")
    again = sensitivity_report(net, x, 0.1, out=str(out), **REPORT)
    assert calls == [] and comparable(again) == comparable(first)
    changed = x.copy()
    changed[2, 1] = 0.5
    certificates = (out / "certificates.jsonl").read_text()
    for kwargs, match in ((dict(data=changed), r"another data set \(row 2 differs\)"),
                          (dict(net=random_relu_net([2, 8, 2], 4)), "another model"),
                          (dict(epsilon=2.0), r"other settings \(epsilon: 1.0 before, 2.0 now\)")):
        args = {"net": net, "data": x, **REPORT, **kwargs}
        with pytest.raises(BadInput, match=match):
            sensitivity_report(args.pop("net"), args.pop("data"), 0.1, out=str(out), **args)
    assert (out / "certificates.jsonl").read_text() == certificates and calls == []
    fresh = sensitivity_report(net, changed, 0.1, out=str(out), overwrite=True, **REPORT)
    reference = sensitivity_report(net, changed, 0.1, out=str(tmp_path / "reference"), **REPORT)
    assert comparable(fresh) == comparable(reference)
    assert sorted(calls) == sorted(list(range(4)) * 2)  # every point twice: the overwrite and the reference
    # the CLI: exit 2 naming the setting
    cli_out = tmp_path / "cli"
    base = ("report", files.model, "--data", files.pa, "--out", cli_out, "--curve", "0", "--no-html", "--json")
    assert cli(*base, "--radius", "0.1").code == 0
    assert_bad_input(cli(*base, "--radius", "0.2"), "other settings (radius: 0.1 before, 0.2 now)", "--overwrite")
    assert cli(*base, "--radius", "0.2", "--overwrite").json()["radius"] == 0.2


# ----------------------------------------------------------------------------------------- bench
def test_bench_resumes_remeasures_or_refuses(cli, tmp_path, monkeypatch):
    import certify.bench.runner as runner

    out = tmp_path / "bench"
    args = ("bench", "global", "--quick", "--methods", "naive", "--out", out, "--json", "--no-progress")
    first = cli(*args)
    assert first.code == 0, first.err
    planned = first.json()["runs"]
    journal = (out / "runs.jsonl").read_text()
    calls = _count_calls(monkeypatch, runner, "run_one")
    assert cli(*args, "--resume").code == 0 and calls == []  # the same benchmark: nothing runs again
    assert (out / "runs.jsonl").read_text() == journal
    for extra in (("--resume",), ()):  # another benchmark, with or without --resume
        assert_bad_input(cli(*args, "--seed", "1", *extra), "other settings (seed: 0 before, 1 now)", "--overwrite")
    assert (out / "runs.jsonl").read_text() == journal and calls == []
    assert cli(*args).code == 0 and sorted(calls) == list(range(planned))  # without --resume: measured afresh
    calls.clear()
    assert cli(*args, "--seed", "1", "--overwrite").code == 0 and sorted(calls) == list(range(planned))
    with open(out / "runs.csv", newline="") as fh:
        assert {row["seed"] for row in csv.DictReader(fh)} == {"1"}
    (out / "run.json").unlink()  # an older certify's directory
    assert_bad_input(cli(*args, "--seed", "1", "--resume"), "no run identity", "--overwrite")


def test_bench_of_a_changed_model_file_is_refused(cli, tmp_path):
    model = tmp_path / "net.onnx"
    write_onnx(random_weights((2, 6, 2), 1), model)
    args = ("bench", "--models", model, "--question", "global", "--methods", "naive", "--out", tmp_path / "b",
            "--json", "--no-progress", "--resume")
    assert cli(*args).code == 0
    write_onnx(random_weights((2, 6, 2), 2), model)  # same name, other weights
    assert_bad_input(cli(*args), "another model")


# ---------------------------------------------------------------------------- verify --instances
def test_verify_instances_resume_only_the_same_files_and_settings(cli, tmp_path):
    src = DATA / "vnncomp_test"
    for name in ("test_nano.onnx", "test_nano.vnnlib", "test_tiny.onnx", "test_tiny.vnnlib"):
        shutil.copy(src / name, tmp_path / name)
    listing = tmp_path / "instances.csv"
    listing.write_text("test_nano.onnx,test_nano.vnnlib,30\ntest_tiny.onnx,test_tiny.vnnlib,30\n")
    out = tmp_path / "results.csv"
    run = ("verify", "--instances", listing, "--out", out, "--json")
    assert cli(*run).code == 0
    again = cli(*run).json()
    assert (again["skipped"], again["run"]) == (2, 0)
    rows = out.read_text()
    assert_bad_input(cli(*run, "--seed", "1"), "other settings (seed: 0 before, 1 now)")
    prop = tmp_path / "test_tiny.vnnlib"
    prop.write_text(prop.read_text().replace("(>= Y_0 100)", "(>= Y_0 -100)"))  # same name, another property
    assert_bad_input(cli(*run), "another instance list (row 1 differs)", "--overwrite")
    assert out.read_text() == rows
    fresh = cli(*run, "--overwrite").json()
    assert (fresh["skipped"], fresh["run"]) == (0, 2)
    results = {(r[1], r[2]): r[4] for r in csv.reader(open(out))}
    assert len(results) == 2
    for onnx, vnnlib in results:
        direct = cli("verify", tmp_path / onnx, tmp_path / vnnlib, "--json").json()
        assert results[(onnx, vnnlib)] == direct["result"]
    assert results[("test_tiny.onnx", "test_tiny.vnnlib")] == "sat"  # the new property, not the old row


# ------------------------------------------------------------------------------- the pieces alone
def square(index, item):
    return {"value": float(np.dot(item, item))}


def test_run_batch_refuses_rows_computed_for_other_inputs(tmp_path):
    items = [[float(i), 1.0] for i in range(4)]
    out = tmp_path / "r.jsonl"
    run_batch(square, items, out=out, progress=False)
    lines = _lines(out)
    assert [line["input_sha256"] for line in lines] == [item_sha256(x) for x in items]
    tampered = [dict(line) for line in lines]
    tampered[2]["input_sha256"] = item_sha256([9.0, 9.0])
    out.write_text("".join(json.dumps(line) + "\n" for line in tampered))
    with pytest.raises(BadInput, match="row 2 of .* another input"):
        run_batch(square, items, out=out, progress=False)
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    changed = [list(x) for x in items]
    changed[3][1] = 2.0  # the same rows, but item 3 is another input now
    with pytest.raises(BadInput, match="row 3 of .* another input"):
        run_batch(square, changed, out=out, progress=False)
    with pytest.raises(BadInput, match="holds row 3 but this run has 3 inputs"):
        run_batch(square, items[:3], out=out, progress=False)
    del lines[1]["input_sha256"]
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(BadInput, match="row 1 .* no input hash"):
        run_batch(square, items, out=out, progress=False)


def test_identity_names_the_first_difference_and_claims_files(tmp_path):
    base = RunIdentity.of("radius", {"norm": "linf", "time_limit": None}, "m" * 64, ["a", "b"], "points file")
    stored = json.loads(json.dumps(base.to_dict()))
    assert base.difference(stored) is None and base.sha256 == stored["sha256"]
    cases = [
        (RunIdentity.of("report", base.settings, base.model, base.rows, "points file"), "of certify radius"),
        (RunIdentity.of("radius", base.settings, "n" * 64, base.rows, "points file"), "another model"),
        (RunIdentity.of("radius", {"norm": "linf", "time_limit": 5}, base.model, base.rows, "points file"),
         "time_limit: unset before, 5 now"),
        (RunIdentity.of("radius", base.settings, base.model, ["a", "c"], "points file"), "row 1 differs"),
        (RunIdentity.of("radius", base.settings, base.model, ["a"], "points file"), "2 rows before, 1 now"),
    ]
    for other, fragment in cases:
        assert fragment in other.difference(stored)
    out = tmp_path / "o.jsonl"
    assert claim_file(out, base) is False and out.exists() and sidecar(out).exists()
    out.write_text('{"index": 0}\n')
    assert claim_file(out, base) is True  # same run: resume
    other = cases[3][0]
    with pytest.raises(BadInput, match=r"o.jsonl holds a run of another points file \(row 1 differs\)"):
        claim_file(out, other)
    assert claim_file(out, other, overwrite=True) is False and out.read_text() == ""
    assert json.loads(sidecar(out).read_text())["sha256"] == other.sha256
