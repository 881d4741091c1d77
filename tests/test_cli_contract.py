"""The command-line contract (issue 27, points 4 and 5): every bad input exits 2 with one line;
output cannot be corrupted: data prints literally (no markup), a closed stdout gives exit 141 for
every command, every --json output is one object naming its schema and valid against it, a
points file's NaN row is an error row, notes quote the user's units, no warnings on stderr."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from models.zoo import lipmip_suite_path, vnncomp_test_path
from tests.conftest import assert_bad_input
from tests.lipschitz_oracles import write_onnx

SMALL = str(vnncomp_test_path("test_small"))  # 1 input -> 1 output
CLASSIFIER = str(lipmip_suite_path("lipmip_2-16-16-2"))  # 2 inputs -> 2 classes
PROP = SMALL.replace(".onnx", ".vnnlib")
INSTANCES = str(Path(SMALL).parent / "test_instances.csv")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Models, properties and points files of the regressions (paths as strings)."""
    from tests.test_audit_cli import _broken_models, _nested_vnnlib

    root = tmp_path_factory.mktemp("contract")
    out = {k: str(v) for k, v in _broken_models(root).items()}
    for name, inner in (("nested_ok", "(<= X_0 1.0)"), ("nested_bad", "(<= X_0 X_7)")):
        (root / f"{name}.vnnlib").write_text(_nested_vnnlib(5000, inner))
        out[name] = str(root / f"{name}.vnnlib")
    for name in ("[red]evil.onnx", "[a].onnx"):
        shutil.copy(SMALL, root / name)
        out[name] = str(root / name)
    # y = relu(1e300 x) - relu(1e300 x), three times: NaN (inf - inf) at x = 1e30
    out["nan_out"] = write_onnx([(np.array([[1e300], [1e300]]), np.zeros(2)),
                                 (np.array([[1.0, -1.0]] * 3), np.zeros(3))], root / "nan_out.onnx")
    (root / "points.csv").write_text("0.5,0.5\nnan,0.3\n0.2,0.3\n1e300,0\n")
    out["points"] = str(root / "points.csv")
    (root / "data.csv").write_text("0.2\n0.6\n")
    out["data"] = str(root / "data.csv")
    os.mkfifo(root / "fifo")
    out["fifo"] = str(root / "fifo")
    (root / "foreign.txt").write_text("not certify's\n")
    out["foreign"] = str(root / "foreign.txt")
    out["root"] = str(root)
    return out


# ----------------------------------------------------------------------------- 4. bad input -> exit 2
def test_onnx_input_dimension_of_size_zero(cli, files):
    assert_bad_input(cli("inspect", files["zero_dim"]), "dimension of size 0", "re-export")


def test_onnx_external_data(cli, files):
    """Weights in a file beside the model load; a missing, foreign, absolute or short data file is
    refused naming the tensor and the file (never read from elsewhere)."""
    r = cli("eval", files["ext_ok"], "--input", "2", "--json")
    assert r.code == 0, r.err
    assert r.json()["output"] == [1.0]
    assert_bad_input(cli("inspect", files["ext_missing"]), "tensor 'W'", "missing from the model's folder")
    assert_bad_input(cli("inspect", files["ext_outside"]), "'../outside.data'", "outside the model's folder")
    assert_bad_input(cli("inspect", files["ext_absolute"]), "relative location")
    assert_bad_input(cli("inspect", files["ext_short"]), "truncated")


@pytest.mark.parametrize("argv,option", [
    (["lipschitz", SMALL, "--center", "0.5", "--radius", "1e308"], "--radius"),
    (["lipschitz", SMALL, "--center", "-1e300", "--radius", "0.1"], "--center"),
    (["radius", CLASSIFIER, "--point", "0.5,0.5", "--max-radius", "1e308"], "--max-radius"),
    (["ptr", SMALL, "--point", "0.5", "--radius", "1e308", "--epsilon", "1", "--delta", "1e-5", "--proposal", "30"],
     "--radius"),
    (["report", SMALL, "--data", "DATA", "--radius", "1e308", "--out", "OUT"], "--radius"),
    (["bench", "--models", SMALL, "--methods", "bounds", "--radius", "1e308", "--out", "OUT"], "--radius"),
])
def test_huge_numbers_are_refused(cli, files, tmp_path, argv, option):
    argv = [files["data"] if a == "DATA" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert_bad_input(cli(*argv), option, "out of range", "up to 1e+38")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [
    ["lipschitz", SMALL, "--center", "0.5", "--radius", "0.1"],
    ["radius", CLASSIFIER, "--point", "0.5,0.5"],
    ["hyperrectangle", CLASSIFIER, "--point", "0.5,0.5"],
    ["ptr", SMALL, "--point", "0.5", "--radius", "0.1", "--epsilon", "1", "--delta", "1e-5", "--proposal", "30"],
])
def test_thread_counts_beyond_the_limit_are_refused(cli, argv):
    assert_bad_input(cli(*argv, "--threads", "100000"), "--threads must be an integer from 1 to 1024", "100000")
    assert_bad_input(cli(*argv, "--threads", "0"), "--threads must be an integer from 1 to 1024")


