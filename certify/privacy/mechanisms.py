"""Inference Privacy mechanisms (Tian & Tandon) and plain additive-noise releases.

A mechanism is a function plus its privacy guarantee (OpenDP's measurement idea): it is built
from validated parameters, calibrates its noise once (from a certified Lipschitz upper bound for
the output mechanisms), and `release(x)` returns noisy outputs. `guarantee` is a `Guarantee`
value that `accounting` composes; `guarantee_at(beta)` is the privacy map to another radius.

- `LapOutput`:      f(x) + Lap(b)^k,       b = mu_1 alpha / epsilon   (pure; mu_1: Lipschitz to l1)
- `LogisticOutput`: f(x) + Logistic(s)^k,  s = mu_1 alpha / epsilon   (pure)
- `GaussOutput`:    f(x) + N(0, sigma^2 I), sigma for Delta_2 = mu_2 alpha (mu_2: Lipschitz to l2)
- `GaussInput`:     f(x + N(0, sigma^2 I)), sigma for Delta_2 = alpha ||I||_{metric->l2}; any model
- `NoisyQuery`:     q(data) + noise for a given sensitivity (ordinary DP of a vector query)

The model is a `models.Network`, a torch module, or any callable mapping a batch (n, d) of
float64 inputs to (n, k) outputs. Releases are per row: each row of a batch is one query with
the mechanism's guarantee.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import BadInput
from .accounting import chain
from .calibration import Calibration, calibrate_noise, finite_sensitivity, input_sensitivity
from .guarantee import Guarantee
from .params import check_count, check_epsilon, check_metric, check_radius, check_sensitivity, mul_up
from .provenance import LipschitzSource, lipschitz_source
from .sampling import Sampler, SecureSampler, make_sampler, sampler_label


def as_function(model: Any) -> Callable[[np.ndarray], np.ndarray]:
    """A float64 batch function for a `models.Network`, a torch module, or a callable."""
    from models import Network

    if isinstance(model, Network):
        # the IR takes flat rows: an image-shaped batch (n, c, h, w) becomes (n, c*h*w)
        return lambda x: model.forward(x if x.ndim <= 2 else x.reshape(x.shape[0], -1))
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(model, torch.nn.Module):
        module = model.eval()
        dtype = next((p.dtype for p in module.parameters()), torch.float32)

        def run(x: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return module(torch.as_tensor(np.asarray(x), dtype=dtype)).double().numpy()

        return run
    if callable(model):
        return lambda x: np.asarray(model(x), dtype=np.float64)
    raise BadInput(f"model must be a models.Network, a torch module or a callable, got {type(model).__name__}")


def _as_batch(x: Any, what: str = "input") -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if not np.all(np.isfinite(arr)):
        raise BadInput(f"{what} contains NaN or inf")
    return arr


#: why a Python Gaussian mechanism's sigma differs from `certify calibrate`'s default (analytic)
ZCDP_NOTE = ("calibration zcdp: the default secure sampler draws a discrete Gaussian, calibrated through zCDP "
             "for the sensitivity plus 2^-10 grid headroom, so sigma is larger than the analytic sigma that "
             "`certify calibrate` prints by default (about 8% at epsilon = 1, delta = 1e-5); sampler='numpy' "
             "or a seed gives the analytic sigma with continuous noise")


class Mechanism:
    """Additive noise with a calibrated scale and the guarantee it gives."""

    name = "mechanism"

    calibration: Calibration
    guarantee: Guarantee
    sampler: Sampler
    sensitivity: float

    def _setup(self, family: str, *, epsilon: float, delta: float | None, sensitivity: float, calibration: str | None,
               sampler: Any, alpha: float, metric: str, lipschitz: LipschitzSource | None, empirical: bool = False,
               claims: tuple[str, ...] = ()) -> None:
        self.sampler = make_sampler(sampler)
        self.sensitivity = sensitivity
        self.notes: list[str] = []
        if isinstance(self.sampler, SecureSampler) and family == "gaussian":
            if calibration not in (None, "zcdp"):
                raise BadInput(
                    f"calibration {calibration!r} is for continuous Gaussian noise; the secure sampler draws a "
                    "discrete Gaussian, calibrated through zCDP (calibration='zcdp'); use sampler='numpy' "
                    "(or a seed) for the analytic, classic or pac calibrations"
                )
            calibration = "zcdp"
            self.notes.append(ZCDP_NOTE)
        # secure releases are discretised: calibrate for the rounding headroom (see sampling.SLACK)
        budget = sensitivity
        if self.sampler.sensitivity_slack:
            budget = finite_sensitivity(mul_up(sensitivity, 1 + self.sampler.sensitivity_slack),
                                        f"{sensitivity:g} x (1 + grid headroom)")
        cal = calibrate_noise(family, epsilon=epsilon, delta=delta, sensitivity=budget, calibration=calibration,
                              mechanism=self.name)
        self.calibration = Calibration(self.name, family, cal.scale, cal.epsilon, cal.delta, budget, cal.calibration,
                                       alpha, metric, lipschitz, claims)
        self.guarantee = self.calibration.guarantee(alpha=alpha, metric=metric, empirical=empirical)

    @property
    def noise(self):
        return self.calibration.noise

    @property
    def scale(self) -> float:
        return self.calibration.scale

    def guarantee_at(self, radius: float) -> Guarantee:
        """The guarantee for inputs up to `radius` apart (chaining; the radius itself if smaller)."""
        return chain(self.guarantee, radius)

    def _perturb(self, values: np.ndarray, sensitivity: float) -> np.ndarray:
        return self.sampler.perturb(values, self.noise, sensitivity, self.noise.sensitivity_norm)

    def to_dict(self) -> dict:
        out = self.calibration.to_dict()
        out.update(mechanism=self.name, sensitivity=self.sensitivity, calibrated_sensitivity=self.calibration.sensitivity,
                   sampler=sampler_label(self.sampler), guarantee=self.guarantee.to_dict())
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def __repr__(self) -> str:
        n = self.noise
        return (f"{type(self).__name__}({n.parameter}={n.scale:.6g} ({self.calibration.calibration} calibration); "
                f"{self.guarantee.describe()}; sampler={sampler_label(self.sampler)})")


class OutputPerturbation(Mechanism):
    """f(x) + i.i.d. noise, calibrated for sensitivity Lipschitz * alpha."""

    family = ""

    def __init__(self, model: Any, lipschitz: Any, *, epsilon: float, alpha: float, delta: float | None = None,
                 metric: str = "l2", calibration: str | None = None, sampler: Any = None):
        self.model = model
        self._f = as_function(model)
        metric = check_metric(metric, "metric")
        alpha = check_radius(alpha, "alpha")
        check_epsilon(epsilon)
        norm = "l2" if self.family == "gaussian" else "l1"
        src = lipschitz_source(lipschitz, input_norm=metric, output_norm=norm, what=f"{self.name} lipschitz",
                               model=model)
        sensitivity = finite_sensitivity(mul_up(src.value, alpha), f"L x alpha = {src.value:g} x {alpha:g}")
        self._source = src
        self._setup(self.family, epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration,
                    sampler=sampler, alpha=alpha, metric=metric, lipschitz=src,
                    claims=tuple(c for c in (src.claim(),) if c))

    def release(self, x: Any) -> np.ndarray:
        """Noisy outputs f(x) + Z for one input (d,) or a batch (n, d); inputs outside the box of a
        local or domain certificate are refused (the constant says nothing there)."""
        batch = _as_batch(x)
        self._source.check_inputs(batch)
        y = _as_batch(self._f(batch), "model output")
        return self._perturb(y, self.sensitivity)


class LapOutput(OutputPerturbation):
    """Lap-Output: f(x) + Lap(mu_1 alpha / epsilon)^k, pure {epsilon, alpha} IP (Tian & Tandon, Thm 1)."""

    name = "lap-output"
    family = "laplace"

    def __init__(self, model: Any, lipschitz: Any, *, epsilon: float, alpha: float, metric: str = "l2", sampler: Any = None):
        super().__init__(model, lipschitz, epsilon=epsilon, alpha=alpha, metric=metric, sampler=sampler)


class LogisticOutput(OutputPerturbation):
    """Logistic-Output: f(x) + Logistic(mu_1 alpha / epsilon)^k, pure {epsilon, alpha} IP."""

    name = "logistic-output"
    family = "logistic"

    def __init__(self, model: Any, lipschitz: Any, *, epsilon: float, alpha: float, metric: str = "l2", sampler: Any = None):
        super().__init__(model, lipschitz, epsilon=epsilon, alpha=alpha, metric=metric, sampler=sampler)


class GaussOutput(OutputPerturbation):
    """Gauss-Output: f(x) + N(0, sigma^2 I), {(epsilon, delta), alpha} IP with Delta_2 = mu_2 alpha.

    `calibration`: analytic (default with a numpy sampler), classic (epsilon < 1), pac, or zcdp
    (forced for the secure sampler's discrete Gaussian).
    """

    name = "gauss-output"
    family = "gaussian"

    def __init__(self, model: Any, lipschitz: Any, *, epsilon: float, delta: float, alpha: float, metric: str = "l2",
                 calibration: str | None = None, sampler: Any = None):
        super().__init__(model, lipschitz, epsilon=epsilon, alpha=alpha, delta=delta, metric=metric,
                         calibration=calibration, sampler=sampler)


def features_per_example(x: np.ndarray) -> int:
    """Features of one example: every value of a 1-D input; for a batch (n, ...), the product of
    the axes after the first (3072 for (n, 3, 32, 32), never the last axis alone)."""
    return int(x.size) if x.ndim <= 1 else int(np.prod(x.shape[1:]))


def _model_input_dim(model: Any) -> int | None:
    from models import Network

    return model.input_dim if isinstance(model, Network) else None


class GaussInput(Mechanism):
    """Gauss-Input: f(x + N(0, sigma^2 I)), {(epsilon, delta), alpha} IP for any model (post-processing).

    The l2 sensitivity of the identity is alpha for the l1 and l2 metrics and alpha sqrt(n) for
    linf, n = the number of features of one example (the product of its non-batch axes: 3072 for
    a 3x32x32 image). n is taken from a `models.Network` (and `input_dim` must agree with it);
    for a torch module or a callable give `input_dim`. Every release checks its input against n,
    so a mechanism calibrated for one axis (32) refuses a (1, 3, 32, 32) image.
    """

    name = "gauss-input"

    def __init__(self, model: Any, *, epsilon: float, delta: float, alpha: float, metric: str = "l2",
                 calibration: str | None = None, input_dim: int | None = None, sampler: Any = None):
        self.model = model
        self._f = as_function(model)
        metric = check_metric(metric, "metric")
        alpha = check_radius(alpha, "alpha")
        model_dim = _model_input_dim(model)
        if input_dim is not None:
            input_dim = check_count(input_dim, "input_dim")
            if model_dim is not None and input_dim != model_dim:
                raise BadInput(f"input_dim = {input_dim}, but the model takes {model_dim} features per example "
                               f"(input shape {list(model.input_shape)}); the dimension is the product of the "
                               "non-batch axes: omit input_dim to use the model's")
        self.input_dim = input_dim if input_dim is not None else model_dim
        sensitivity = input_sensitivity(alpha, metric, self.input_dim)
        self._setup("gaussian", epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration,
                    sampler=sampler, alpha=alpha, metric=metric, lipschitz=None)

    def release(self, x: Any) -> np.ndarray:
        """f(x + Z) for one input (d,) or a batch (n, ...) of examples of any shape (one per row)."""
        x = _as_batch(x)
        n = features_per_example(x)
        if self.input_dim is not None and n != self.input_dim:
            hint = "; a single example of several axes needs a batch axis (x[None])" if x.size == self.input_dim else ""
            raise BadInput(f"input of shape {list(x.shape)} has {n} features per example (the product of the axes "
                           f"after the batch axis), but the noise was calibrated for {self.input_dim}{hint}")
        return _as_batch(self._f(self._perturb(x, self.sensitivity)), "model output")


class NoisyQuery(Mechanism):
    """q(data) + noise for a vector query of known sensitivity (ordinary DP, replace-one adjacency).

    `sensitivity` is in the family's norm (l1 for laplace/logistic, l2 for gaussian). With
    `empirical=True` (a sampled sensitivity) the guarantee is labelled empirical, and a sampled
    sensitivity of 0 is refused (it would mean no noise at all).
    """

    name = "noisy-query"

    def __init__(self, family: str, *, sensitivity: float, epsilon: float, delta: float | None = None,
                 calibration: str | None = None, sampler: Any = None, empirical: bool = False,
                 metric: str = "records", alpha: float = 1.0):
        self.name = str(family).lower()
        sensitivity = check_sensitivity(sensitivity)
        if empirical and sensitivity == 0:
            # a worst-case 0 (a constant query) needs no noise; a sampled 0 proves nothing
            raise BadInput(
                "the empirical sensitivity is 0: no sampled pair of neighbouring datasets changed the output, which "
                "does not show it never changes, and calibrating from 0 would release it without noise; sample "
                "more pairs, or give a worst-case sensitivity you can justify"
            )
        claims = () if empirical else (f"the sensitivity {sensitivity:g} given by the user, not verified by certify",)
        self._setup(self.name, epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration,
                    sampler=sampler, alpha=alpha, metric=metric, lipschitz=None, empirical=empirical, claims=claims)

    def release(self, value: Any) -> np.ndarray:
        return self._perturb(_as_batch(value, "query value"), self.sensitivity)
