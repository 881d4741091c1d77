"""Command-line regressions from issue 11 (items 10, 13) and a property test: every subcommand, one
argument replaced by a generated bad value, exits 2 with exactly one stderr line and no traceback."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.cli import build_parser, main
from models.zoo import acasxu_path, lipmip_suite_path, vnncomp_test_path
from tests.conftest import assert_bad_input

SMALL = str(vnncomp_test_path("test_small"))  # 1 input -> 1 output
CLASSIFIER = str(lipmip_suite_path("lipmip_2-16-16-2"))  # 2 inputs -> 2 classes (class 1 around 0.5,0.5)
PROP = str(vnncomp_test_path("test_small")).replace(".onnx", ".vnnlib")
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ 10. a closed stdout
def test_closed_stdout_is_not_an_internal_error():
    """`certify inspect MODEL --json | head -c 150` ended in "internal error: BrokenPipeError"."""
    proc = subprocess.Popen([sys.executable, "-m", "certify.cli", "inspect", str(acasxu_path(1, 1)), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 141 and err == ""


def test_shell_pipe_into_head():
    cmd = f"{shlex.quote(sys.executable)} -m certify.cli inspect {shlex.quote(str(acasxu_path(1, 1)))} --json | head -c 150"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith('{"schema": "certify.inspect/1", "name": "ACASXU_run2a_1_1_batch_2000"')
    assert len(out.stdout) == 150
    assert out.stderr == "" and out.returncode in (0, 141)  # 141 when the write came after head exited


# ------------------------------------------------------------------ 13. messages
def test_target_length_names_the_outputs(cli):
    assert_bad_input(cli("lipschitz", SMALL, "--center", "0.5", "--radius", "0.1", "--target", "1,2"),
                     "--target has 2 values but the model has 1 output")
    assert_bad_input(cli("eval", SMALL, "--input", "1,2"), "--input has 2 values but the model takes 1 input")


def test_vector_file_that_is_a_directory(cli, tmp_path):
    assert_bad_input(cli("eval", SMALL, "--input", f"@{tmp_path}"), "is a directory")
    assert_bad_input(cli("eval", SMALL, "--input", f"@{tmp_path / 'x.npy'}"), "does not exist")


@pytest.mark.parametrize("compress,tool", [("gzip", "gunzip"), ("zip", "unzip"), ("xz", "unxz")])
def test_compressed_model_gets_a_decompress_hint(cli, tmp_path, compress, tool):
    import gzip
    import lzma
    import zipfile

    data = Path(SMALL).read_bytes()
    path = tmp_path / f"m.onnx.{compress}"
    if compress == "gzip":
        path.write_bytes(gzip.compress(data))
    elif compress == "xz":
        path.write_bytes(lzma.compress(data))
    else:
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("m.onnx", data)
    assert_bad_input(cli("inspect", path), "not an ONNX file", tool)


def test_bare_certify_prints_the_help_as_a_usage_error(capsys):
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage: certify" in err
    for command in ("inspect", "eval", "lipschitz", "global", "calibrate", "chain"):
        assert command in err
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0 and "usage: certify" in capsys.readouterr().out


def test_demo_echoes_commands_that_run_from_the_repository_root(monkeypatch, capsys):
    """The demo printed `certify inspect ACASXU_run2a_1_1_batch_2000.onnx`, which fails when pasted."""
    from certify import demo

    ran: list[list[str]] = []
    monkeypatch.setattr("certify.cli.main", lambda argv: ran.append(list(argv)) or 0)
    monkeypatch.chdir(REPO)
    demo.demo_import()
    demo.demo_global()
    demo.demo_lipschitz()
    demo.demo_robustness()
    demo.demo_verify()
    demo.demo_ptr()
    echoed = [shlex.split(line[2:]) for line in capsys.readouterr().out.splitlines() if line.startswith("$ certify ")]
    assert len(echoed) == len(ran) == 7
    for shown, argv in zip(echoed, ran):
        assert shown[0] == "certify" and shown[1] == argv[0]
        model = shown[2]
        assert not os.path.isabs(model) and os.sep in model and (REPO / model).is_file(), model
        assert os.path.samefile(REPO / model, argv[1]) and len(shown) == len(argv) + 1
        for a, b in zip(shown[3:], argv[2:]):  # other paths (a property file) are shown pasteable too
            assert a == b or (not os.path.isabs(a) and os.path.samefile(REPO / a, b)), (a, b)


# ------------------------------------------------------------------ property: bad input -> exit 2
def _bad_files(root: Path) -> dict[str, str]:
    files = {"dir": root / "adir", "empty": root / "empty.onnx", "text": root / "text.onnx",
             "trunc": root / "trunc.onnx", "pickle": root / "model.pt", "json": root / "bad.json",
             "gz": root / "m.onnx.gz", "npy3": root / "three.npy", "nan": root / "nan.json"}
    files["dir"].mkdir(exist_ok=True)
    files["empty"].write_bytes(b"")
    files["text"].write_text("hello\n")
    files["trunc"].write_bytes(Path(SMALL).read_bytes()[:60])
    files["pickle"].write_bytes(b"\x80\x04not really")
    files["json"].write_text("{not json")
    files["gz"].write_bytes(b"\x1f\x8b" + b"\x00" * 20)
    np.save(files["npy3"], np.ones(3))
    files["nan"].write_text("[NaN]")
    files["fifo"] = root / "fifo"
    os.mkfifo(files["fifo"])  # read by nothing: refused unread (a read would block)
    files.update(_broken_models(root))
    files["nested_bad"] = root / "nested_bad.vnnlib"  # 3000 levels deep, an undeclared variable at the bottom
    files["nested_bad"].write_text(_nested_vnnlib(3000, "(<= X_0 X_7)"))
    files["nested_ok"] = root / "nested_ok.vnnlib"  # 3000 levels deep and valid (docs: no recursion limit)
    files["nested_ok"].write_text(_nested_vnnlib(3000, "(<= X_0 1.0)"))
    return {k: str(v) for k, v in files.items()}


def _nested_vnnlib(depth: int, inner: str) -> str:
    """A property of test_small (1 input, 1 output) with an assertion nested `depth` levels deep."""
    return ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (>= X_0 0.0))\n(assert (<= X_0 1.0))\n"
            "(assert " + "(and " * depth + inner + ")" * depth + ")\n(assert (<= Y_0 -1000.0))\n")


def _broken_models(root: Path) -> dict[str, Path]:
    """ONNX files certify must refuse with exit 2: an input dimension of size 0, and weights in
    external data files that are missing, outside the model's folder, named by an absolute path or
    too short; and one whose external data is fine (it loads)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(shape, w):
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [numpy_helper.from_array(w.astype(np.float32), "W")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    out = {"zero_dim": root / "zero_dim.onnx"}
    onnx.save(model([1, 0], np.ones((0, 1))), out["zero_dim"])
    ext = root / "ext"
    ext.mkdir(exist_ok=True)
    for name in ("ext_ok", "ext_missing", "ext_outside", "ext_absolute", "ext_short"):
        out[name] = ext / f"{name}.onnx"
        onnx.save(model([1, 1], np.full((1, 1), 0.5)), out[name], save_as_external_data=True,
                  all_tensors_to_one_file=True, location=f"{name}.data", size_threshold=0)
    (ext / "ext_missing.data").unlink()
    (ext / "ext_short.data").write_bytes(b"\x00")
    for name, location in (("ext_outside", "../outside.data"), ("ext_absolute", str(root / "outside.data"))):
        (root / "outside.data").write_bytes((ext / f"{name}.data").read_bytes())
        m = onnx.load(out[name], load_external_data=False)
        for entry in m.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        onnx.save(m, out[name])
    return out


_TMP = tempfile.mkdtemp(prefix="certify-audit-cli-")  # the strategies below need the paths up front
atexit.register(shutil.rmtree, _TMP, True)
FILES = _bad_files(Path(_TMP))

_NOT_A_NUMBER = st.text(min_size=0, max_size=12).filter(lambda s: not _parses_as_float(s))


def _parses_as_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _values(*fixed: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(fixed), _NOT_A_NUMBER)


POSITIVE = _values("0", "-1", "-0.0", "nan", "inf", "-inf", "1e400", "-1e-300")
NON_NEGATIVE = _values("-1", "nan", "inf", "-inf", "1e999", "-1e-300")
DELTA = _values("1", "1.5", "-0.1", "nan", "inf")
VECTOR_1 = st.one_of(st.sampled_from(["1,2", "", ",", "1,,", "nan", "inf", "-inf", "1e400", "@missing.npy",
                                      "@" + FILES["dir"], "@" + FILES["json"], "@" + FILES["npy3"], "@" + FILES["nan"],
                                      "@" + FILES["text"], "1;2", "0x1"]),
                     st.text(min_size=1, max_size=10).filter(lambda s: not _parses_as_float(s) and "@" not in s))
MODEL = st.sampled_from(["missing.onnx", FILES["dir"], FILES["empty"], FILES["text"], FILES["trunc"],
                         FILES["pickle"], FILES["gz"], FILES["json"], FILES["fifo"], FILES["zero_dim"],
                         FILES["ext_missing"], FILES["ext_outside"], FILES["ext_absolute"], FILES["ext_short"]])
HUGE = st.sampled_from(["1e308", "-1e308", "1e39", "1e300"])  # finite, beyond certify's magnitude range
SEED = st.sampled_from(["-1", "-9223372036854775809", "9223372036854775808", "a", "1.5", ""])
THREADS = st.sampled_from(["0", "-1", "100000", "1025", "1.5", "a"])
SCHEDULER = st.sampled_from(["foo", "tcp://", "tcp://localhost:99999", "tcp://localhost:abc", "", "localhost:8786",
                             "http://x", "tcp://a b:1"])
OUT_FILE = st.sampled_from(["", FILES["dir"], FILES["fifo"], FILES["text"], FILES["text"] + "/x", FILES["json"]])
OUT_DIR = st.sampled_from(["", FILES["fifo"], FILES["text"], FILES["text"] + "/x"])
NORM = st.one_of(st.sampled_from(["l3", "L0", "", "2.5", "l1,l2", "\u221e", "lnan"]),
                 st.text(min_size=1, max_size=8).map(lambda s: "bad" + s))
DOMAIN = st.sampled_from(["1,0", "0,0", "0", "a,b", "nan,1", "0,inf", "0,1,2", "@missing.csv", "@" + FILES["dir"], ""])
WORD = st.text(min_size=0, max_size=10).map(lambda s: "no-such-" + s)
COUNT = _values("0", "-1", "1.5")
VECTOR_2 = st.sampled_from(["1", "1,2,3", "", ",", "nan,1", "1,inf", "@missing.npy", "@" + FILES["npy3"], "a,b"])
CLASS = st.sampled_from(["2", "-1", "a", "1.5", "nan", "1", "1e19", "-9e18", "1e308", "inf"])  # (1 is predicted)
FEATURES = st.sampled_from(["2", "0,0", "-1", "a", "0.5", ""])
# data files for `certify report` (the model takes 1 input): a valid one and bad ones
_DATA = Path(_TMP) / "points.csv"
_DATA.write_text("0.2\n0.6\n")
(Path(_TMP) / "wide.csv").write_text("0.2,0.3\n")
(Path(_TMP) / "empty.csv").write_text("")
DATA = st.sampled_from([str(Path(_TMP) / "wide.csv"), str(Path(_TMP) / "empty.csv"), "missing.csv", FILES["dir"],
                        FILES["json"], FILES["nan"], FILES["text"], FILES["pickle"]])

# each subcommand: a valid command line and the slots (option -> strategy of bad values) to break
CASES: dict[str, tuple[list[str], dict[str, st.SearchStrategy[str]]]] = {
    "inspect": ([SMALL], {"MODEL": MODEL}),
    "eval": ([SMALL, "--input", "0.5"], {"MODEL": MODEL, "--input": VECTOR_1}),
    "lipschitz": ([SMALL, "--center", "0.5", "--radius", "0.1", "--backend", "highs"],
                  {"MODEL": MODEL, "--center": st.one_of(VECTOR_1, HUGE),
                   "--radius": st.one_of(POSITIVE, HUGE, st.just("0.1,0.1")),
                   "--domain": st.one_of(DOMAIN, st.just("-1e300,1e300")), "--input-norm": NORM, "--output-norm": NORM,
                   "--target": st.sampled_from(["1,2", "nan", "a", ",", "1e300"]), "--time-limit": POSITIVE,
                   "--threads": st.one_of(COUNT, THREADS)}),
    "global": ([SMALL, "--method", "naive"],
               {"MODEL": MODEL, "--method": WORD, "--input-norm": NORM, "--output-norm": NORM, "--domain": DOMAIN,
                "--accuracy": POSITIVE, "--time-limit": POSITIVE, "--solver": WORD}),
    "calibrate": (["gaussian", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "1"],
                  {"MECHANISM": WORD, "--epsilon": POSITIVE, "--delta": DELTA, "--sensitivity": NON_NEGATIVE,
                   "--calibration": WORD, "--metric": NORM, "--model": MODEL}),
    "utility": (["pm", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8"],
                {"MECHANISM": WORD, "--epsilon": POSITIVE, "--point": VECTOR_1, "--domain": DOMAIN,
                 "--box": st.sampled_from(["0.8:0.2", "a:b", "0.2", "", "0.2:0.8,0.1:0.2", "-1:2", "nan:1"]),
                 "--delta": DELTA}),
    "verify": ([SMALL, PROP, "--timeout", "5"],
               {"MODEL": MODEL, "PROPERTY": st.one_of(MODEL, st.just(FILES["nested_bad"])), "--timeout": POSITIVE,
                "--seed": SEED}),
    "radius": ([CLASSIFIER, "--point", "0.5,0.5", "--backend", "highs", "--time-limit", "30"],
               {"MODEL": MODEL, "--point": st.one_of(VECTOR_2, st.just("1e300,0")), "--norm": NORM, "--domain": DOMAIN,
                "--max-radius": st.one_of(POSITIVE, HUGE), "--target-class": CLASS, "--features": FEATURES,
                "--time-limit": POSITIVE, "--threads": st.one_of(COUNT, THREADS), "--seed": SEED,
                "--mip-gap": _values("-1", "1", "nan", "inf"), "--out": st.just("x.jsonl"),
                "--scheduler": st.just("tcp://localhost:8786"), "--jsonl": st.just("")}),
    "hyperrectangle": ([CLASSIFIER, "--point", "0.5,0.5", "--backend", "highs"],
                       {"MODEL": MODEL, "--point": VECTOR_2, "--domain": st.one_of(DOMAIN, st.just("-1e300,1e300")),
                        "--target-class": CLASS, "--features": FEATURES, "--time-limit": POSITIVE,
                        "--threads": THREADS, "--seed": SEED}),
    "chain": (["--epsilon", "1", "--delta", "1e-5", "--alpha", "0.1", "--beta", "0.3"],
              {"--epsilon": POSITIVE, "--delta": DELTA, "--alpha": POSITIVE, "--beta": POSITIVE}),
    "ptr": ([SMALL, "--point", "0.5", "--radius", "0.1", "--epsilon", "1", "--delta", "1e-5", "--proposal", "30"],
            {"MODEL": MODEL, "--point": VECTOR_1, "--radius": st.one_of(POSITIVE, HUGE), "--epsilon": POSITIVE,
             "--delta": st.one_of(DELTA, st.just("0")), "--proposal": POSITIVE, "--input-norm": NORM,
             "--domain": DOMAIN, "--tolerance": POSITIVE, "--max-radius": st.one_of(POSITIVE, HUGE),
             "--time-limit": POSITIVE, "--step-time-limit": POSITIVE, "--global-bound": POSITIVE,
             "--threads": st.one_of(COUNT, THREADS), "--seed": st.one_of(SEED, st.just("nan"))}),
    "report": ([SMALL, "--data", str(_DATA), "--radius", "0.1", "--out", str(Path(_TMP) / "report"), "--curve", "0",
                "--no-html", "--no-progress"],
               {"MODEL": MODEL, "--data": DATA, "--radius": st.one_of(POSITIVE, HUGE), "--epsilon": POSITIVE,
                "--delta": st.one_of(DELTA, st.just("0")), "--workers": COUNT, "--rules": WORD, "--input-norm": NORM,
                "--domain": DOMAIN, "--tolerance": POSITIVE, "--max-radius": POSITIVE, "--time-limit": POSITIVE,
                "--step-time-limit": POSITIVE, "--curve": _values("-1", "1.5", "100000"),
                "--scheduler": SCHEDULER, "--out": OUT_DIR}),
    "bench": (["--models", SMALL, "--methods", "bounds", "--center", "0.5", "--radius", "0.1", "--out",
               str(Path(_TMP) / "bench"), "--no-progress"],
              {"--models": MODEL, "--radius": st.one_of(POSITIVE, HUGE), "--domain": DOMAIN,
               "--center": VECTOR_1.filter(lambda v: v != "@" + FILES["npy3"]),  # (for bench: 3 points of 1 input)
               "--points": COUNT, "--repeat": COUNT, "--time-limit": POSITIVE, "--backends": WORD, "--methods": WORD,
               "--question": WORD, "--input-norm": NORM, "--output-norm": NORM, "--seed": SEED, "--out": OUT_DIR}),
}
# more command lines of the same subcommands (a points file, an instance list): (command, base, slots)
_POINTS = Path(_TMP) / "points2.csv"
_POINTS.write_text("0.5,0.5\n0.2,0.3\n")
INSTANCES_CSV = str(vnncomp_test_path("test_small").parent / "test_instances.csv")
MORE_CASES: list[tuple[str, list[str], dict[str, st.SearchStrategy[str]]]] = [
    ("radius", [CLASSIFIER, "--points", str(_POINTS), "--backend", "highs", "--time-limit", "30"],
     {"--out": OUT_FILE, "--scheduler": SCHEDULER, "--workers": COUNT, "--seed": SEED, "--threads": THREADS,
      "--points": st.sampled_from([FILES["dir"], FILES["fifo"], "missing.csv", FILES["npy3"],
                                   FILES["json"], FILES["text"]])}),
    ("verify", ["--instances", INSTANCES_CSV, "--timeout", "5"],
     {"--out": OUT_FILE, "--seed": SEED, "--instances": st.sampled_from([FILES["dir"], FILES["fifo"], "missing.csv",
                                                                         FILES["text"], FILES["json"]])}),
]


def test_the_property_covers_every_subcommand():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(CASES)


@st.composite
def bad_command_lines(draw) -> list[str]:
    cases = [(command, base, slots) for command, (base, slots) in sorted(CASES.items())] + MORE_CASES
    command, base, slots = draw(st.sampled_from(cases))
    slot = draw(st.sampled_from(sorted(slots)))
    return [command] + _replace(base, slot, draw(slots[slot]))


def _replace(base: list[str], slot: str, value: str) -> list[str]:
    """`base` with `slot` (MODEL, MECHANISM, PROPERTY or an option) set to `value`."""
    argv = list(base)
    if slot in ("MODEL", "MECHANISM"):
        argv[0] = value
    elif slot == "PROPERTY":
        argv[1] = value
    elif slot == "--jsonl":  # a flag
        argv.append(slot)
    else:  # --opt=value: the value is taken as given, even when it starts with "-"
        argv = [a for i, a in enumerate(argv) if a != slot and (i == 0 or argv[i - 1] != slot)]
        argv.append(f"{slot}={value}")
    return argv


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=200, deadline=None)
@given(bad_command_lines())
def test_every_subcommand_refuses_bad_input_in_one_line(argv):
    code, out, err = _run(argv)
    lines = [l for l in err.splitlines() if l.strip()]
    assert code == 2, (argv, code, err)
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    assert lines[0].startswith("certify"), (argv, err)


# ------------------------------------------------------------------ property: edge values -> exit 0 or 2
# values at the edge of what makes sense (huge, tiny, NaN, negative, extreme seeds, thread counts,
# deep nesting, model files with external data): each either works (exit 0) or is refused in one
# line (exit 2); never an internal error (1), a traceback, or an interrupt (130)
EDGE_NUMBER = st.sampled_from(["1e38", "-1e38", "3e38", "1e300", "1e-300", "5e-324", "0", "-0", "nan", "inf", "-inf",
                               "-1", "1"])
EDGE_INT = st.sampled_from(["0", "1", "-1", "1024", "1025", "100000", str(2**63 - 1), str(2**63), "-" + str(2**63)])
EDGE_CASES: list[tuple[str, list[str], dict[str, st.SearchStrategy[str]]]] = [
    ("inspect", [FILES["ext_ok"]], {"MODEL": st.sampled_from([FILES["ext_ok"], FILES["ext_missing"], FILES["ext_short"],
                                                             FILES["ext_outside"], FILES["zero_dim"]])}),
    ("eval", [SMALL, "--input", "0.5"], {"--input": EDGE_NUMBER}),
    ("lipschitz", [SMALL, "--center", "0.5", "--radius", "0.1", "--backend", "highs", "--time-limit", "20"],
     {"--center": EDGE_NUMBER, "--radius": EDGE_NUMBER, "--threads": EDGE_INT, "--target": EDGE_NUMBER,
      "--domain": st.sampled_from(["-1e38,1e38", "0,1e-300", "-3e38,0", "0,1"])}),
    ("calibrate", ["laplace", "--epsilon", "1", "--sensitivity", "1"],
     {"--epsilon": EDGE_NUMBER, "--sensitivity": EDGE_NUMBER}),
    ("chain", ["--epsilon", "1", "--alpha", "0.1", "--beta", "0.3"],
     {"--epsilon": EDGE_NUMBER, "--alpha": EDGE_NUMBER, "--beta": EDGE_NUMBER, "--delta": EDGE_NUMBER}),
    ("utility", ["pm", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8"],
     {"--epsilon": EDGE_NUMBER, "--point": EDGE_NUMBER, "--delta": EDGE_NUMBER}),
    ("verify", [SMALL, PROP, "--timeout", "10"],
     {"PROPERTY": st.sampled_from([FILES["nested_ok"], FILES["nested_bad"]]), "--seed": EDGE_INT}),
    ("ptr", [SMALL, "--point", "0.5", "--radius", "0.1", "--epsilon", "1", "--delta", "1e-5", "--proposal", "30",
             "--time-limit", "20"],
     {"--radius": EDGE_NUMBER, "--proposal": EDGE_NUMBER, "--seed": EDGE_INT, "--threads": EDGE_INT,
      "--max-radius": EDGE_NUMBER, "--point": EDGE_NUMBER}),
    ("radius", [CLASSIFIER, "--points", str(_POINTS), "--backend", "highs", "--time-limit", "20", "--no-exact"],
     {"--seed": EDGE_INT, "--threads": EDGE_INT, "--scheduler": st.sampled_from(["tcp://[::1]:0", "inproc://", "tcp://h:1x"]),
      "--max-radius": EDGE_NUMBER}),
]


@st.composite
def edge_command_lines(draw) -> list[str]:
    command, base, slots = draw(st.sampled_from(EDGE_CASES))
    slot = draw(st.sampled_from(sorted(slots)))
    return [command] + _replace(base, slot, draw(slots[slot]))


@settings(max_examples=60, deadline=None)
@given(edge_command_lines())
def test_edge_values_work_or_are_refused_in_one_line(argv):
    with warnings.catch_warnings(record=True) as caught:  # (pytest would keep them off stderr)
        warnings.simplefilter("always")
        code, out, err = _run(argv)
    leaked = [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, (RuntimeWarning, UserWarning))]
    lines = [l for l in err.splitlines() if l.strip()]
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err and "internal error" not in err and not leaked, (argv, err, leaked)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("certify"), (argv, err)
    else:
        assert isinstance(json.loads(out) if "--json" in argv else out, (dict, str))


def test_a_valid_command_line_of_each_case_succeeds():
    """The property's base command lines are valid, so its failures come from the one bad value."""
    for command, base in [(c, b) for c, (b, _) in CASES.items()] + [(c, b) for c, b, _ in MORE_CASES]:
        code, out, err = _run([command] + base + ["--json"])
        assert code == 0, (command, err)
        assert isinstance(json.loads(out), dict)


def test_nan_sensitivity_is_refused_not_nan_noise(cli):
    assert_bad_input(cli("calibrate", "laplace", "--epsilon", "1", "--sensitivity", "nan"), "sensitivity")
    assert math.isfinite(cli("calibrate", "laplace", "--epsilon", "1", "--sensitivity", "0", "--json").json()["scale"])


@pytest.mark.parametrize("bad", ["abc", True, None, "1"])
def test_positive_scalars_must_be_numbers(bad):
    from certify.errors import BadInput
    from certify.boundary.vectors import parse_positive

    with pytest.raises(BadInput, match="time limit must be a number"):
        parse_positive(bad, "time limit")
