"""`certify report` and `certify ptr` (issue 13): report.json against its schema, identical reports from
every executor (in process, local processes, a Dask LocalCluster) and after a resumed run, the CLI's
JSON and bad input, and report.html rendered by headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from certify.report import comparable, load_report_schema, sensitivity_report
from models.zoo import random_relu_net, vnncomp_test_path
from tests.conftest import assert_bad_input
from tests.lipschitz_oracles import random_weights, write_onnx

SMALL = str(vnncomp_test_path("test_small"))  # 1 input -> 1 output
VALIDATOR = jsonschema.Draft202012Validator(load_report_schema(), format_checker=jsonschema.FormatChecker())


def _net():
    return random_relu_net((2, 6, 6, 2), seed=4)


def _data(n: int = 6) -> np.ndarray:
    return np.random.default_rng(8).uniform(-1, 1, (n, 2))


FAST = dict(epsilon=1.0, delta=1e-3, curve=2, progress=False, time_limit=60, step_time_limit=5)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    sensitivity_report(_net(), _data(), 0.1, out=str(out), **FAST)
    return out


def test_report_json_validates_against_its_schema(report_dir):
    report = json.loads((report_dir / "report.json").read_text())
    VALIDATOR.validate(report)
    assert report["schema"] == "certify.report/1" and len(report["points"]) == 6
    assert [p["rule"] for p in report["proposals"]] == ["mean+3std", "q0.95", "q0.99"]
    uppers = [p["upper"] for p in report["points"]]
    stats = report["statistics"]["upper"]
    assert stats["mean"] == pytest.approx(np.mean(uppers)) and stats["std"] == pytest.approx(np.std(uppers, ddof=1))
    first = report["proposals"][0]
    assert first["value"] >= np.mean(uppers) + 3 * np.std(uppers, ddof=1) * (1 - 1e-12)
    # a quantile rule picks a certified bound (raised by the tie margin)
    assert any(report["proposals"][1]["value"] == pytest.approx(u * (1 + 1e-6), rel=1e-15) for u in uppers)
    for pr in report["proposals"]:
        assert pr["noise_scale"] == pytest.approx(pr["value"] * 0.1 / 1.0 * (1 + 2**-10), rel=1e-12)
        per_point = [pt["ptr"][pr["rule"]]["release_probability"] for pt in report["points"]]
        assert pr["release_rate"] == pytest.approx(np.mean(per_point))
    rates = [c["release_rate"] for c in report["curve"]]
    assert rates == sorted(rates)  # a larger proposal never releases less
    bad = dict(report, radius=-1.0)
    assert not VALIDATOR.is_valid(bad)


def test_schema_rejects_missing_and_unknown_fields(report_dir):
    report = json.loads((report_dir / "report.json").read_text())
    for key in ("model", "points", "proposals"):
        assert not VALIDATOR.is_valid({k: v for k, v in report.items() if k != key})
    assert not VALIDATOR.is_valid(dict(report, surprise=1))


def _strip_backend_notes(report: dict) -> dict:
    return comparable(report)


@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_executors_give_identical_reports(report_dir, tmp_path, executor):
    reference = json.loads((report_dir / "report.json").read_text())
    if executor == "processes":
        other = sensitivity_report(_net(), _data(), 0.1, out=str(tmp_path), workers=2, **FAST)
    else:
        distributed = pytest.importorskip("distributed")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                      dashboard_address=None) as cluster:
            other = sensitivity_report(_net(), _data(), 0.1, out=str(tmp_path), scheduler=cluster.scheduler_address,
                                       **FAST)
    assert comparable(other) == comparable(reference)
    assert other["timing"]["workers"] == (2 if executor == "processes" else 1)


def test_resumed_run_gives_the_same_report(report_dir, tmp_path, monkeypatch):
    out = tmp_path / "resume"
    shutil.copytree(report_dir, out)
    for name, keep in (("certificates.jsonl", 4), ("searches.jsonl", 2)):  # as if killed mid-run
        lines = (out / name).read_text().splitlines(keepends=True)
        (out / name).write_text("".join(lines[:keep]) + lines[keep][: len(lines[keep]) // 2])
    (out / "report.json").unlink()
    import certify.report.build as build

    calls: list[int] = []
    real = build.certify_point
    monkeypatch.setattr(build, "certify_point", lambda i, *a, **k: calls.append(i) or real(i, *a, **k))
    resumed = sensitivity_report(_net(), _data(), 0.1, out=str(out), **FAST)
    assert calls == [4, 5]  # only the points that were not finished
    assert comparable(resumed) == comparable(json.loads((report_dir / "report.json").read_text()))


def test_a_directory_with_other_settings_is_refused(report_dir):
    from certify.errors import BadInput

    with pytest.raises(BadInput, match=r"other settings \(radius: 0.1 before, 0.2 now\).*--overwrite"):
        sensitivity_report(_net(), _data(), 0.2, out=str(report_dir), **FAST)


# ------------------------------------------------------------------------------------------- CLI
def test_cli_ptr_json(cli, tmp_path):
    model = write_onnx(random_weights((2, 6, 6, 2), 4), tmp_path / "m.onnx")
    args = ("ptr", model, "--point", "0.1,-0.2", "--radius", "0.1", "--epsilon", "1", "--delta", "1e-3",
            "--proposal", "20", "--seed", "3", "--json")
    a, b = cli(*args), cli(*args)
    assert a.code == 0, a.err
    ra = a.json()
    assert ra == {**b.json(), "seconds": ra["seconds"], "steps": ra["steps"]}  # same seed, same release
    for key in ("released", "output", "phi", "phi_noisy", "threshold", "noise_scale", "r_star", "guarantee", "steps",
                "schema", "kind", "lower", "upper", "status", "certified"):
        assert key in ra
    assert ra["guarantee"]["epsilon"] == 2.0 and ra["guarantee"]["delta"] == 5e-4 and ra["guarantee"]["radius"] == 0.1
    assert all({"index", "radius", "decision", "lower", "upper", "status", "seconds"} <= set(s) for s in ra["steps"])
    assert "NOT secure" in ra["sampler"]
    human = cli(*args[:-1])
    assert human.code == 0 and "propose-test-release" in human.out and "guarantee" in human.out


@pytest.mark.parametrize("flag, value, fragment", [
    ("--delta", "0", "delta"), ("--delta", "1", "delta"), ("--delta", "1.5", "delta"), ("--epsilon", "0", "epsilon"),
    ("--epsilon", "-1", "epsilon"), ("--proposal", "0", "proposal"), ("--proposal", "-3", "proposal"),
    ("--radius", "0", "radius"), ("--radius", "-0.1", "radius"), ("--point", "1,2", "--point"),
    ("--seed", "-1", "seed"),
])
def test_cli_ptr_bad_input(cli, flag, value, fragment):
    args = {"--point": "0.5", "--radius": "0.1", "--epsilon": "1", "--delta": "1e-5", "--proposal": "3"}
    args[flag] = value
    argv = ["ptr", SMALL] + [f"{k}={v}" for k, v in args.items()]
    assert_bad_input(cli(*argv), fragment)


@pytest.fixture
def data_files(tmp_path) -> dict[str, Path]:
    files = {"good": tmp_path / "good.csv", "wide": tmp_path / "wide.csv", "empty": tmp_path / "empty.csv",
             "empty_npy": tmp_path / "empty.npy", "nan": tmp_path / "nan.json"}
    files["good"].write_text("0.2\n0.5\n")
    files["wide"].write_text("0.2,0.3\n0.5,0.1\n")
    files["empty"].write_text("")
    np.save(files["empty_npy"], np.zeros((0, 1)))
    files["nan"].write_text("[[0.1], [NaN]]")
    return files


@pytest.mark.parametrize("case, fragment", [
    ("wide", "takes 1 input"), ("empty", "no points"), ("empty_npy", "no points"), ("nan", "NaN"),
])
def test_cli_report_bad_data(cli, data_files, tmp_path, case, fragment):
    assert_bad_input(cli("report", SMALL, "--data", data_files[case], "--radius", "0.1", "--out", tmp_path / "o"),
                     fragment)


@pytest.mark.parametrize("flag, value, fragment", [
    ("--delta", "0", "delta"), ("--delta", "1", "delta"), ("--epsilon", "0", "epsilon"), ("--radius", "0", "radius"),
    ("--radius", "-1", "radius"), ("--rules", "median", "rule"), ("--workers", "0", "workers"),
    ("--scheduler", "localhost:1", "scheduler"),
])
def test_cli_report_bad_parameters(cli, data_files, tmp_path, flag, value, fragment):
    args = {"--data": str(data_files["good"]), "--radius": "0.1", "--out": str(tmp_path / "o")}
    args[flag] = value
    assert_bad_input(cli("report", SMALL, *[f"{k}={v}" for k, v in args.items()]), fragment)


def test_cli_report_json_summary(cli, data_files, tmp_path):
    res = cli("report", SMALL, "--data", data_files["good"], "--radius", "0.1", "--out", tmp_path / "r", "--curve", "0",
              "--no-html", "--json")
    assert res.code == 0, res.err
    summary = res.json()
    assert summary["points"] == 2 and summary["html"] is None and os.path.isfile(summary["report"])
    report = json.loads(Path(summary["report"]).read_text())
    VALIDATOR.validate(report)
    assert report["model"]["file_sha256"] and report["data"]["source"].endswith("good.csv")


# ------------------------------------------------------------------------------ HTML in Chromium
def _chromium() -> str:
    """The chromium binary; installed with apt-get when absent and running as root (as CI does)."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("headless Chromium is not installed and cannot be installed here (apt-get needs root): "
                    "install Debian's chromium package to run this test")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if proc.returncode != 0:
            pytest.skip(f"could not install chromium with apt-get ({proc.stderr.strip().splitlines()[-1:]})")
    path = shutil.which("chromium")
    if not path:
        pytest.skip("apt-get installed chromium but no chromium binary is on PATH")
    return path


