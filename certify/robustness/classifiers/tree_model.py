"""Tree ensembles as certify sees them: splits `x_i <= cutoff`, leaf score vectors, a decision rule.

`tree_ensemble_from_sklearn(est)` reads a fitted DecisionTreeClassifier, RandomForestClassifier,
ExtraTreesClassifier, GradientBoostingClassifier or HistGradientBoostingClassifier (binary or
multiclass) into a `TreeEnsemble`: class scores S(x) = base + sum_t leaf_value_t(x) (one entry
per class), predicted class argmax_k S_k. The scores are those scikit-learn's `predict` compares:

- decision tree / forests: per-tree class proportions (each leaf's value normalised as
  `predict_proba` does), summed (the forest's average times the number of trees: same argmax);
- gradient boosting: the raw score; binary models have the single raw score r as (0, r), since
  predict is class 1 iff r >= 0 (GradientBoosting) or r > 0 (HistGradientBoosting).

Splits act on what scikit-learn compares. DecisionTree-based estimators (forests, GradientBoosting)
cast X to float32 before `x <= threshold` (threshold float64); HistGradientBoosting compares the
float64 value to `num_threshold` directly. Each split is stored as a float64 `cutoff` with
`x <= cutoff  <=>  scikit-learn sends x left` for every float64 x (for float32 models: the largest
float64 whose float32 rounding is <= threshold, computed and checked here). Certificates are
statements about float64 inputs, exactly as scikit-learn's `predict` receives them.

`guard` bounds the floating-point error of scikit-learn's score evaluation (leaf normalisation,
summation, scaling, link function): where every exact margin S_c - S_j exceeds it, scikit-learn's
float `predict` returns class c. Margins within the guard (including exact ties) count as flips.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import BadInput

U = 2.0**-53
SUPPORTED = ("DecisionTreeClassifier", "RandomForestClassifier", "ExtraTreesClassifier",
             "GradientBoostingClassifier", "HistGradientBoostingClassifier")
# what skops lists as untrusted in saved tree models (their estimators are trusted by skops)
TREE_TYPES = (
    "sklearn.tree._tree.Tree",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
)


@dataclass(frozen=True)
class Tree:
    """One tree: node arrays (`feature` -1 at leaves), float64 `cutoff` (left iff x <= cutoff),
    children, and the class-score vector `value[node]` (used at leaves)."""

    feature: np.ndarray
    cutoff: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    def leaf_of(self, x: np.ndarray) -> int:
        node = 0
        while self.feature[node] >= 0:
            node = self.left[node] if x[self.feature[node]] <= self.cutoff[node] else self.right[node]
        return int(node)

    @property
    def leaves(self) -> np.ndarray:
        return np.flatnonzero(self.feature < 0)


@dataclass(frozen=True)
class TreeEnsemble:
    """Class scores base + sum_t trees[t].value[leaf_t(x)]; `classes` as in scikit-learn's `classes_`."""

    trees: tuple[Tree, ...]
    base: np.ndarray
    classes: tuple
    n_features: int
    source: str
    guard: float
    float32_inputs: bool

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def leaves(self, x: Any) -> list[int]:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        return [t.leaf_of(x) for t in self.trees]

    def margins_exact(self, leaves: list[int], c: int) -> list[Fraction]:
        """S_c - S_j (j != c, in class order) in exact arithmetic for a choice of leaves."""
        total = [Fraction(float(b)) for b in self.base]
        for t, leaf in zip(self.trees, leaves):
            for k in range(self.n_classes):
                v = t.value[leaf, k]
                if v != 0.0:
                    total[k] += Fraction(float(v))
        return [total[c] - total[j] for j in range(self.n_classes) if j != c]

    def cutoffs(self) -> list[np.ndarray]:
        """Sorted distinct finite cutoffs per feature."""
        per: list[list[np.ndarray]] = [[] for _ in range(self.n_features)]
        for t in self.trees:
            inner = t.feature >= 0
            for f, c in zip(t.feature[inner], t.cutoff[inner]):
                per[f].append(c)
        return [np.unique(np.array([c for c in cs if np.isfinite(c)], dtype=np.float64)) for cs in per]


