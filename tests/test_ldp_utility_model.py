"""`certify utility MODEL`: the certified box of the model, then rho on it.

Oracles: the model's own predictions (scikit-learn `predict`, onnxruntime) on dense samples of the
box and on points just outside a side; rho against the mechanisms' closed-form interval masses
(tests/ldp_oracles, written independently of certify.ldp).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_bad_input
from tests.ldp_oracles import interval_mass, pm_breaks, pm_density
from tests.lipschitz_oracles import random_weights, write_onnx


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import skops.io as sio
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import MinMaxScaler

    d = tmp_path_factory.mktemp("utility_model")
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    rf = RandomForestClassifier(15, max_depth=4, random_state=0).fit(X, y)
    lr = LogisticRegression(max_iter=2000).fit(X, y)
    sio.dump(rf, d / "rf.skops")
    sio.dump(lr, d / "lr.skops")
    w = random_weights([4, 12, 12, 3], 6)
    write_onnx(w, d / "net.onnx")
    np.save(d / "x.npy", X[3])
    return {"rf": (rf, d / "rf.skops"), "lr": (lr, d / "lr.skops"), "net": (w, d / "net.onnx"), "x": X[3],
            "x_path": d / "x.npy"}


def _pm_rho(x, lo, hi, eps) -> float:
    return float(np.prod([float(interval_mass(pm_density, pm_breaks, a, b, v, eps)) for v, a, b in zip(x, lo, hi)]))


def _onnx_predict(path):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda X: np.array([np.argmax(sess.run(None, {"x": np.asarray(v, dtype=np.float64)[None]})[0]) for v in X])


@pytest.mark.parametrize("kind", ["rf", "lr"])
def test_sklearn_models_get_a_certified_box_and_rho(cli, models, kind):
    model, path = models[kind]
    x, feats = models["x"], [7, 20, 27]
    r = cli("utility", str(path), "--mechanism", "pm", "--epsilon", "3", "--point", f"@{models['x_path']}",
            "--features", ",".join(map(str, feats)), "--json")
    assert r.code == 0, r.err
    out = r.json()
    box = out["robustness_box"]
    assert box["certified"] is True and out["features"] == feats
    lo, hi = np.array(box["lo"]), np.array(box["hi"])
    c = model.predict(x[None])[0]
    rng = np.random.default_rng(0)
    X = rng.uniform(lo, hi, size=(4000, x.size))
    for k, corner in enumerate(np.array(np.meshgrid(*[[lo[f], hi[f]] for f in feats], indexing="ij")).reshape(3, -1).T):
        X[k, feats] = corner
    assert np.all(model.predict(X) == c)
    assert lo[27] > 0 and out["rho"] < 1.0
    assert np.all(lo[[i for i in range(x.size) if i not in feats]] == x[[i for i in range(x.size) if i not in feats]])
    assert out["rho"] == pytest.approx(_pm_rho(x[feats], lo[feats], hi[feats], 3.0), rel=1e-9, abs=1e-12)


def test_onnx_net_gets_a_proven_box_and_rho(cli, models):
    _, path = models["net"]
    x = np.array([0.64, 0.27, 0.04, 0.02])
    r = cli("utility", str(path), "--mechanism", "pm", "--epsilon", "2", "--point", "0.64,0.27,0.04,0.02",
            "--features", "0,1", "--json")
    assert r.code == 0, r.err
    out = r.json()
    box = out["robustness_box"]
    assert box["kind"] == "robustness_hyperrectangle" and box["certified"] is True
    lo, hi = np.array(box["lo"]), np.array(box["hi"])
    predict = _onnx_predict(path)
    c = predict(x[None])[0]
    X = np.random.default_rng(1).uniform(lo, hi, size=(1500, 4))
    assert np.all(predict(X) == c)
    assert np.all(hi[:2] - lo[:2] < 1.0) and out["rho"] < 1.0  # a box that binds: rho is informative
    assert out["rho"] == pytest.approx(_pm_rho(x[:2], lo[:2], hi[:2], 2.0), rel=1e-9, abs=1e-12)
    text = cli("utility", str(path), "--mechanism", "pm", "--epsilon", "2", "--point", "0.64,0.27,0.04,0.02",
               "--features", "0,1")
    assert text.code == 0 and "rho = " in text.out and "robustness_hyperrectangle" in text.out


@pytest.mark.parametrize("argv,fragment", [
    (("{net}", "--epsilon", "1", "--point", "0.1,0.2,0.3,0.4"), "--mechanism"),
    (("{net}", "--mechanism", "pm", "--epsilon", "1", "--point", "0.1,0.2"), "4"),
    (("{net}", "--mechanism", "nope", "--epsilon", "1", "--point", "0.1,0.2,0.3,0.4"), "unknown mechanism"),
    (("{net}", "--mechanism", "pm", "--epsilon", "1", "--point", "0.1,0.2,0.3,0.4", "--box", "0:1,0:1,0:1,0:1"),
     "drop --box"),
    (("{tmp}/model.pkl", "--mechanism", "pm", "--epsilon", "1", "--point", "0.1"), "skops"),
    (("{tmp}/missing.skops", "--mechanism", "pm", "--epsilon", "1", "--point", "0.1"), "no such file"),
    (("pm", "--mechanism", "pm", "--epsilon", "1", "--point", "0.1", "--box", "0:1"), "MODEL"),
])
def test_bad_inputs_exit_2(cli, models, tmp_path, argv, fragment):
    (tmp_path / "model.pkl").write_bytes(b"\x80\x04K\x01.")
    args = [a.format(net=models["net"][1], tmp=tmp_path) for a in argv]
    assert_bad_input(cli("utility", *args), fragment)
