"""Samplers: distribution tests (KS, exact pmf), privacy of the discretised release, audits.

All statistical tests use fixed seeds (deterministic outcomes); the stated false-alarm rate is
the probability that a correct sampler would fail the test for a random seed. The secure sampler
is driven by `random.Random(seed)` here (same algorithm as with the OS CSPRNG) to be reproducible.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from certify.errors import BadInput
from certify.privacy import NoisyQuery, audit_epsilon, clopper_pearson
from certify.privacy.discrete import discrete_gaussian, discrete_laplace, discrete_logistic
from certify.privacy.noise import Gaussian, Laplace, Logistic
from certify.privacy.sampling import SLACK, NumpySampler, SecureSampler, make_sampler

SCIPY = {"laplace": lambda s: stats.laplace(scale=s), "gaussian": lambda s: stats.norm(scale=s),
         "logistic": lambda s: stats.logistic(scale=s)}
FAMILIES = [Laplace(1.7), Gaussian(0.6), Logistic(2.3)]


@pytest.mark.parametrize("noise", FAMILIES, ids=lambda n: n.name)
def test_noise_family_cdf_and_density_match_scipy(noise):
    z = np.linspace(-30, 30, 601)
    ref = SCIPY[noise.name](noise.scale)
    assert np.allclose(noise.cdf(z), ref.cdf(z), rtol=1e-12, atol=1e-300)
    assert np.allclose(noise.logpdf(z), ref.logpdf(z), rtol=1e-12)
    assert noise.std() == pytest.approx(ref.std(), rel=1e-14)


@pytest.mark.parametrize("noise", FAMILIES, ids=lambda n: n.name)
def test_numpy_sampler_ks(noise):
    """KS test, n = 5000, seed 11; false alarm 1e-3 per family."""
    out = NumpySampler(11).perturb(np.zeros((5000, 1)), noise, 1.0, noise.sensitivity_norm).ravel()
    assert stats.kstest(out, SCIPY[noise.name](noise.scale).cdf).pvalue > 1e-3


@pytest.mark.parametrize("noise", [Laplace(1.3), Gaussian(2.0), Logistic(0.7)], ids=lambda n: n.name)
def test_secure_sampler_ks(noise):
    """KS test against the continuous CDF, n = 2000, seed 5; false alarm 1e-3 per family.

    The grid is ~1000x finer than the noise scale, so discreteness moves the CDF by < 1e-3,
    far below the KS critical value (~0.04) at this n.
    """
    sampler = SecureSampler(random.Random(5))
    out = sampler.perturb(np.zeros((2000, 1)), noise, 1.0, noise.sensitivity_norm).ravel()
    grid = sampler.grid(1.0, 1, noise.sensitivity_norm)
    assert np.all(np.abs(out / grid - np.rint(out / grid)) == 0)  # outputs lie on the grid
    assert stats.kstest(out, SCIPY[noise.name](noise.scale).cdf).pvalue > 1e-3


def _pmf(logw: np.ndarray) -> np.ndarray:
    w = np.exp(logw - logw.max())
    return w / w.sum()


@pytest.mark.parametrize("name", ["laplace", "gaussian", "logistic"])
def test_exact_discrete_samplers_match_their_pmf(name):
    """Chi-square against the exact pmf (computed here by summation), n = 4000; false alarm 1e-3."""
    rng = random.Random(17)
    zs = np.arange(-80, 81)
    scale = Fraction(3, 2)
    if name == "laplace":
        draw, logw = (lambda: discrete_laplace(scale, rng)), -np.abs(zs) / 1.5
    elif name == "gaussian":
        draw, logw = (lambda: discrete_gaussian(scale * scale, rng)), -zs**2 / (2 * 2.25)
    else:
        draw, logw = (lambda: discrete_logistic(scale, rng)), -np.abs(zs) / 1.5 - 2 * np.log1p(np.exp(-np.abs(zs) / 1.5))
    pmf = _pmf(logw)
    n = 4000
    counts = np.bincount(np.clip([draw() + 80 for _ in range(n)], 0, 160), minlength=161)
    keep = pmf * n >= 5  # merge the tails into one bin
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(pmf[keep], pmf[~keep].sum()) * n
    assert stats.chisquare(obs, exp).pvalue > 1e-3


@pytest.mark.parametrize("k,norm", [(1, "l1"), (5, "l1"), (1, "l2"), (10, "l2"), (330, "l1")])
def test_grid_headroom(k, norm):
    sens = 0.37
    gamma = SecureSampler(random.Random(0)).grid(sens, k, norm)
    assert math.log2(gamma).is_integer()
    c = k if norm == "l1" else math.sqrt(k)
    assert c * gamma <= sens * SLACK * (1 + 1e-15)
    assert 2 * c * gamma > sens * SLACK * (1 - 1e-15)  # the largest such power of two


@pytest.mark.parametrize("shape", [(3, 64), (3, 64, 1), (3, 4, 4, 4)])
def test_grid_counts_every_coordinate_of_a_query(shape):
    """A query of a batch (n, ...) has prod(shape[1:]) coordinates whatever its shape: the grid
    must be the one for 64 coordinates (a coarser one breaks the rounding headroom). Outputs are
    multiples of the grid used; with 192 coordinates some are odd multiples of the right one."""
    sens, noise = 0.5, Laplace(0.5)
    sampler = SecureSampler(random.Random(1))
    gamma = sampler.grid(sens, 64, "l1")
    out = sampler.perturb(np.random.default_rng(0).uniform(-1, 1, shape), noise, sens, "l1") / gamma
    assert np.array_equal(out, np.rint(out))
    assert np.any(np.rint(out) % 2 == 1)


def _secure_release(family, eps, delta, sens, seed=0):
    return NoisyQuery(family, sensitivity=sens, epsilon=eps, delta=delta, sampler=SecureSampler(random.Random(seed)))


@pytest.mark.parametrize("eps,sens", [(1.0, 1.0), (0.1, 2.5), (4.0, 0.01)])
def test_discretised_laplace_and_logistic_are_epsilon_private(eps, sens):
    """Privacy of the released integers, from the pmf: rounding moves neighbours at most floor(Delta/gamma) + 1 apart."""
    for family in ("laplace", "logistic"):
        q = _secure_release(family, eps, None, sens)
        gamma = q.sampler.grid(sens, 1, "l1")
        shift = math.floor(sens / gamma) + 1
        tau = q.scale / gamma
        z = np.arange(-40 * int(tau) - shift, 40 * int(tau) + shift)
        if family == "laplace":
            logq = lambda v: -np.abs(v) / tau  # noqa: E731
        else:
            logq = lambda v: -np.abs(v) / tau - 2 * np.log1p(np.exp(-np.abs(v) / tau))  # noqa: E731
        assert np.max(logq(z) - logq(z - shift)) <= eps * (1 + 1e-12)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.5, 1e-6), (3.0, 1e-3)])
def test_discretised_gaussian_meets_epsilon_delta_on_its_pmf(eps, delta):
    """Hockey-stick divergence of the 1-D discrete Gaussian at the worst integer shift, summed over its support."""
    q = _secure_release("gaussian", eps, delta, 1.0)
    gamma = q.sampler.grid(1.0, 1, "l2")
    shift = math.floor(1.0 / gamma) + 1
    sigma = q.scale / gamma
    z = np.arange(-int(45 * sigma), int(45 * sigma) + 1)
    logw = -(z.astype(np.float64) ** 2) / (2 * sigma**2)
    log_norm = np.log(np.sum(np.exp(logw - logw.max()))) + logw.max()
    p = np.exp(logw - log_norm)
    p_shift = np.exp(-((z - shift).astype(np.float64) ** 2) / (2 * sigma**2) - log_norm)
    hockey = np.sum(np.maximum(0.0, p - math.exp(eps) * p_shift))
    assert hockey <= delta


def test_secure_sampler_records_its_source_and_refuses_mismatched_norms():
    assert SecureSampler().cryptographic
    assert not SecureSampler(random.Random(0)).cryptographic
    with pytest.raises(BadInput):
        SecureSampler(random.Random(0)).perturb(np.zeros(3), Laplace(1.0), 1.0, "l2")
    assert isinstance(make_sampler(None), SecureSampler) and isinstance(make_sampler(3), NumpySampler)
    with pytest.raises(BadInput):
        make_sampler("mersenne")


def test_clopper_pearson_matches_scipy_binomtest():
    for k, n in [(0, 50), (7, 50), (50, 50), (1234, 5000)]:
        lo, hi = clopper_pearson(k, n, 0.01)
        ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.98, method="exact")
        assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)


AUDIT_CASES = [("laplace", None, 1.0), ("logistic", None, 1.0), ("gaussian", "analytic", 1.0),
               ("gaussian", "classic", 0.9), ("gaussian", "pac", 1.0), ("gaussian", "zcdp", 1.0)]


def _thresholds(sens, scale):
    return [sens / 2 + j * scale for j in range(-4, 5)]


@pytest.mark.parametrize("family,calibration,eps", AUDIT_CASES)
def test_audit_numpy_samplers(family, calibration, eps):
    """Clopper-Pearson lower bound on eps from 9 threshold events between neighbours 0 and Delta.

    n = 200000 per input, seed 1; the audit's false-alarm rate is 1e-3 (Bonferroni over all its
    bounds), i.e. a correct mechanism fails with probability <= 1e-3 per case.
    """
    delta = 1e-5 if family == "gaussian" else None
    q = NoisyQuery(family, sensitivity=1.0, epsilon=eps, delta=delta, calibration=calibration, sampler=1)
    n = 200_000
    a = q.release(np.zeros((n, 1))).ravel()
    b = q.release(np.ones((n, 1))).ravel()
    result = audit_epsilon(a, b, _thresholds(1.0, q.scale), delta=delta or 0.0, false_alarm=1e-3)
    assert result.epsilon_lower <= eps


@pytest.mark.parametrize("family", ["laplace", "logistic", "gaussian"])
def test_audit_secure_samplers(family):
    """As above for the secure (discrete) sampler, n = 3000 per input, seed 3; false alarm 1e-3."""
    delta = 1e-5 if family == "gaussian" else None
    q = _secure_release(family, 1.0, delta, 1.0, seed=3)
    a = q.release(np.zeros((3000, 1))).ravel()
    b = q.release(np.ones((3000, 1))).ravel()
    assert audit_epsilon(a, b, _thresholds(1.0, q.scale), delta=delta or 0.0).epsilon_lower <= 1.0


@pytest.mark.parametrize("noise", [Laplace(0.25), Logistic(0.25), Gaussian(3.7306 / 4)], ids=lambda n: n.name)
def test_audit_detects_too_little_noise(noise):
    """The audit has power: a quarter of the needed scale for eps = 1 is caught (lower bound > 1)."""
    rng = np.random.default_rng(2)
    a = noise.sample(rng, 200_000)
    b = 1.0 + noise.sample(rng, 200_000)
    assert audit_epsilon(a, b, _thresholds(1.0, noise.scale), delta=1e-5).epsilon_lower > 1.0


@pytest.mark.slow
@pytest.mark.parametrize("family", ["laplace", "logistic", "gaussian"])
def test_audit_secure_samplers_large(family):
    """The secure samplers with 30000 samples per input (seed 13); false alarm 1e-3 each."""
    delta = 1e-5 if family == "gaussian" else None
    q = _secure_release(family, 1.0, delta, 1.0, seed=13)
    a = q.release(np.zeros((30000, 1))).ravel()
    b = q.release(np.ones((30000, 1))).ravel()
    assert audit_epsilon(a, b, _thresholds(1.0, q.scale), delta=delta or 0.0).epsilon_lower <= 1.0
