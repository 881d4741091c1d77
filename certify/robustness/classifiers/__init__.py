"""Exact robustness of scikit-learn classifiers, beside the ReLU networks of `certify.robustness`.

- `linear_radius(model, x, norm=...)`, `linear_hyperrectangle(model, x, features=...)`: linear
  classifiers (LogisticRegression, LinearSVC, ... or a `LinearModel`), closed forms re-proven in
  exact rational arithmetic (`linear`; the model itself: `linear_model`);
- `tree_radius(model, x)`, `tree_hyperrectangle(model, x, features=...)`: tree ensembles
  (DecisionTree, RandomForest, ExtraTrees, (Hist)GradientBoosting or a `TreeEnsemble`), MILP with
  a proof (`trees`; `tree_model`, `tree_milp`, `tree_verify`);
- `load_sklearn(path)`: skops files, never pickle (`sklearn_io`).

Every result is a `certify.robustness.certificate.ClassifierRobustness`. See docs/ldp.md.
"""

from __future__ import annotations

from ...lazy import lazy_getattr

_EXPORTS = {
    "LinearModel": "linear_model",
    "linear_model_from_sklearn": "linear_model",
    "LinearRobustness": "linear",
    "linear_radius": "linear",
    "linear_hyperrectangle": "linear",
    "TreeEnsemble": "tree_model",
    "tree_ensemble_from_sklearn": "tree_model",
    "TreeRobustness": "trees",
    "tree_radius": "trees",
    "tree_hyperrectangle": "trees",
    "load_sklearn": "sklearn_io",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
