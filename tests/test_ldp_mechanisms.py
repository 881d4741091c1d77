"""LDP mechanisms: masses against quadrature and closed-form oracles, LDP ratios, samplers (KS / chi-square)."""

from __future__ import annotations

import math
import random

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from certify.errors import BadInput
from certify.ldp import KRR, Exponential, GaussianLDP, LaplaceLDP, PiecewiseMechanism, PrivacyIndicator, SquareWave, make_mechanism
from tests import ldp_oracles as orc

EPS = [0.05, 0.5, 2.0, 7.0, 40.0]
XS = [0.0, 0.03, 0.37, 0.5, 0.91, 1.0]
# every statistical test below uses a fixed seed; each has false-alarm probability FALSE_ALARM
FALSE_ALARM = 1e-3


@pytest.mark.parametrize("cls,density,breaks", [(PiecewiseMechanism, orc.pm_density, orc.pm_breaks),
                                                (SquareWave, orc.sw_density, orc.sw_breaks)])
@pytest.mark.parametrize("eps", EPS)
def test_piecewise_density_integrates_to_one_and_masses_match_quadrature(cls, density, breaks, eps):
    rng = np.random.default_rng(7)
    for x in XS:
        total = orc.interval_mass(density, breaks, 0, 1, x, eps)
        assert abs(total - 1) < 1e-25
        m = cls(eps)
        assert float(m.mass(0, 1, x)) == pytest.approx(1.0, abs=1e-14)
        for a, b in np.sort(rng.uniform(-0.1, 1.1, size=(6, 2)), axis=1):
            expected = float(orc.interval_mass(density, breaks, a, b, x, eps))
            assert float(m.mass(a, b, x)) == pytest.approx(expected, abs=2e-14), (x, a, b)


@pytest.mark.parametrize("eps", EPS)
def test_noise_masses_match_closed_form_cdfs_with_atoms(eps):
    delta = 1e-6
    for clip in (False, True):
        lap = LaplaceLDP(eps, clip=clip)
        gau = GaussianLDP(eps, delta=delta, clip=clip, calibration="pac")
        sigma = orc.pac_sigma_formula(eps, delta)
        assert gau.sigma01 == pytest.approx(float(sigma), rel=1e-13) and gau.sigma01 >= float(sigma)
        for x in XS:
            for a, b in [(-0.5, 0.2), (0.0, 0.3), (0.25, 0.75), (0.6, 1.0), (0.0, 1.0), (0.99, 2.0)]:
                for mech, cdf, scale in ((lap, orc.laplace_cdf, 1 / mp.mpf(eps)), (gau, orc.gaussian_cdf, gau.sigma01)):
                    lo = -mp.inf if clip and a <= 0 else mp.mpf(a) - x
                    hi = mp.inf if clip and b >= 1 else mp.mpf(b) - x
                    f = (lambda z: mp.mpf(0) if z == -mp.inf else mp.mpf(1) if z == mp.inf else cdf(z, scale))
                    expected = f(hi) - f(lo)
                    if clip and (b < 0 or a > 1):
                        expected = 0
                    assert float(mech.mass(a, b, x)) == pytest.approx(float(expected), abs=2e-15), (mech, x, a, b)


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("k", [2, 11, 101])
def test_grid_pmfs_match_definitions(eps, k):
    exp_m, krr = Exponential(eps, k=k), KRR(eps, k=k)
    for x in [0.0, 0.004, 0.333, 0.5, 0.75, 1.0]:
        got = exp_m.pmf(x)
        want = [float(v) for v in orc.exponential_pmf(x, eps, k)]
        assert got.sum() == pytest.approx(1.0, abs=1e-14)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
        i = int(np.argmin(np.abs(np.linspace(0, 1, k) - x)))  # nearest grid point (no ties at these x)
        np.testing.assert_allclose(krr.pmf(x), [float(v) for v in orc.krr_pmf(i, eps, k)], rtol=1e-12)
        for a, b in [(0.0, 0.3), (0.3, 0.7), (0.71, 0.71), (0.5, 1.0)]:
            idx = [j for j in range(k) if a <= j / (k - 1) <= b]  # nearest doubles of j/(k-1)
            assert float(exp_m.mass(a, b, x)) == pytest.approx(sum(want[j] for j in idx), abs=1e-14)


