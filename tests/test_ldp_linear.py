"""Certified radii and hyperrectangles of scikit-learn linear classifiers; skops loading."""

from __future__ import annotations

import itertools
import pickle
import warnings

import jsonschema
import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.datasets import load_iris, make_classification
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from certify.certificate import Status, load_schema
from certify.errors import BadInput
from certify.ldp import make_mechanism, rho, utility
from certify.robustness.classifiers.linear import LinearModel, linear_hyperrectangle, linear_radius
from certify.robustness.classifiers.linear_model import linear_model_from_sklearn
from certify.robustness.classifiers.sklearn_io import load_sklearn


def _data(n_classes, d=4, seed=0):
    X, y = make_classification(n_samples=300, n_features=d, n_informative=d, n_redundant=0, n_classes=n_classes,
                               n_clusters_per_class=1, random_state=seed)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X, y


def _models():
    out = []
    for k in (2, 3):
        X, y = _data(k, seed=k)
        out.append((LogisticRegression(max_iter=2000).fit(X, y), X))
        out.append((LinearSVC(max_iter=20000).fit(X, y), X))
        out.append((SGDClassifier(random_state=0, max_iter=2000, tol=None).fit(X, y), X))
    return out


MODELS = _models()


def _oracle_radius(model, x0, norm, domain):
    """Independent: min over competitors of an LP (linf, l1) or a QP (l2) solved by HiGHS / cvxpy."""
    coef, icpt = np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_)
    c = int(np.flatnonzero(model.classes_ == model.predict(x0[None])[0])[0])
    if coef.shape[0] == 1:
        rows = [(coef[0], icpt[0])] if c == 1 else [(-coef[0], -icpt[0])]
    else:
        rows = [(coef[c] - coef[j], icpt[c] - icpt[j]) for j in range(coef.shape[0]) if j != c]
    d = x0.size
    best = np.inf
    for w, b in rows:
        if norm == "l2" and domain is None:  # distance to a hyperplane
            best = min(best, max(float(w @ x0 + b), 0.0) / float(np.linalg.norm(w)))
            continue
        if norm == "l2":
            import cvxpy as cp
            x = cp.Variable(d)
            cons = [w @ x + b <= 0]
            if domain is not None:
                cons += [x >= domain[0], x <= domain[1]]
            prob = cp.Problem(cp.Minimize(cp.norm(x - x0, 2)), cons)
            with warnings.catch_warnings():  # "solution may be inaccurate": the tolerance below allows for it
                warnings.simplefilter("ignore", UserWarning)
                prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
            if prob.status in ("optimal", "optimal_inaccurate"):
                best = min(best, float(prob.value))
            continue
        bounds = [(domain[0], domain[1]) if domain is not None else (None, None)] * d
        if norm == "linf":  # variables x (d), t
            cost = np.r_[np.zeros(d), 1.0]
            A = [np.r_[w, 0.0]]
            ub = [-b]
            for i in range(d):
                e = np.zeros(d); e[i] = 1
                A += [np.r_[e, -1.0], np.r_[-e, -1.0]]
                ub += [x0[i], -x0[i]]
            res = linprog(cost, A_ub=np.array(A), b_ub=np.array(ub), bounds=bounds + [(0, None)], method="highs")
        else:  # l1: variables x (d), u (d) with |x - x0| <= u
            cost = np.r_[np.zeros(d), np.ones(d)]
            A = [np.r_[w, np.zeros(d)]]
            ub = [-b]
            for i in range(d):
                e = np.zeros(d); e[i] = 1
                A += [np.r_[e, -e], np.r_[-e, -e]]
                ub += [x0[i], -x0[i]]
            res = linprog(cost, A_ub=np.array(A), b_ub=np.array(ub), bounds=bounds + [(0, None)] * d, method="highs")
        if res.status == 0:
            best = min(best, float(res.fun))
    return best


