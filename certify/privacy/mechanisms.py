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
from .calibration import Calibration, calibrate_noise, input_sensitivity
from .guarantee import Guarantee
from .params import check_epsilon, check_metric, check_radius, check_sensitivity, mul_up
from .provenance import LipschitzSource, lipschitz_source
from .sampling import Sampler, SecureSampler, make_sampler


def as_function(model: Any) -> Callable[[np.ndarray], np.ndarray]:
    """A float64 batch function for a `models.Network`, a torch module, or a callable."""
    from models import Network

    if isinstance(model, Network):
        return model.forward
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


class Mechanism:
    """Additive noise with a calibrated scale and the guarantee it gives."""

    name = "mechanism"

    calibration: Calibration
    guarantee: Guarantee
    sampler: Sampler
    sensitivity: float

    def _setup(self, family: str, *, epsilon: float, delta: float | None, sensitivity: float, calibration: str | None,
               sampler: Any, alpha: float, metric: str, lipschitz: LipschitzSource | None, empirical: bool = False) -> None:
        self.sampler = make_sampler(sampler)
        self.sensitivity = sensitivity
        if isinstance(self.sampler, SecureSampler) and family == "gaussian":
            if calibration not in (None, "zcdp"):
                raise BadInput(
                    f"calibration {calibration!r} is for continuous Gaussian noise; the secure sampler draws a "
                    "discrete Gaussian, calibrated through zCDP (calibration='zcdp'); use sampler='numpy' "
                    "(or a seed) for the analytic, classic or pac calibrations"
                )
            calibration = "zcdp"
        # secure releases are discretised: calibrate for the rounding headroom (see sampling.SLACK)
        budget = mul_up(sensitivity, 1 + self.sampler.sensitivity_slack) if self.sampler.sensitivity_slack else sensitivity
        cal = calibrate_noise(family, epsilon=epsilon, delta=delta, sensitivity=budget, calibration=calibration,
                              mechanism=self.name)
        self.calibration = Calibration(self.name, family, cal.scale, cal.epsilon, cal.delta, budget, cal.calibration,
                                       alpha, metric, lipschitz)
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
                   sampler=self.sampler.name, guarantee=self.guarantee.to_dict())
        return out

    def __repr__(self) -> str:
        n = self.noise
        return f"{type(self).__name__}({n.parameter}={n.scale:.6g}; {self.guarantee.describe()}; sampler={self.sampler.name})"


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
        src = lipschitz_source(lipschitz, input_norm=metric, output_norm=norm, what=f"{self.name} lipschitz")
        sensitivity = mul_up(src.value, alpha)
        self._source = src
        self._setup(self.family, epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration,
                    sampler=sampler, alpha=alpha, metric=metric, lipschitz=src)

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


class GaussInput(Mechanism):
    """Gauss-Input: f(x + N(0, sigma^2 I)), {(epsilon, delta), alpha} IP for any model (post-processing).

    The l2 sensitivity of the identity is alpha for the l1 and l2 metrics and alpha sqrt(n) for
    linf (n = input dimension: taken from a `models.Network`, else give `input_dim`).
    """

    name = "gauss-input"

    def __init__(self, model: Any, *, epsilon: float, delta: float, alpha: float, metric: str = "l2",
                 calibration: str | None = None, input_dim: int | None = None, sampler: Any = None):
        self.model = model
        self._f = as_function(model)
        metric = check_metric(metric, "metric")
        alpha = check_radius(alpha, "alpha")
        if input_dim is None:
            input_dim = getattr(model, "input_dim", None)
        self.input_dim = input_dim
        sensitivity = input_sensitivity(alpha, metric, input_dim)
        self._setup("gaussian", epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration,
                    sampler=sampler, alpha=alpha, metric=metric, lipschitz=None)

    def release(self, x: Any) -> np.ndarray:
        """f(x + Z) for one input (d,) or a batch (n, d)."""
        x = _as_batch(x)
        if self.input_dim is not None and x.shape[-1] != self.input_dim:
            raise BadInput(f"input has {x.shape[-1]} values but the mechanism was calibrated for {self.input_dim}")
        return _as_batch(self._f(self._perturb(x, self.sensitivity)), "model output")


class NoisyQuery(Mechanism):
    """q(data) + noise for a vector query of known sensitivity (ordinary DP, replace-one adjacency).

    `sensitivity` is in the family's norm (l1 for laplace/logistic, l2 for gaussian). With
    `empirical=True` (a sampled sensitivity) the guarantee is labelled empirical.
    """

    name = "noisy-query"

    def __init__(self, family: str, *, sensitivity: float, epsilon: float, delta: float | None = None,
                 calibration: str | None = None, sampler: Any = None, empirical: bool = False,
                 metric: str = "records", alpha: float = 1.0):
        self.name = str(family).lower()
        sensitivity = check_sensitivity(sensitivity)
        self._setup(self.name, epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration,
                    sampler=sampler, alpha=alpha, metric=metric, lipschitz=None, empirical=empirical)

    def release(self, value: Any) -> np.ndarray:
        return self._perturb(_as_batch(value, "query value"), self.sensitivity)
