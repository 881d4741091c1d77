"""LDP mechanisms for one bounded feature: exact interval masses, samplers, guarantees, self-checks.

Every mechanism perturbs a value x of a feature with domain [lo, hi] (default [0, 1]). The
formulas are stated on [0, 1]; any [lo, hi] is the affine image (x -> (x - lo) / (hi - lo), the
output mapped back), so the sensitivity of the identity is the domain width.

| name | output | distribution on [0, 1] (eps-LDP unless said) |
|---|---|---|
| `laplace` | R, or [0, 1] with `clip=True` | x + Lap(1/eps); clipping is post-processing |
| `gaussian` | R, or [0, 1] with `clip=True` | x + N(0, sigma^2), sigma from (eps, delta): `analytic` (Balle & Wang, (eps, delta)-DP) or `pac` (Zheng & Hu Thm 4, (eps, delta)-PAC) |
| `pm` | [0, 1] | density e^{eps/2} on the window [l, l + w], e^{-eps/2} elsewhere; w = 2C = 1/(e^{eps/2} + 1), l = clamp(x - C, 0, 1 - w) |
| `sw` | [0, 1] | density p = (e^eps - 1)/eps on [(1 - w) x, (1 - w) x + w], p e^{-eps} elsewhere; w = 2C = (e^eps (eps - 1) + 1)/(e^eps - 1)^2 |
| `exponential` | grid of k points | P(y_j) proportional to exp(-eps |x - y_j| / 2) (score -|x - y|, sensitivity 1) |
| `krr` | grid of k points | x snapped to the nearest grid point y_i; P(y_i) = e^eps/(k - 1 + e^eps), every other point 1/(k - 1 + e^eps) |

Grid convention (exponential, k-RR): k points lo + (hi - lo) j/(k-1), j = 0..k-1 (on [0, 1] the
points 0, 1/(k-1), ..., 1; default k = 101, step 0.01), each output as the float64 nearest to it
(so 0.7 is the float 0.7). These floats are what the mechanism outputs, and whether an output
lies in a box is decided on them. The exponential mechanism's
probabilities use the exact positions j/(k-1) and the exact input (no snapping); k-RR snaps x
to the nearest grid float (ties to the lower point) before perturbing it.

Exact masses: `mass(a, b, x)` is P(a <= M(x) <= b) for the closed interval (atoms of clipped and
discrete mechanisms at a or b are included), from closed forms evaluated stably in float64
(absolute error ~1e-15); `cdf(t, x) = mass(-inf, t, x)`. Every kernel is vectorised over
epsilon, x, a and b (numpy broadcasting), which is what `certify.ldp.utility` builds on.

Sampling: `sample(x, size, sampler=None)`, with the `sampler=` values of every mechanism of certify
(`certify.privacy.sampling.make_sampler`). Default (None or "secure", a `SecureSampler`): the exact
sampler of `certify.ldp.exact` with the OS CSPRNG (the exact output correctly rounded to float64:
no floating-point leak). `sampler=random.Random(seed)` (or `SecureSampler(random.Random(seed))`):
the same exact sampler, reproducible, NOT secure. `sampler=<int seed>` / numpy Generator / "numpy"
(a `NumpySampler`): fast float sampling with numpy, reproducible, NOT secure (for experiments
and Monte-Carlo checks).

Densities (for boxes found by sampling, `certify.ldp.utility`): `max_density(a, b, x)` is the sup
over [a, b] of the density of M(x) per unit of the feature, rounded up, and inf when M(x) has an
atom in [a, b] (a clipped mechanism's domain edge, a grid point, an indicator's raw value);
`continuous_mass` and `continuous_max_density` describe the atomless part alone.

`check_ldp()` checks the privacy claim numerically: the largest log ratio of densities (or
probabilities, atoms included) over a grid of input pairs and outputs must not exceed eps; for the
Gaussian, the exact delta of the calibrated sigma (analytic) or the exact tail of its privacy loss
(pac) must not exceed the claimed delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import mpmath
import numpy as np
from scipy.special import expit, ndtr

from ..boundary.domains import check_domain
from ..errors import BadInput
from ..privacy.gaussian import analytic_sigma, gaussian_delta, pac_sigma
from ..privacy.guarantee import Guarantee
from ..privacy.params import check_delta, check_epsilon
from ..privacy.sampling import NumpySampler, SecureSampler, make_sampler
from . import exact

#: the largest epsilon the mechanisms accept (e^eps overflows float64 near 709; no privacy is left)
EPS_MAX = 700.0
DEFAULT_GRID = 101
#: relative margin for rounding densities up: far above the few-ulp error of exp, a square and a division
DENSITY_UP = 1.0 + 1e-9
MECHANISM_NAMES = ("laplace", "gaussian", "pm", "sw", "exponential", "krr")


def check_ldp_epsilon(value: Any, name: str = "epsilon") -> float:
    v = check_epsilon(value, name)
    if v > EPS_MAX:
        raise BadInput(f"{name} must be at most {EPS_MAX:g} for the LDP mechanisms (e^epsilon overflows and "
                       f"nothing is private any more), got {value}")
    return v


def _eps_array(value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.size == 0:
        raise BadInput("epsilon grid is empty")
    bad = ~((arr > 0) & (arr <= EPS_MAX))
    if np.any(bad):
        raise BadInput(f"every epsilon must be in (0, {EPS_MAX:g}], got {arr[bad].reshape(-1)[0]!r}")
    return arr


def _sym_mass(z1, z2, tail):
    """P(z1 <= Z <= z2) for a continuous symmetric Z with upper tail `tail(z) = P(Z >= z)`, z >= 0."""
    ta, tb = tail(np.abs(z1)), tail(np.abs(z2))
    return np.where(z1 >= 0, ta - tb, np.where(z2 <= 0, tb - ta, 1.0 - ta - tb))


def _em1x(eps):
    """eps - 1 + e^{-eps} without cancellation (series below 1)."""
    eps = np.asarray(eps, dtype=np.float64)
    small = np.minimum(eps, 1.0)
    series = np.zeros_like(small)
    term = np.ones_like(small)
    for n in range(1, 22):
        term = term * (-small) / n
        if n >= 2:
            series = series + term
    return np.where(eps < 1.0, series, eps - 1.0 + np.exp(-eps))


@dataclass(frozen=True)
class LDPCheck:
    """Result of `check_ldp`: the claim, what the grid (or the exact curve) shows, and whether it holds."""

    mechanism: str
    epsilon: float
    delta: float
    observed: float
    holds: bool
    method: str

    def to_dict(self) -> dict:
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "delta": self.delta, "observed": self.observed,
                "holds": self.holds, "method": self.method}


def _draws(sampler: Any) -> tuple[str, Any]:
    """("exact", random source) or ("numpy", Generator) for the `sampler` argument of `sample`
    (`certify.privacy.sampling.make_sampler`: the same values as every mechanism of certify)."""
    s = make_sampler(sampler)
    if isinstance(s, SecureSampler):
        return "exact", s.source
    if isinstance(s, NumpySampler):
        return "numpy", s.rng
    raise BadInput("an LDP mechanism draws from the secure sampler (exact) or a seeded numpy generator; give "
                   "sampler=None/'secure', a random.Random (exact, seeded, NOT secure), an int seed, a numpy "
                   f"Generator or 'numpy', got {type(sampler).__name__}")


class LDPMechanism:
    """An eps-LDP (or (eps, delta)) mechanism for one feature with domain [lo, hi]."""

    name: ClassVar[str] = ""
    discrete: ClassVar[bool] = False
    #: rho(eps) is non-decreasing in eps for every box containing x (proven for this family)
    monotone: ClassVar[bool] = False

    def __init__(self, epsilon: float, *, domain: Any = (0.0, 1.0)):
        self.epsilon = check_ldp_epsilon(epsilon)
        self.lo, self.hi = check_domain(domain)
        self.width = self.hi - self.lo

    # ------------------------------------------------------------------ description
    @property
    def domain(self) -> tuple[float, float]:
        return (self.lo, self.hi)

    @property
    def delta(self) -> float:
        return 0.0

    @property
    def guarantee(self) -> Guarantee:
        """What one release of one feature promises: eps-LDP (any two inputs of the domain)."""
        return Guarantee(self.epsilon, self.delta, math.inf, "linf", pac=True, mechanism=f"ldp {self.label}")

    @property
    def label(self) -> str:
        return self.name

    def params(self) -> dict:
        """Constructor arguments other than epsilon (to rebuild the mechanism at another epsilon)."""
        return {"domain": self.domain}

    def with_epsilon(self, epsilon: float) -> "LDPMechanism":
        return type(self)(epsilon, **self.params())

    def to_dict(self) -> dict:
        out = {"mechanism": self.name, "label": self.label, "epsilon": self.epsilon, "delta": self.delta,
               "domain": list(self.domain), "guarantee": self.guarantee.to_dict()}
        out.update({k: v for k, v in self.params().items() if k != "domain"})
        return out

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.params().items() if k != "domain")
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, domain={self.domain}{extra})"

    # ------------------------------------------------------------------ validation helpers
    def _check_x(self, x: Any) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise BadInput("input value contains NaN or inf")
        if np.any(arr < self.lo) or np.any(arr > self.hi):
            raise BadInput(f"input value outside the mechanism's domain [{self.lo:g}, {self.hi:g}]; "
                           "give --domain LO,HI (or domain=(lo, hi)) covering the feature")
        return arr

    def _norm(self, v):
        return (np.asarray(v, dtype=np.float64) - self.lo) / self.width

    # ------------------------------------------------------------------ masses
    def mass(self, a: Any, b: Any, x: Any, epsilon: Any = None) -> np.ndarray:
        """P(a <= M(x) <= b), vectorised over a, b, x and epsilon (default: the mechanism's)."""
        eps, x, a, b = self._validated(a, b, x, epsilon)
        return np.clip(self._mass(eps, x, a, b), 0.0, 1.0)

    def cdf(self, t: Any, x: Any, epsilon: Any = None) -> np.ndarray:
        """P(M(x) <= t)."""
        return self.mass(-np.inf, t, x, epsilon)

    def _mass(self, eps, x, a, b):  # original coordinates, validated
        raise NotImplementedError

    # ------------------------------------------------------------------ densities (boxes found by sampling)
    def _validated(self, a: Any, b: Any, x: Any, epsilon: Any):
        """(epsilon, x, a, b) as float arrays, checked (the interval, and x inside the domain)."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(np.isnan(b)):
            raise BadInput("interval bounds contain NaN")
        if np.any(a > b):
            raise BadInput("interval has lo > hi")
        x = self._check_x(x)
        eps = self.epsilon if epsilon is None else _eps_array(epsilon)
        return np.asarray(eps, dtype=np.float64), x, a, b

    def continuous_mass(self, a: Any, b: Any, x: Any, epsilon: Any = None) -> np.ndarray:
        """The mass the atomless part of M(x)'s law gives [a, b] (atoms, e.g. of clipping or a grid, left out)."""
        eps, x, a, b = self._validated(a, b, x, epsilon)
        return np.clip(self._cmass(eps, x, a, b), 0.0, 1.0)

    def continuous_max_density(self, a: Any, b: Any, x: Any, epsilon: Any = None) -> np.ndarray:
        """sup over t in [a, b] of the density (per unit of the feature) of the atomless part of M(x), rounded up."""
        eps, x, a, b = self._validated(a, b, x, epsilon)
        return self._cdens(eps, x, a, b)

    def max_density(self, a: Any, b: Any, x: Any, epsilon: Any = None) -> np.ndarray:
        """sup over t in [a, b] of the density of M(x) (per unit of the feature), rounded up.

        inf when M(x) has an atom in [a, b] (a clipped mechanism's domain edge, a grid point, the raw
        value of a privacy indicator): its law is then not bounded by any multiple of the length.
        """
        eps, x, a, b = self._validated(a, b, x, epsilon)
        return np.where(self._has_atom(x, a, b), np.inf, self._cdens(eps, x, a, b))

    def _has_atom(self, x, a, b):
        """Whether M(x) has an atom in [a, b] (structural; every atom has positive mass)."""
        return np.zeros(np.broadcast(x, a, b).shape, dtype=bool)

    def _cmass(self, eps, x, a, b):
        """Mass of the atomless part on [a, b] (default: the mechanism has no atoms)."""
        return self._mass(eps, x, a, b)

    def _cdens(self, eps, x, a, b):
        """sup on [a, b] of the atomless part's density, original coordinates, rounded up (vectorised)."""
        raise NotImplementedError

    def _cmass_upper(self, e1, e2, x, a, b):
        """An upper bound of `_cmass` over every epsilon in [e1, e2] (boxes containing x)."""
        return self._mass_upper(e1, e2, x, a, b)

    def _cdens_lower(self, e1, e2, x, a, b):
        """A lower bound of `_cdens` over every epsilon in [e1, e2], for boxes containing x.

        For every family here the sup of the density over a box containing x is its value at (or,
        PM/SW, the level of the window around) x, a monotone function of epsilon: the smaller of the
        two ends bounds it. Used to prune the epsilon search, where it must tend to the value at a
        point as the interval shrinks, so it keeps `_cdens`'s (tiny) rounding up."""
        return np.minimum(self._cdens(np.asarray(e1, dtype=np.float64), x, a, b),
                          self._cdens(np.asarray(e2, dtype=np.float64), x, a, b))

    def _mass_upper(self, e1, e2, x, a, b):
        """An upper bound of the mass over every epsilon in [e1, e2] that tends to mass(e1) as e2 -> e1."""
        if self.monotone:
            return self._mass(np.asarray(e2, dtype=np.float64), x, a, b)
        raise NotImplementedError

    # ------------------------------------------------------------------ sampling
    def sample(self, x: float, size: int | None = None, sampler: Any = None) -> np.ndarray | float:
        """Perturbed values of x (see the module docstring for `sampler`)."""
        x = float(self._check_x(float(x)))
        n = 1 if size is None else int(size)
        if n < 0:
            raise BadInput("size must be >= 0")
        kind, src = _draws(sampler)
        if kind == "numpy":
            out = np.asarray(self._sample_numpy(x, n, src), dtype=np.float64)
        else:
            out = np.array([self._sample_exact(x, src) for _ in range(n)], dtype=np.float64)
        return float(out[0]) if size is None else out

    def _sample_numpy(self, x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _sample_exact(self, x: float, source: Any) -> float:
        raise NotImplementedError

    # ------------------------------------------------------------------ privacy self-check
    def check_ldp(self, n_inputs: int = 65, n_outputs: int = 4001) -> LDPCheck:
        """Largest log probability ratio over a grid of input pairs and outputs (must be <= epsilon)."""
        xs = np.linspace(self.lo, self.hi, n_inputs)
        logp = self._log_probabilities(xs, n_outputs)  # (inputs, outputs)
        finite = np.isfinite(logp)
        if not np.all(finite.all(axis=0) | (~finite).all(axis=0)):
            worst = math.inf  # an output possible from one input and impossible from another
        else:
            cols = logp[:, finite.all(axis=0)]
            worst = float(np.max(cols.max(axis=0) - cols.min(axis=0))) if cols.size else 0.0
        holds = worst <= self.epsilon * (1 + 1e-12) + 1e-12
        return LDPCheck(self.label, self.epsilon, self.delta, worst, bool(holds),
                        f"max log ratio over {n_inputs} inputs x {logp.shape[1]} outputs")

    def _log_probabilities(self, xs: np.ndarray, n_outputs: int) -> np.ndarray:
        raise NotImplementedError


# ====================================================================== noise-adding mechanisms
class _NoiseAdding(LDPMechanism):
    """x + symmetric noise, optionally clipped to the domain (post-processing)."""

    monotone = True

    def __init__(self, epsilon: float, *, domain: Any = (0.0, 1.0), clip: bool = False):
        super().__init__(epsilon, domain=domain)
        self.clip = bool(clip)

    @property
    def label(self) -> str:
        return f"{self.name}{' (clipped)' if self.clip else ''}"

    def params(self) -> dict:
        return {"domain": self.domain, "clip": self.clip}

    def _scale01(self, eps):
        raise NotImplementedError

    def _tail(self, eps):
        raise NotImplementedError

    def _mass(self, eps, x, a, b):
        x01, a01, b01 = self._norm(x), self._norm(a), self._norm(b)
        if self.clip:
            empty = (b01 < 0) | (a01 > 1)
            a01 = np.where(a01 <= 0, -np.inf, a01)
            b01 = np.where(b01 >= 1, np.inf, b01)
        tail = self._tail(eps)
        out = _sym_mass(a01 - x01, b01 - x01, tail)
        return np.where(empty, 0.0, out) if self.clip else out

    def _pdf01(self, eps, d):
        """Density of the noise (on [0, 1] coordinates) at distance d >= 0 from 0."""
        raise NotImplementedError

    def _has_atom(self, x, a, b):
        if not self.clip:
            return super()._has_atom(x, a, b)
        edge = ((a <= self.lo) & (self.lo <= b)) | ((a <= self.hi) & (self.hi <= b))
        return np.broadcast_to(edge, np.broadcast(x, a, b).shape)

    def _cmass(self, eps, x, a, b):
        if not self.clip:
            return self._mass(eps, x, a, b)
        # the atomless part of the clipped output is the unclipped law on the open domain (lo, hi)
        x01 = self._norm(x)
        aa, bb = np.maximum(self._norm(a), 0.0), np.minimum(self._norm(b), 1.0)
        out = _sym_mass(aa - x01, bb - x01, self._tail(eps))
        return np.where(aa > bb, 0.0, out)

    def _cdens(self, eps, x, a, b):
        x01, a01, b01 = self._norm(x), self._norm(a), self._norm(b)
        empty = np.zeros(np.broadcast(a01, b01).shape, dtype=bool)
        if self.clip:
            a01, b01 = np.maximum(a01, 0.0), np.minimum(b01, 1.0)
            empty = a01 > b01
        # the noise is symmetric and unimodal: the sup is at the point of [a, b] nearest to x; the
        # distance is rounded down (the density decreases in it) by a bound on the error of the
        # normalisation (a - lo) / width and the subtraction
        slack = 8 * np.finfo(np.float64).eps * (np.abs(a) + np.abs(b) + np.abs(x) + 2 * abs(self.lo)) / self.width
        d = np.maximum(np.maximum(a01 - x01, x01 - b01) - slack, 0.0)
        dens = self._pdf01(np.asarray(eps, dtype=np.float64), d) / self.width * DENSITY_UP
        return np.where(empty, 0.0, dens)

    def _cmass_upper(self, e1, e2, x, a, b):
        # boxes containing x: the mass of any interval around x grows as the noise shrinks with epsilon
        return self._cmass(np.asarray(e2, dtype=np.float64), x, a, b)

    def _sample_numpy(self, x, n, rng):
        y = x + self.width * self._noise01(rng, n)
        return np.clip(y, self.lo, self.hi) if self.clip else y

    def _cdf_mp(self, t, x):
        """P(M(x) <= t) in mpmath (original coordinates)."""
        z = (t - x) / mpmath.mpf(self.width)
        if self.clip:
            if t < self.lo:
                return mpmath.mpf(0)
            if t >= self.hi:
                return mpmath.mpf(1)
        return self._noise_cdf_mp(z)

    def _sample_exact(self, x, source):
        lo, hi = (self.lo, self.hi) if self.clip else (-math.inf, math.inf)
        return exact.sample_continuous(lambda t: self._cdf_mp(t, mpmath.mpf(x)), lo, hi, source)

    def _log_probabilities(self, xs, n_outputs):
        # outputs spread over the domain and well beyond it (unclipped), atoms (clipped)
        x01 = self._norm(xs)[:, None]
        if self.clip:
            t = np.linspace(0, 1, n_outputs)[None, :]
            dens = self._logpdf01(t - x01)
            eps = self.epsilon
            low = np.log(np.clip(_sym_mass(np.full_like(x01, -np.inf), 0 - x01, self._tail(eps)), 1e-300, None))
            high = np.log(np.clip(_sym_mass(1 - x01, np.full_like(x01, np.inf), self._tail(eps)), 1e-300, None))
            return np.concatenate([low, dens, high], axis=1)
        t = np.linspace(-3, 4, n_outputs)[None, :]
        return self._logpdf01(t - x01)


class LaplaceLDP(_NoiseAdding):
    """x + Lap(width / eps): eps-LDP (clipped or not)."""

    name = "laplace"

    @property
    def scale(self) -> float:
        return self.width / self.epsilon

    def _tail(self, eps):
        return lambda z: 0.5 * np.exp(-z * eps)

    def _pdf01(self, eps, d):
        return 0.5 * eps * np.exp(-eps * d)

    def _logpdf01(self, z):
        return -np.abs(z) * self.epsilon + math.log(self.epsilon / 2)

    def _noise01(self, rng, n):
        return rng.laplace(0.0, 1.0 / self.epsilon, n)

    def _noise_cdf_mp(self, z):
        e = mpmath.mpf(self.epsilon)
        return mpmath.exp(z * e) / 2 if z < 0 else 1 - mpmath.exp(-z * e) / 2


@lru_cache(maxsize=4096)
def _gaussian_sigma01(epsilon: float, delta: float, calibration: str) -> float:
    if calibration == "pac":
        return pac_sigma(epsilon, delta, 1.0)
    return analytic_sigma(epsilon, delta, 1.0)


GAUSSIAN_CALIBRATIONS = ("analytic", "pac")


class GaussianLDP(_NoiseAdding):
    """x + N(0, sigma^2) with sigma for the l2 sensitivity `width` and (eps, delta).

    `calibration="analytic"` (default): the smallest sigma meeting (eps, delta)-DP exactly
    (Balle & Wang). `"pac"`: Zheng & Hu Thm 4, sigma = width (C + sqrt(C^2 + 2 eps)) / (2 eps),
    C = sqrt(2 ln(2/delta)): the privacy loss exceeds eps with probability <= delta (PAC; also
    (eps, delta)-DP, with a larger sigma). Never pure: delta > 0 is required.
    """

    name = "gaussian"

    def __init__(self, epsilon: float, *, delta: float, domain: Any = (0.0, 1.0), clip: bool = False,
                 calibration: str = "analytic"):
        super().__init__(epsilon, domain=domain, clip=clip)
        if delta is None:
            raise BadInput("the Gaussian mechanism needs delta (0 < delta < 1), e.g. --delta 1e-5")
        self._delta = check_delta(delta, positive=True, mechanism="the Gaussian mechanism")
        calibration = str(calibration).lower()
        if calibration not in GAUSSIAN_CALIBRATIONS:
            raise BadInput(f"unknown Gaussian calibration {calibration!r}; choose analytic or pac")
        self.calibration = calibration
        self.sigma01 = _gaussian_sigma01(self.epsilon, self._delta, calibration)

    @property
    def delta(self) -> float:
        return self._delta

    @property
    def sigma(self) -> float:
        return self.sigma01 * self.width

    @property
    def label(self) -> str:
        return f"gaussian ({self.calibration}{', clipped' if self.clip else ''})"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, self._delta, math.inf, "linf", pac=self.calibration == "pac",
                         mechanism=f"ldp {self.label}")

    def params(self) -> dict:
        return {"domain": self.domain, "clip": self.clip, "delta": self._delta, "calibration": self.calibration}

    def _sigmas(self, eps):
        eps = np.asarray(eps, dtype=np.float64)
        if eps.ndim == 0:
            return _gaussian_sigma01(float(eps), self._delta, self.calibration)
        flat = [_gaussian_sigma01(float(e), self._delta, self.calibration) for e in eps.reshape(-1)]
        return np.asarray(flat).reshape(eps.shape)

    def _tail(self, eps):
        sigma = self._sigmas(eps)
        return lambda z: ndtr(-z / sigma)

    def _pdf01(self, eps, d):
        sigma = self._sigmas(eps)
        return np.exp(-0.5 * (d / sigma) ** 2) / (math.sqrt(2 * math.pi) * sigma)

    def _logpdf01(self, z):
        s = self.sigma01
        return -0.5 * (z / s) ** 2 - math.log(math.sqrt(2 * math.pi) * s)

    def _noise01(self, rng, n):
        return rng.normal(0.0, self.sigma01, n)

    def _noise_cdf_mp(self, z):
        return mpmath.erfc(-z / (mpmath.mpf(self.sigma01) * mpmath.sqrt(2))) / 2

    def check_ldp(self, n_inputs: int = 65, n_outputs: int = 4001) -> LDPCheck:
        """Exact: the delta of the calibrated sigma at eps (analytic), or Pr[privacy loss > eps] (pac)."""
        s, eps = self.sigma01, self.epsilon
        if self.calibration == "analytic":
            observed = gaussian_delta(s, eps, 1.0)
            method = "exact (eps, delta) curve of N(0, sigma^2) for sensitivity = width (Balle & Wang Thm 8)"
        else:
            # privacy loss at the worst pair (|x1 - x2| = width): N(1/(2 s^2), 1/s^2); two-sided as in the paper
            observed = 2 * float(ndtr(-(eps - 0.5 / s**2) * s))
            method = "exact tail 2 Pr[Z >= eps sigma - 1/(2 sigma)] of the privacy loss (Zheng & Hu Thm 4)"
        return LDPCheck(self.label, eps, self._delta, observed, bool(observed <= self._delta), method)


# ====================================================================== piecewise mechanisms
class _Piecewise(LDPMechanism):
    """Density p_in on a window [l, l + w] (moving with x), p_out = p_in e^{-eps} elsewhere on [0, 1]."""

    def _window(self, eps, x01):
        """(l, w) on [0, 1]."""
        raise NotImplementedError

    def _levels(self, eps):
        """(mass inside the window, density outside) on [0, 1]."""
        raise NotImplementedError

    def _geometry(self, eps, x, a, b):
        """(w, fraction of the window inside [a, b], length of [a, b] within [0, 1]) on [0, 1].

        The fraction comes from the parts of the window outside [a, b]: exactly 1 when the tiny
        window of a large eps lies inside the box, where (overlap / w) would cancel.
        """
        x01, a01, b01 = self._norm(x), self._norm(a), self._norm(b)
        l, w = self._window(eps, x01)
        aa, bb = np.clip(a01, 0, 1), np.clip(b01, 0, 1)
        outside = np.clip(aa - l, 0.0, w) + np.clip(l + w - bb, 0.0, w)
        length = np.maximum(bb - aa, 0.0)
        # the window part inside [a, b] is never longer than [a, b] (rounding of l near a box edge)
        return w, np.clip(np.minimum(1.0 - outside / w, length / w), 0.0, 1.0), length

    def _mass(self, eps, x, a, b):
        w, frac, length = self._geometry(eps, x, a, b)
        p_window, q = self._levels(eps)
        return p_window * frac + q * np.maximum(length - frac * w, 0.0)

    def _mass_upper(self, e1, e2, x, a, b):
        # windows are nested (shrinking) as eps grows; the inside density p and the window mass P_in grow,
        # the outside density q shrinks. For eps in [e1, e2]: the in-window mass p |box & W(eps)| is at
        # most p(e2) |box & W(e1)| and at most P_in(e2); the rest q |box - W(eps)| <= q(e1) |box - W(e2)|
        w1, frac1, length = self._geometry(e1, x, a, b)
        w2, frac2, _ = self._geometry(e2, x, a, b)
        inside = np.minimum(self._density_in(e2) * (frac1 * w1), self._levels(e2)[0])
        return np.minimum(1.0, inside + self._levels(e1)[1] * np.maximum(length - frac2 * w2, 0.0))

    def _density_in(self, eps):
        raise NotImplementedError

    def _cdens(self, eps, x, a, b):
        # e^eps times the outside level where [a, b] meets the window (within 1e-12, counted as meeting),
        # the outside level where it lies beside it, 0 where it misses [0, 1]
        x01, a01, b01 = self._norm(x), self._norm(a), self._norm(b)
        l, w = self._window(eps, x01)
        slack = 1e-12
        meets = (a01 <= l + w + slack) & (b01 >= l - slack)
        empty = (b01 < 0) | (a01 > 1)
        level = np.where(meets, self._density_in(eps), self._levels(eps)[1])
        return np.where(empty, 0.0, level / self.width * DENSITY_UP)

    def _sample_numpy(self, x, n, rng):
        l, w = self._window(self.epsilon, self._norm(x))
        p_window, _ = self._levels(self.epsilon)
        inside = rng.random(n) < p_window
        u_in = l + w * rng.random(n)
        v = (1 - w) * rng.random(n)
        u_out = np.where(v < l, v, v + w)
        return self.lo + self.width * np.where(inside, u_in, u_out)

    def _window_mp(self, e, x01):
        raise NotImplementedError

    def _densities_mp(self, e):
        raise NotImplementedError

    def _cdf_mp(self, t, x):
        e = mpmath.mpf(self.epsilon)
        x01 = (x - self.lo) / mpmath.mpf(self.width)
        t01 = (t - self.lo) / mpmath.mpf(self.width)
        if t01 <= 0:
            return mpmath.mpf(0)
        if t01 >= 1:
            return mpmath.mpf(1)
        l, w = self._window_mp(e, x01)
        p_in, p_out = self._densities_mp(e)
        ov = max(mpmath.mpf(0), min(t01, l + w) - l)
        return p_out * t01 + (p_in - p_out) * ov

    def _sample_exact(self, x, source):
        return exact.sample_continuous(lambda t: self._cdf_mp(t, mpmath.mpf(x)), self.lo, self.hi, source)

    def _log_probabilities(self, xs, n_outputs):
        x01 = self._norm(xs)[:, None]
        t = np.linspace(0, 1, n_outputs)[None, :]
        l, w = self._window(self.epsilon, x01)
        p_window, q = self._levels(self.epsilon)
        inside = (t >= l) & (t <= l + w)
        return np.where(inside, math.log(self._density_in(self.epsilon)), math.log(q)) + 0 * x01


class PiecewiseMechanism(_Piecewise):
    """Normalised PM on [0, 1] (Zheng & Hu Def. 11, from Wang et al. 2019)."""

    name = "pm"

    def _window(self, eps, x01):
        w = expit(-np.asarray(eps) / 2)  # 2C = 1/(e^{eps/2} + 1)
        return np.clip(x01 - w / 2, 0.0, 1.0 - w), w

    def _levels(self, eps):
        eps = np.asarray(eps, dtype=np.float64)
        return expit(eps / 2), np.exp(-eps / 2)

    def _density_in(self, eps):
        return np.exp(np.asarray(eps, dtype=np.float64) / 2)

    def _window_mp(self, e, x01):
        w = 1 / (mpmath.exp(e / 2) + 1)
        return min(max(x01 - w / 2, mpmath.mpf(0)), 1 - w), w

    def _densities_mp(self, e):
        return mpmath.exp(e / 2), mpmath.exp(-e / 2)


class SquareWave(_Piecewise):
    """Normalised SW on [0, 1] (Zheng & Hu Def. 12, from Li et al. 2020)."""

    name = "sw"

    def _window(self, eps, x01):
        eps = np.asarray(eps, dtype=np.float64)
        om = -np.expm1(-eps)
        w = np.exp(-eps) * _em1x(eps) / om**2  # 2C = (e^eps (eps - 1) + 1) / (e^eps - 1)^2
        return (1 - w) * x01, w

    def _levels(self, eps):
        eps = np.asarray(eps, dtype=np.float64)
        om = -np.expm1(-eps)
        return _em1x(eps) / (eps * om), om / eps  # w p = (eps - 1 + e^-eps) / (eps (1 - e^-eps)); p e^-eps

    def _density_in(self, eps):
        eps = np.asarray(eps, dtype=np.float64)
        return np.expm1(eps) / eps

    def _window_mp(self, e, x01):
        # e^e (e - 1) + 1 ~ e^2/2 cancels for small e: add the bits it loses
        extra = 2 * max(0, -int(mpmath.floor(mpmath.log(e, 2)))) + 8
        with mpmath.extraprec(extra):
            w = (mpmath.exp(e) * (e - 1) + 1) / mpmath.expm1(e) ** 2
            return (1 - w) * x01, w

    def _densities_mp(self, e):
        p = mpmath.expm1(e) / e
        return p, p * mpmath.exp(-e)


# ====================================================================== discrete mechanisms
@lru_cache(maxsize=64)
def _grid(lo: float, hi: float, k: int) -> np.ndarray:
    """The float64 nearest to each exact grid point lo + (hi - lo) j / (k - 1) (0.7 is the 8th of 11 on [0, 1])."""
    from fractions import Fraction

    flo, width = Fraction(lo), Fraction(hi) - Fraction(lo)
    grid = np.array([float(flo + width * Fraction(j, k - 1)) for j in range(k)])
    if not np.all(np.diff(grid) > 0):
        raise BadInput(f"the domain [{lo:g}, {hi:g}] is too narrow for {k} distinct float64 grid points")
    grid.setflags(write=False)
    return grid


class _GridMechanism(LDPMechanism):
    discrete = True

    def __init__(self, epsilon: float, *, domain: Any = (0.0, 1.0), k: int = DEFAULT_GRID):
        super().__init__(epsilon, domain=domain)
        try:
            kk = int(k)
        except (TypeError, ValueError):
            raise BadInput(f"grid size k must be an integer >= 2, got {k!r}") from None
        if kk != k or kk < 2 or kk > 10**5:
            raise BadInput(f"grid size k must be an integer in [2, 100000], got {k!r}")
        self.k = kk
        self.grid = _grid(self.lo, self.hi, kk)

    def params(self) -> dict:
        return {"domain": self.domain, "k": self.k}

    @property
    def label(self) -> str:
        return f"{self.name} (k={self.k})"

    def _range(self, a, b):
        """Grid indices [j1, j2] (inclusive; empty when j1 > j2) of the points in [a, b]."""
        j1 = np.searchsorted(self.grid, a, side="left")
        j2 = np.searchsorted(self.grid, b, side="right") - 1
        return j1, j2

    # every output is an atom (a grid float): no atomless part
    def _has_atom(self, x, a, b):
        j1, j2 = self._range(a, b)
        return np.broadcast_to(j1 <= j2, np.broadcast(x, a, b).shape)

    def _zeros(self, eps, x, a, b):
        return np.zeros(np.broadcast(eps, x, a, b).shape)

    def _cmass(self, eps, x, a, b):
        return self._zeros(eps, x, a, b)

    def _cdens(self, eps, x, a, b):
        return self._zeros(eps, x, a, b)

    def _cmass_upper(self, e1, e2, x, a, b):
        return self._zeros(e1, x, a, b)

    def _cdens_lower(self, e1, e2, x, a, b):
        return self._zeros(e1, x, a, b)

    def pmf(self, x: Any, epsilon: Any = None) -> np.ndarray:
        """P(M(x) = grid[j]) for every j (last axis)."""
        x = self._check_x(x)
        eps = self.epsilon if epsilon is None else _eps_array(epsilon)
        j = np.arange(self.k)
        return self._mass(np.asarray(eps)[..., None], np.asarray(x)[..., None], self.grid[j], self.grid[j])

    def _log_probabilities(self, xs, n_outputs):
        return np.log(self.pmf(xs))

    def _sample_numpy(self, x, n, rng):
        return self.grid[rng.choice(self.k, size=n, p=self.pmf(x))]

    def _sample_exact(self, x, source):
        return float(self.grid[exact.sample_index(self._cumulative_mp(x), self.k, source)])

    def _cumulative_mp(self, x):
        raise NotImplementedError


class KRR(_GridMechanism):
    """k-ary randomized response on the grid (Kairouz et al.; Zheng & Hu Def. 14)."""

    name = "krr"
    monotone = False  # non-increasing when the snapped input lies outside the box

    def snap(self, x: Any) -> np.ndarray:
        """Index of the grid float nearest to x (ties to the lower point)."""
        x = np.asarray(x, dtype=np.float64)
        j = np.clip(np.searchsorted(self.grid, x), 1, self.k - 1)
        left, right = self.grid[j - 1], self.grid[j]
        return np.where(x - left <= right - x, j - 1, j)

    def _probs(self, eps):
        eps = np.asarray(eps, dtype=np.float64)
        r = np.exp(-eps)  # P(stay) = 1/(1 + (k-1) e^-eps), P(each other) = e^-eps/(1 + (k-1) e^-eps)
        den = 1 + (self.k - 1) * r
        return 1 / den, r / den

    def _mass(self, eps, x, a, b):
        i = self.snap(x)
        j1, j2 = self._range(a, b)
        m = np.maximum(j2 - j1 + 1, 0)
        inside = ((i >= j1) & (i <= j2)).astype(np.float64)
        p_stay, p_other = self._probs(eps)
        return inside * p_stay + (m - inside) * p_other

    def _mass_upper(self, e1, e2, x, a, b):
        # monotone in eps either way (non-decreasing if the snapped input is in [a, b], else non-increasing)
        return np.maximum(self._mass(e1, x, a, b), self._mass(e2, x, a, b))

    def _cumulative_mp(self, x):
        i = int(self.snap(x))
        e = mpmath.exp(-mpmath.mpf(self.epsilon))

        def cum(j: int):
            den = 1 + (self.k - 1) * e
            return ((j + 1) * e + (1 - e if i <= j else 0)) / den

        return cum


class Exponential(_GridMechanism):
    """Exponential mechanism on the grid with score -|x - y| (sensitivity = width): P(y_j) ~ exp(-eps |x - y_j| / 2)."""

    name = "exponential"

    def _sums(self, eps, x, j1, j2):
        """Sum over j in [j1, j2] of exp(-c |t - j|) / (1 - e^-c), c = eps / (2 (k-1)), t = x01 (k-1)."""
        k = self.k
        c = np.asarray(eps, dtype=np.float64) / (2 * (k - 1))
        t = np.clip(self._norm(x), 0.0, 1.0) * (k - 1)
        i = np.clip(np.floor(t), 0, k - 2)
        f = t - i
        g1 = -np.expm1(-c)
        # left part: j in [j1, min(j2, i)], weight exp(-c (f + i - j))
        l2 = np.minimum(j2, i)
        nl = np.maximum(l2 - j1 + 1, 0)
        left = np.exp(-c * (f + i - l2)) * -np.expm1(-c * nl)
        # right part: j in [max(j1, i + 1), j2], weight exp(-c (j - i - f))
        r1 = np.maximum(j1, i + 1)
        nr = np.maximum(j2 - r1 + 1, 0)
        right = np.exp(-c * np.maximum(r1 - i - f, 0.0)) * -np.expm1(-c * nr)
        return (left + right) / g1

    def _mass(self, eps, x, a, b):
        j1, j2 = self._range(a, b)
        total = self._sums(eps, x, 0, self.k - 1)
        return self._sums(eps, x, j1, j2) / total

    def _mass_upper(self, e1, e2, x, a, b):
        # weights decrease with eps: P(S) = s / (s + rest) <= s(e1) / (s(e1) + rest(e2))
        j1, j2 = self._range(a, b)
        s = self._sums(e1, x, j1, j2)
        rest = self._sums(e2, x, 0, j1 - 1) + self._sums(e2, x, j2 + 1, self.k - 1)
        return s / (s + rest)

    def _cumulative_mp(self, x):
        e = mpmath.mpf(self.epsilon)
        state: dict[int, list] = {}

        def cum(j: int):
            prec = mpmath.mp.prec
            if prec not in state:
                x01 = (mpmath.mpf(x) - self.lo) / mpmath.mpf(self.width)
                w = [mpmath.exp(-e * abs(x01 - mpmath.mpf(i) / (self.k - 1)) / 2) for i in range(self.k)]
                acc, run = [], mpmath.mpf(0)
                for v in w:
                    run += v
                    acc.append(run)
                state[prec] = [v / run for v in acc]
            return state[prec][j]

        return cum


# ====================================================================== privacy indicator
class PrivacyIndicator(LDPMechanism):
    """I_delta(M): with probability 1 - delta release M(x), with probability delta release x itself.

    (eps, delta)-PAC LDP when M is eps-LDP (Zheng & Hu Thm 3; also (eps, delta)-DP): with probability
    delta the raw value is disclosed. Masses: delta [a <= x <= b] + (1 - delta) mass_M.
    """

    def __init__(self, mechanism: LDPMechanism, delta: float):
        if not isinstance(mechanism, LDPMechanism) or isinstance(mechanism, PrivacyIndicator):
            raise BadInput("the privacy indicator wraps one LDP mechanism")
        if mechanism.delta != 0:
            raise BadInput("the privacy indicator needs a pure eps-LDP mechanism (not the Gaussian)")
        self.inner = mechanism
        self._delta = check_delta(delta, positive=True, mechanism="the privacy indicator")
        self.epsilon, self.lo, self.hi, self.width = mechanism.epsilon, mechanism.lo, mechanism.hi, mechanism.width
        self.name = mechanism.name
        self.discrete = mechanism.discrete
        self.monotone = mechanism.monotone

    @property
    def delta(self) -> float:
        return self._delta

    @property
    def label(self) -> str:
        return f"indicator(delta={self._delta:g}) of {self.inner.label}"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, self._delta, math.inf, "linf", pac=True, mechanism=f"ldp {self.label}")

    def with_epsilon(self, epsilon: float) -> "PrivacyIndicator":
        return PrivacyIndicator(self.inner.with_epsilon(epsilon), self._delta)

    def params(self) -> dict:
        return {**self.inner.params(), "indicator_delta": self._delta}

    def _mass(self, eps, x, a, b):
        stay = ((a <= x) & (x <= b)).astype(np.float64)
        return self._delta * stay + (1 - self._delta) * self.inner._mass(eps, x, a, b)

    def _mass_upper(self, e1, e2, x, a, b):
        stay = ((a <= x) & (x <= b)).astype(np.float64)
        return self._delta * stay + (1 - self._delta) * self.inner._mass_upper(e1, e2, x, a, b)

    # the raw value is an atom at x; the atomless part is (1 - delta) times the inner mechanism's
    def _has_atom(self, x, a, b):
        return ((a <= x) & (x <= b)) | self.inner._has_atom(x, a, b)

    def _cmass(self, eps, x, a, b):
        return (1 - self._delta) * self.inner._cmass(eps, x, a, b)

    def _cdens(self, eps, x, a, b):
        return (1 - self._delta) * self.inner._cdens(eps, x, a, b)

    def _cmass_upper(self, e1, e2, x, a, b):
        return (1 - self._delta) * self.inner._cmass_upper(e1, e2, x, a, b)

    def _cdens_lower(self, e1, e2, x, a, b):
        return (1 - self._delta) * self.inner._cdens_lower(e1, e2, x, a, b)

    def _sample_numpy(self, x, n, rng):
        keep = rng.random(n) < self._delta
        return np.where(keep, x, self.inner._sample_numpy(x, n, rng))

    def _sample_exact(self, x, source):
        return x if exact.bernoulli(self._delta, source) else self.inner._sample_exact(x, source)

    def check_ldp(self, n_inputs: int = 65, n_outputs: int = 4001) -> LDPCheck:
        inner = self.inner.check_ldp(n_inputs, n_outputs)
        return LDPCheck(self.label, self.epsilon, self._delta, inner.observed, inner.holds,
                        f"{inner.method} of the inner mechanism; the raw value is released with probability delta")