def test_deeply_nested_vnnlib_parses(cli, files):
    """5000 nested `and`s: no RecursionError (docs/verify.md: no recursion limit)."""
    r = cli("verify", SMALL, files["nested_ok"], "--timeout", "10")
    assert r.code == 0 and r.out.strip() in ("unsat", "sat"), r.err
    assert_bad_input(cli("verify", SMALL, files["nested_bad"]), "X_7 is used but not declared")


@pytest.mark.parametrize("argv", [
    ["verify", SMALL, PROP],
    ["verify", "--instances", INSTANCES],
    ["bench", "--models", SMALL, "--methods", "bounds", "--center", "0.5", "--out", "OUT"],
    ["radius", CLASSIFIER, "--point", "0.5,0.5"],
    ["ptr", SMALL, "--point", "0.5", "--radius", "0.1", "--epsilon", "1", "--delta", "1e-5", "--proposal", "30"],
])
def test_negative_seeds_are_refused(cli, tmp_path, argv):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert_bad_input(cli(*argv, "--seed", "-1"), "--seed must be an integer from 0", "-1")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("address", ["foo", "tcp://", "tcp://localhost:99999", "tcp://localhost:abc", ""])
def test_malformed_scheduler_is_refused(cli, files, address):
    assert_bad_input(cli("radius", CLASSIFIER, "--points", files["points"], "--scheduler", address), "tcp://HOST:PORT")
    assert_bad_input(cli("report", SMALL, "--data", files["data"], "--radius", "0.1", "--scheduler", address),
                     "tcp://HOST:PORT")


@pytest.mark.parametrize("value", ["1e19", "-9e18", "nan", "1e308"])
def test_target_class_that_is_no_index(cli, value):
    assert_bad_input(cli("radius", CLASSIFIER, "--point", "0.5,0.5", "--target-class", value), "target class")


def _out_cases(files, tmp_path):
    return {
        "radius": ["radius", CLASSIFIER, "--points", files["points"], "--backend", "highs"],
        "verify": ["verify", "--instances", INSTANCES, "--timeout", "5"],
        "report": ["report", SMALL, "--data", files["data"], "--radius", "0.1", "--curve", "0", "--no-html",
                   "--no-progress"],
        "bench": ["bench", "--models", SMALL, "--methods", "bounds", "--center", "0.5", "--no-progress"],
    }


@pytest.mark.parametrize("command", ["radius", "verify", "report", "bench"])
def test_bad_out_is_refused_before_anything_runs(cli, files, tmp_path, command, monkeypatch):
    """Empty, a FIFO or device (never emptied or deleted: /dev/null is one), a directory for a file
    output or a file for a directory output, a path under a file, a file certify did not write."""
    monkeypatch.chdir(tmp_path)  # an empty --out must not write into the current directory
    argv = _out_cases(files, tmp_path)[command]
    directory = command in ("report", "bench")
    assert_bad_input(cli(*argv, "--out="), "--out is empty")
    assert_bad_input(cli(*argv, "--out", files["fifo"]), "not a regular file")
    assert_bad_input(cli(*argv, "--out", files["foreign"] + "/x"), "cannot write")
    if directory:
        assert_bad_input(cli(*argv, "--out", files["foreign"]), "is a file, not a directory", "takes a directory")
    else:
        assert_bad_input(cli(*argv, "--out", files["root"]), "is a directory")
        assert_bad_input(cli(*argv, "--out", files["foreign"]))
    assert Path(files["foreign"]).read_text() == "not certify's\n" and list(tmp_path.iterdir()) == []