def test_grid_membership_is_decided_on_the_output_floats():
    # 0.7 is not exactly 7/10: the grid float for 7/10 is what the mechanism outputs and what the box sees
    m = KRR(1.0, k=11)
    assert m.grid[7] == 0.7 and float(m.mass(0.7, 0.7, 0.7)) == pytest.approx(math.e / (10 + math.e))
    assert float(m.mass(0.2, 0.2, 0.5)) == pytest.approx(1 / (10 + math.e))


def _mechs(eps):
    return [LaplaceLDP(eps), LaplaceLDP(eps, clip=True), PiecewiseMechanism(eps), SquareWave(eps), Exponential(eps, k=41),
            KRR(eps, k=41)]


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 12.0])
def test_cell_mass_ratios_are_bounded_by_e_eps(eps):
    """eps-LDP from the implementation's own masses: every output cell, every pair of inputs on a grid."""
    xs = np.linspace(0, 1, 41)[:, None]
    edges = np.linspace(-0.5, 1.5, 801)
    for m in _mechs(eps):
        if m.discrete:
            cells = m.pmf(xs[:, 0])
        else:
            a, b = edges[:-1], edges[1:]
            cells = m.mass(a[None, :], b[None, :], xs)
            if getattr(m, "clip", False):  # the atoms at the domain ends are outputs too
                cells = np.concatenate([m.mass(0, 0, xs), m.mass(1, 1, xs), cells], axis=1)
            cells = cells[:, cells.min(axis=0) > 1e-250]
        ratio = np.log(cells.max(axis=0)) - np.log(cells.min(axis=0))
        assert ratio.max() <= eps * (1 + 1e-9) + 1e-12, m
        assert m.check_ldp().holds


def test_density_ratio_from_oracle_densities():
    for eps in (0.3, 3.0, 9.0):
        ts = np.linspace(0, 1, 301)
        for density in (orc.pm_density, orc.sw_density):
            dens = np.array([[float(density(t, x, eps)) for t in ts] for x in np.linspace(0, 1, 11)])
            assert np.log(dens.max(axis=0) / dens.min(axis=0)).max() <= eps * (1 + 1e-12)


def test_check_ldp_detects_a_broken_mechanism():
    class Broken(PiecewiseMechanism):
        def _density_in(self, eps):  # inside density e^{eps} instead of e^{eps/2}: ratio e^{3 eps/2}
            return np.exp(np.asarray(eps))

    assert not Broken(2.0).check_ldp().holds
    g = GaussianLDP(2.0, delta=1e-5)
    g.sigma01 *= 0.9  # too little noise
    assert not g.check_ldp().holds
    assert GaussianLDP(2.0, delta=1e-5).check_ldp().holds and GaussianLDP(2.0, delta=1e-5, calibration="pac").check_ldp().holds


def test_pac_sigma_is_at_least_the_analytic_one():
    for eps in (0.1, 1.0, 5.0, 30.0):
        for delta in (1e-2, 1e-6):
            assert GaussianLDP(eps, delta=delta, calibration="pac").sigma01 >= GaussianLDP(eps, delta=delta).sigma01


def _ks(samples, mech, x):
    return stats.kstest(samples, lambda t: mech.cdf(t, x)).pvalue


@pytest.mark.parametrize("mech", [LaplaceLDP(1.5), GaussianLDP(1.5, delta=1e-3, domain=(-2, 3)), PiecewiseMechanism(2.0),
                                  SquareWave(2.0, domain=(10, 20)), PiecewiseMechanism(0.3)])
