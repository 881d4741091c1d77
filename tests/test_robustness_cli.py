"""`certify radius` and `certify hyperrectangle`: JSON as documented, the batch (resumable, CSV),
bad input -> exit 2 with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.zoo import vnncomp_test_path
from tests.conftest import assert_bad_input
from tests.lipschitz_oracles import write_onnx
from tests.robustness_oracles import exact_radius, flips, onnxruntime_outputs, small_classifier

X0 = [0.14, 0.45, -0.3]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    w = small_classifier((3, 8, 4), 1)
    return w, write_onnx(w, tmp_path_factory.mktemp("cli") / "net.onnx")


def test_radius_json(cli, model):
    w, path = model
    r = cli("radius", path, "--point", ",".join(map(str, X0)), "--norm", "l1", "--domain", "-1,1", "--backend", "highs",
            "--json")
    assert r.code == 0, r.err
    d = r.json()
    for key in ("radius", "lower", "upper", "status", "predicted_class", "counterexample", "seconds"):
        assert key in d
    oracle = exact_radius(w, np.array(X0), "l1", domain=(-1, 1))
    assert d["status"] == "optimal" and abs(d["radius"] - oracle) <= 1e-6 and abs(d["lower"] - oracle) <= 1e-6
    assert flips(onnxruntime_outputs(path, d["counterexample"]), d["predicted_class"])


def test_radius_human_output_and_max_radius(cli, model):
    w, path = model
    r = cli("radius", path, "--point", ",".join(map(str, X0)), "--max-radius", "0.01")
    assert r.code == 0 and "robust_within" in r.out and "radius >= 0.01" in r.out
    neg = cli("radius", path, "--point", "-0.2,0.3,0.1", "--no-exact", "--json")  # a leading minus is a value
    assert neg.code == 0 and neg.json()["status"] in ("open_gap", "optimal")


def test_hyperrectangle_json(cli, model):
    w, path = model
    r = cli("hyperrectangle", path, "--point", "0.5,0.4,0.3", "--features", "0,2", "--backend", "highs", "--json")
    assert r.code == 0, r.err
    d = r.json()  # the certificate itself (issue 27): boxes as {lo, hi}
    box, outer = d["box"], d["outer_box"]
    assert len(box["lo"]) == len(outer["hi"]) == 3 and box["lo"][1] == box["hi"][1] == 0.4 == outer["lo"][1] == outer["hi"][1]
    assert all(ol <= bl <= x <= bh <= oh for x, bl, bh, ol, oh in zip([0.5, 0.4, 0.3], box["lo"], box["hi"], outer["lo"],
                                                                      outer["hi"]))
    assert d["status"] in ("certified", "open_gap") and isinstance(d["predicted_class"], int)
    assert d["schema"] == "certify.certificate/1" and d["kind"] == "robustness_hyperrectangle"


def test_batch_resumes_and_writes_csv(cli, model, tmp_path):
    w, path = model
    pts = tmp_path / "points.csv"
    rows = np.array([X0, [0.3, 0.1, 0.2], [-0.5, 0.5, 0.0]])
    np.savetxt(pts, rows, delimiter=",", header="a,b,c", comments="")
    out = tmp_path / "out.jsonl"
    r = cli("radius", path, "--points", pts, "--out", out, "--domain", "-1,1", "--backend", "highs", "--json")
    assert r.code == 0, r.err
    lines = r.json()["rows"]  # --json: one object {"schema", "rows"} (issue 27)
    assert r.json()["schema"] == "certify.radius_batch/1"
    assert [l["index"] for l in lines] == [0, 1, 2] and len(out.read_text().splitlines()) == 3
    for row, x in zip(lines, rows):
        assert abs(row["lower"] - exact_radius(w, x, "linf", domain=(-1, 1))) <= 1e-6
    again = cli("radius", path, "--points", pts, "--out", out, "--domain", "-1,1", "--backend", "highs", "--json")
    assert again.code == 0 and len(out.read_text().splitlines()) == 3  # nothing recomputed
    csv_out = tmp_path / "summary.csv"
    r = cli("radius", path, "--points", pts, "--out", csv_out, "--domain", "-1,1", "--backend", "highs")
    text = csv_out.read_text().splitlines()
    assert r.code == 0 and text[0] == "index,predicted_class,lower,upper,radius,status,seconds" and len(text) == 4
    assert (tmp_path / "summary.csv.jsonl").exists()


def test_bad_input_exits_2(cli, model, tmp_path):
    w, path = model
    point = ",".join(map(str, X0))
    assert_bad_input(cli("radius", path, "--point", "0.1,0.2"), "has 2 values but the model takes 3 inputs")
    assert_bad_input(cli("radius", path, "--point", point, "--norm", "l3"), "unknown norm")
    assert_bad_input(cli("radius", path, "--point", point, "--max-radius", "-1"), "max radius")
    assert_bad_input(cli("radius", path, "--point", point, "--target-class", "4"), "out of range")
    assert_bad_input(cli("radius", str(vnncomp_test_path("test_small")), "--point", "0.5"), "at least 2")
    assert_bad_input(cli("hyperrectangle", path, "--point", "0.5,0.4,0.3", "--features", "0,7"), "out of range")
    bad_points = tmp_path / "bad.csv"
    bad_points.write_text("1,2\n3,4\n")
    assert_bad_input(cli("radius", path, "--points", bad_points), "rows have 2 values")
    assert_bad_input(cli("radius", path, "--point", point, "--out", tmp_path / "o.jsonl"), "--points only")
