"""Noise calibration and privacy mechanisms calibrated from certified Lipschitz bounds.

Modules (small, each one job):

- `params`       validation of epsilon, delta, sensitivity, radius, metric at the boundary
- `provenance`   `LipschitzSource`: where a Lipschitz upper bound came from (user, certificate, layer product)
- `guarantee`    `Guarantee`: {(epsilon, delta), alpha} in a metric, PAC / empirical flags, provenance
- `accounting`   compose, parallel, chain, group_privacy, post_process, compose_pac
- `gaussian`     exact Gaussian privacy curve; classic, analytic, pac and zcdp calibrations
- `noise`        Laplace, Gaussian, logistic families (density, CDF, sampler)
- `calibration`  `calibrate_noise` and `calibrate` (the named mechanisms of `certify calibrate`)
- `discrete`     exact integer samplers (CKS20) for the hardened path
- `sampling`     `SecureSampler` (default, CSPRNG + exact discrete noise) and `NumpySampler` (seeded)
- `mechanisms`   LapOutput, GaussOutput, LogisticOutput, GaussInput, NoisyQuery
- `weights`      perturb_weights, sensitivity_sampler (empirical), utility_loss
- `audit`        Clopper-Pearson lower bound on epsilon from samples

>>> from certify.privacy import calibrate, chain
>>> round(calibrate("gaussian", epsilon=1.0, delta=1e-5, sensitivity=1.0).scale, 4)
3.7306
"""

from __future__ import annotations

from .accounting import chain, compose, compose_pac, group_privacy, parallel, post_process
from .audit import audit_epsilon, clopper_pearson
from .calibration import MECHANISMS, Calibration, calibrate, calibrate_noise
from .gaussian import (CALIBRATIONS, analytic_sigma, classic_sigma, gaussian_delta, pac_sigma, zcdp_log_delta,
                       zcdp_sigma)
from .guarantee import Guarantee
from .mechanisms import GaussInput, GaussOutput, LapOutput, LogisticOutput, Mechanism, NoisyQuery
from .noise import Gaussian, Laplace, Logistic, noise_family
from .provenance import LipschitzSource, layer_product_bound, lipschitz_source
from .sampling import NumpySampler, SecureSampler, make_sampler
from .weights import EmpiricalSensitivity, perturb_weights, sensitivity_sampler, utility_loss

__all__ = [
    "CALIBRATIONS", "MECHANISMS", "Calibration", "EmpiricalSensitivity", "GaussInput", "GaussOutput", "Gaussian",
    "Guarantee", "LapOutput", "Laplace", "LipschitzSource", "Logistic", "LogisticOutput", "Mechanism", "NoisyQuery",
    "NumpySampler", "SecureSampler", "analytic_sigma", "audit_epsilon", "calibrate", "calibrate_noise", "chain",
    "classic_sigma", "clopper_pearson", "compose", "compose_pac", "gaussian_delta", "group_privacy",
    "layer_product_bound", "lipschitz_source", "make_sampler", "noise_family", "pac_sigma", "parallel",
    "perturb_weights", "post_process", "sensitivity_sampler", "utility_loss", "zcdp_log_delta", "zcdp_sigma",
]
