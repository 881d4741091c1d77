"""Certified radii and hyperrectangles of tree ensembles, checked against independent oracles.

The oracles use only scikit-learn's own `predict` and the thresholds stored in the fitted trees:
for each threshold, the float64 boundary where scikit-learn's float32 cast switches sides is found
by bisection over float64 bit patterns (HistGradientBoosting compares float64 directly). Every
cell of the split grid then has a representative among {boundary, next float, x0_f, box ends}, so
a product grid over 1-3 features is an exhaustive check (the nearest point of a cell to x0 is the
coordinate-wise clip, which lies on the grid).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier, HistGradientBoostingClassifier,
                              RandomForestClassifier)
from sklearn.preprocessing import MinMaxScaler
from sklearn.tree import DecisionTreeClassifier

from certify.errors import BadInput
from certify.ldp import robustness_box
from certify.robustness.classifiers import tree_ensemble_from_sklearn, tree_hyperrectangle, tree_radius


# ---------------------------------------------------------------------------------- oracle
def _thresholds(est, f: int) -> list[float]:
    if isinstance(est, HistGradientBoostingClassifier):
        out = []
        for it in est._predictors:
            for p in it:
                n = p.nodes
                out += [float(t) for t, leaf, ff in zip(n["num_threshold"], n["is_leaf"], n["feature_idx"])
                        if not leaf and ff == f]
        return out
    if hasattr(est, "tree_"):
        trees = [est]
    else:
        trees = list(np.ravel(est.estimators_))
    return [float(t) for e in trees for t, ff in zip(e.tree_.threshold, e.tree_.feature) if ff == f]


def _boundary(thr: float, float32: bool) -> float:
    """Largest float64 x >= 0 that scikit-learn sends left at threshold thr (bisection on bits)."""
    if not float32:
        return thr
    left = lambda x: float(np.float32(x)) <= thr  # noqa: E731
    bits = lambda x: int(np.float64(x).view(np.int64))  # noqa: E731
    val = lambda i: float(np.int64(i).view(np.float64))  # noqa: E731
    a, b = bits(max(thr, 0.0)) - 2**31, bits(max(thr, 0.0)) + 2**31  # left(a) and not left(b)
    a = max(a, 0)
    assert left(val(a)) and not left(val(b))
    while b - a > 1:
        m = (a + b) // 2
        a, b = (m, b) if left(val(m)) else (a, m)
    return val(a)


def _grid(est, f: int, lo: float, hi: float, extra=()) -> np.ndarray:
    f32 = not isinstance(est, HistGradientBoostingClassifier)
    pts = {lo, hi, *extra}
    for t in _thresholds(est, f):
        b = _boundary(t, f32)
        pts.update([b, float(np.nextafter(b, np.inf))])
    return np.array(sorted(p for p in pts if lo <= p <= hi))


def _product(est, x0, feats, lo, hi, extra=True) -> np.ndarray:
    axes = [_grid(est, f, lo[f], hi[f], [x0[f]] if extra else ()) for f in feats]
    P = np.array(list(itertools.product(*axes)))
    X = np.repeat(x0[None, :], len(P), axis=0)
    X[:, feats] = P
    return X


def _oracle_radius(est, x0, feats, lo=0.0, hi=1.0) -> Fraction | None:
    d = x0.size
    X = _product(est, x0, feats, np.full(d, lo), np.full(d, hi))
    flip = est.predict(X) != est.predict(x0[None])[0]
    if not flip.any():
        return None
    return min(max(abs(Fraction(float(a)) - Fraction(float(b))) for a, b in zip(x, x0)) for x in X[flip])


def _toy(kind: str, n_features: int = 2, classes: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (300, n_features))
    s = X @ rng.normal(size=n_features) + 0.3 * np.sin(6 * X[:, 0])
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, classes + 1)[1:-1]))
    est = {
        "dt": DecisionTreeClassifier(max_depth=4, random_state=seed),
        "rf": RandomForestClassifier(7, max_depth=3, random_state=seed),
        "et": ExtraTreesClassifier(6, max_depth=3, random_state=seed),
        "gb": GradientBoostingClassifier(n_estimators=8, max_depth=2, random_state=seed),
        "hgb": HistGradientBoostingClassifier(max_iter=8, max_depth=3, random_state=seed),
    }[kind]
    return est.fit(X, y), X


KINDS = ["dt", "rf", "et", "gb", "hgb"]


# ---------------------------------------------------------------------------------- extraction
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("classes", [2, 3])
def test_scores_reproduce_predict_including_split_boundaries(kind, classes):
    est, X = _toy(kind, 3, classes)
    ens = tree_ensemble_from_sklearn(est)
    f32 = kind != "hgb"
    rng = np.random.default_rng(1)
    pts = [X[:50], rng.uniform(0, 1, (50, 3))]
    for f in range(3):  # points right at the float32 switch of every threshold
        for t in _thresholds(est, f)[:15]:
            b = _boundary(t, f32)
            for v in (b, float(np.nextafter(b, np.inf))):
                p = X[:2].copy()
                p[:, f] = v
                pts.append(p)
    P = np.vstack(pts)
    S = np.array([ens.base + sum(t.value[leaf] for t, leaf in zip(ens.trees, ens.leaves(x))) for x in P])
    assert np.array_equal(np.array(ens.classes)[S.argmax(1)], est.predict(P))


# ---------------------------------------------------------------------------------- radius
@pytest.mark.parametrize("kind", KINDS)
def test_radius_is_exact_against_grid_oracle(kind):
    est, X = _toy(kind, 2, 2)
    for x0 in X[:6]:
        r = tree_radius(est, x0, domain=(0, 1))
        truth = _oracle_radius(est, x0, [0, 1])
        if truth is None:
            assert r.status == "robust_within"
            continue
        assert Fraction(r.lower) <= truth, (r.lower, float(truth))
        assert r.upper is not None and Fraction(r.upper) >= truth
        if r.status == "optimal":
            assert r.lower == pytest.approx(float(truth), rel=1e-15, abs=0)
        # the witness really flips in scikit-learn and sits at distance `upper`
        assert est.predict(r.witness[None])[0] != r.predicted_class
        assert np.max(np.abs(r.witness - x0)) <= r.upper
        # the certified box: every grid point strictly inside keeps the class
        B = _product(est, x0, [0, 1], r.box.lo, r.box.hi)
        assert np.all(est.predict(B) == r.predicted_class)


@pytest.mark.parametrize("kind", ["rf", "gb", "hgb"])
def test_radius_multiclass_three_features(kind):
    est, X = _toy(kind, 3, 3, seed=2)
    for x0 in X[:3]:
        r = tree_radius(est, x0, domain=(0, 1))
        truth = _oracle_radius(est, x0, [0, 1, 2])
        assert truth is not None and Fraction(r.lower) <= truth <= Fraction(r.upper)
        assert r.status == "optimal" and r.certified


def test_radius_features_subset_and_no_domain():
    est, X = _toy("gb", 3, 2, seed=3)
    x0 = X[0]
    r = tree_radius(est, x0, features=[1])
    truth = _oracle_radius(est, x0, [1], lo=-1e3, hi=1e3)
    if truth is None:
        assert r.status == "robust_within"
    else:
        assert r.status == "optimal" and r.lower == pytest.approx(float(truth), rel=1e-15)
        assert r.witness[0] == x0[0] and r.witness[2] == x0[2]


def test_certificate_json():
    est, X = _toy("rf", 2, 2)
    d = tree_radius(est, X[0], domain=(0, 1)).to_dict()
    assert d["kind"] == "tree_robustness" and d["schema"] == "certify.certificate/1" and d["certified"]


# ---------------------------------------------------------------------------------- hyperrectangle
def _check_hyperrectangle(est, x0, feats, h, exhaustive=True, samples=20000):
    c = h.predicted_class
    lo, hi = h.box.lo, h.box.hi
    rng = np.random.default_rng(0)
    S = np.repeat(x0[None, :], samples, axis=0)
    S[:, feats] = rng.uniform(lo[feats], hi[feats], (samples, len(feats)))
    assert np.all(est.predict(S) == c)
    if exhaustive:
        assert np.all(est.predict(_product(est, x0, feats, lo, hi, extra=False)) == c)
    for side in h.sides:
        f = side["feature"]
        if side["at_domain_edge"]:
            continue
        plo, phi = lo.copy(), hi.copy()
        if side["side"] == "lower":
            plo[f] = max(lo[f] - 1e-3, 0.0)
        else:
            phi[f] = min(hi[f] + 1e-3, 1.0)
        if side["maximal"]:  # its replayed witness lies in the pushed box and flips
            w = np.array(side["witness"])
            assert np.all(w >= plo) and np.all(w <= phi) and est.predict(w[None])[0] != c
        if exhaustive and side["maximal"]:  # independently: the oracle grid of the pushed box has a flip
            assert np.any(est.predict(_product(est, x0, feats, plo, phi, extra=False)) != c)


@pytest.mark.parametrize("kind", KINDS)
def test_hyperrectangle_exhaustive_inside_and_pushed_out(kind):
    est, X = _toy(kind, 3, 2, seed=4)
    for x0 in X[:3]:
        h = tree_hyperrectangle(est, x0, features=[0, 2])
        assert h.certified and h.status in ("certified", "robust_within")
        assert np.all(h.box.lo[[1]] == x0[1]) and np.all(h.box.hi[[1]] == x0[1])
        if kind in ("gb", "hgb", "dt"):  # no vote ties: every side is maximal
            assert all(s["maximal"] for s in h.sides)
        _check_hyperrectangle(est, x0, [0, 2], h)


def test_hyperrectangle_multiclass_iris():
    X, y = load_iris(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    est = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0).fit(X, y)
    for x0 in X[[0, 60, 120]]:
        h = tree_hyperrectangle(est, x0, features=[2, 3])
        _check_hyperrectangle(est, x0, [2, 3], h)


def test_breast_cancer_forest_hyperrectangle():
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    est = RandomForestClassifier(20, max_depth=4, random_state=0).fit(X, y)
    feats = [20, 22, 27]
    for i in (0, 3, 7):
        h = tree_hyperrectangle(est, X[i], features=feats)
        assert h.certified
        _check_hyperrectangle(est, X[i], feats, h, exhaustive=True, samples=5000)


@pytest.mark.slow
def test_breast_cancer_boosting_radius_all_features():
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    est = GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0).fit(X, y)
    for i in range(5):
        r = tree_radius(est, X[i], domain=(0, 1))
        assert est.predict(r.witness[None])[0] != r.predicted_class
        assert r.lower <= r.upper
        box = r.box
        S = np.random.default_rng(i).uniform(box.lo, box.hi, (5000, X.shape[1]))
        assert np.all(est.predict(S) == r.predicted_class)


# ---------------------------------------------------------------------------------- entry points, bad input
def test_robustness_box_dispatch_and_probabilistic_fallback():
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    est, X = _toy("rf", 2, 2)
    assert robustness_box(est, X[0]).KIND == "tree_robustness"
    lin = LogisticRegression().fit(X, est.predict(X))
    assert robustness_box(lin, X[0]).KIND == "linear_robustness"
    knn = KNeighborsClassifier(3).fit(X, est.predict(X))
    p = robustness_box(knn, X[0], seed=0)
    assert p.status == "probabilistic" and not p.certified and p.omega == 0.05 and p.tau == 0.05
    assert p.box.contains(X[0])


def test_skops_roundtrip(tmp_path):
    import skops.io as sio

    from certify.robustness.classifiers import load_sklearn

    for kind in ("rf", "hgb"):
        est, X = _toy(kind, 2, 2)
        path = tmp_path / f"{kind}.skops"
        sio.dump(est, path)
        loaded = load_sklearn(str(path))
        a = tree_radius(loaded, X[0], domain=(0, 1))
        b = tree_radius(est, X[0], domain=(0, 1))
        assert a.lower == b.lower and a.upper == b.upper


def test_bad_inputs():
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    est, X = _toy("gb", 2, 2)
    with pytest.raises(BadInput, match="2 features"):
        tree_radius(est, [0.5, 0.5, 0.5])
    with pytest.raises(BadInput, match="NaN"):
        tree_radius(est, [0.5, np.nan])
    with pytest.raises(BadInput, match="outside the domain"):
        tree_radius(est, [0.5, 2.0], domain=(0, 1))
    with pytest.raises(BadInput, match="not a supported tree ensemble"):
        tree_radius(KNeighborsClassifier().fit(X, est.predict(X)), X[0])
    with pytest.raises(BadInput, match="not a supported tree ensemble"):
        tree_radius(make_pipeline(MinMaxScaler(), est), X[0])
    with pytest.raises(BadInput, match="not fitted"):
        tree_radius(RandomForestClassifier(), X[0])
    with pytest.raises(BadInput, match="domain"):
        tree_hyperrectangle(est, X[0], domain=None)
    with pytest.raises(BadInput, match="feature index"):
        tree_hyperrectangle(est, X[0], features=[5])


def test_utility_reads_tree_and_probabilistic_boxes():
    from sklearn.neighbors import KNeighborsClassifier

    from certify.ldp import make_mechanism, probabilistic_box, utility

    est, X = _toy("gb", 3, 2, seed=4)
    cert = tree_hyperrectangle(est, X[0], features=[0, 2])
    u = utility(make_mechanism("pm", 2.0), cert, features=[0, 2])
    assert 0 < u.rho <= 1 and "certified box (tree_robustness" in u.to_dict()["basis"]
    knn = KNeighborsClassifier(3).fit(X, est.predict(X))
    p = probabilistic_box(knn, X[0], features=[0, 2], omega=0.1, tau=0.1, seed=1)
    up = utility(make_mechanism("pm", 2.0), p, features=[0, 2])
    assert "probabilistic" in up.to_dict()["basis"]


@pytest.mark.parametrize("kind", ["rf", "gb"])
def test_proof_alone_corrects_a_useless_milp(kind, monkeypatch):
    """Without MILP proposals the box search alone must reach the same exact answers."""
    from certify.robustness.classifiers import trees

    est, X = _toy(kind, 2, 2)
    monkeypatch.setattr(trees._Ctx, "hint", lambda self, fm, parts_left=1: ("none", None))
    for x0 in X[:4]:
        r = tree_radius(est, x0, domain=(0, 1))
        truth = _oracle_radius(est, x0, [0, 1])
        if truth is not None:
            assert Fraction(r.lower) <= truth and (r.status != "optimal" or r.lower == float(truth))
        h = tree_hyperrectangle(est, x0, features=[0, 1])
        _check_hyperrectangle(est, x0, [0, 1], h)