# ---------------------------------------------------------------------------------- float32 splits
def float32_cutoffs(thr: np.ndarray) -> np.ndarray:
    """Per threshold, the largest float64 x with float32(x) <= thr (x <= it <=> sklearn goes left)."""
    thr = np.asarray(thr, dtype=np.float64)
    out = np.empty_like(thr)
    for k, t in enumerate(thr):
        out[k] = _float32_cutoff(float(t))
    return out


def _goes_left(x: float, t: float) -> bool:
    return float(np.float32(x)) <= t


def _float32_cutoff(t: float) -> float:
    if not np.isfinite(t) or abs(t) >= float(np.finfo(np.float32).max):
        return t
    f = np.float32(t)
    if float(f) > t:
        f = np.nextafter(f, np.float32(-np.inf))
    g = np.nextafter(f, np.float32(np.inf))
    c = (float(f) + float(g)) / 2  # exact in float64: the rounding boundary between f and g
    while not _goes_left(c, t):
        c = float(np.nextafter(c, -np.inf))
    while _goes_left(float(np.nextafter(c, np.inf)), t):
        c = float(np.nextafter(c, np.inf))
    return c


# ---------------------------------------------------------------------------------- extraction
def _sk_tree(tree_: Any, values: np.ndarray, float32: bool) -> Tree:
    feature = np.asarray(tree_.feature, dtype=np.int64).copy()
    thr = np.asarray(tree_.threshold, dtype=np.float64)
    cutoff = np.where(feature >= 0, thr, np.nan)
    if float32:
        inner = feature >= 0
        cutoff[inner] = float32_cutoffs(thr[inner])
    feature[np.asarray(tree_.children_left) < 0] = -1
    return Tree(feature, cutoff, np.asarray(tree_.children_left, dtype=np.int64),
                np.asarray(tree_.children_right, dtype=np.int64), np.asarray(values, dtype=np.float64))


def _proportions(tree_: Any, n_classes: int) -> np.ndarray:
    """Leaf values normalised as DecisionTreeClassifier.predict_proba does (in float64)."""
    v = np.asarray(tree_.value, dtype=np.float64)
    if v.ndim != 3 or v.shape[1] != 1:
        raise BadInput("multi-output trees are not supported (one target column only)")
    v = v[:, 0, :n_classes].copy()
    norm = v.sum(axis=1, keepdims=True)
    norm[norm == 0.0] = 1.0
    return v / norm


def _guard(n_terms: int, scale: float, link: bool) -> float:
    """A bound on sklearn's float error when comparing two scores (see the module docstring)."""
    g = 16.0 * (n_terms + 8) * U * (scale + 1.0)
    return g + (1e-12 * (scale + 1.0) if link else 0.0)


def _check_fitted(est: Any, attr: str) -> None:
    if not hasattr(est, attr):
        raise BadInput(f"{type(est).__name__} is not fitted (no {attr}); fit it before certifying")


def tree_ensemble_from_sklearn(est: Any) -> TreeEnsemble:
    """A `TreeEnsemble` for a fitted scikit-learn tree classifier (see the module docstring)."""
    name = type(est).__name__
    if name not in SUPPORTED:
        raise BadInput(f"{name} is not a supported tree ensemble; supported: {', '.join(SUPPORTED)}")
    _check_fitted(est, "classes_")
    classes = tuple(np.asarray(est.classes_).tolist())
    if np.ndim(est.classes_) != 1 or len(classes) < 2:
        raise BadInput(f"{name}: need a single-output classifier with at least two classes")
    K = len(classes)
    n_features = int(est.n_features_in_)
    if name == "DecisionTreeClassifier":
        trees = (_sk_tree(est.tree_, _proportions(est.tree_, K), True),)
        return _finish(trees, np.zeros(K), classes, n_features, name, True, 1.0)
    if name in ("RandomForestClassifier", "ExtraTreesClassifier"):
        _check_fitted(est, "estimators_")
        trees = tuple(_sk_tree(e.tree_, _proportions(e.tree_, K), True) for e in est.estimators_)
        return _finish(trees, np.zeros(K), classes, n_features, name, True, float(len(trees)))
    if name == "GradientBoostingClassifier":
        return _from_gb(est, classes, n_features)
    return _from_hgb(est, classes, n_features)


