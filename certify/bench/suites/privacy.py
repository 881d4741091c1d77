"""`privacy`: noise calibration and release costs. Calibrations (Gaussian analytic / classic / PAC /
zCDP, Laplace, logistic) over an epsilon grid; the Inference Privacy mechanisms (Lap-, Logistic-,
Gauss-Output calibrated from a certified global bound, Gauss-Input) releasing the test set of a
digits MLP with the secure sampler. `bound` is the noise scale; the note gives the accuracy."""

from __future__ import annotations

import functools

import numpy as np

from ..cases import NO_BACKEND, Case, Outcome, SuiteConfig, suite
from .lipschitz import digits_setup

CALIBRATIONS = (("gaussian", "analytic"), ("gaussian", "classic"), ("gaussian", "pac"), ("gaussian", "zcdp"),
                ("laplace", None), ("logistic", None))
EPSILONS = (0.1, 0.2, 0.5, 0.9, 2.0, 5.0)
MECHANISMS = ("LapOutput", "LogisticOutput", "GaussOutput", "GaussInput")


def _calibrate(family: str, calibration: str | None, reps: int, time_limit: float) -> Outcome:
    from certify.privacy.calibration import calibrate_noise

    eps = [e for e in EPSILONS if calibration != "classic" or e < 1]
    delta = 1e-5 if family == "gaussian" else None
    for _ in range(reps):
        for e in eps:
            calibrate_noise(family, epsilon=e, delta=delta, sensitivity=1.0, calibration=calibration)
    scale = calibrate_noise(family, epsilon=0.5, delta=delta, sensitivity=1.0, calibration=calibration).scale
    return Outcome(status="certified", solved=True, bound=scale,
                   note=f"{reps * len(eps)} calibrations; scale at eps 0.5, delta 1e-5, sensitivity 1")


def _release(name: str, seed: int, n: int, time_limit: float) -> Outcome:
    import certify
    from certify.lipschitz.global_bounds import global_lipschitz
    from models.zoo import digits_data

    net, _ = digits_setup((32,), seed, 0)
    data = digits_data(seed)
    x, y = data.x_test[:n], data.y_test[:n]
    kw = dict(epsilon=1.0, alpha=0.05)
    if name == "GaussInput":
        mech = certify.GaussInput(net, delta=1e-5, **kw)
    else:
        out_norm = "l2" if name == "GaussOutput" else "l1"
        mu = global_lipschitz(net, "naive", input_norm="l2", output_norm=out_norm)
        extra = dict(delta=1e-5) if name == "GaussOutput" else {}
        mech = getattr(certify, name)(net, mu, **kw, **extra)
    noisy = mech.release(x)
    acc = float(np.mean(np.argmax(noisy, axis=1) == y))
    return Outcome(status="certified", solved=True, bound=float(mech.scale),
                   note=f"{n} releases, eps 1, alpha 0.05 (l2): accuracy {acc:.3f}")


@suite("privacy", "noise calibrations over an epsilon grid and Inference Privacy releases on a digits MLP "
       "(secure sampler): time per batch, noise scale, accuracy", default_time_limit=60.0, quick_time_limit=30.0)
def privacy_suite(cfg: SuiteConfig) -> list[Case]:
    cases = []
    reps = 5 if cfg.quick else 50
    for family, calibration in CALIBRATIONS:
        method = calibration or "pure"
        cases.append(Case(family, "calibration", "privacy", NO_BACKEND, method,
                          functools.partial(_calibrate, family, calibration, reps)))
    n = 100 if cfg.quick else 360
    size = {"inputs": 64, "outputs": 10, "hidden_layers": 1, "relus": 32}
    for name in MECHANISMS:
        cases.append(Case("digits_32", "inference privacy", "privacy", NO_BACKEND, name,
                          functools.partial(_release, name, cfg.seed, n), size=size,
                          prepare=functools.partial(digits_setup, (32,), cfg.seed, 0)))
    return cases