def test_claim_file_never_touches_a_device(tmp_path):
    """certify.runs refuses a non-regular --out itself (it used to unlink it and touch a regular file in
    its place: `--out /dev/null` as root replaced the device)."""
    from certify.errors import BadInput
    from certify.runs import RunIdentity, claim_file

    fifo = tmp_path / "fifo"  # (like /dev/null, without the risk of deleting it if this regresses)
    os.mkfifo(fifo)
    identity = RunIdentity.of("radius", {}, "0" * 64, [], "points file")
    with pytest.raises(BadInput, match="not a regular file"):
        claim_file(fifo, identity)
    assert fifo.exists() and not fifo.is_file()


# ----------------------------------------------------------------------------- 5. output
def test_model_names_and_vectors_print_literally(cli, files):
    """Rich markup is off for data: `[red]evil.onnx` keeps its name, `[nan, nan, nan]` prints."""
    r = cli("inspect", files["[red]evil.onnx"])
    assert r.code == 0 and r.out.startswith("[red]evil: input shape [1] (1 inputs)"), r.out
    assert cli("inspect", files["[a].onnx"]).out.startswith("[a]: ")
    r = cli("eval", files["nan_out"], "--input", "1e30")
    assert r.code == 0 and r.out.strip() == "output: [nan, nan, nan]", r.out
    assert cli("eval", files["nan_out"], "--input", "1e30", "--json").json()["output"] == ["nan"] * 3
    r = cli("calibrate", "laplace", "--epsilon", "1", "--sensitivity", "2")
    assert r.code == 0 and "[bold" not in r.out and "[/" not in r.out and r.out.startswith("laplace: b = 2")


def test_labels_keep_their_style_on_a_terminal():
    from rich.console import Console

    from certify.cli.common import line

    c = Console(force_terminal=True, color_system="standard", width=200, markup=False)
    with c.capture() as cap:
        c.print(line(("robustness radius", "bold"), " [red]x[/red] [nan]"))
    text = cap.get()
    assert "\x1b[1m" in text and "[red]x[/red] [nan]" in text


