"""Where the noise comes from: a seeded numpy Generator (experiments) or a hardened sampler (deployment).

Default: `SecureSampler` (sampler="secure"). Textbook floating-point Laplace sampling leaks
through the pattern of representable outputs (Mironov 2012), so releases meant for deployment
use exact integer noise from the OS CSPRNG on a power-of-two grid:

    release = gamma * (round(v / gamma) + Z),  Z ~ discrete Laplace / Gaussian / logistic (exact)

`v / gamma` and the rounding are exact in float64 (gamma is a power of two), Z is sampled with
integer arithmetic (`discrete`), and the final multiplication is post-processing of an integer.
Rounding moves each coordinate by at most gamma/2, so two inputs whose query differs by Delta
give integer vectors differing by at most Delta/gamma + c(k) (c = k in l1, sqrt(k) in l2, for k
coordinates). Mechanisms therefore calibrate secure noise for Delta * (1 + SLACK), and the grid
is chosen so that c(k) * gamma <= Delta * SLACK: the guarantee is exactly the requested one.
The discrete Gaussian is calibrated through zCDP (CKS20), slightly more noise than the
continuous analytic calibration (about 8% at epsilon = 1, delta = 1e-5).

`NumpySampler(seed)` adds float noise from `numpy.random.Generator`: reproducible and fast, for
experiments and benchmarks, not hardened against floating-point attacks.

`make_sampler` reads the one `sampler=` argument of every mechanism of certify, central and LDP
alike. The LDP mechanisms (`certify.ldp`) draw from the same objects: a `SecureSampler` gives its
random source to their exact sampler (`certify.ldp.exact`: the exact output correctly rounded),
a `NumpySampler` its Generator.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any, Callable, Protocol

import numpy as np

from ..errors import BadInput
from .discrete import discrete_gaussian, discrete_laplace, discrete_logistic
from .noise import NoiseFamily

#: relative sensitivity headroom that secure (discretised) releases calibrate for
SLACK = 2.0**-10


class Sampler(Protocol):
    name: str
    sensitivity_slack: float

    def perturb(self, values: np.ndarray, noise: NoiseFamily, sensitivity: float, norm: str) -> np.ndarray:
        """values + noise (i.i.d. per coordinate); `sensitivity` in `norm` per row of `values`."""
        ...


class NumpySampler:
    """Float noise from a seeded `numpy.random.Generator` (experiments; not hardened)."""

    name = "numpy"
    sensitivity_slack = 0.0

    def __init__(self, seed: int | np.random.Generator | None = None):
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def perturb(self, values: np.ndarray, noise: NoiseFamily, sensitivity: float, norm: str) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if noise.scale == 0:
            return values.copy()
        return values + noise.sample(self.rng, values.shape)

    def __repr__(self) -> str:
        return "NumpySampler()"


class SecureSampler:
    """Exact discrete noise on a power-of-two grid from a CSPRNG (see the module docstring).

    `source` defaults to `random.SystemRandom()` (os.urandom); tests may pass `random.Random(seed)`
    for reproducibility, which is then reported as not cryptographic.
    """

    name = "secure"
    sensitivity_slack = SLACK

    def __init__(self, source: Any = None):
        self.source = source if source is not None else random.SystemRandom()
        self.cryptographic = isinstance(self.source, random.SystemRandom)

    def grid(self, sensitivity: float, k: int, norm: str) -> float:
        """Largest power of two gamma with c(k) gamma <= sensitivity * SLACK (checked exactly)."""
        budget = Fraction(sensitivity) * Fraction(SLACK)
        exponent = math.frexp(float(budget) / (k if norm == "l1" else math.sqrt(k)))[1] - 1
        gamma = Fraction(2) ** exponent
        ok = (lambda g: k * g <= budget) if norm == "l1" else (lambda g: k * g * g <= budget * budget)
        while not ok(gamma):
            gamma /= 2
        return float(gamma)

    def perturb(self, values: np.ndarray, noise: NoiseFamily, sensitivity: float, norm: str) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if noise.scale == 0 or sensitivity == 0:
            return values.copy()
        if norm not in ("l1", "l2") or norm != noise.sensitivity_norm:
            raise BadInput(f"{noise.name} noise needs the {noise.sensitivity_norm} sensitivity, got {norm}")
        # coordinates of one query: a vector, or each row of a batch (n, ...) whatever its shape
        k = 1 if values.ndim == 0 else (values.size if values.ndim == 1 else int(np.prod(values.shape[1:])))
        gamma = self.grid(sensitivity, k, norm)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # refused just below
            scaled = values / gamma  # exact: gamma is a power of two (0 when the sensitivity is subnormal)
        if not np.all(np.isfinite(scaled)):
            raise BadInput("values are too large (or not finite) for the secure sampler's grid")
        draw = self._integer_sampler(noise, gamma)
        flat = [int(v) + draw() for v in np.rint(scaled).reshape(-1)]
        return np.array([float(n) for n in flat], dtype=np.float64).reshape(values.shape) * gamma

    def _integer_sampler(self, noise: NoiseFamily, gamma: float) -> Callable[[], int]:
        scale = Fraction(noise.scale) / Fraction(gamma)  # noise scale in grid units, exact
        src = self.source
        if noise.name == "laplace":
            return lambda: discrete_laplace(scale, src)
        if noise.name == "logistic":
            return lambda: discrete_logistic(scale, src)
        if noise.name == "gaussian":
            sigma2 = scale * scale
            return lambda: discrete_gaussian(sigma2, src)
        raise BadInput(f"the secure sampler has no {noise.name} noise")

    def __repr__(self) -> str:
        return f"SecureSampler({'SystemRandom' if self.cryptographic else type(self.source).__name__ + ', NOT cryptographic'})"


def sampler_label(sampler: Any) -> str:
    """How a sampler is described in results: "secure" only for exact noise from the OS CSPRNG."""
    if isinstance(sampler, SecureSampler):
        return "secure" if sampler.cryptographic else \
            f"exact noise from a seeded {type(sampler.source).__name__} (NOT secure, for tests)"
    if isinstance(sampler, NumpySampler):
        return "numpy (float noise, NOT secure: for experiments)"
    return f"{getattr(sampler, 'name', type(sampler).__name__)} (user sampler, not checked by certify)"


def make_sampler(spec: Any = None) -> Sampler:
    """The one `sampler=` argument of every mechanism (central, PTR, LDP): "secure" or None (default,
    `SecureSampler` on the OS CSPRNG) | a `random.Random` (the same exact sampler, seeded: NOT secure)
    | "numpy", an int seed or a numpy Generator (`NumpySampler`: float noise, NOT secure) | a sampler
    object."""
    if spec is None or (isinstance(spec, str) and spec.lower() == "secure"):
        return SecureSampler()
    if isinstance(spec, random.Random):
        return SecureSampler(spec)
    if isinstance(spec, str):
        if spec.lower() == "numpy":
            return NumpySampler()
        raise BadInput(f"unknown sampler {spec!r}; choose 'secure' (hardened, default) or 'numpy' (seedable)")
    if isinstance(spec, (int, np.integer, np.random.Generator)) and not isinstance(spec, bool):
        return NumpySampler(spec if isinstance(spec, np.random.Generator) else int(spec))
    if hasattr(spec, "perturb") and hasattr(spec, "sensitivity_slack"):
        return spec
    raise BadInput(f"sampler must be 'secure', 'numpy', a seed, a numpy Generator, a random.Random or a sampler object, "
                   f"got {type(spec).__name__}")