def test_numpy_samplers_pass_ks(mech):
    x = mech.lo + 0.23 * mech.width
    samples = mech.sample(x, 5000, sampler=1234)
    assert _ks(samples, mech, x) > FALSE_ALARM


@pytest.mark.parametrize("mech", [LaplaceLDP(1.5), GaussianLDP(1.5, delta=1e-3), PiecewiseMechanism(2.0),
                                  SquareWave(2.0, domain=(10, 20))])
def test_exact_samplers_pass_ks(mech):
    x = mech.lo + 0.77 * mech.width
    samples = mech.sample(x, 120, sampler=random.Random(99))
    assert _ks(samples, mech, x) > FALSE_ALARM


def _chi2(samples, mech, x, cells):
    """Chi-square test of counts in cells [a, b] (a partition of the output space) against masses."""
    counts = np.array([np.sum((samples >= a) & (samples <= b)) for a, b in cells])
    assert counts.sum() == samples.size
    probs = np.array([float(mech.mass(a, b, x)) for a, b in cells])
    return stats.chisquare(counts, probs / probs.sum() * samples.size).pvalue


@pytest.mark.parametrize("make", [lambda: Exponential(3.0, k=21), lambda: KRR(2.0, k=21), lambda: LaplaceLDP(2.0, clip=True)])
@pytest.mark.parametrize("exact", [False, True])
def test_discrete_and_atom_samplers_chi_square(make, exact):
    mech = make()
    x = 0.88
    rng = random.Random(5) if exact else 5
    samples = mech.sample(x, 300 if exact else 6000, sampler=rng)
    grid = np.arange(21) / 20
    if mech.discrete:
        cells = [(g, g) for g in mech.grid]
    else:
        starts = np.concatenate([[np.nextafter(0.0, 1)], grid[1:-1]])  # atoms at 0 and 1 are cells of their own
        cells = [(0.0, 0.0)] + list(zip(starts, np.nextafter(grid[1:], -1))) + [(1.0, 1.0)]
    assert _chi2(samples, mech, x, cells) > FALSE_ALARM


def test_samples_stay_in_domain_and_exact_sampler_is_reproducible():
    for m in (PiecewiseMechanism(1.0, domain=(-1, 1)), SquareWave(0.5, domain=(-1, 1)), LaplaceLDP(1.0, clip=True, domain=(-1, 1))):
        s = m.sample(0.5, 40, sampler=random.Random(3))
        assert np.all((s >= -1) & (s <= 1))
        assert np.array_equal(s, m.sample(0.5, 40, sampler=random.Random(3)))
    assert isinstance(PiecewiseMechanism(1.0).sample(0.5), float)  # the default secure path


def test_indicator_releases_x_with_probability_delta():
    ind = PrivacyIndicator(PiecewiseMechanism(1.0), 0.25)
    s = ind.sample(0.4, 4000, sampler=11)
    lo, hi = stats.binomtest(int(np.sum(s == 0.4)), 4000).proportion_ci(1 - FALSE_ALARM)
    assert lo <= 0.25 <= hi
    assert float(ind.mass(0.3, 0.5, 0.4)) == pytest.approx(0.25 + 0.75 * float(PiecewiseMechanism(1.0).mass(0.3, 0.5, 0.4)))
    assert ind.guarantee.pac and ind.guarantee.delta == 0.25


def test_domain_rescaling_is_the_affine_image():
    lo, hi = -3.0, 5.0
    for name in ("laplace", "pm", "sw", "exponential", "krr"):
        m01, m = make_mechanism(name, 1.7), make_mechanism(name, 1.7, domain=(lo, hi))
        for x, a, b in [(0.2, 0.105, 0.6049), (0.9, 0.0, 0.9549), (0.5, 0.4951, 1.0)]:  # box edges off the grid
            assert float(m.mass(lo + 8 * a, lo + 8 * b, lo + 8 * x)) == pytest.approx(float(m01.mass(a, b, x)), abs=1e-13)
    g01, g = GaussianLDP(1.0, delta=1e-5), GaussianLDP(1.0, delta=1e-5, domain=(lo, hi))
    assert g.sigma == pytest.approx(8 * g01.sigma01, rel=1e-15)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["laplace", "pm", "sw", "exponential", "krr"]), x=st.floats(0, 1), u=st.floats(0, 1),
       v=st.floats(0, 1), e1=st.floats(0.01, 300), width=st.floats(1e-6, 5), frac=st.floats(0, 1))
