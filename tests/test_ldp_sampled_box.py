"""Boxes found by sampling (issue 26.5): the lower bound that replaces Zheng & Hu's rho (1 - omega)(1 - tau).

With confidence 1 - omega over the sampling, the bad set B of the box has uniform measure <= tau,
and P(class kept) >= max(0, C - tau * volume * prod pmax_i) + P(M(x) = x) (certify.ldp.utility).
The Monte-Carlo tests put B where it hurts most (next to x, where the mechanism concentrates) and
check the bound against the kept frequency; they also show that the old factor is violated.

Statistics: fixed seeds; every Clopper-Pearson bound below is one-sided with error FALSE_ALARM
(computed here from scipy's beta quantiles, not from certify). A test of "kept >= bound" rejects
only when the upper confidence bound of the kept rate falls below the bound (false alarm
FALSE_ALARM); where the adversarial B attains the bound, the two-sided interval must contain it.
Each test states its total false-alarm rate (a sum over its one-sided checks).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta

from certify.errors import BadInput
from certify.ldp import (PrivacyIndicator, empirical_rho, make_mechanism, probabilistic_box, rho, rho_batch,
                         smallest_epsilon, utility)
from certify.ldp.utility import _Problem
from tests import ldp_oracles as orc

FALSE_ALARM = 1e-6
N = 200_000


def cp_lower(k: int, n: int, err: float = FALSE_ALARM) -> float:
    return 0.0 if k == 0 else float(beta.ppf(err, k, n - k + 1))


def cp_upper(k: int, n: int, err: float = FALSE_ALARM) -> float:
    return 1.0 if k == n else float(beta.ppf(1 - err, k + 1, n - k))


def kept_count(mech, classifier, x, features, n=N, seed=0) -> int:
    """Perturb the features of x independently (numpy sampler), count records classified as x."""
    rng = np.random.default_rng(seed)
    recs = np.repeat(np.asarray(x, dtype=np.float64)[None, :], n, axis=0)
    for f in features:
        recs[:, f] = mech.sample(float(x[f]), n, sampler=rng)
    label = classifier(np.asarray(x, dtype=np.float64)[None, :])[0]
    return int(np.sum(classifier(recs) == label))


# ----------------------------------------------------------------------------- adversarial Monte-Carlo checks
def test_pm_eps20_sampled_box_old_factor_violated_new_bound_holds():
    """The audit's case: PM at eps = 20 through the real sampling pipeline (probabilistic_box).

    B = (0.5, 0.5 + 2e-5], half of PM's window (width 4.5e-5) next to x = 0.5: uniform fraction 2e-5
    of [0, 1], far below tau = 0.05 (the sampling cannot see it, and the guarantee is true), yet
    PM puts e^10 * 2e-5 = 0.44 of its mass there. False alarm: 2 x 1e-6.
    """
    x = np.array([0.5, 0.3])
    clf = lambda X: ((X[:, 0] > 0.5) & (X[:, 0] <= 0.5 + 2e-5)).astype(int)  # noqa: E731
    box = probabilistic_box(clf, x, features=[0], omega=0.05, tau=0.05, seed=1)
    lo, hi = box.box.lo[0], box.box.hi[0]
    assert (lo, hi) == (0.0, 1.0) and box.box.lo[1] == box.box.hi[1] == 0.3
    assert 2e-5 / (hi - lo) <= box.tau  # the sampling guarantee holds for this box (we know B exactly)
    pm = make_mechanism("pm", 20.0)
    u = utility(pm, box)
    rho_box = u.rho_mechanism
    old = (1 - box.omega) * (1 - box.tau) * rho_box  # Zheng & Hu Sec. 4.3
    k = kept_count(pm, clf, x, [0])
    truth = 1 - math.exp(10) * 2e-5  # exact: the bad interval lies inside the window
    assert cp_lower(k, N) <= truth <= cp_upper(k, N)
    assert old == pytest.approx(0.9025) and old > cp_upper(k, N)  # the old factor is violated (power)
    assert u.rho == 0.0 and u.rho <= cp_upper(k, N)  # the new bound: e^10 * tau makes it vacuous, and says so
    assert u.subtracted == pytest.approx(0.05 * math.exp(10), rel=1e-8) and u.omega == 0.05 and u.tau == 0.05
    d = u.to_dict()
    assert d["confidence"] == 0.95 and d["sampled_box"]["max_density"][0] == pytest.approx(math.exp(10), rel=1e-8)
    # empirical_rho now agrees with the theory; with the old factor it said "consistent: False"
    e = empirical_rho(pm, clf, box, n=N, sampler=0, confidence=1 - 2 * FALSE_ALARM)
    assert e.consistent and e.rho == u.rho and e.rho_box == pytest.approx(1.0) and e.omega == 0.05
    assert old > e.ci[1]


@pytest.mark.parametrize("name,eps,x,box,bad", [
    # window of PM at eps = 1: [0.311, 0.689]; B = (0.5, 0.53]: uniform fraction 0.03 / 0.6 = tau, all in the window
    ("pm", 1.0, 0.5, (0.2, 0.8), (0.5, 0.53)),
    # SW at eps = 2, x = 0.4: window [0.318, 0.523]; B = (0.4, 0.44]: fraction 0.04 / 0.8 = tau
    ("sw", 2.0, 0.4, (0.1, 0.9), (0.4, 0.44)),
])
def test_small_eps_bound_is_attained_by_the_worst_bad_set(name, eps, x, box, bad):
    """B of uniform fraction exactly tau inside the window (maximal density): P(kept) equals the bound.

    Exact check against the independent oracle (40-digit quadrature) plus Monte Carlo: the
    two-sided interval contains the bound (false alarm 2 x 1e-6); and the tau half of the old
    factor, rho_box (1 - tau), is above the true P(kept).
    """
    tau, omega = 0.05, 0.05
    (a, b), (b1, b2) = box, bad
    assert (b2 - b1) / (b - a) == pytest.approx(tau)
    density, breaks = (orc.pm_density, orc.pm_breaks) if name == "pm" else (orc.sw_density, orc.sw_breaks)
    l, r = breaks(x, eps)
    assert l < b1 and b2 < r  # B inside the window
    clf = lambda X: (~((X[:, 0] >= a) & (X[:, 0] <= b)) | ((X[:, 0] > b1) & (X[:, 0] <= b2))).astype(int)  # noqa: E731
    mech = make_mechanism(name, eps)
    u = utility(mech, ([a], [b]), point=[x], omega=omega, tau=tau)
    truth = float(orc.kept_probability_1d(density, breaks, [(b1, b2)], a, b, x, eps))
    assert truth - 1e-8 <= u.rho <= truth  # the bound is attained (up to its rounding up of the subtracted term)
    k = kept_count(mech, clf, [x], [0], seed=5)
    assert cp_lower(k, N) <= u.rho + 1e-8 and u.rho <= cp_upper(k, N)
    assert u.rho_mechanism * (1 - tau) > cp_upper(k, N) > truth  # the paper's (1 - tau) alone overstates P(kept)
    e = empirical_rho(mech, clf, ([a], [b]), point=[x], omega=omega, tau=tau, n=N, sampler=5,
                      confidence=1 - 2 * FALSE_ALARM)
    assert e.consistent and e.rho == u.rho


def test_laplace_two_features_bound_holds_with_margin():
    """Clipped Laplace at eps = 3 on two perturbed features (a third fixed), B = (0.5, 0.5 + s]^2 next to x.

    s^2 = tau * 0.36 (fraction tau of the box). The Laplace density falls off away from x, so the
    bound has slack: the *lower* confidence bound of the kept rate is above it (false alarm 1e-6).
    """
    tau = 0.05
    s = math.sqrt(tau * 0.36)
    x = np.array([0.5, 0.5, 0.3])
    lo, hi = np.array([0.2, 0.2, 0.3]), np.array([0.8, 0.8, 0.3])

    def clf(X):
        inside = np.all((X >= lo) & (X <= hi), axis=1)
        bad = (X[:, 0] > 0.5) & (X[:, 0] <= 0.5 + s) & (X[:, 1] > 0.5) & (X[:, 1] <= 0.5 + s)
        return (~inside | bad).astype(int)

    lap = make_mechanism("laplace", 3.0, clip=True)
    u = utility(lap, (lo, hi), point=x, features=[0, 1], omega=0.01, tau=tau)
    m = 1 - math.exp(-0.9)  # P(|Lap(1/3)| <= 0.3)
    assert u.rho_mechanism == pytest.approx(m * m, rel=1e-12)
    assert u.rho == pytest.approx(m * m - tau * 0.36 * 1.5**2, rel=1e-8)  # pmax = eps / 2 per feature
    truth = m * m - (0.5 * -math.expm1(-3 * s)) ** 2
    k = kept_count(lap, clf, x, [0, 1], seed=9)
    assert cp_lower(k, N, 2 * FALSE_ALARM) <= truth <= cp_upper(k, N, 2 * FALSE_ALARM)  # the test's own sanity
    assert cp_lower(k, N) >= u.rho


def test_atom_at_the_clipping_edge_gets_no_credit():
    """Clipped Laplace at x = 0.1, box [0, 0.6]: B = {0}, the clipping atom (uniform measure 0, so any
    tau holds). The old factor counts the atom (0.45 of the mass); the bound does not. False alarm 2e-6."""
    x, a, b = 0.1, 0.0, 0.6
    clf = lambda X: ((X[:, 0] == 0.0) | (X[:, 0] > b)).astype(int)  # noqa: E731
    lap = make_mechanism("laplace", 1.0, clip=True)
    assert float(lap.max_density(a, b, x)) == math.inf
    u = utility(lap, ([a], [b]), point=[x], omega=0.01, tau=0.01)
    atom = 0.5 * math.exp(-0.1)
    assert u.sampled_box["continuous_mass"] == pytest.approx(u.rho_mechanism - atom, rel=1e-12)
    assert u.sampled_box["atom_at_point"] == 0.0
    k = kept_count(lap, clf, [x], [0], seed=3)
    old = 0.99 * 0.99 * u.rho_mechanism
    assert old > cp_upper(k, N) and u.rho <= cp_upper(k, N)


def test_grid_mechanism_only_the_point_counts():
    """k-RR: every output is a grid point (uniform measure 0). B = the grid points of the box other than x:
    P(kept) = P(M(x) = x), which is exactly the bound. False alarm 2 x 1e-6 (+ 1e-6 for the old factor)."""
    x, a, b = 0.5, 0.2, 0.8
    krr = make_mechanism("krr", 3.0)
    grid = krr.grid

    def clf(X):
        t = X[:, 0]
        on_grid = np.isin(t, grid)
        return (((t >= a) & (t <= b) & on_grid & (t != 0.5)) | (t < a) | (t > b)).astype(int)

    u = utility(krr, ([a], [b]), point=[x], omega=0.05, tau=0.05)
    stay = math.exp(3) / (100 + math.exp(3))
    assert u.rho == pytest.approx(stay, rel=1e-12) and u.sampled_box["continuous_mass"] == 0.0
    assert any("grid" in n for n in u.notes)
    k = kept_count(krr, clf, [x], [0], seed=4)
    assert cp_lower(k, N) <= u.rho <= cp_upper(k, N)
    assert 0.95 * 0.95 * u.rho_mechanism > cp_upper(k, N)


def test_box_wide_on_an_unperturbed_feature_gives_no_credit():
    """The sampled box spreads feature 1, the mechanism only perturbs feature 0: the records lie on the
    slice t1 = x1, of uniform measure 0, which may be all bad (here it is, except x itself)."""
    x = np.array([0.5, 0.3])
    lo, hi = np.array([0.2, 0.0]), np.array([0.8, 1.0])
    clf = lambda X: ((X[:, 1] == 0.3) & (X[:, 0] != 0.5)).astype(int)  # noqa: E731
    pm = make_mechanism("pm", 1.0)
    u = utility(pm, (lo, hi), point=x, features=[0], omega=0.05, tau=0.05)
    assert u.rho == 0.0 and u.sampled_box["spread_unperturbed"] == [1] and any("slice" in n for n in u.notes)
    k = kept_count(pm, clf, x, [0], n=20_000, seed=2)
    assert k == 0  # the bound over the perturbed features alone (0.71) would be violated
    assert utility(pm, (lo, hi), point=x, features=[0, 1], omega=0.05, tau=0.05).rho > 0


def test_record_indicator_and_per_feature_indicator():
    pm = make_mechanism("pm", 1.0)
    box = ([0.2], [0.8])
    base = utility(pm, box, point=[0.5], omega=0.05, tau=0.05).rho
    assert utility(pm, box, point=[0.5], omega=0.05, tau=0.05, indicator=0.1).rho == pytest.approx(0.1 + 0.9 * base)
    # per-feature indicator: atom delta at x (credited: x keeps its class), atomless part (1 - delta) PM
    ind = PrivacyIndicator(pm, 0.1)
    u = utility(ind, box, point=[0.5], omega=0.05, tau=0.05)
    c = 0.9 * float(pm.mass(0.2, 0.8, 0.5))
    assert u.rho == pytest.approx(c - 0.05 * 0.6 * 0.9 * math.exp(0.5) + 0.1, rel=1e-8)
    assert float(ind.max_density(0.2, 0.8, 0.5)) == math.inf  # the raw value is an atom at x
    assert float(ind.max_density(0.6, 0.8, 0.5)) == pytest.approx(0.9 * math.exp(0.5), rel=1e-8)


# ----------------------------------------------------------------------------- pmax against the densities
def _specs():
    return [
        ("laplace", {}, (0.0, 1.0)), ("laplace", {"clip": True}, (-1.0, 2.0)),
        ("gaussian", {"delta": 1e-5}, (0.0, 1.0)), ("gaussian", {"delta": 1e-3, "calibration": "pac", "clip": True},
                                                     (-1.0, 2.0)),
        ("pm", {}, (0.0, 1.0)), ("pm", {}, (-1.0, 2.0)), ("sw", {}, (0.0, 1.0)), ("sw", {}, (-1.0, 2.0)),
        ("pm", {"indicator": 0.2}, (0.0, 1.0)),
    ]


def _oracle_density(mech, name, t01, x01, eps):
    """Density (per unit of the feature) of the atomless part at t, from the oracles (mp values)."""
    w = mp.mpf(mech.width)
    scale = 1 - mp.mpf(mech.delta) if isinstance(mech, PrivacyIndicator) else 1
    if name == "laplace":
        return orc.laplace_density(t01 - x01, 1 / mp.mpf(eps)) / w
    if name == "gaussian":
        return orc.gaussian_density(t01 - x01, mp.mpf(mech.sigma01)) / w
    dens = orc.pm_density if name == "pm" else orc.sw_density
    return scale * dens(t01, x01, eps) / w


@pytest.mark.parametrize("name,kw,domain", _specs())
@pytest.mark.parametrize("eps", [0.3, 2.0, 20.0])
def test_max_density_against_a_fine_grid(name, kw, domain, eps):
    """sup of the density on [a, b] (rounded up) vs the oracle on 801 points plus the points where the sup
    may sit (x clipped into [a, b], the window's ends): never below, at most 1e-8 above."""
    mech = make_mechanism(name, eps, domain=domain, **kw)
    lo, w = domain[0], domain[1] - domain[0]
    rng = np.random.default_rng(17)
    cases = [(0.5, 0.3, 0.7), (0.02, 0.0, 0.4), (0.97, 0.5, 1.0), (0.3, 0.6, 0.9), (0.9, 0.05, 0.2)]
    cases += [tuple([u] + sorted(rng.uniform(0, 1, 2))) for u in rng.uniform(0, 1, 3)]
    inner = name if "indicator" not in kw else "pm"
    for x01, a01, b01 in cases:
        x, a, b = lo + w * x01, lo + w * a01, lo + w * b01
        got = float(mech.continuous_max_density(a, b, x))
        ma, mb = mp.mpf(a01), mp.mpf(b01)
        pts = [ma + (mb - ma) * j / 800 for j in range(801)] + [min(max(mp.mpf(x01), ma), mb)]
        if inner in ("pm", "sw"):
            brk = (orc.pm_breaks if inner == "pm" else orc.sw_breaks)(x01, eps)
            pts += [min(max(v, ma), mb) for v in brk]
        want = max(_oracle_density(mech, inner, t, mp.mpf(x01), eps) for t in pts)
        assert float(want) <= got <= float(want) * (1 + 1e-8), (x01, a01, b01, got, float(want))
        has_atom = (kw.get("clip") and (a01 == 0 or b01 == 1)) or ("indicator" in kw and a01 <= x01 <= b01)
        assert (float(mech.max_density(a, b, x)) == math.inf) == bool(has_atom), (x01, a01, b01)


@pytest.mark.parametrize("name,kw,domain", _specs())
def test_continuous_mass_against_the_oracles(name, kw, domain):
    eps = 1.5
    mech = make_mechanism(name, eps, domain=domain, **kw)
    lo, w = domain[0], domain[1] - domain[0]
    inner = name if "indicator" not in kw else "pm"
    for x01, a01, b01 in [(0.5, 0.3, 0.7), (0.02, 0.0, 0.4), (0.97, 0.5, 1.0), (0.3, 0.0, 1.0)]:
        x, a, b = lo + w * x01, lo + w * a01, lo + w * b01
        if inner == "laplace":
            want = orc.laplace_cdf(b01 - x01, 1 / mp.mpf(eps)) - orc.laplace_cdf(a01 - x01, 1 / mp.mpf(eps))
        elif inner == "gaussian":
            s = mp.mpf(mech.sigma01)
            want = orc.gaussian_cdf(b01 - x01, s) - orc.gaussian_cdf(a01 - x01, s)
        else:
            dens, brk = (orc.pm_density, orc.pm_breaks) if inner == "pm" else (orc.sw_density, orc.sw_breaks)
            want = orc.interval_mass(dens, brk, a01, b01, x01, eps) * (1 - mp.mpf(kw.get("indicator", 0)))
        assert float(mech.continuous_mass(a, b, x)) == pytest.approx(float(want), abs=1e-13), (x01, a01, b01)


@pytest.mark.parametrize("name", ["krr", "exponential"])
def test_grid_mechanisms_have_no_density(name):
    mech = make_mechanism(name, 2.0, k=11)
    assert float(mech.max_density(0.2, 0.8, 0.5)) == math.inf
    assert float(mech.max_density(0.21, 0.29, 0.5)) == 0.0  # no grid point inside
    assert float(mech.continuous_mass(0.2, 0.8, 0.5)) == 0.0 == float(mech.continuous_max_density(0.2, 0.8, 0.5))
    pmf = orc.krr_pmf(5, 2.0, 11) if name == "krr" else orc.exponential_pmf(0.5, 2.0, 11)
    assert float(mech.mass(0.5, 0.5, 0.5)) == pytest.approx(float(pmf[5]), rel=1e-12)


# ----------------------------------------------------------------------------- invariants
_MECHS = [("laplace", {"clip": True}), ("laplace", {}), ("gaussian", {"delta": 1e-4}), ("pm", {}), ("sw", {}),
          ("krr", {}), ("exponential", {}), ("pm", {"indicator": 0.05})]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.sampled_from(_MECHS), st.floats(0.05, 30), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1),
       st.floats(0, 0.5))