# ====================================================================== factory
_CLASSES: dict[str, type[LDPMechanism]] = {
    "laplace": LaplaceLDP, "gaussian": GaussianLDP, "pm": PiecewiseMechanism, "sw": SquareWave,
    "exponential": Exponential, "krr": KRR,
}


def make_mechanism(name: str, epsilon: float, *, domain: Any = (0.0, 1.0), delta: float | None = None,
                   clip: bool | None = None, k: int | None = None, calibration: str | None = None,
                   indicator: float | None = None) -> LDPMechanism:
    """Build a mechanism by name (laplace, gaussian, pm, sw, exponential, krr).

    `delta` is the Gaussian's delta; `indicator` wraps a pure mechanism in I_delta. `clip` applies
    to laplace and gaussian (default False), `k` to the grid mechanisms (default 101),
    `calibration` to the Gaussian (analytic or pac).
    """
    key = str(name).strip().lower()
    if key not in _CLASSES:
        raise BadInput(f"unknown LDP mechanism {name!r}; choose one of {', '.join(MECHANISM_NAMES)}")
    cls = _CLASSES[key]
    kwargs: dict[str, Any] = {"domain": domain}
    if clip is not None:
        if key not in ("laplace", "gaussian"):
            raise BadInput(f"clipping applies to laplace and gaussian; {key} already outputs values in the domain")
        kwargs["clip"] = clip
    if k is not None:
        if key not in ("exponential", "krr"):
            raise BadInput(f"the grid size k applies to exponential and krr, not {key}")
        kwargs["k"] = k
    if key == "gaussian":
        if indicator is not None:
            raise BadInput("the privacy indicator needs a pure mechanism; the Gaussian takes its own delta")
        kwargs["delta"] = delta
        if calibration is not None:
            kwargs["calibration"] = calibration
        return cls(epsilon, **kwargs)
    if calibration is not None:
        raise BadInput("calibration applies to the Gaussian mechanism only")
    if delta is not None and indicator is not None:
        raise BadInput("give the indicator's delta once")
    mech = cls(epsilon, **kwargs)
    ind = indicator if indicator is not None else delta
    return PrivacyIndicator(mech, ind) if ind is not None and float(ind) != 0 else mech
