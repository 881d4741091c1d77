"""scikit-learn classifiers: loading from skops files (never pickle).

`load_sklearn(path)` reads a model saved with `skops.io.dump(model, "model.skops")`. Pickle and
joblib files are refused (unpickling runs arbitrary code): re-save the model with skops. A skops
file is loaded only when every type in it is trusted by skops' defaults or is one of the
scikit-learn types certify knows (`TRUSTED`); anything else is refused with the list of types.

Tree ensembles (DecisionTree, RandomForest, ExtraTrees, GradientBoosting, HistGradientBoosting
classifiers) load the same way; `trees` certifies them.

`linear_model.linear_model_from_sklearn(est)` turns a loaded linear classifier into exact scores.
"""

from __future__ import annotations

import os
from typing import Any

from models.file_kinds import PICKLE_EXTENSIONS

from ...errors import BadInput
from .tree_model import TREE_TYPES

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


__all__ = ["PICKLE_EXTENSIONS", "TRUSTED", "load_sklearn"]