def test_bound_invariants(spec, eps, u, v, x, tau):
    name, kw = spec
    mech = make_mechanism(name, eps, **kw)
    a, b = min(u, v, x), max(u, v, x)
    box = ([a], [b])
    r_box = rho(mech, box, point=[x])
    r = rho(mech, box, point=[x], omega=0.05, tau=tau)
    assert 0 <= r <= r_box
    assert rho(mech, box, point=[x], omega=0.05, tau=min(tau + 0.1, 0.99)) <= r  # non-increasing in tau
    if name in ("pm", "sw") or (name in ("laplace", "gaussian") and not kw.get("clip")):
        # no atoms: tau = 0 gives back the box's mass
        assert rho(mech, box, point=[x], omega=0.05, tau=0.0) == pytest.approx(r_box, rel=1e-12, abs=1e-15)
    # the epsilon search's upper bound covers the bound at every epsilon of the interval
    prob = _Problem(mech, box, point=[x], omega=0.05, tau=tau)
    e1, e2 = eps, eps * 1.7
    up = prob.rho_upper(e1, e2)
    for e in np.linspace(e1, e2, 7):
        assert float(prob.rho(e)) <= up + 1e-12


def test_rho_batch_with_tau_matches_single_evaluations():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (20, 3))
    lo = np.clip(x - rng.uniform(0, 0.4, x.shape), 0, 1)
    hi = np.clip(x + rng.uniform(0, 0.4, x.shape), 0, 1)
    lo[:5, 2] = hi[:5, 2] = x[:5, 2]  # some rows not spread on the unperturbed feature
    eps = [0.5, 2.0, 8.0]
    for name in ("pm", "laplace", "krr"):
        mech = make_mechanism(name, 1.0, **({"clip": True} if name == "laplace" else {}))
        out = rho_batch(mech, eps, x, lo, hi, features=[0, 1], tau=0.05)
        for i in range(20):
            for j, e in enumerate(eps):
                single = rho(mech, (lo[i], hi[i]), point=x[i], features=[0, 1], omega=0.05, tau=0.05, epsilon=e)
                assert out[j, i] == pytest.approx(single, rel=1e-12, abs=1e-15)
    with pytest.raises(BadInput, match="not a lower bound"):
        rho_batch(make_mechanism("pm", 1.0), [1.0], x, lo, hi, factor=0.9)


