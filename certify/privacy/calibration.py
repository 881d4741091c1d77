"""Noise scale from (epsilon, delta) and a sensitivity: the formulas, behind validated parameters.

`calibrate_noise` works on a noise family and a sensitivity; `calibrate` on the named mechanisms
of the CLI (`certify calibrate`), deriving the sensitivity of the Inference Privacy mechanisms
from a certified Lipschitz upper bound and the radius alpha (Tian & Tandon):

| mechanism        | noise    | sensitivity                              | scale                      |
|------------------|----------|------------------------------------------|----------------------------|
| laplace          | Laplace  | Delta_1 (given, or L * alpha)            | b = Delta_1 / epsilon      |
| logistic         | logistic | Delta_1                                  | s = Delta_1 / epsilon      |
| gaussian         | Gaussian | Delta_2                                  | sigma (analytic/classic/pac/zcdp) |
| lap-output       | Laplace  | mu_1 alpha (mu_1: Lipschitz, l1 output)   | b = mu_1 alpha / epsilon   |
| logistic-output  | logistic | mu_1 alpha                                | s = mu_1 alpha / epsilon   |
| gauss-output     | Gaussian | mu_2 alpha (mu_2: Lipschitz, l2 output)   | sigma                      |
| gauss-input      | Gaussian | alpha ||I||_{metric->l2} (alpha for l1/l2 metrics, alpha sqrt(n) for linf) | sigma |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInput
from .gaussian import CALIBRATIONS, gaussian_sigma
from .guarantee import Guarantee
from .noise import FAMILIES, NoiseFamily, noise_family
from .names import MECHANISMS
from .params import (check_count, check_delta, check_epsilon, check_metric, check_pure, check_radius,
                     check_sensitivity, div_up, mul_up, round_up)
from .provenance import LipschitzSource, lipschitz_source


PURE = "pure"  # calibration name of the Laplace / logistic scale Delta_1 / epsilon


@dataclass(frozen=True)
class Calibration:
    """A noise scale and the numbers it was computed from."""

    mechanism: str
    family: str
    scale: float
    epsilon: float
    delta: float
    sensitivity: float
    calibration: str
    radius: float | None = None
    metric: str | None = None
    lipschitz: LipschitzSource | None = field(default=None, compare=False)
    #: what the user asserted and certify did not prove (a typed sensitivity or Lipschitz constant)
    claims: tuple[str, ...] = ()

    @property
    def basis(self) -> str:
        """"user" when the scale rests on `claims`, else "worst-case"."""
        return "user" if self.claims else "worst-case"

    @property
    def parameter(self) -> str:
        return self.noise.parameter

    @property
    def noise(self) -> NoiseFamily:
        return noise_family(self.family, self.scale)

    @property
    def sensitivity_norm(self) -> str:
        return self.noise.sensitivity_norm

    def guarantee(self, *, alpha: float | None = None, metric: str | None = None, empirical: bool = False) -> Guarantee:
        """The privacy this noise gives for inputs whose query differs by at most `sensitivity`."""
        a = alpha if alpha is not None else (self.radius if self.radius is not None else 1.0)
        m = metric or self.metric or "records"
        return Guarantee(self.epsilon, self.delta, a, m, pac=self.calibration in (PURE, "pac"), empirical=empirical,
                         mechanism=f"{self.mechanism} ({self.calibration})", lipschitz=self.lipschitz,
                         claims=() if empirical else self.claims)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "mechanism": self.mechanism,
            "scale": self.scale,
            "parameter": self.parameter,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sensitivity": self.sensitivity,
            "sensitivity_norm": self.sensitivity_norm,
            "calibration": self.calibration,
            "basis": self.basis,
        }
        if self.claims:
            out["conditional_on"] = list(self.claims)
        if self.radius is not None:
            out["radius"] = self.radius
            out["metric"] = self.metric
        if self.lipschitz is not None:
            out["lipschitz"] = self.lipschitz.to_dict()
        return out


def calibrate_noise(family: str, *, epsilon: float, sensitivity: float, delta: float | None = None,
                    calibration: str | None = None, mechanism: str | None = None) -> Calibration:
    """Scale of `family` noise giving (epsilon, delta) for a query of the given sensitivity.

    Laplace and logistic: scale = sensitivity / epsilon (pure; delta must be 0 or None).
    Gaussian: `calibration` in analytic (default), classic (epsilon < 1 only), pac, zcdp.
    """
    family = str(family).lower()
    if family not in FAMILIES:
        raise BadInput(f"unknown noise family {family!r}; choose one of {', '.join(FAMILIES)}")
    name = mechanism or family
    epsilon = check_epsilon(epsilon)
    sensitivity = check_sensitivity(sensitivity)
    if family == "gaussian":
        if delta is None:
            raise BadInput(f"{name} needs --delta (0 < delta < 1), e.g. --delta 1e-5")
        delta = check_delta(delta, positive=True, mechanism=name)
        calibration = calibration or "analytic"
        if calibration not in CALIBRATIONS:
            raise BadInput(f"unknown Gaussian calibration {calibration!r}; choose one of {', '.join(CALIBRATIONS)}")
        scale = gaussian_sigma(epsilon, delta, sensitivity, calibration)
    else:
        delta = check_pure(delta, name)
        if calibration not in (None, PURE):
            raise BadInput(f"--calibration applies to Gaussian mechanisms only; {name} uses scale = sensitivity / epsilon")
        calibration = PURE
        scale = div_up(sensitivity, epsilon) if sensitivity > 0 else 0.0
        if not math.isfinite(scale):
            raise BadInput(f"{name}: the noise scale sensitivity / epsilon = {sensitivity:g} / {epsilon:g} exceeds the "
                           "float64 range (about 1.8e308); use a larger epsilon or a smaller sensitivity")
    return Calibration(name, family, scale, epsilon, delta, sensitivity, calibration)


def finite_sensitivity(value: float, how: str) -> float:
    """`value` if finite; a product that overflowed float64 is refused with what it was."""
    if not math.isfinite(value):
        raise BadInput(f"the sensitivity {how} exceeds the float64 range (about 1.8e308); "
                       "rescale the model's outputs or use a smaller radius")
    return value


def input_sensitivity(radius: float, metric: str, input_dim: int | None = None) -> float:
    """l2 distance of inputs at `metric` distance <= radius: radius * ||I||_{metric -> l2}.

    `input_dim` is the number of features of one example (the product of its non-batch axes,
    3072 for a 3x32x32 image), not the length of one axis.
    """
    if metric in ("l1", "l2"):
        return radius
    if input_dim is None:
        raise BadInput("the linf metric needs the input dimension n, the number of features per example (l2 "
                       "sensitivity alpha * sqrt(n), n = product of the non-batch axes); give --input-dim or --model")
    n = check_count(input_dim, "input dimension")
    return finite_sensitivity(round_up(radius * math.sqrt(n)), f"radius x sqrt(n) = {radius:g} x sqrt({n})")


def calibrate(mechanism: str, *, epsilon: float, delta: float | None = None, sensitivity: float | None = None,
              lipschitz: Any = None, radius: float | None = None, calibration: str | None = None,
              metric: str = "l2", input_dim: int | None = None, model: Any = None) -> Calibration:
    """Calibrate a named mechanism (see the module table); the engine of `certify calibrate`.

    Give either `sensitivity`, or `lipschitz` (a certified upper bound: a certificate certify
    issued, or a number) with `radius`; `gauss-input` takes `radius` alone. A typed sensitivity
    or Lipschitz constant is the user's claim: the calibration's `basis` is then "user" and
    `claims` names it. `model`: the model the noise is for; a certificate of another network is
    refused.
    """
    key = str(mechanism).strip().lower()
    if key not in MECHANISMS:
        raise BadInput(f"unknown mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}")
    family, kind = MECHANISMS[key]
    metric = check_metric(metric, "metric")
    if sensitivity is not None and (lipschitz is not None or radius is not None):
        # (for gauss-input a radius fixes the sensitivity: a second, different number would make
        # the stated guarantee false)
        raise BadInput("give either --sensitivity, or --radius (with --lipschitz for output mechanisms), not both")
    src: LipschitzSource | None = None
    claims: tuple[str, ...] = ()
    if sensitivity is not None:
        sens = check_sensitivity(sensitivity)
        claims = (f"the sensitivity {sens:g} given by the user, not verified by certify",)
    elif kind == "input":
        if lipschitz is not None:
            raise BadInput("gauss-input adds noise to the input: its sensitivity is the radius, it takes no --lipschitz")
        if radius is None:
            raise BadInput("gauss-input needs --radius A (or --sensitivity)")
        radius = check_radius(radius)
        sens = input_sensitivity(radius, metric, input_dim)
    else:
        need = "l1" if family != "gaussian" else "l2"
        if lipschitz is None or radius is None:
            what = f"the {need}-output Lipschitz constant" if kind == "output" else "a Lipschitz constant"
            raise BadInput(f"{key} needs --sensitivity S, or --lipschitz L ({what}) with --radius A")
        radius = check_radius(radius)
        src = lipschitz_source(lipschitz, input_norm=metric, output_norm=need, what="lipschitz", model=model)
        sens = finite_sensitivity(mul_up(src.value, radius), f"L x radius = {src.value:g} x {radius:g}")
        claims = tuple(c for c in (src.claim(),) if c)
    cal = calibrate_noise(family, epsilon=epsilon, delta=delta, sensitivity=sens, calibration=calibration, mechanism=key)
    return Calibration(key, family, cal.scale, cal.epsilon, cal.delta, sens, cal.calibration,
                       radius, metric if radius is not None else None, src, claims)
