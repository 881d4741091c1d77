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

# name -> module; imported on first use, so that `certify calibrate --help` stays light (no scipy.stats)
_LAZY: dict[str, str] = {
    "CALIBRATIONS": "gaussian",
    "Calibration": "calibration",
    "EmpiricalSensitivity": "weights",
    "GaussInput": "mechanisms",
    "GaussOutput": "mechanisms",
    "Gaussian": "noise",
    "Guarantee": "guarantee",
    "LapOutput": "mechanisms",
    "Laplace": "noise",
    "LipschitzSource": "provenance",
    "Logistic": "noise",
    "LogisticOutput": "mechanisms",
    "MECHANISMS": "calibration",
    "Mechanism": "mechanisms",
    "NoisyQuery": "mechanisms",
    "NumpySampler": "sampling",
    "SecureSampler": "sampling",
    "analytic_sigma": "gaussian",
    "audit_epsilon": "audit",
    "calibrate": "calibration",
    "calibrate_noise": "calibration",
    "chain": "accounting",
    "classic_sigma": "gaussian",
    "clopper_pearson": "audit",
    "compose": "accounting",
    "compose_pac": "accounting",
    "gaussian_delta": "gaussian",
    "group_privacy": "accounting",
    "layer_product_bound": "provenance",
    "lipschitz_source": "provenance",
    "make_sampler": "sampling",
    "noise_family": "noise",
    "pac_sigma": "gaussian",
    "parallel": "accounting",
    "perturb_weights": "weights",
    "post_process": "accounting",
    "sensitivity_sampler": "weights",
    "utility_loss": "weights",
    "zcdp_log_delta": "gaussian",
    "zcdp_sigma": "gaussian",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'certify.privacy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "CALIBRATIONS", "MECHANISMS", "Calibration", "EmpiricalSensitivity", "GaussInput", "GaussOutput", "Gaussian",
    "Guarantee", "LapOutput", "Laplace", "LipschitzSource", "Logistic", "LogisticOutput", "Mechanism", "NoisyQuery",
    "NumpySampler", "SecureSampler", "analytic_sigma", "audit_epsilon", "calibrate", "calibrate_noise", "chain",
    "classic_sigma", "clopper_pearson", "compose", "compose_pac", "gaussian_delta", "group_privacy",
    "layer_product_bound", "lipschitz_source", "make_sampler", "noise_family", "pac_sigma", "parallel",
    "perturb_weights", "post_process", "sensitivity_sampler", "utility_loss", "zcdp_log_delta", "zcdp_sigma",
]