def test_mass_upper_bounds_every_epsilon_in_the_interval(name, x, u, v, e1, width, frac):
    """The branch and bound of smallest_epsilon is sound only if _mass_upper really bounds the mass."""
    a, b = min(u, v, x), max(u, v, x)
    m = make_mechanism(name, 1.0, **({"clip": True} if name == "laplace" else {}))
    e2 = e1 + width
    up = float(m._mass_upper(e1, e2, x, a, b))
    inner = e1 + frac * width
    assert float(m.mass(a, b, x, epsilon=inner)) <= up + 1e-12
    assert 0 <= float(m.mass(a, b, x, epsilon=inner)) <= 1


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(["laplace", "gaussian"]), x=st.floats(0, 1), u=st.floats(0, 1), v=st.floats(0, 1),
       e1=st.floats(0.05, 20), d=st.floats(0, 10), clip=st.booleans())
def test_noise_masses_are_monotone_in_epsilon_for_boxes_containing_x(name, x, u, v, e1, d, clip):
    a, b = min(u, v, x), max(u, v, x)
    kw = {"delta": 1e-4, "calibration": "pac"} if name == "gaussian" else {}
    m = make_mechanism(name, e1, clip=clip, **kw)
    assert float(m.mass(a, b, x, epsilon=e1)) <= float(m.mass(a, b, x, epsilon=e1 + d)) + 1e-14


@pytest.mark.parametrize("kwargs,fragment", [
    ({"name": "pm", "epsilon": 0}, "epsilon"), ({"name": "pm", "epsilon": -1}, "epsilon"),
    ({"name": "pm", "epsilon": 701}, "at most 700"), ({"name": "nope", "epsilon": 1}, "unknown ldp mechanism"),
    ({"name": "gaussian", "epsilon": 1}, "delta"), ({"name": "gaussian", "epsilon": 1, "delta": 1.0}, "delta"),
    ({"name": "gaussian", "epsilon": 1, "delta": -0.1}, "delta"), ({"name": "pm", "epsilon": 1, "domain": (1, 0)}, "domain"),
    ({"name": "krr", "epsilon": 1, "k": 1}, "grid size"), ({"name": "pm", "epsilon": 1, "clip": True}, "clipping"),
    ({"name": "gaussian", "epsilon": 1, "delta": 1e-5, "indicator": 0.1}, "indicator"),
])
def test_bad_mechanism_parameters(kwargs, fragment):
    kwargs = dict(kwargs)
    name, eps = kwargs.pop("name"), kwargs.pop("epsilon")
    with pytest.raises(BadInput, match=f"(?i){fragment}"):
        make_mechanism(name, eps, **kwargs)


def test_bad_mass_arguments():
    m = PiecewiseMechanism(1.0)
    with pytest.raises(BadInput, match="lo > hi"):
        m.mass(0.6, 0.5, 0.5)
    with pytest.raises(BadInput, match="outside the mechanism's domain"):
        m.mass(0.1, 0.5, 1.5)
    with pytest.raises(BadInput, match="sampler"):
        m.sample(0.5, 3, sampler="fast")


@settings(max_examples=200, deadline=None)
@given(a=st.floats(allow_nan=False, allow_infinity=False), b=st.floats(allow_nan=False, allow_infinity=False))
def test_float_keys_are_order_preserving(a, b):
    from certify.ldp.exact import float_key, key_float

    assert key_float(float_key(a)) == a
    assert (float_key(a) < float_key(b)) == (a < b)
