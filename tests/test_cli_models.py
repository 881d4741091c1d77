"""`certify inspect` / `certify eval` and the shared CLI conventions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from models import save_onnx
from models.zoo import acasxu_path, random_relu_net, vnncomp_test_path
from tests.conftest import assert_bad_input
from tests.onnx_builders import make_model, ort_forward, save

ROOT = Path(__file__).resolve().parents[1]


def test_inspect_acasxu_reports_5_inputs_6x50_relus_5_outputs(cli):
    r = cli("inspect", acasxu_path(2, 3), "--json")
    assert r.code == 0, r.err
    info = r.json()
    assert info["input_dim"] == 5 and info["output_dim"] == 5 and info["input_shape"] == [1, 1, 1, 5]
    assert [l["size"] for l in info["layers"] if l["kind"] == "relu"] == [50] * 6
    assert info["relu_count"] == 300
    assert [l["kind"] for l in info["layers"]] == ["affine", "relu"] * 6 + ["affine"]
    human = cli("inspect", acasxu_path(2, 3))
    assert human.code == 0 and "300" in human.out and "relu" in human.out


def test_eval_matches_onnxruntime_with_every_vector_syntax(cli, tmp_path):
    path = acasxu_path(1, 1)
    x = np.array([-0.2, 0.3, -0.1, 0.45, -0.45])
    ref = ort_forward(str(path), x, [1, 1, 1, 5])
    (tmp_path / "x.json").write_text(json.dumps(x.tolist()))
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "x.csv").write_text(",".join(map(str, x.tolist())) + "\n")
    for spec in (["--input", ",".join(map(str, x.tolist()))], [f"--input={','.join(map(str, x.tolist()))}"],
                 ["--input", f"@{tmp_path / 'x.json'}"], ["--input", f"@{tmp_path / 'x.npy'}"], ["--input", f"@{tmp_path / 'x.csv'}"]):
        r = cli("eval", path, *spec, "--json")
        assert r.code == 0, (spec, r.err)
        # float64 IR vs float32 runtime on float32-representable inputs
        np.testing.assert_allclose(r.json()["output"], ref, rtol=1e-5, atol=1e-6)


def test_eval_human_output(cli):
    r = cli("eval", vnncomp_test_path("test_nano"), "--input", "-4")
    assert r.code == 0 and "output" in r.out and "0" in r.out


def test_roundtrip_through_save_onnx(cli, tmp_path):
    net = random_relu_net((3, 6, 2), seed=5)
    save_onnx(net, tmp_path / "r.onnx")
    x = np.array([0.3, -1.2, 0.8])
    r = cli("eval", tmp_path / "r.onnx", "--input", "0.3,-1.2,0.8", "--json")
    np.testing.assert_allclose(r.json()["output"], net.forward(x), rtol=1e-12)


@pytest.mark.parametrize("argv,fragments", [
    (["eval", "MODEL", "--input", "1,2,3"], ["has 3 values", "takes 5 inputs"]),
    (["eval", "MODEL", "--input", "1,2,x,4,5"], ["not a list of numbers"]),
    (["eval", "MODEL", "--input", "1,nan,0,0,0"], ["NaN"]),
    (["eval", "MODEL", "--input", "@/nonexistent/v.npy"], ["does not exist"]),
    (["inspect", "/nonexistent/model.onnx"], ["does not exist"]),
    (["eval", "MODEL"], ["--input"]),
    (["inspect", "MODEL", "--bogus"], ["unrecognized"]),
])
def test_bad_input_exits_2_with_one_line(cli, argv, fragments):
    argv = [str(acasxu_path(1, 1)) if a == "MODEL" else a for a in argv]
    assert_bad_input(cli(*argv), *fragments)


def test_bad_model_files_exit_2(cli, tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage")
    assert_bad_input(cli("inspect", tmp_path / "junk.onnx"), "not a valid ONNX model")
    (tmp_path / "model.pt").write_bytes(b"\x80\x04pickle")
    assert_bad_input(cli("inspect", tmp_path / "model.pt"), "never unpickles")
    W = np.ones((2, 2), np.float32)
    W[1, 1] = np.nan
    nan_path = save(make_model([helper.make_node("Gemm", ["x", "W"], ["y"])], {"W": W}, [1, 2]), tmp_path, "nan.onnx")
    assert_bad_input(cli("inspect", nan_path), "NaN", "'W'")
    inf_W = np.ones((2, 2), np.float32)
    inf_W[0, 0] = np.inf
    inf_path = save(make_model([helper.make_node("Gemm", ["x", "W"], ["y"])], {"W": inf_W}, [1, 2]), tmp_path, "inf.onnx")
    assert_bad_input(cli("inspect", inf_path), "inf")
    op_path = save(make_model([helper.make_node("Softmax", ["x"], ["y"], name="soft")], {}, [1, 2]), tmp_path, "op.onnx")
    assert_bad_input(cli("inspect", op_path), "Softmax", "soft")


def test_module_entry_point_exit_codes_without_traceback(tmp_path):
    """The real process: exit 2 and one line on stderr, JSON on stdout on success."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    bad = subprocess.run([sys.executable, "-m", "certify.cli", "eval", str(acasxu_path(1, 1)), "--input", "1,2"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    ok = subprocess.run([sys.executable, "-m", "certify.cli", "inspect", str(vnncomp_test_path("test_small")), "--json"],
                        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["relu_count"] == 4