CHECK = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.type)), true);
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-decoded', ok);
  document.body.setAttribute('data-errors', JSON.stringify(window.__errors));
});
</script>"""


def _run_chromium(binary: str, url: str, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"]
        return subprocess.run([binary, *flags, *extra, url], capture_output=True, text=True, timeout=180)


def test_report_html_renders_in_headless_chromium(report_dir, tmp_path):
    binary = _chromium()
    html = (report_dir / "report.html").read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html  # self-contained, static
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("<head>", "<head>" + CHECK, 1))
    dom = _run_chromium(binary, probe.as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    import re

    images = int(re.search(r'data-images="(\d+)"', dom.stdout).group(1))
    decoded = int(re.search(r'data-decoded="(\d+)"', dom.stdout).group(1))
    found = re.search(r"data-errors='([^']*)'|data-errors=\"([^\"]*)\"", dom.stdout)
    errors = json.loads((found.group(1) if found.group(1) is not None else found.group(2)).replace("&quot;", '"'))
    assert images == 3 and decoded == 3, (images, decoded)
    assert errors == []
    assert [line for line in dom.stderr.splitlines() if "CONSOLE" in line] == []  # no console messages at all
    shot = tmp_path / "shot.png"
    res = _run_chromium(binary, (report_dir / "report.html").as_uri(), f"--screenshot={shot}", "--window-size=1200,1800")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(str(shot))[..., :3]
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    dark = np.mean(np.min(pixels, axis=2) < 0.9)  # text, tables and plots
    colours = len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert dark > 0.02 and colours > 50, (dark, colours)


def test_ptr_point_batch_rows_match_single_queries(tmp_path):
    """Many PTR queries through run_batch (seed + index per query): the same rows as one `ptr` call each,
    and a rerun on the same JSON-lines file does no work."""
    from certify.batch import run_batch
    from certify.ptr import ptr
    from certify.report.tasks import ptr_point

    net, xs = _net(), _data(3)
    ctx = dict(net=net, radius=0.1, epsilon=1.0, delta=1e-3, proposal=3.0, seed=10)
    out = tmp_path / "ptr.jsonl"
    rows = run_batch(ptr_point, list(xs), context=ctx, out=str(out), progress=False)
    for i, (x, row) in enumerate(zip(xs, rows)):
        r = ptr(net, x, 0.1, epsilon=1.0, delta=1e-3, proposal=3.0, sampler=10 + i)
        assert (row["released"], row["phi"], row["decided"]) == (r.released, r.phi, r.decided)
        assert row["output"] == (None if r.output is None else list(r.output))
    again = run_batch(lambda *a, **k: pytest.fail("nothing left to do"), list(xs), context=ctx, out=str(out),
                      progress=False)
    assert [r["released"] for r in again] == [r["released"] for r in rows]


def test_report_html_names_what_proved_each_upper_bound(report_dir):
    """The per-point table of report.html: one row per JSON point, whose "upper proven by" cell is the
    point's `proven_by` (a non-empty description), next to the same upper bound."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self._cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self._cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.tables[-1][-1].append(self._cell)
                self._cell = None

        def handle_data(self, data):
            if self._cell is not None:
                self._cell += data

    report = json.loads((report_dir / "report.json").read_text())
    parser = Tables()
    parser.feed((report_dir / "report.html").read_text())
    [table] = [t for t in parser.tables if t and "upper proven by" in t[0]]
    head, rows = table[0], table[1:]
    assert len(rows) == len(report["points"])
    col, up = head.index("upper proven by"), head.index("upper")
    for row, point in zip(rows, report["points"]):
        assert point["proven_by"] and row[col] == point["proven_by"]
        assert float(row[up]) == pytest.approx(point["upper"], rel=1e-5)
