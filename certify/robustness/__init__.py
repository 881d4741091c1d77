"""Robustness of classifiers: exact radii, hyperrectangles and probabilistic radii.

- `robustness_radius(model, x, norm=...)`: the exact robustness radius of a ReLU network (MILP; l2 by Gurobi's MIQP
  or a sound interval; the linf radius of image-sized nets by a bisection of verifications, `split_radius`), with a
  fast certified lower bound and a replayed counterexample;
- `robustness_hyperrectangle(model, x, features=...)`: a box on which the class is proven
  constant, grown side by side, and the outer box where counterexamples are known;
- `probabilistic_radius(classifier, x, ...)`: the Hoeffding procedure for any black-box
  classifier (status "probabilistic", never certified);
- `radius_batch(model, points, out=...)`: many points, resumable;
- `classifiers`: the exact radii and hyperrectangles of scikit-learn linear models and tree
  ensembles (`linear_radius`, `tree_hyperrectangle`, ...).

See docs/robustness.md.
"""

from typing import Any

_EXPORTS = {
    "robustness_radius": "radius",
    "robustness_hyperrectangle": "hyperrectangle",
    "probabilistic_radius": "probabilistic",
    "radius_batch": "batch",
    "read_points": "batch",
    "RobustnessRadius": "certificate",
    "RobustnessHyperrectangle": "certificate",
    "ProbabilisticRadius": "certificate",
    "ClassifierRobustness": "certificate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    # imported on first use: `certify radius --help` reads only the options module
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'certify.robustness' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