@pytest.mark.parametrize("idx", range(len(MODELS)))
@pytest.mark.parametrize("norm", ["linf", "l1", "l2"])
def test_radius_matches_lp_oracle(idx, norm):
    model, X = MODELS[idx]
    for i in (3, 77, 150):
        x0 = X[i]
        for domain in (None, (0.0, 1.0)):
            cert = linear_radius(model, x0, norm=norm, domain=domain)
            want = _oracle_radius(model, x0, norm, domain)
            if np.isinf(want):
                assert cert.status == Status.ROBUST_WITHIN and cert.upper is None
                continue
            assert cert.status == Status.OPTIMAL and cert.certified
            assert cert.lower <= cert.upper
            tol = 1e-5 if norm == "l2" and domain is not None else 1e-7  # the conic solver's accuracy
            assert cert.lower == pytest.approx(want, rel=tol, abs=1e-9) and cert.upper == pytest.approx(want, rel=tol, abs=1e-9)
            # the witness is a point of another class at distance <= upper
            assert model.predict(cert.witness[None])[0] != model.predict(x0[None])[0]
            dist = {"linf": np.max, "l1": np.sum, "l2": lambda v: np.sqrt(np.sum(v * v))}[norm](np.abs(cert.witness - x0))
            assert dist <= cert.upper * (1 + 1e-12)
            if domain is not None:
                assert np.all((cert.witness >= 0) & (cert.witness <= 1))


def _vertices_minimising_margins(model, c, lo, hi):
    """For each competitor, the box vertex where its margin is smallest (sign pattern of the coefficients)."""
    coef = np.atleast_2d(model.coef_)
    dirs = [coef[0] if c == 1 else -coef[0]] if coef.shape[0] == 1 else [coef[c] - coef[j] for j in range(len(coef)) if j != c]
    return [np.where(dvec > 0, lo, hi) for dvec in dirs]


@pytest.mark.parametrize("idx", range(len(MODELS)))
def test_hyperrectangle_is_robust_and_maximal(idx):
    model, X = MODELS[idx]
    rng = np.random.default_rng(idx)
    for i in (5, 60, 222):
        x0 = X[i]
        label = model.predict(x0[None])[0]
        c = int(np.flatnonzero(model.classes_ == label)[0])
        for feats in (None, [0, 2]):
            cert = linear_hyperrectangle(model, x0, features=feats, domain=(0, 1))
            box = cert.box
            assert cert.status == Status.CERTIFIED and box.contains(x0)
            free = np.arange(x0.size) if feats is None else np.array(feats)
            fixed = np.setdiff1d(np.arange(x0.size), free)
            assert np.all(box.lo[fixed] == x0[fixed]) and np.all(box.hi[fixed] == x0[fixed])
            # dense sampling + every vertex keeps the class
            pts = rng.uniform(box.lo, box.hi, size=(20000, x0.size))
            verts = np.array([np.where(m, box.hi, box.lo) for m in itertools.product([0, 1], repeat=x0.size)])
            assert np.all(model.predict(np.vstack([pts, verts])) == label)
            # pushing any side out by 1e-3 gives a point of another class, unless the side is at the domain edge
            for f in free:
                for side in ("lo", "hi"):
                    lo, hi = box.lo.copy(), box.hi.copy()
                    if side == "lo":
                        if lo[f] == 0.0:
                            continue
                        lo[f] = max(0.0, lo[f] - 1e-3)
                    else:
                        if hi[f] == 1.0:
                            continue
                        hi[f] = min(1.0, hi[f] + 1e-3)
                    cands = np.array(_vertices_minimising_margins(model, c, lo, hi))
                    assert np.any(model.predict(cands) != label), (i, f, side)