def _finish(trees, base, classes, n_features, source, float32, scale, link=False) -> TreeEnsemble:
    for t in trees:
        if np.any(t.feature >= n_features):
            raise BadInput(f"{source}: a split uses feature {int(t.feature.max())} of {n_features}")
    guard = _guard(len(trees) + len(classes), scale, link)
    return TreeEnsemble(tuple(trees), np.asarray(base, dtype=np.float64), tuple(classes), n_features, source,
                        guard, float32)


def _from_gb(est: Any, classes: tuple, n_features: int) -> TreeEnsemble:
    _check_fitted(est, "estimators_")
    K = len(classes)
    init = est.init_
    if isinstance(init, str) and init == "zero":
        raw0 = np.zeros(est.n_trees_per_iteration_)
    elif type(init).__name__ == "DummyClassifier":
        # the prior is constant in x: read it where sklearn computes it
        raw0 = np.asarray(est._raw_predict_init(np.zeros((1, n_features))), dtype=np.float64).reshape(-1)
    else:
        raise BadInput(f"GradientBoostingClassifier with init={type(init).__name__} is not supported "
                       "(its initial score depends on x); use init=None or 'zero'")
    lr = float(est.learning_rate)
    trees, scale = [], float(np.max(np.abs(raw0), initial=0.0))
    for stage in est.estimators_:
        for k, reg in enumerate(stage):
            v = np.asarray(reg.tree_.value, dtype=np.float64)[:, 0, 0] * lr
            vals = np.zeros((v.size, K))
            vals[:, 1 if K == 2 else k] = v
            trees.append(_sk_tree(reg.tree_, vals, True))
            scale += float(np.max(np.abs(v)))
    base = np.zeros(K)
    if K == 2:
        base[1] = raw0[0]
    else:
        base[:] = raw0
    return _finish(tuple(trees), base, classes, n_features, "GradientBoostingClassifier", True, scale)


def _from_hgb(est: Any, classes: tuple, n_features: int) -> TreeEnsemble:
    _check_fitted(est, "_predictors")
    if getattr(est, "is_categorical_", None) is not None and np.any(est.is_categorical_):
        raise BadInput("HistGradientBoostingClassifier with categorical features is not supported")
    if getattr(est, "_preprocessor", None) is not None:
        raise BadInput("HistGradientBoostingClassifier with a categorical preprocessor is not supported")
    K = len(classes)
    raw0 = np.asarray(est._baseline_prediction, dtype=np.float64).reshape(-1)
    trees, scale = [], float(np.max(np.abs(raw0)))
    for it in est._predictors:
        for k, pred in enumerate(it):
            nodes = pred.nodes
            if np.any(nodes["is_categorical"]):
                raise BadInput("HistGradientBoostingClassifier with categorical splits is not supported")
            leaf = nodes["is_leaf"].astype(bool)
            feature = np.where(leaf, -1, nodes["feature_idx"]).astype(np.int64)
            cutoff = np.where(leaf, np.nan, nodes["num_threshold"]).astype(np.float64)
            vals = np.zeros((len(nodes), K))
            vals[:, 1 if K == 2 else k] = nodes["value"]
            trees.append(Tree(feature, cutoff, np.asarray(nodes["left"], dtype=np.int64),
                              np.asarray(nodes["right"], dtype=np.int64), vals))
            scale += float(np.max(np.abs(nodes["value"][leaf])))
    base = np.zeros(K)
    if K == 2:
        base[1] = raw0[0]
    else:
        base[:] = raw0
    # predict goes through expit/softmax (binary: argmax of (1 - p, p)), hence the link term
    return _finish(tuple(trees), base, classes, n_features, "HistGradientBoostingClassifier", False, scale, link=True)


def is_tree_model(model: Any) -> bool:
    return isinstance(model, TreeEnsemble) or type(model).__name__ in SUPPORTED


__all__ = ["SUPPORTED", "TREE_TYPES", "Tree", "TreeEnsemble", "float32_cutoffs", "is_tree_model",
           "tree_ensemble_from_sklearn"]
