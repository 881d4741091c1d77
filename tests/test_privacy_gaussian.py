"""Gaussian calibrations against mpmath oracles (50 digits, tests/privacy_oracles.py), not against the code.

Oracle: the exact privacy curve of the Gaussian mechanism (Balle & Wang 2018, Thm 8),
delta(sigma) = Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D),
with Phi from mpmath's erfc, and a plain bisection on it.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.errors import BadInput
from certify.privacy.gaussian import (analytic_sigma, classic_sigma, gaussian_delta, gaussian_sigma, pac_sigma,
                                      zcdp_log_delta, zcdp_sigma)

from tests.privacy_oracles import bisect_sigma, cks_min_log_delta, exact_delta

CASES = [(0.1, 1e-5, 1.0), (0.5, 1e-5, 2.5), (1.0, 1e-5, 1.0), (3.0, 1e-6, 0.3), (10.0, 1e-5, 1.0),
         (100.0, 1e-12, 1.0), (0.01, 1e-12, 1.0), (1.0, 0.3, 1.0), (50.0, 1e-100, 4.0),
         (1e-3, 1e-12, 1.0), (1e-5, 1e-10, 1.0)]


@pytest.mark.parametrize("eps,delta,sens", CASES)
def test_analytic_sigma_matches_bisection_oracle(eps, delta, sens):
    sigma = analytic_sigma(eps, delta, sens)
    oracle = bisect_sigma(eps, delta, sens)
    assert abs(sigma - float(oracle)) <= 1e-10 * float(oracle)
    # the curve at the returned sigma meets (eps, delta); a slightly smaller sigma does not
    assert exact_delta(sigma, eps, sens) <= delta
    assert exact_delta(sigma * (1 - 1e-9), eps, sens) > delta


@pytest.mark.parametrize("eps,delta,sens", CASES)
def test_exact_curve_implementation_matches_oracle(eps, delta, sens):
    for factor in (0.5, 1.0, 2.0):
        sigma = factor * float(bisect_sigma(eps, delta, sens))
        want = exact_delta(sigma, eps, sens)
        assert gaussian_delta(sigma, eps, sens) == pytest.approx(float(want), rel=1e-11)


@pytest.mark.parametrize("eps,delta", [(0.05, 1e-5), (0.5, 1e-3), (0.99, 1e-8)])
def test_classic_formula_by_hand(eps, delta):
    by_hand = math.sqrt(2 * math.log(1.25 / delta)) * 3.0 / eps
    assert classic_sigma(eps, delta, 3.0) == pytest.approx(by_hand, rel=1e-14)
    assert classic_sigma(eps, delta, 3.0) >= by_hand
    # Dwork & Roth's proof covers eps < 1; the exact curve confirms it there
    assert exact_delta(classic_sigma(eps, delta, 3.0), eps, 3.0) <= delta


@pytest.mark.parametrize("eps", [1.0, 1.5, 10.0])
def test_classic_refused_for_epsilon_at_least_one(eps):
    with pytest.raises(BadInput, match="analytic"):
        classic_sigma(eps, 1e-5, 1.0)


@pytest.mark.parametrize("eps,delta,sens", [(0.1, 1e-5, 1.0), (1.0, 1e-5, 2.0), (10.0, 0.1, 1.0), (100.0, 1e-12, 0.5)])
def test_pac_formula_by_hand_and_its_guarantees(eps, delta, sens):
    c = math.sqrt(2 * math.log(2 / delta))
    by_hand = sens * (c + math.sqrt(c * c + 2 * eps)) / (2 * eps)
    sigma = pac_sigma(eps, delta, sens)
    assert sigma == pytest.approx(by_hand, rel=1e-14) and sigma >= by_hand
    # PAC: privacy loss L ~ N(D^2/(2 s^2), D^2/s^2) exceeds eps with probability <= delta/2
    mean, sd = mp.mpf(sens) ** 2 / (2 * mp.mpf(sigma) ** 2), mp.mpf(sens) / mp.mpf(sigma)
    tail = mp.erfc((eps - mean) / sd / mp.sqrt(2)) / 2
    assert tail <= delta / 2
    # ... hence also (eps, delta)-DP on the exact curve, and never smaller than the analytic sigma
    assert exact_delta(sigma, eps, sens) <= delta
    assert analytic_sigma(eps, delta, sens) <= sigma


def zcdp_delta_oracle(rho, eps):
    """CKS20 Cor. 13 evaluated on a fine grid of alpha (every alpha > 1 gives a valid delta)."""
    best = mp.mpf(1)
    for i in range(1, 4000):
        a = 1 + mp.mpf(i) / 40 * (1 + eps / rho) / 50
        val = mp.e ** ((a - 1) * (a * rho - eps)) / (a - 1) * (1 - 1 / a) ** a
        best = min(best, val)
    return best


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.3, 1e-6), (5.0, 1e-8)])
def test_zcdp_calibration(eps, delta):
    sigma = zcdp_sigma(eps, delta, 1.0)
    rho = 1 / (2 * sigma**2)
    # the implementation's minimisation is at least as good as a grid search, and meets delta
    assert math.exp(zcdp_log_delta(rho, eps)) <= float(zcdp_delta_oracle(rho, eps)) * (1 + 1e-9)
    assert math.exp(zcdp_log_delta(rho, eps)) <= delta
    # zCDP is a (valid) relaxation: never below the exact analytic sigma, and the exact curve holds
    assert sigma >= analytic_sigma(eps, delta, 1.0)
    assert exact_delta(sigma, eps) <= delta
    # minimality to 1e-9: a slightly smaller sigma violates the zCDP conversion
    assert zcdp_log_delta(1 / (2 * (sigma * (1 - 1e-9)) ** 2), eps) > math.log(delta)


@pytest.mark.parametrize("eps,delta", [(1e-8, 1e-100), (1e-6, 1e-100), (1e-4, 1e-300), (1e-2, 1e-12), (2.0, 1e-5)])
def test_zcdp_sigma_meets_the_conversion_at_high_precision(eps, delta):
    """Small epsilon made the float64 conversion cancel (a sigma 1.6e-7 too small at eps = 1e-8)."""
    sigma = zcdp_sigma(eps, delta, 1.0)
    assert cks_min_log_delta(1 / (2 * sigma**2), eps) <= mp.log(delta)
    assert cks_min_log_delta(1 / (2 * (sigma * (1 - 1e-8)) ** 2), eps) > mp.log(delta)  # and not loose


@pytest.mark.parametrize("args", [(1.0, 1e-308, 1.0), (1.0, 5e-324, 1.0)])
def test_extreme_delta_calibrates_without_overflow(args):
    for fn in (analytic_sigma, pac_sigma, zcdp_sigma):
        sigma = fn(*args)
        assert math.isfinite(sigma) and sigma > 0
    assert exact_delta(analytic_sigma(*args), args[0]) <= args[1]


def test_a_sigma_beyond_float64_is_bad_input():
    with pytest.raises(BadInput, match="float64 range"):
        analytic_sigma(1e-12, 1e-30, 1e300)


def test_sensitivity_zero_needs_no_noise():
    for cal in ("analytic", "classic", "pac", "zcdp"):
        assert gaussian_sigma(0.5, 1e-5, 0.0, cal) == 0.0


@pytest.mark.parametrize("bad", [dict(epsilon=0.0), dict(epsilon=-1.0), dict(delta=0.0), dict(delta=1.0),
                                 dict(delta=-0.1), dict(sensitivity=-1.0), dict(epsilon=math.inf), dict(delta=math.nan)])
def test_bad_parameters_rejected(bad):
    args = dict(epsilon=0.5, delta=1e-5, sensitivity=1.0) | bad
    for fn in (analytic_sigma, classic_sigma, pac_sigma, zcdp_sigma):
        with pytest.raises(BadInput):
            fn(args["epsilon"], args["delta"], args["sensitivity"])


eps_st = st.floats(min_value=1e-3, max_value=60.0)
delta_st = st.floats(min_value=1e-15, max_value=0.5)


@settings(max_examples=60, deadline=None)
@given(eps=eps_st, eps2=eps_st, delta=delta_st, delta2=delta_st)
def test_analytic_sigma_monotone_in_epsilon_and_delta(eps, eps2, delta, delta2):
    e1, e2 = sorted((eps, eps2))
    d1, d2 = sorted((delta, delta2))
    assert analytic_sigma(e2, d1) <= analytic_sigma(e1, d1) * (1 + 1e-11)
    assert analytic_sigma(e1, d2) <= analytic_sigma(e1, d1) * (1 + 1e-11)


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(min_value=1e-3, max_value=0.999), delta=delta_st, sens=st.floats(min_value=1e-3, max_value=1e3))
def test_analytic_below_classic_and_pac_and_linear_in_sensitivity(eps, delta, sens):
    a = analytic_sigma(eps, delta, sens)
    assert a <= classic_sigma(eps, delta, sens)
    assert a <= pac_sigma(eps, delta, sens)
    assert a == pytest.approx(sens * analytic_sigma(eps, delta, 1.0), rel=1e-11)
    assert gaussian_delta(a, eps, sens) <= delta


def test_classic_formula_fails_outside_its_range():
    """Why eps >= 1 is refused: at eps = 10 (used in the IP paper's experiments) the classic sigma is
    below the exact minimum, and its true delta exceeds the claimed one."""
    eps, delta = 10.0, 1e-5
    sigma = math.sqrt(2 * math.log(1.25 / delta)) / eps
    assert sigma < float(bisect_sigma(eps, delta))
    assert exact_delta(sigma, eps) > 2 * delta


@pytest.mark.slow
def test_analytic_sigma_wide_grid_against_bisection():
    """80 (eps, delta) pairs from 1e-4 to 300 and 1e-300 to 0.9: within 1e-10 of the oracle, never below it."""
    for eps in np.geomspace(1e-4, 300, 10):
        for delta in (1e-300, 1e-100, 1e-30, 1e-12, 1e-6, 1e-3, 0.1, 0.9):
            sigma = analytic_sigma(float(eps), delta, 1.0)
            oracle = float(bisect_sigma(float(eps), delta, 1.0))
            assert oracle * (1 - 1e-15) <= sigma <= oracle * (1 + 1e-10), (eps, delta)