# commands for the closed-pipe test: one line per output path (human and --json)
PIPE_COMMANDS = {
    "inspect": ["inspect", SMALL],
    "eval": ["eval", SMALL, "--input", "0.5"],
    "lipschitz": ["lipschitz", SMALL, "--center", "0.5", "--radius", "0.1", "--backend", "highs"],
    "global": ["global", SMALL],
    "calibrate": ["calibrate", "laplace", "--epsilon", "1", "--sensitivity", "1"],
    "chain": ["chain", "--epsilon", "1", "--alpha", "0.1", "--beta", "0.3"],
    "utility": ["utility", "pm", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8"],
    "verify": ["verify", SMALL, PROP, "--timeout", "5"],
    "verify-instances": ["verify", "--instances", INSTANCES, "--timeout", "5"],
    "radius": ["radius", CLASSIFIER, "--point", "0.5,0.5", "--backend", "highs"],
    "radius-points": ["radius", CLASSIFIER, "--points", "POINTS", "--backend", "highs", "--no-progress"],
    "hyperrectangle": ["hyperrectangle", CLASSIFIER, "--point", "0.5,0.5", "--backend", "highs"],
    "ptr": ["ptr", SMALL, "--point", "0.5", "--radius", "0.1", "--epsilon", "1", "--delta", "1e-5",
            "--proposal", "30"],
    "report": ["report", SMALL, "--data", "DATA", "--radius", "0.1", "--curve", "0", "--no-html", "--no-progress",
               "--out", "OUT"],
    "bench": ["bench", "--models", SMALL, "--methods", "bounds", "--center", "0.5", "--no-progress", "--out", "OUT"],
    "bench-list": ["bench", "--list"],
}
FAST_PIPE = ("inspect", "calibrate", "chain", "verify", "bench-list")  # the default run; the rest is slow


def _closed_pipe_runs(names, tmp_path) -> list[tuple[str, list[str], int, str]]:
    """Run each command (human and --json) with its stdout already closed, like `certify ... | head
    -c 10` after head exited; two at a time. Returns (name, argv, exit status, stderr)."""
    (tmp_path / "p.csv").write_text("0.5,0.5\n0.2,0.3\n")
    (tmp_path / "d.csv").write_text("0.2\n0.6\n")
    jobs = []
    for name in names:
        for extra in ([], ["--json"]):
            out = str(tmp_path / f"out-{name}-{len(extra)}")
            argv = [{"POINTS": str(tmp_path / "p.csv"), "DATA": str(tmp_path / "d.csv"), "OUT": out}.get(a, a)
                    for a in PIPE_COMMANDS[name]] + extra
            jobs.append((name, argv))
    results, running = [], []
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    for k, (name, argv) in enumerate(jobs):
        p = subprocess.Popen([sys.executable, "-m", "certify.cli", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=tmp_path, env=env)
        p.stdout.close()  # the reader is gone before anything is written
        running.append((name, argv, p))
        if len(running) == 2 or k == len(jobs) - 1:
            for name_, argv_, q in running:
                err = q.stderr.read().decode()
                q.wait(timeout=300)
                results.append((name_, argv_, q.returncode, err))
            running = []
    return results


def _assert_141(results) -> None:
    bad = [(argv, code, err[-300:]) for _, argv, code, err in results
           if code != 141 or "Traceback" in err or "Warning" in err or "error" in err]
    assert not bad, bad


def test_a_closed_stdout_exits_141(tmp_path):
    _assert_141(_closed_pipe_runs(FAST_PIPE, tmp_path))


@pytest.mark.slow
def test_a_closed_stdout_exits_141_for_every_command(tmp_path):
    _assert_141(_closed_pipe_runs([n for n in PIPE_COMMANDS if n not in FAST_PIPE], tmp_path))


def test_shell_pipe_into_head_exits_141():
    """`certify chain ... | head -c 0` (head gone before certify writes): SIGPIPE's status."""
    cmd = f"{sys.executable} -m certify.cli chain --epsilon 1 --alpha 0.1 --beta 0.3 | head -c 0"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert out.returncode == 141 and out.stderr == "", out


# ------------------------------------------------------------------ one JSON object, with its schema
def _validator(name: str):
    from referencing import Registry, Resource

    from certify.schema import ALL, load

    registry = Registry().with_resources((load(n)["$id"], Resource.from_contents(load(n))) for n in ALL)
    return jsonschema.Draft202012Validator(load(name), registry=registry)


def test_every_schema_is_valid_and_named_by_its_file():
    from certify.schema import ALL, load, schema_path

    for name in ALL:
        schema = load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["schema"] == {"const": name}, schema_path(name)
    assert sorted(p.name for p in Path(schema_path(ALL[0])).parent.glob("*.schema.json")) == \
        sorted(Path(schema_path(n)).name for n in ALL)


JSON_COMMANDS = {
    **{k: v for k, v in PIPE_COMMANDS.items() if k not in ("radius-points", "report", "bench")},
    "global-all": ["global", SMALL, "--method", "all"],
    "utility-target": ["utility", "pm", "--target-rho", "0.5", "--point", "0.5", "--box", "0.2:0.8"],
    "utility-all": ["utility", "all", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8"],
    "calibrate-gaussian": ["calibrate", "gauss-output", "--epsilon", "1", "--delta", "1e-5", "--lipschitz", "2",
                           "--radius", "0.1"],
    "verify-sat": ["verify", str(vnncomp_test_path("test_sat")), str(Path(SMALL).parent / "test_prop.vnnlib")],
}
SCHEMA_OF = {"inspect": "certify.inspect/1", "eval": "certify.eval/1", "calibrate": "certify.calibration/1",
             "calibrate-gaussian": "certify.calibration/1", "chain": "certify.chain/1",
             "utility": "certify.utility/1", "utility-target": "certify.utility/1", "utility-all": "certify.utility/1",
             "verify-instances": "certify.instances/1", "bench-list": "certify.bench_suites/1"}


@pytest.mark.parametrize("name", sorted(JSON_COMMANDS))
def test_json_output_is_one_object_valid_against_its_schema(cli, name):
    r = cli(*JSON_COMMANDS[name], "--json")
    assert r.code == 0, r.err
    assert len(r.out.strip().splitlines()) == 1
    d = r.json()
    assert d["schema"] == SCHEMA_OF.get(name, "certify.certificate/1")
    _validator(d["schema"]).validate(d)


def test_report_and_bench_json_are_valid(cli, files, tmp_path):
    r = cli("report", SMALL, "--data", files["data"], "--radius", "0.1", "--curve", "0", "--no-html", "--no-progress",
            "--out", tmp_path / "report", "--json")
    assert r.code == 0, r.err
    assert r.json()["schema"] == "certify.report_summary/1"
    _validator("certify.report_summary/1").validate(r.json())
    r = cli("bench", "--models", SMALL, "--methods", "bounds", "--center", "0.5", "--no-progress",
            "--out", tmp_path / "bench", "--json")
    assert r.code == 0, r.err
    assert r.json()["schema"] == "certify.bench/1"
    _validator("certify.bench/1").validate(r.json())


def test_points_give_one_object_and_a_nan_row_is_an_error_row(cli, files, tmp_path):
    """`radius --points --json`: one object {"schema", "rows"}; the NaN row and the out-of-range row
    get status "error" and a message, the others run; --jsonl gives one line per point."""
    out = tmp_path / "r.jsonl"
    r = cli("radius", CLASSIFIER, "--points", files["points"], "--backend", "highs", "--out", out, "--json")
    assert r.code == 0, r.err
    assert len(r.out.strip().splitlines()) == 1
    d = r.json()
    assert d["schema"] == "certify.radius_batch/1" and [row["index"] for row in d["rows"]] == [0, 1, 2, 3]
    _validator("certify.radius_batch/1").validate(d)
    statuses = [row["status"] for row in d["rows"]]
    assert statuses[1] == statuses[3] == "error" and "NaN" in d["rows"][1]["error"]
    assert "out of range" in d["rows"][3]["error"] and statuses[0] == statuses[2] == "optimal"
    again = cli("radius", CLASSIFIER, "--points", files["points"], "--backend", "highs", "--out", out, "--jsonl")
    lines = [json.loads(x) for x in again.out.splitlines()]
    assert again.code == 0 and [row["index"] for row in lines] == [0, 1, 2, 3]  # resumed, NaN hashed fine
    human = cli("radius", CLASSIFIER, "--points", files["points"], "--backend", "highs", "--out", out)
    assert human.code == 0 and "point 1: the point contains NaN or inf" in human.err
    assert_bad_input(cli("radius", CLASSIFIER, "--points", files["points"], "--json", "--jsonl"), "not both")
    assert_bad_input(cli("radius", CLASSIFIER, "--point", "0.5,0.5", "--jsonl"), "--points only")


def test_hyperrectangle_json_is_its_certificate(cli):
    r = cli("hyperrectangle", CLASSIFIER, "--point", "0.5,0.5", "--backend", "highs", "--json")
    d = r.json()
    assert d["schema"] == "certify.certificate/1" and d["kind"] == "robustness_hyperrectangle"
    assert set(d["box"]) >= {"lo", "hi"} and set(d["outer_box"]) >= {"lo", "hi"}
    _validator("certify.certificate/1").validate(d)


# ----------------------------------------------------------------------------- notes and warnings
def test_a_wrong_dual_bound_is_quoted_in_the_users_units(monkeypatch):
    """The note names the solver's and the proven bound as the caller's quantity (a Lipschitz
    constant, a radius), not as the MILP's scaled or squared objective."""
    import scipy.sparse as sp

    import solvers.milp.sound as sound
    from solvers.lp import MilpModel
    from solvers.milp.backends import Choice
    from solvers.milp.result import MilpResult
    from solvers.runtime import Budget

    class Liar:  # claims the maximum is 1 (it is 2)
        name = "liar"

        def solve(self, model, opts):
            return MilpResult("optimal", 1.0, 1.0, np.array([0.5, 0.0]), 1, 0.0, "liar")

    monkeypatch.setattr(sound, "choose_backend", lambda name, model: Choice(Liar()))
    model = MilpModel(np.array([1.0, 1.0]), "max", sp.csr_matrix([[1.0, -1.0]]), np.array([-np.inf]),
                      np.array([0.5]), np.zeros(2), np.ones(2), np.array([False, True]))
    res = sound.sound_solve(model, Budget(30), units=lambda v: 2.0 ** -3 * v)
    assert "liar's dual bound 0.125 was wrong; the proven bound is 0.25" in res.notes, res.notes


def test_no_warnings_on_stderr(tmp_path):
    """Overflow in harmless places (ranking of far-out points, an inaccurate SDP solution that is
    re-proven) stays off stderr: a subprocess with warnings shown."""
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    runs = [["lipschitz", SMALL, "--center", "0.5", "--radius", "1e38", "--backend", "highs"],
            ["eval", str(vnncomp_test_path("test_small")), "--input", "1e38"]]
    for argv in runs:
        out = subprocess.run([sys.executable, "-m", "certify.cli", *argv], capture_output=True, text=True,
                             timeout=300, env=env, cwd=tmp_path)
        assert out.returncode == 0 and "Warning" not in out.stderr, (argv, out.stderr)


@pytest.mark.slow
def test_an_inaccurate_sdp_solution_is_no_warning(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    out = subprocess.run([sys.executable, "-m", "certify.cli", "global", CLASSIFIER, "--method", "lipsdp-neuron",
                          "--accuracy", "1e-15"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "Warning" not in out.stderr, out.stderr
