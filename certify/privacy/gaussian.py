"""Gaussian noise calibrations: sigma for a sensitivity Delta (l2) and a target (epsilon, delta).

- classic (Dwork & Roth, Thm A.1): sigma = sqrt(2 ln(1.25/delta)) Delta / epsilon; proven only for
  epsilon < 1, so it is refused outside that range.
- analytic (Balle & Wang 2018, Thm 8): the smallest sigma with
      Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta) <= delta,
  the exact (epsilon, delta) curve of the Gaussian mechanism; any epsilon > 0.
- pac (Zheng & Hu, Thm 4, "extended Gaussian"): sigma = Delta (C + sqrt(C^2 + 2 epsilon)) / (2 epsilon),
  C = sqrt(2 ln(2/delta)); any epsilon. It bounds Pr[privacy loss > epsilon] <= delta/2, hence is
  both (epsilon, delta)-PAC and (epsilon, delta)-DP, at a larger sigma than analytic.
- zcdp: Gaussian noise (continuous or discrete) is rho-zCDP with rho = Delta^2 / (2 sigma^2)
  (Bun & Steinke 2016; Canonne, Kamath & Steinke 2020 for the discrete Gaussian); converted to
  (epsilon, delta) with CKS20 Cor. 13. Used for the secure discrete sampler.

All returned sigmas are rounded up, and the solved ones are re-checked against their condition.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfinv, log_ndtr

from ..errors import BadInput
from .names import CALIBRATIONS
from .params import check_delta, check_epsilon, check_sensitivity, inflate, round_up


# relative accuracy of the solved sigmas (the returned value is on the safe side of the root)
SOLVE_RTOL = 1e-12


def _log_sub(la: float, lb: float) -> float:
    """log(e^la - e^lb) for la >= lb."""
    if lb == -math.inf:
        return la
    if lb >= la:
        return -math.inf
    return la + math.log(-math.expm1(lb - la))


# log_ndtr and the arguments a -/+ b carry a few ulps of relative error each; this many ulps of
# the magnitudes involved bound the error of the computed log delta (generously)
_ULPS = 64 * 2.0**-52
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(24)


def _log_delta_with_error(sigma: float, epsilon: float, sensitivity: float) -> tuple[float, float]:
    """(log delta(sigma), a bound on its float64 error), Delta > 0, sigma > 0.

    delta = Phi(a - b) - e^eps Phi(-a - b) = e^l1 (1 - e^x) with l1 = log Phi(a - b) and
    x = eps + log Phi(-a - b) - l1 < 0, a = Delta/(2 sigma), b = eps sigma/Delta. An error eta in
    x moves log(1 - e^x) by about eta e^x / (1 - e^x), large when x is near 0 (small eps, large
    sigma). There (a < 1/2), x = eps - integral_{-b-a}^{-b+a} phi(t)/Phi(t) dt is computed by
    Gauss-Legendre quadrature of the smooth, positive Mills-ratio integrand instead of as the
    difference of two large logs.
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    l1 = float(log_ndtr(a - b))
    if a < 0.5:
        t = -b + a * _GL_NODES
        mills = np.exp(-0.5 * t * t - 0.5 * math.log(2 * math.pi) - log_ndtr(t))
        integral = a * float(np.dot(_GL_WEIGHTS, mills))
        x = epsilon - integral
        eta = _ULPS * (epsilon + integral)
    else:
        l2 = epsilon + float(log_ndtr(-a - b))
        x = l2 - l1
        eta = _ULPS * (abs(l1) + abs(l2) + epsilon + 1.0)
    if not x < 0:  # only possible through rounding; delta is positive for every sigma
        return 0.0, 0.0
    return l1 + math.log(-math.expm1(x)), _ULPS * (abs(l1) + 1.0) + eta * math.exp(x) / -math.expm1(x)


def gaussian_log_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """log of the exact delta(epsilon) of the Gaussian mechanism (Balle & Wang 2018, Thm 8).

    Computed from log Phi (scipy.special.log_ndtr) and, where two terms nearly cancel, a
    quadrature of their difference: accurate for large epsilon, tiny epsilon and deltas down to
    1e-300.
    """
    if sensitivity == 0:
        return -math.inf
    if sigma <= 0:
        return 0.0
    return _log_delta_with_error(sigma, epsilon, sensitivity)[0]


