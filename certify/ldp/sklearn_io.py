"""scikit-learn linear classifiers: loading from skops files (never pickle) and exact weights.

`load_sklearn(path)` reads a model saved with `skops.io.dump(model, "model.skops")`. Pickle and
joblib files are refused (unpickling runs arbitrary code): re-save the model with skops. A skops
file is loaded only when every type in it is trusted by skops' defaults or is one of the
scikit-learn types certify knows (`TRUSTED`); anything else is refused with the list of types.

Tree ensembles (DecisionTree, RandomForest, ExtraTrees, GradientBoosting, HistGradientBoosting
classifiers) load the same way; `certify.ldp.trees` certifies them.

`linear_model_from_sklearn(est)` turns a fitted LogisticRegression, LinearSVC, SGDClassifier (or
any scikit-learn linear classifier with `coef_`, `intercept_`, `classes_` and the usual
`decision_function` / `predict`: RidgeClassifier, Perceptron, ...), optionally behind a Pipeline
of StandardScaler / MinMaxScaler steps, into the exact scores W x + b of certify.ldp.linear. The
scalers are folded in exact rational arithmetic: the certified object is the real-valued function
the pipeline computes (sklearn evaluates it in float64, so points within ~1e-15 of a decision
boundary may be predicted differently by sklearn itself).
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import BadInput
from .linear import LinearModel
from .tree_model import TREE_TYPES

PICKLE_EXTENSIONS = (".pkl", ".pickle", ".joblib", ".pk", ".sav", ".dill")
TRUSTED = (
    "sklearn.linear_model._logistic.LogisticRegression",
    "sklearn.svm._classes.LinearSVC",
    "sklearn.linear_model._stochastic_gradient.SGDClassifier",
    "sklearn.linear_model._ridge.RidgeClassifier",
    "sklearn.linear_model._perceptron.Perceptron",
    "sklearn.pipeline.Pipeline",
    "sklearn.preprocessing._data.StandardScaler",
    "sklearn.preprocessing._data.MinMaxScaler",
    *TREE_TYPES,
)
_PICKLE_HINT = ("certify never unpickles files (unpickling runs arbitrary code); save the model with skops: "
                "`import skops.io; skops.io.dump(model, 'model.skops')`")


def _looks_like_pickle(head: bytes) -> bool:
    return head[:1] == b"\x80" or head[:2] in (b"(d", b"(l", b"}q", b"]q", b"cs", b"cn", b"cc")


def load_sklearn(path: str) -> Any:
    """A scikit-learn model from a skops file (pickle/joblib refused)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext in PICKLE_EXTENSIONS:
        raise BadInput(f"{path}: {_PICKLE_HINT}")
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    with open(path, "rb") as fh:
        head = fh.read(4)
    if _looks_like_pickle(head):
        raise BadInput(f"{path} is a pickle file: {_PICKLE_HINT}")
    if head[:2] != b"PK":
        raise BadInput(f"{path} is not a skops file (expected a zip archive written by skops.io.dump)")
    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:  # a corrupt archive
        raise BadInput(f"{path}: cannot read the skops file ({type(exc).__name__}: {str(exc)[:120]})") from None
    unknown = [t for t in untrusted if t not in TRUSTED]
    if unknown:
        raise BadInput(f"{path} contains types certify does not load: {', '.join(unknown[:5])}; "
                       "supported: scikit-learn linear classifiers, optionally after StandardScaler/MinMaxScaler, "
                       "and tree ensembles (DecisionTree, RandomForest, ExtraTrees, (Hist)GradientBoosting)")
    try:
        return sio.load(path, trusted=list(untrusted))
    except Exception as exc:
        raise BadInput(f"{path}: cannot load the skops file ({type(exc).__name__}: {str(exc)[:120]})") from None


def _fractions(a: Any) -> list[Fraction]:
    return [Fraction(float(v)) for v in np.asarray(a, dtype=np.float64).reshape(-1)]


def linear_model_from_sklearn(est: Any) -> LinearModel:
    """Exact scores of a fitted scikit-learn linear classifier (or scaler pipeline ending in one)."""
    steps = [est]
    try:
        from sklearn.pipeline import Pipeline
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        Pipeline = ()  # type: ignore[assignment]
    if isinstance(est, Pipeline):
        steps = [s for _, s in est.steps if s not in (None, "passthrough")]
    clf = steps[-1]
    for attr in ("coef_", "intercept_", "classes_"):
        if not hasattr(clf, attr):
            raise BadInput(f"{type(clf).__name__} is not a fitted linear classifier (no {attr}); certified boxes "
                           "cover scikit-learn linear classifiers (LogisticRegression, LinearSVC, SGDClassifier, ...)")
    coef = np.atleast_2d(np.asarray(clf.coef_, dtype=np.float64))
    intercept = np.atleast_1d(np.asarray(clf.intercept_, dtype=np.float64)).reshape(-1)
    if intercept.size == 1 and coef.shape[0] > 1:
        intercept = np.full(coef.shape[0], intercept[0])
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        raise BadInput(f"{type(clf).__name__} has NaN or inf weights")
    classes = list(np.asarray(clf.classes_).tolist())
    W = [[Fraction(float(v)) for v in row] for row in coef]
    b = [Fraction(float(v)) for v in intercept]
    # fold the scalers, last first: scores(x) = W T(x) + b with T affine and coordinate-wise
    for step in reversed(steps[:-1]):
        name = type(step).__name__
        if name == "StandardScaler":
            mean = _fractions(step.mean_) if getattr(step, "mean_", None) is not None and step.with_mean else None
            scale = _fractions(step.scale_) if getattr(step, "scale_", None) is not None and step.with_std else None
            n = len(W[0])
            mean = mean or [Fraction(0)] * n
            scale = scale or [Fraction(1)] * n
            b = [bi - sum((w * m / s for w, m, s in zip(row, mean, scale)), Fraction(0)) for row, bi in zip(W, b)]
            W = [[w / s for w, s in zip(row, scale)] for row in W]
        elif name == "MinMaxScaler":
            if getattr(step, "clip", False):
                raise BadInput("MinMaxScaler(clip=True) is not affine; refit it with clip=False")
            scale, shift = _fractions(step.scale_), _fractions(step.min_)
            b = [bi + sum((w * m for w, m in zip(row, shift)), Fraction(0)) for row, bi in zip(W, b)]
            W = [[w * s for w, s in zip(row, scale)] for row in W]
        else:
            raise BadInput(f"pipeline step {name} is not supported (only StandardScaler and MinMaxScaler before "
                           "the linear classifier)")
    binary = len(W) == 1
    if binary and len(classes) != 2:
        raise BadInput(f"one score row but {len(classes)} classes")
    if not binary and len(classes) != len(W):
        raise BadInput(f"{len(W)} score rows but {len(classes)} classes")
    source = type(clf).__name__ if len(steps) == 1 else "Pipeline(" + ", ".join(type(s).__name__ for s in steps) + ")"
    return LinearModel(tuple(tuple(r) for r in W), tuple(b), tuple(classes), binary, source)