def test_hyperrectangle_plugs_into_utility():
    model, X = MODELS[0]
    x0 = X[10]
    cert = linear_hyperrectangle(model, x0, features=[1, 3])
    pm = make_mechanism("pm", 3.0)
    u = utility(pm, cert, features=[1, 3])
    assert u.basis.startswith("certified box") and utility(pm, cert).rho == u.rho  # the certificate's features
    assert utility(pm, cert, features=[1, 2, 3]).rho == 0.0  # feature 2 is fixed in the box: any noise leaves it
    assert u.rho == pytest.approx(rho(pm, (cert.box.lo, cert.box.hi), point=x0, features=[1, 3]))
    jsonschema.validate(cert.to_dict(), load_schema())
    jsonschema.validate(linear_radius(model, x0, norm="l2").to_dict(), load_schema())
    # the empirical frequency of keeping the class is at least rho (sampled, fixed seed)
    rng = np.random.default_rng(0)
    n = 4000
    recs = np.repeat(x0[None], n, axis=0)
    for f in (1, 3):
        recs[:, f] = pm.sample(x0[f], n, sampler=rng)
    kept = np.mean(model.predict(recs) == model.predict(x0[None])[0])
    assert kept >= u.rho - 4 * np.sqrt(u.rho * (1 - u.rho) / n)


def test_radius_boxes_are_robust_for_every_norm():
    model, X = MODELS[1]
    rng = np.random.default_rng(1)
    for norm in ("linf", "l1", "l2"):
        cert = linear_radius(model, X[40], norm=norm, domain=(0, 1))
        pts = rng.uniform(cert.box.lo, cert.box.hi, size=(5000, X.shape[1]))
        assert np.all(model.predict(pts) == model.predict(X[40][None])[0])


def test_pipeline_with_scaler_is_folded_exactly(tmp_path):
    X, y = load_iris(return_X_y=True)
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X, y)
    lin = linear_model_from_sklearn(pipe)
    pts = X[::7]
    np.testing.assert_allclose(pts @ lin.Wf.T + lin.bf, pipe.decision_function(pts), rtol=1e-9, atol=1e-9)
    lo, hi = X.min(0), X.max(0)
    cert = linear_hyperrectangle(pipe, X[70], domain=(lo, hi))
    sample = np.random.default_rng(2).uniform(cert.box.lo, cert.box.hi, size=(20000, 4))
    assert np.all(pipe.predict(sample) == pipe.predict(X[70][None])[0])
    import skops.io as sio

    path = tmp_path / "pipe.skops"
    sio.dump(pipe, path)
    loaded = load_sklearn(str(path))
    assert np.array_equal(loaded.predict(X), pipe.predict(X))


def test_pickle_files_are_refused(tmp_path):
    model, _ = MODELS[0]
    for name in ("model.pkl", "model.joblib"):
        p = tmp_path / name
        p.write_bytes(pickle.dumps(model))
        with pytest.raises(BadInput, match="never unpickles"):
            load_sklearn(str(p))
    disguised = tmp_path / "model.skops"
    disguised.write_bytes(pickle.dumps(model))
    with pytest.raises(BadInput, match="pickle"):
        load_sklearn(str(disguised))


def test_unsupported_models_and_inputs():
    from sklearn.tree import DecisionTreeClassifier

    X, y = _data(2)
    with pytest.raises(BadInput, match="not a fitted linear classifier"):
        linear_radius(DecisionTreeClassifier().fit(X, y), X[0])
    lin = LinearModel.from_arrays([[1.0, -1.0]], [0.0])
    with pytest.raises(BadInput, match="norm"):
        linear_radius(lin, [0.2, 0.1], norm="l3")
    with pytest.raises(BadInput, match="outside the domain"):
        linear_hyperrectangle(lin, [1.5, 0.1])
    on_boundary = linear_radius(lin, [0.25, 0.25])
    assert on_boundary.lower == on_boundary.upper == 0.0
    # binary class 1 needs w.x + b > 0: the radius is the distance to the line x1 = x2
    cert = linear_radius(lin, [0.5, 0.1], norm="l2")
    assert cert.predicted_class == 1 and cert.lower == pytest.approx(0.4 / np.sqrt(2), rel=1e-12)
