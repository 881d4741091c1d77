"""Additive noise families: density, CDF, seeded sampler and the sensitivity norm they need.

| family   | density                                 | scale   | privacy for sensitivity Delta        |
|----------|-----------------------------------------|---------|--------------------------------------|
| Laplace  | exp(-|z|/b) / (2b)                      | b       | pure, epsilon = Delta_1 / b           |
| logistic | e^{-z/s} / (s (1 + e^{-z/s})^2)         | s       | pure, epsilon = Delta_1 / s (|d/dz log p| <= 1/s) |
| Gaussian | exp(-z^2/(2 sigma^2)) / (sqrt(2 pi) sigma) | sigma | (epsilon, delta), see `gaussian`     |

Coordinates are i.i.d.; Laplace and logistic need the l1 sensitivity, the Gaussian the l2 one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import expit, log_ndtr, ndtr

from ..errors import BadInput

FAMILIES = ("laplace", "gaussian", "logistic")


@dataclass(frozen=True)
class NoiseFamily:
    """Zero-mean i.i.d. noise with a scale parameter."""

    scale: float
    name: ClassVar[str] = ""
    parameter: ClassVar[str] = ""
    sensitivity_norm: ClassVar[str] = ""
    pure: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not (self.scale >= 0 and math.isfinite(self.scale)):
            raise BadInput(f"{self.name} noise scale {self.parameter} must be a non-negative finite number, got {self.scale}")

    def logpdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def pdf(self, z: np.ndarray) -> np.ndarray:
        return np.exp(self.logpdf(z))

    def cdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    def std(self) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class Laplace(NoiseFamily):
    name: ClassVar[str] = "laplace"
    parameter: ClassVar[str] = "b"
    sensitivity_norm: ClassVar[str] = "l1"

    def logpdf(self, z):
        return -np.abs(z) / self.scale - math.log(2 * self.scale)

    def cdf(self, z):
        z = np.asarray(z, dtype=np.float64)
        half = 0.5 * np.exp(-np.abs(z) / self.scale)
        return np.where(z < 0, half, 1.0 - half)

    def sample(self, rng, size):
        return rng.laplace(0.0, self.scale, size)

    def std(self) -> float:
        return math.sqrt(2.0) * self.scale


@dataclass(frozen=True)
class Logistic(NoiseFamily):
    name: ClassVar[str] = "logistic"
    parameter: ClassVar[str] = "s"
    sensitivity_norm: ClassVar[str] = "l1"

    def logpdf(self, z):
        u = -np.abs(np.asarray(z, dtype=np.float64)) / self.scale  # symmetric; stable for large |z|
        return u - 2.0 * np.log1p(np.exp(u)) - math.log(self.scale)

    def cdf(self, z):
        return expit(np.asarray(z, dtype=np.float64) / self.scale)

    def sample(self, rng, size):
        return rng.logistic(0.0, self.scale, size)

    def std(self) -> float:
        return math.pi * self.scale / math.sqrt(3.0)


@dataclass(frozen=True)
class Gaussian(NoiseFamily):
    name: ClassVar[str] = "gaussian"
    parameter: ClassVar[str] = "sigma"
    sensitivity_norm: ClassVar[str] = "l2"
    pure: ClassVar[bool] = False

    def logpdf(self, z):
        z = np.asarray(z, dtype=np.float64)
        return -0.5 * (z / self.scale) ** 2 - math.log(math.sqrt(2 * math.pi) * self.scale)

    def cdf(self, z):
        return ndtr(np.asarray(z, dtype=np.float64) / self.scale)

    def logsf(self, z):
        return log_ndtr(-np.asarray(z, dtype=np.float64) / self.scale)

    def sample(self, rng, size):
        return rng.normal(0.0, self.scale, size)

    def std(self) -> float:
        return self.scale


_CLASSES: dict[str, type[NoiseFamily]] = {"laplace": Laplace, "gaussian": Gaussian, "logistic": Logistic}


def noise_family(name: str, scale: float) -> NoiseFamily:
    """`noise_family("laplace", b)`, `("gaussian", sigma)`, `("logistic", s)`."""
    try:
        cls = _CLASSES[str(name).lower()]
    except KeyError:
        raise BadInput(f"unknown noise family {name!r}; choose one of {', '.join(FAMILIES)}") from None
    return cls(float(scale))
