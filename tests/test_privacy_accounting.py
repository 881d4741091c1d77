"""Accounting values checked against formulas computed by hand in the tests."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.errors import BadInput
from certify.privacy import (Guarantee, chain, compose, compose_pac, group_privacy, parallel, post_process)
from certify.privacy.accounting import chain_steps


def g(eps, delta=0.0, alpha=0.1, metric="l2", pac=False):
    return Guarantee(eps, delta, alpha, metric, pac=pac)


def test_basic_composition_by_hand():
    out = compose(g(0.5, 1e-6, 0.2), g(1.25, 2e-6, 0.1), g(0.25, 0.0, 0.3))
    assert out.epsilon == pytest.approx(2.0, rel=1e-15)
    assert out.delta == pytest.approx(3e-6, rel=1e-15)
    assert out.alpha == 0.1
    assert out.metric == "l2" and len(out.parts) == 3
    assert out.epsilon >= 2.0 and out.delta >= 3e-6  # never rounded down


def test_parallel_composition_equals_basic_in_ip():
    parts = [g(0.3, 1e-7, 0.5), g(0.7, 0.0, 0.2)]
    out = parallel(parts)
    assert (out.epsilon, out.delta, out.alpha) == pytest.approx((1.0, 1e-7, 0.2))
    assert out.mechanism.startswith("parallel")


@pytest.mark.parametrize("eps,delta,alpha,beta", [(1.0, 1e-5, 0.1, 0.35), (0.2, 1e-6, 1.0, 7.5), (2.0, 1e-9, 0.5, 0.5),
                                                  (0.5, 0.0, 0.1, 0.95)])
def test_chaining_by_hand(eps, delta, alpha, beta):
    h = math.ceil(beta / alpha - 1e-12)
    out = chain(g(eps, delta, alpha), beta)
    want = delta * sum(math.exp(i * eps) for i in range(h))  # telescoping: delta (1 + e^eps + ... + e^{(h-1) eps})
    assert out.epsilon == pytest.approx(h * eps, rel=1e-15)
    assert out.delta == pytest.approx(min(1.0, want), rel=1e-12)
    assert out.alpha == beta
    if h > 1 and delta > 0:
        assert out.delta > h * delta  # the paper's statement (h delta) is too small


def test_chaining_worked_example():
    # eps = 1, delta = 1e-5, alpha = 0.1 to beta = 0.35: h = 4, delta' = 1e-5 (e^4 - 1)/(e - 1)
    out = chain(g(1.0, 1e-5, 0.1), 0.35)
    assert out.epsilon == pytest.approx(4.0)
    assert out.delta == pytest.approx(1e-5 * (math.e**4 - 1) / (math.e - 1), rel=1e-12)
    assert out.delta == pytest.approx(3.1192874850577e-4, rel=1e-10)


@pytest.mark.parametrize("alpha,beta,h", [(0.1, 0.3, 3), (0.2, 0.6, 3), (0.1, 0.1, 1), (0.1, 0.05, 1), (0.25, 1.0, 4),
                                          (0.25, 1.0000001, 5),
                                          # in binary 11 x 0.1 falls 2.8e-17 short of 1.1 (float64 says >=)
                                          (0.1, 1.1, 12), (0.1, 0.30000000000000004, 4), (0.1, 25.1, 252)])
def test_chain_steps_are_the_exact_ceiling(alpha, beta, h):
    from fractions import Fraction

    assert chain_steps(alpha, beta) == h
    assert h * Fraction(alpha) >= Fraction(beta) and (h == 1 or (h - 1) * Fraction(alpha) < Fraction(beta))


def test_chaining_too_far_is_bad_input():
    with pytest.raises(BadInput, match="too many steps"):
        chain(g(1.0, 1e-5, 1e-300), 1e300)


def test_chain_delta_is_capped_and_marked_vacuous():
    out = chain(g(1.0, 1e-3, 0.1), 3.0)
    assert out.delta == 1.0 and out.vacuous
    assert out.to_dict()["vacuous"] is True


def test_chaining_large_epsilon_does_not_overflow():
    out = chain(g(300.0, 1e-200, 1.0), 3.0)
    # log delta' = log(1e-200) + log(e^900 - 1) - log(e^300 - 1) ~ -460.5 + 600
    assert out.delta == 1.0
    out = chain(g(50.0, 1e-300, 1.0), 3.0)
    assert math.log(out.delta) == pytest.approx(math.log(1e-300) + 100.0, rel=1e-9)


def test_group_privacy_by_hand():
    base = g(0.5, 1e-6, 1.0, metric="records")
    out = group_privacy(base, 3)
    assert out.epsilon == pytest.approx(1.5)
    assert out.delta == pytest.approx(1e-6 * (1 + math.exp(0.5) + math.exp(1.0)), rel=1e-12)
    assert out.alpha == 3.0
    with pytest.raises(BadInput):
        group_privacy(g(0.5), 2)  # an input-radius guarantee: use chain
    with pytest.raises(BadInput):
        chain(base, 2.0)


def test_post_processing_keeps_values():
    base = g(0.7, 1e-5, 0.2)
    out = post_process(base, "argmax")
    assert (out.epsilon, out.delta, out.alpha, out.metric) == (0.7, 1e-5, 0.2, "l2")
    assert "argmax" in out.mechanism


def test_post_processing_drops_the_pac_label():
    """PAC (probabilistic) DP is not closed under post-processing (Meiser 2018); the implied
    (eps, delta)-DP is, so the values stay and PAC composition refuses the result."""
    out = post_process(g(0.5, 1e-3, pac=True))
    assert not out.pac and (out.epsilon, out.delta) == (0.5, 1e-3)
    assert post_process(g(0.5, 0.0)).pac  # pure DP is PAC with delta = 0
    with pytest.raises(BadInput):
        compose_pac([out, g(0.5, 1e-3, pac=True)])


def test_pac_composition_by_hand():
    parts = [g(0.5, 0.1, pac=True), g(0.5, 0.1, pac=True), g(1.0, 0.05, pac=True)]
    out = compose_pac(parts)
    assert out.epsilon == pytest.approx(2.0)
    assert out.delta == pytest.approx(1 - 0.9 * 0.9 * 0.95, rel=1e-12)
    assert out.delta < 0.25  # tighter than the sum of deltas
    assert out.pac
    d = 10
    same = compose_pac([g(0.1, 0.01, pac=True)] * d)
    assert same.epsilon == pytest.approx(d * 0.1)
    assert same.delta == pytest.approx(1 - 0.99**d, rel=1e-12)
    many = compose_pac([g(0.01, 0.001, pac=True)] * 200)  # beyond the exact-rational path
    assert many.delta == pytest.approx(1 - 0.999**200, rel=1e-12) and many.delta >= 1 - 0.999**200 - 1e-15


def test_pac_composition_refuses_non_pac_guarantees():
    with pytest.raises(BadInput, match="PAC"):
        compose_pac(g(1.0, 1e-5), g(1.0, 1e-5, pac=True))
    # pure guarantees are PAC
    assert compose_pac(g(1.0), g(0.5)).delta == 0.0


def test_mixed_metrics_refused():
    with pytest.raises(BadInput, match="metric"):
        compose(g(1.0, metric="l2"), g(1.0, metric="linf"))


def test_guarantee_validation_and_flags():
    with pytest.raises(BadInput):
        Guarantee(-1.0)
    with pytest.raises(BadInput):
        Guarantee(1.0, 1.5)
    with pytest.raises(BadInput):
        Guarantee(1.0, 0.0, 0.0)
    with pytest.raises(BadInput):
        Guarantee(1.0, 0.0, 1.0, "hamming")
    assert Guarantee(1.0).pac  # pure
    emp = Guarantee(1.0, 0.0, 1.0, "records", empirical=True)
    assert compose(emp, Guarantee(1.0, 0.0, 1.0, "records")).empirical
    assert "EMPIRICAL" in emp.describe() and emp.to_dict()["basis"] == "empirical"


pos = st.floats(min_value=1e-3, max_value=5.0)


@settings(max_examples=80, deadline=None)
@given(eps=pos, delta=st.floats(min_value=0.0, max_value=1e-3), alpha=st.floats(min_value=1e-3, max_value=2.0),
       b1=st.floats(min_value=1e-3, max_value=20.0), b2=st.floats(min_value=1e-3, max_value=20.0))
def test_chaining_monotone_in_beta(eps, delta, alpha, b1, b2):
    lo, hi = sorted((b1, b2))
    c1, c2 = chain(g(eps, delta, alpha), lo), chain(g(eps, delta, alpha), hi)
    assert c1.epsilon <= c2.epsilon and c1.delta <= c2.delta
    assert c1.epsilon >= eps and c1.delta >= delta


@settings(max_examples=80, deadline=None)
@given(e1=pos, e2=pos, d1=st.floats(min_value=0, max_value=0.1), d2=st.floats(min_value=0, max_value=0.1))
def test_composition_is_commutative_and_associative(e1, e2, d1, d2):
    a, b, c = g(e1, d1, 0.3), g(e2, d2, 0.2), g(e1 + e2, d1, 0.5)
    ab, ba = compose(a, b), compose(b, a)
    assert (ab.epsilon, ab.delta, ab.alpha) == (ba.epsilon, ba.delta, ba.alpha)
    left, right = compose(compose(a, b), c), compose(a, compose(b, c))
    assert left.epsilon == pytest.approx(right.epsilon, rel=1e-14)
    assert left.delta == pytest.approx(right.delta, rel=1e-14, abs=1e-300)
    assert left.alpha == right.alpha == 0.2
