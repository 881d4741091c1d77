"""Exact samplers on the integers from uniform random integers (no floating point).

Algorithms 1-3 of Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020): Bernoulli(exp(-gamma)) for rational gamma, the discrete Laplace and the discrete
Gaussian, plus a discrete logistic by rejection from the discrete Laplace. All arithmetic is on
Python integers and `fractions.Fraction`, so the output distribution is exactly the stated one
and carries no floating-point artefacts (Mironov 2012's attack on textbook Laplace sampling).

`rng` is any object with `randrange(n)` returning a uniform integer in [0, n):
`random.SystemRandom()` (the OS CSPRNG) in deployment, `random.Random(seed)` in tests.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt
from typing import Protocol


class RandomSource(Protocol):
    def randrange(self, n: int) -> int: ...


def bernoulli(p: Fraction, rng: RandomSource) -> bool:
    """True with probability p (0 <= p <= 1, rational)."""
    return rng.randrange(p.denominator) < p.numerator


def bernoulli_exp(gamma: Fraction, rng: RandomSource) -> bool:
    """True with probability exp(-gamma), gamma >= 0 rational (CKS20 Algorithm 1)."""
    if gamma < 0:
        raise ValueError("gamma must be >= 0")
    while gamma > 1:  # exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma)))
        if not bernoulli_exp(Fraction(1), rng):
            return False
        gamma -= 1
    k = 1
    while bernoulli(gamma / k, rng):
        k += 1
    return k % 2 == 1


def bernoulli_logistic(x: Fraction, rng: RandomSource) -> bool:
    """True with probability 1 / (1 + exp(-x)), x >= 0.

    Each round returns True with probability 1/2 and False with probability exp(-x)/2, so the
    outcome is True with probability (1/2) / (1/2 + exp(-x)/2).
    """
    while True:
        if rng.randrange(2):
            return True
        if bernoulli_exp(x, rng):
            return False


def discrete_laplace(scale: Fraction, rng: RandomSource) -> int:
    """Z with Pr[Z = z] proportional to exp(-|z| / scale), scale = t/s > 0 (CKS20 Algorithm 2)."""
    scale = Fraction(scale)
    if scale <= 0:
        raise ValueError("scale must be > 0")
    t, s = scale.numerator, scale.denominator
    while True:
        u = rng.randrange(t)
        if not bernoulli_exp(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rng):
            v += 1
        y = (u + t * v) // s
        negative = rng.randrange(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma2: Fraction, rng: RandomSource) -> int:
    """Z with Pr[Z = z] proportional to exp(-z^2 / (2 sigma2)), sigma2 > 0 rational (CKS20 Algorithm 3)."""
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError("sigma2 must be > 0")
    t = isqrt(sigma2.numerator * sigma2.denominator) // sigma2.denominator + 1  # floor(sigma) + 1
    while True:
        y = discrete_laplace(Fraction(t), rng)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp(gamma, rng):
            return y


def discrete_logistic(scale: Fraction, rng: RandomSource) -> int:
    """Z with Pr[Z = z] proportional to the logistic density at z / scale:
    e^{-|z|/scale} / (1 + e^{-|z|/scale})^2.

    Rejection from the discrete Laplace with the same scale: the ratio of the two pmfs is
    proportional to (1 / (1 + e^{-|z|/scale}))^2 in [1/4, 1], accepted by two exact Bernoullis.
    """
    scale = Fraction(scale)
    while True:
        z = discrete_laplace(scale, rng)
        x = Fraction(abs(z)) / scale
        if bernoulli_logistic(x, rng) and bernoulli_logistic(x, rng):
            return z
