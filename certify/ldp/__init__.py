"""LDP utility: mechanisms on a bounded feature domain, rho(eps, box), mechanism and eps selection.

See docs/ldp.md. Modules: `mechanisms` (Laplace, Gaussian, PM, SW, exponential, k-RR, the privacy
indicator), `exact` (the hardened exact sampler), `utility` (rho), `selection` (smallest eps,
comparison), `linear` (certified boxes of linear classifiers), `trees` (certified boxes of tree
ensembles: `tree_model`, `tree_milp`, `tree_verify`), `boxes` (one entry point, probabilistic
fallback for other models), `sklearn_io` (skops loading), `empirical` (rho_hat by sampling).
"""

from __future__ import annotations

from .mechanisms import (EPS_MAX, KRR, MECHANISM_NAMES, Exponential, Gaussian, Laplace, LDPCheck, LDPMechanism,
                         PiecewiseMechanism, PrivacyIndicator, SquareWave, make_mechanism)
from .empirical import EmpiricalUtility, empirical_rho, theory_vs_practice
from .linear import LinearModel, LinearRobustness, robustness_hyperrectangle, robustness_radius
from .selection import Comparison, EpsilonSearch, best_mechanism, compare_mechanisms, smallest_epsilon
from .sklearn_io import linear_model_from_sklearn, load_sklearn
from .boxes import ProbabilisticBox, probabilistic_box, robustness_box
from .tree_model import TreeEnsemble, tree_ensemble_from_sklearn
from .trees import TreeRobustness, tree_robustness_hyperrectangle, tree_robustness_radius
from .utility import UtilityResult, read_box, rho, rho_batch, utility

# names under which certify exports the linear-model certificates (the robustness engine has its own)
linear_radius = robustness_radius
linear_hyperrectangle = robustness_hyperrectangle
tree_radius = tree_robustness_radius
tree_hyperrectangle = tree_robustness_hyperrectangle

__all__ = [
    "EmpiricalUtility", "LinearModel", "LinearRobustness", "empirical_rho", "linear_hyperrectangle",
    "linear_model_from_sklearn", "linear_radius", "load_sklearn", "robustness_hyperrectangle", "robustness_radius",
    "theory_vs_practice", "EPS_MAX", "KRR", "MECHANISM_NAMES", "Comparison", "EpsilonSearch", "Exponential", "Gaussian", "LDPCheck",
    "LDPMechanism", "Laplace", "PiecewiseMechanism", "PrivacyIndicator", "SquareWave", "UtilityResult",
    "best_mechanism", "compare_mechanisms", "make_mechanism", "read_box", "rho", "rho_batch", "smallest_epsilon",
    "utility", "ProbabilisticBox", "TreeEnsemble", "TreeRobustness", "probabilistic_box", "robustness_box",
    "tree_ensemble_from_sklearn", "tree_hyperrectangle", "tree_radius", "tree_robustness_hyperrectangle",
    "tree_robustness_radius",
]
