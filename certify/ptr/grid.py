"""The PTR radius grid and the noisy test in exact integer units.

The stability radius is searched on the grid r_k = R + k h, h = R / m (m a positive integer,
k = 0..K), and phi(x) is reported in grid units: phi = k h where k is the largest index whose box
box(x, r_k) has a certified constant <= D_p (phi = 0 when there is none). Because R = m h, two
neighbours (d(x, x') <= R) have |k(x) - k(x')| <= m exactly (box(x', r_{k-m}) lies inside
box(x, r_k)), so the test statistic is an integer of sensitivity m and its noise is an exact
discrete Laplace on the integers:

    release  iff  k + Z >= z0,     Pr[Z = z] proportional to exp(-|z| eps / m),

which is eps-DP for sensitivity m (the log-probability moves by at most m * eps / m). z0 is the
smallest integer with Pr[Z >= z0] <= delta / 2, so a query whose proposal fails at x itself
(k = 0) is released with probability at most delta / 2. In radius units this is the paper's test
phi + Lap(R / eps) > R ln(1/delta) / eps (z0 h is R ln(1/delta) / eps up to one grid step); the
bisection tolerance h costs no privacy, only a little utility.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath

from ..errors import BadInput
from ..privacy.params import check_delta, check_epsilon, check_radius, up_fraction

#: default grid steps per radius (phi is found to within R / 8)
DEFAULT_STEPS = 8
#: a grid finer than this many steps per radius is refused (the search would only get longer)
MAX_STEPS = 4096
#: a search range beyond this many grid steps is refused
MAX_INDEX = 10**7


def _threshold_units(steps: int, epsilon: float, delta: float) -> int:
    """Smallest integer z >= 1 with q^z / (1 + q) <= delta / 2, q = exp(-eps / m), checked in 60-digit
    arithmetic on the exact binary values of eps and delta (rounded up when within 1e-40 of an integer)."""
    with mpmath.workdps(60):
        eps, dlt = mpmath.mpf(Fraction(epsilon).numerator) / Fraction(epsilon).denominator, \
            mpmath.mpf(Fraction(delta).numerator) / Fraction(delta).denominator
        rate = eps / steps  # 1 / scale in grid units
        q = mpmath.exp(-rate)
        value = (mpmath.log(2 / dlt) - mpmath.log1p(q)) / rate
        z = int(mpmath.ceil(value - mpmath.mpf(10) ** -40))
        if z - value < mpmath.mpf(10) ** -40:
            z += 1  # too close to call in 60 digits: one step more is always safe
        z = max(z, 1)
        # the defining inequality, re-checked on the chosen z
        if not mpmath.exp(-rate * z) / (1 + q) <= dlt / 2:
            raise RuntimeError("internal error: PTR threshold check failed")
    return z


@dataclass(frozen=True)
class TestGrid:
    """Radii, the test's noise and threshold for one (R, eps, delta, m, K).

    `steps` is m (h = R / m); `max_index` is K (radii up to R + K h are searched); `noise_units`
    is the discrete Laplace scale m / eps in grid units (an exact rational); `threshold_units` z0.
    """

    __test__ = False  # not a pytest class, despite its name

    radius: float
    epsilon: float
    delta: float
    steps: int
    max_index: int
    threshold_units: int

    @classmethod
    def make(cls, radius: float, epsilon: float, delta: float, *, tolerance: float | None = None,
             max_radius: float | None = None) -> "TestGrid":
        """The grid for neighbourhood radius R: h = R / m with m = ceil(R / tolerance) (default
        tolerance R / 8); radii searched up to `max_radius` (default R + 2 R ln(1/delta) / eps, where
        the release probability already reaches 1 - delta / 2)."""
        radius = check_radius(radius, "radius")
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        if delta == 0:
            raise BadInput("delta must be in (0, 1) for PTR: the test fails with probability delta / 2 when the "
                           "proposal is wrong; give e.g. --delta 1e-5")
        if tolerance is None:
            steps = DEFAULT_STEPS
        else:
            tolerance = check_radius(tolerance, "tolerance")
            ratio = Fraction(radius) / Fraction(tolerance)
            steps = max(1, -((-ratio.numerator) // ratio.denominator))
            if steps > MAX_STEPS:
                raise BadInput(f"tolerance {tolerance:g} is finer than radius / {MAX_STEPS}; use a larger tolerance")
        z0 = _threshold_units(steps, epsilon, delta)
        if max_radius is None:
            index = 2 * z0  # phi = 2 z0 h: release probability 1 - delta / 2 (up to a grid step)
        else:
            max_radius = check_radius(max_radius, "max radius")
            if max_radius < radius:
                raise BadInput(f"max radius {max_radius:g} is below the radius {radius:g}")
            span = (Fraction(max_radius) - Fraction(radius)) * steps / Fraction(radius)
            index = span.numerator // span.denominator
        if index > MAX_INDEX:
            raise BadInput(f"the search range is {index} grid steps (more than {MAX_INDEX:.0e}); use a larger "
                           "tolerance, a smaller max radius or a larger epsilon")
        return cls(radius, epsilon, delta, steps, int(index), z0)

    # ------------------------------------------------------------------ radii
    @property
    def step(self) -> Fraction:
        """h = R / m, exact."""
        return Fraction(self.radius) / self.steps

    def radius_at(self, k: int) -> float:
        """r_k = R + k h rounded up (a certificate on the rounded box covers the exact one)."""
        return up_fraction(Fraction(self.radius) + k * self.step)

    def phi(self, k: int) -> float:
        """phi for index k (k = -1: no radius >= R certified): max(0, k) h, to nearest."""
        return float(max(k, 0) * self.step)

    @property
    def max_radius(self) -> float:
        return self.radius_at(self.max_index)

    # ------------------------------------------------------------------ the test
    @property
    def noise_units(self) -> Fraction:
        """Scale m / eps of the discrete Laplace noise, in grid units (exact)."""
        return Fraction(self.steps) / Fraction(self.epsilon)

    @property
    def threshold(self) -> float:
        """z0 h: the test releases when phi_noisy >= threshold."""
        return float(self.threshold_units * self.step)

    @property
    def noise_radius_scale(self) -> float:
        """The test noise scale in radius units, R / eps (for reports)."""
        return float(Fraction(self.radius) / Fraction(self.epsilon))

    def release_probability(self, k: int) -> float:
        """Pr[max(k, 0) + Z >= z0]: the probability that the test passes at grid index k."""
        j = self.threshold_units - max(k, 0)
        rate = self.epsilon / self.steps
        log_tail = -rate * abs(j if j >= 1 else 1 - j) - math.log1p(math.exp(-rate))  # log Pr[Z >= |.|]
        tail = math.exp(log_tail)
        return tail if j >= 1 else 1.0 - tail

    def to_dict(self) -> dict:
        return {"radius": self.radius, "steps_per_radius": self.steps, "step": float(self.step),
                "max_index": self.max_index, "max_radius": self.max_radius, "threshold_units": self.threshold_units,
                "threshold": self.threshold, "noise_scale_units": float(self.noise_units),
                "noise_scale": self.noise_radius_scale}


__all__ = ["DEFAULT_STEPS", "TestGrid"]