def test_smallest_epsilon_on_a_sampled_box():
    pm = make_mechanism("pm", 1.0)
    box = ([0.2], [0.8])
    s = smallest_epsilon(pm, box, 0.7, point=[0.5], omega=0.05, tau=0.05)
    assert s.reachable and s.rho >= 0.7 and any("confidence 0.95" in n for n in s.notes)
    grid = np.linspace(1e-9, s.epsilon - 2e-9, 3000)
    assert np.all(rho(pm, box, point=[0.5], omega=0.05, tau=0.05, epsilon=grid) < 0.7)
    # the bound rises, then falls back to 0 as PM's density near x outgrows tau's reach
    assert rho(pm, box, point=[0.5], omega=0.05, tau=0.05, epsilon=20.0) == 0.0
    assert not smallest_epsilon(pm, box, 0.8, point=[0.5], omega=0.05, tau=0.05).reachable


def test_probabilistic_box_stops_at_the_point_when_retests_would_exceed_omega(monkeypatch):
    """The union bound over the tests of the search: with 1 sample per test and tau = 0.5 a bad box passes a
    test with probability up to exp(-2 (tau/2)^2) = 0.88 > omega, so no box wider than the point {x} may be
    reported."""
    from certify.robustness import probabilistic

    monkeypatch.setattr(probabilistic, "hoeffding_samples", lambda omega, tau, tests=1: 1)
    clf = lambda X: (np.abs(X[:, 0] - 0.5) > 1e-3).astype(int)  # noqa: E731
    p = probabilistic_box(clf, [0.5], omega=0.1, tau=0.5, seed=0)
    assert p.box.lo[0] == p.box.hi[0] == 0.5


def test_cli_reports_confidence_tau_and_subtracted_term(cli):
    r = cli("utility", "pm", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8", "--omega", "0.05", "--tau",
            "0.05", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["confidence"] == 0.95 and d["omega"] == 0.05 and d["tau"] == 0.05
    assert d["subtracted"] == pytest.approx(0.05 * 0.6 * math.exp(0.5), rel=1e-8)
    assert d["rho"] == pytest.approx(d["rho_mechanism"] - d["subtracted"], rel=1e-12)
    assert "confidence 1 - omega = 0.95" in d["statement"] and "probabilistic_factor" not in d
    text = cli("utility", "pm", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8", "--omega", "0.05", "--tau",
               "0.05")
    assert text.code == 0 and "lower bound of P(class kept) holding with confidence 0.95" in text.out
    cert = cli("utility", "pm", "--epsilon", "1", "--point", "0.5", "--box", "0.2:0.8", "--json").json()
    assert cert["omega"] is None and cert["subtracted"] is None and "not verified" in cert["statement"]
