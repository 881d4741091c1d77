"""LDP utility: mechanisms on a bounded feature domain, rho(eps, box), mechanism and eps selection.

See docs/ldp.md. Modules: `mechanisms` (LaplaceLDP, GaussianLDP, PM, SW, exponential, k-RR, the
privacy indicator; named apart from the noise families `certify.privacy.noise.Laplace`/`Gaussian`),
`exact` (the hardened exact sampler), `utility` (rho), `selection` (smallest eps, comparison),
`boxes` (the box of a classifier at a point: the certified boxes of `certify.robustness` for
linear models, tree ensembles and ReLU networks, the sampling test otherwise), `empirical` (rho_hat by sampling).
"""

from __future__ import annotations

from .mechanisms import (EPS_MAX, KRR, MECHANISM_NAMES, Exponential, GaussianLDP, LaplaceLDP, LDPCheck, LDPMechanism,
                         PiecewiseMechanism, PrivacyIndicator, SquareWave, make_mechanism)
from .empirical import EmpiricalUtility, empirical_rho, theory_vs_practice
from .selection import Comparison, EpsilonSearch, best_mechanism, compare_mechanisms, smallest_epsilon
from .boxes import probabilistic_box, robustness_box
from .utility import UtilityResult, read_box, rho, rho_batch, utility

__all__ = [
    "EmpiricalUtility", "empirical_rho",
    "theory_vs_practice", "EPS_MAX", "KRR", "MECHANISM_NAMES", "Comparison", "EpsilonSearch", "Exponential", "GaussianLDP", "LDPCheck",
    "LDPMechanism", "LaplaceLDP", "PiecewiseMechanism", "PrivacyIndicator", "SquareWave", "UtilityResult",
    "best_mechanism", "compare_mechanisms", "make_mechanism", "read_box", "rho", "rho_batch", "smallest_epsilon",
    "utility", "probabilistic_box", "robustness_box",
]
