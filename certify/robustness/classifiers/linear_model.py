"""Linear classifiers as exact scores W x + b (fractions and float64), from arrays or from scikit-learn.

`linear_model_from_sklearn(est)` turns a fitted LogisticRegression, LinearSVC, SGDClassifier (or
any scikit-learn linear classifier with `coef_`, `intercept_`, `classes_` and the usual
`decision_function` / `predict`: RidgeClassifier, Perceptron, ...), optionally behind a Pipeline
of StandardScaler / MinMaxScaler steps, into the exact scores W x + b of a `LinearModel`. The
scalers are folded in exact rational arithmetic: the certified object is the real-valued function
the pipeline computes (sklearn evaluates it in float64, so points within ~1e-15 of a decision
boundary may be predicted differently by sklearn itself). Files are read by `sklearn_io`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ...errors import BadInput


@dataclass(frozen=True)
class LinearModel:
    """Scores W x + b, exact (fractions) and float64; `binary` models have one score row."""

    W: tuple[tuple[Fraction, ...], ...]
    b: tuple[Fraction, ...]
    classes: tuple
    binary: bool
    source: str = "linear"

    @property
    def dim(self) -> int:
        return len(self.W[0])

    @property
    def Wf(self) -> np.ndarray:
        return np.array([[float(v) for v in row] for row in self.W])

    @property
    def bf(self) -> np.ndarray:
        return np.array([float(v) for v in self.b])

    @classmethod
    def from_arrays(cls, W: Any, b: Any, classes: Sequence | None = None, source: str = "linear") -> "LinearModel":
        Wa = np.atleast_2d(np.asarray(W, dtype=np.float64))
        ba = np.atleast_1d(np.asarray(b, dtype=np.float64)).reshape(-1)
        if Wa.shape[0] != ba.size:
            raise BadInput(f"weights have {Wa.shape[0]} rows but there are {ba.size} intercepts")
        if not (np.all(np.isfinite(Wa)) and np.all(np.isfinite(ba))):
            raise BadInput("the linear model has NaN or inf weights")
        binary = Wa.shape[0] == 1
        if classes is None:
            classes = [0, 1] if binary else list(range(Wa.shape[0]))
        classes = tuple(np.asarray(classes).tolist())
        if len(classes) != (2 if binary else Wa.shape[0]):
            raise BadInput(f"{len(classes)} class labels for {Wa.shape[0]} score rows")
        return cls(tuple(tuple(Fraction(float(v)) for v in row) for row in Wa), tuple(Fraction(float(v)) for v in ba),
                   classes, binary, source)

    def scores_exact(self, x: Sequence[Fraction]) -> list[Fraction]:
        return [sum((w * xi for w, xi in zip(row, x)), bi) for row, bi in zip(self.W, self.b)]

    def predict_index(self, x: Any) -> int:
        """Class index at x in exact arithmetic (binary: 1 iff score > 0; argmax ties to the first)."""
        xs = [Fraction(float(v)) for v in np.asarray(x, dtype=np.float64).reshape(-1)]
        s = self.scores_exact(xs)
        if self.binary:
            return int(s[0] > 0)
        return max(range(len(s)), key=lambda j: (s[j], -j))

    def margins(self, c: int) -> tuple[list[tuple[Fraction, ...]], list[Fraction], list[int]]:
        """(d_j, e_j, competitor index j): class c is kept where every d_j . x + e_j > 0."""
        if self.binary:
            w, b0 = self.W[0], self.b[0]
            if c == 1:
                return [w], [b0], [0]
            return [tuple(-v for v in w)], [-b0], [1]
        D, E, J = [], [], []
        for j in range(len(self.W)):
            if j != c:
                D.append(tuple(a - bb for a, bb in zip(self.W[c], self.W[j])))
                E.append(self.b[c] - self.b[j])
                J.append(j)
        return D, E, J


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


def as_linear_model(model: Any) -> LinearModel:
    """A `LinearModel`, or a fitted scikit-learn linear classifier / pipeline (see `sklearn_io`)."""
    if isinstance(model, LinearModel):
        return model
    return linear_model_from_sklearn(model)


__all__ = ["LinearModel", "as_linear_model", "linear_model_from_sklearn"]