def _log_delta_upper(sigma: float, epsilon: float, sensitivity: float) -> float:
    """An upper bound of log delta(sigma) covering float64 rounding (what the solver must meet)."""
    value, error = _log_delta_with_error(sigma, epsilon, sensitivity)
    return min(0.0, value + error)


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """The exact delta(epsilon) of Gaussian noise N(0, sigma^2 I) for l2 sensitivity `sensitivity`."""
    return math.exp(gaussian_log_delta(sigma, epsilon, sensitivity))


def classic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """sqrt(2 ln(1.25/delta)) Delta / epsilon; valid for 0 < epsilon < 1 only."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, positive=True)
    sensitivity = check_sensitivity(sensitivity)
    if epsilon >= 1:
        raise BadInput(
            f"the classic Gaussian calibration is proven only for epsilon < 1 (got epsilon = {epsilon:g}); "
            "use --calibration analytic (exact, any epsilon) or --calibration pac"
        )
    if sensitivity == 0:
        return 0.0
    return _finite(inflate(math.sqrt(2.0 * (math.log(1.25) - math.log(delta))) * sensitivity / epsilon))


def pac_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Zheng & Hu Thm 4: Delta (C + sqrt(C^2 + 2 epsilon)) / (2 epsilon), C = sqrt(2 ln(2/delta))."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, positive=True)
    sensitivity = check_sensitivity(sensitivity)
    if sensitivity == 0:
        return 0.0
    return _finite(inflate(sensitivity * _pac_ratio(epsilon, delta)))


def _pac_ratio(epsilon: float, delta: float) -> float:
    """sigma / Delta of the PAC calibration, not yet rounded up (inf when beyond float64)."""
    c = math.sqrt(2.0 * (math.log(2.0) - math.log(delta)))  # log(2 / delta) overflows for delta < 1e-308
    # (C + sqrt(C^2 + 2 eps)) / (2 eps) = C s^2 + s sqrt(C^2 s^2 + 1) with s = 1 / sqrt(2 eps):
    # no intermediate overflow (2 eps did at eps = 1e308) and s stays a normal float
    s = math.sqrt(0.5) / math.sqrt(epsilon)
    cs = c * s
    return cs * s + math.sqrt(cs * cs + 1.0) * s


# sigma grows as epsilon, delta shrink and as the sensitivity grows: only that direction overflows
_OVERFLOW = ("the noise scale sigma this (epsilon, delta, sensitivity) needs is beyond the float64 range this "
             "calibration can evaluate; use a larger epsilon or delta, or a smaller sensitivity")


def _finite(sigma: float) -> float:
    if not math.isfinite(sigma):
        raise BadInput(_OVERFLOW)
    return sigma


def _solve_decreasing(g, u_hi: float) -> float:
    """Root of a decreasing g(u) (g(u_hi) <= 0), returned on the g <= 0 side."""
    while g(u_hi) > 0:
        u_hi += 1.0
        if u_hi > 700.0:  # sigma / Delta = e^u would overflow
            raise BadInput(_OVERFLOW)
    u_lo = u_hi - 1.0
    for _ in range(2000):
        if g(u_lo) > 0:
            break
        u_lo -= 1.0
    else:  # pragma: no cover - g would have to stay <= 0 for sigma -> 0
        raise ArithmeticError("could not bracket the calibration root")
    root = brentq(g, u_lo, u_hi, xtol=1e-14, rtol=1e-15, maxiter=500)
    u = root + 1e-13
    while g(u) > 0:
        u += 1e-13
    return u


def _analytic_ratio_at_zero(delta: float) -> float:
    """sigma / Delta meeting delta at epsilon = 0 (delta = erf(Delta / (2 sqrt(2) sigma))).

    delta(sigma) decreases in epsilon, so this brackets the calibrations from above for every
    epsilon, and stays finite where the PAC formula overflows (epsilon -> 0).
    """
    return 1.0 / (2.0 * math.sqrt(2.0) * float(erfinv(delta)))


def analytic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma whose exact privacy curve meets (epsilon, delta) (Balle & Wang 2018).

    Solved by a bracketing root finder (Brent) on log delta(sigma) in log sigma, to 1e-12
    relative; the returned sigma satisfies the condition with a margin covering the float64
    rounding of the evaluation (it matters for small epsilon, where two close terms cancel).
    Where that margin is too wide to confirm even the PAC sigma (epsilon beyond about 1e18, where
    the two agree to 1e-9 and e^epsilon is far outside float64), the PAC sigma is returned: it is
    (epsilon, delta)-DP by Zheng & Hu Thm 4, so it is a valid, slightly larger, analytic answer.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, positive=True)
    sensitivity = check_sensitivity(sensitivity)
    if sensitivity == 0:
        return 0.0
    target = math.log(delta)

    def g(u: float) -> float:  # decreasing in u = log(sigma / Delta)
        return _log_delta_upper(math.exp(u), epsilon, 1.0) - target

    pac = _pac_ratio(epsilon, delta)
    if math.isfinite(pac) and g(math.log(pac)) > 0:
        return pac_sigma(epsilon, delta, sensitivity)
    u = _solve_decreasing(g, math.log(min(pac, _analytic_ratio_at_zero(delta))))
    sigma = _finite(round_up(math.exp(u) * sensitivity, 4))
    while _log_delta_upper(sigma, epsilon, sensitivity) > target:  # guard the final rounding
        sigma = _finite(round_up(sigma, 16))
    return sigma


def zcdp_log_delta(rho: float, epsilon: float) -> float:
    """log delta such that rho-zCDP implies (epsilon, delta)-DP (Canonne, Kamath & Steinke 2020, Cor. 13).

    delta = inf_{a > 1} exp((a - 1)(a rho - epsilon)) / (a - 1) * (1 - 1/a)^a. Every a gives a valid
    delta, so an inexact minimiser only loosens (never breaks) the bound.
    """
    if rho <= 0:
        return -math.inf

    # parametrise a = 1 + e^v so that a - 1 stays exact near a = 1, and write
    # log(1 - 1/a) = -log1p(e^-v), which does not cancel for large a (v - log1p(e^v) did)
    def terms(v: float) -> tuple[float, ...]:
        a = 1.0 + math.exp(v)
        return (math.exp(v) * a * rho, -math.exp(v) * epsilon, -a * math.log1p(math.exp(-v)), -v)

    def evaluable(v: float) -> bool:
        return all(math.isfinite(t) for t in terms(v))

    def log_bound(v: float) -> float:
        t = terms(v)
        if not all(math.isfinite(x) for x in t):
            return 0.0  # delta <= 1 always holds
        # plus a bound on the float64 error of evaluating them (a few ulps of each magnitude)
        return math.fsum(t) + 32 * 2.0**-52 * sum(abs(x) for x in t)

    def slope(v: float) -> float:  # d log_bound / da at a = 1 + e^v; increasing in v
        a = 1.0 + math.exp(v)
        return (2 * a - 1) * rho - epsilon - math.log1p(math.exp(-v))

    lo, hi = -40.0, 0.0
    while slope(hi) < 0 and evaluable(hi + 2.0):
        hi += 2.0
    if slope(lo) >= 0:
        v = lo
    elif slope(hi) < 0:  # the minimiser is where the terms overflow float64 (huge epsilon / rho)
        v = hi
    else:
        v = brentq(slope, lo, hi, xtol=1e-12, maxiter=500)
    return min(0.0, log_bound(v))


def zcdp_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma (to 1e-12) with rho = Delta^2/(2 sigma^2) meeting (epsilon, delta) via zCDP."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, positive=True)
    sensitivity = check_sensitivity(sensitivity)
    if sensitivity == 0:
        return 0.0
    target = math.log(delta)  # zcdp_log_delta already rounds up

    def g(u: float) -> float:  # decreasing in u = log(sigma / Delta)
        rho = 0.5 * math.exp(-2.0 * u) if u > -354.0 else math.inf  # (e^{-2u} overflows below)
        # delta grows with rho: where rho underflows (sigma / Delta > 1e154) evaluate at the smallest
        # normal float, an upper bound (an underflowed rho of 0 claimed delta = 0 at eps = 1e-300)
        return zcdp_log_delta(max(rho, sys.float_info.min), epsilon) - target

    # zCDP needs more noise than analytic: start at the smaller of two brackets, step up if needed
    u = _solve_decreasing(g, min(math.log(_pac_ratio(epsilon, delta)) + 1.0, math.log(_analytic_ratio_at_zero(delta))))
    sigma = _finite(round_up(math.exp(u) * sensitivity, 4))
    while zcdp_log_delta(0.5 * (sensitivity / sigma) ** 2, epsilon) > target:
        sigma = _finite(round_up(sigma, 16))
    return sigma


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float, calibration: str = "analytic") -> float:
    """Dispatch to one of `CALIBRATIONS`."""
    try:
        fn = {"analytic": analytic_sigma, "classic": classic_sigma, "pac": pac_sigma, "zcdp": zcdp_sigma}[calibration]
    except KeyError:
        raise BadInput(f"unknown Gaussian calibration {calibration!r}; choose one of {', '.join(CALIBRATIONS)}") from None
    return fn(epsilon, delta, sensitivity)
