"""One entry point for the box of a classifier at a point: certified when certify can, labelled otherwise.

`robustness_box(model, point, features=, domain=)` returns
- for scikit-learn linear classifiers (or a `LinearModel`):
  `certify.robustness.classifiers.linear_hyperrectangle` (exact, certified);
- for tree ensembles (or a `TreeEnsemble`): `certify.robustness.classifiers.tree_hyperrectangle`
  (exact, certified);
- for ReLU networks (a `models.ir.Network`, e.g. from `certify.load_onnx`):
  `certify.robustness.robustness_hyperrectangle` (sound MILP proofs, certified);
- for anything else with a `predict` (or a callable batch -> labels): `probabilistic_box`, the
  sampling test of `certify.robustness.probabilistic_radius` on the domain (status
  "probabilistic", `certified` False, a `ProbabilisticRadius`): the largest l_inf half-width
  whose n uniform samples show at most a fraction tau/2 of class changes, found by binary search
  with omega split over every test of the search (Zheng & Hu Sec. 4.2 with a union bound): with
  confidence 1 - omega, at most a fraction tau of the box changes the class.

What the sampling shows, exactly: the samples are uniform on the box (the features not moved are
fixed at x, a_i = b_i = x_i), so the statement is about the uniform measure on the moved features.
`utility` turns the box into a lower bound of P(class kept) holding with confidence 1 - omega
(not Zheng & Hu's rho (1 - omega)(1 - tau), which is not a bound: docs/ldp.md).
"""

from __future__ import annotations

from typing import Any

from ..certificate import Certificate
from ..errors import BadInput
from ..robustness.certificate import ProbabilisticRadius


def _kind(model: Any) -> str:
    from models.ir import Network

    from ..robustness.classifiers.linear_model import LinearModel
    from ..robustness.classifiers.tree_model import is_tree_model

    if isinstance(model, LinearModel):
        return "linear"
    if isinstance(model, Network):
        return "network"
    if is_tree_model(model):
        return "tree"
    clf = model
    if type(model).__name__ == "Pipeline":
        clf = model.steps[-1][1]
    if hasattr(clf, "coef_") and hasattr(clf, "intercept_") and hasattr(clf, "classes_"):
        return "linear"
    return "other"


def robustness_box(model: Any, point: Any, *, features: Any = None, domain: Any = (0.0, 1.0), omega: float = 0.05,
                   tau: float = 0.05, seed: int | None = None, **kw: Any) -> Certificate:
    """The best box certify can give for `model` at `point` (see the module docstring)."""
    kind = _kind(model)
    if kind == "linear":
        from ..robustness.classifiers.linear import linear_hyperrectangle

        return linear_hyperrectangle(model, point, features=features, domain=domain)
    if kind == "tree":
        from ..robustness.classifiers.trees import tree_hyperrectangle

        return tree_hyperrectangle(model, point, features=features, domain=domain, **kw)
    if kind == "network":
        from ..robustness import robustness_hyperrectangle as network_hyperrectangle

        return network_hyperrectangle(model, point, features=features, domain=domain, **kw)
    return probabilistic_box(model, point, features=features, domain=domain, omega=omega, tau=tau, seed=seed)


def probabilistic_box(model: Any, point: Any, *, features: Any = None, domain: Any = (0.0, 1.0), omega: float = 0.05,
                      tau: float = 0.05, seed: int | None = None, precision: float | None = None) -> ProbabilisticRadius:
    """A sampled (not certified) box on the domain (default [0, 1], the normalised feature range):
    `certify.robustness.probabilistic_radius` with the LDP defaults (see the module docstring)."""
    from ..robustness.probabilistic import probabilistic_radius

    if domain is None:
        raise BadInput("the probabilistic box needs the input domain (lo, hi)")
    return probabilistic_radius(model, point, omega=omega, tau=tau, domain=domain, features=features,
                                precision=precision, seed=seed)


__all__ = ["probabilistic_box", "robustness_box"]
