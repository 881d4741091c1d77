"""rho(eps, box), its PAC variants, epsilon selection and the mechanism comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from certify.certificate import Certificate, Status
from certify.errors import BadInput
from certify.ldp import (PiecewiseMechanism, compare_mechanisms, make_mechanism, rho, rho_batch, smallest_epsilon,
                         utility)
from models.box import Box

FALSE_ALARM = 1e-3  # per statistical test (fixed seeds)


def test_paper_examples_exact_values():
    lap = make_mechanism("laplace", 2.0)
    assert rho(lap, ([0.2], [0.8]), point=[0.5]) == pytest.approx(1 - math.exp(-0.6), abs=1e-15)  # 0.4512, "0.46"
    s = smallest_epsilon(lap, ([0.2], [0.8]), 0.8, point=[0.5])
    assert abs(s.epsilon - math.log(5) / 0.3) <= 1e-9  # 5.3648, not the paper's 5.2
    # PM at theta = 0.3 (window inside the box): rho = u/(u+1) + (0.6 - 1/(u+1))/u, u = e^{eps/2}; = 0.8 at u = 2
    s = smallest_epsilon(make_mechanism("pm", 1.0), ([0.2], [0.8]), 0.8, point=[0.5])
    assert abs(s.epsilon - math.log(4)) <= 1e-9  # 1.386, not the paper's 1.8
    u = math.e
    assert rho(make_mechanism("pm", 2.0), ([0.2], [0.8]), point=[0.5]) == pytest.approx(u / (u + 1) + (0.6 - 1 / (u + 1)) / u)
    # k-RR, 101 points: 61 grid points in [0.2, 0.8]
    assert rho(make_mechanism("krr", 2.0), ([0.2], [0.8]), point=[0.5]) == pytest.approx((math.e**2 + 60) / (100 + math.e**2))


@pytest.mark.parametrize("name", ["laplace", "gaussian", "pm", "sw", "exponential", "krr"])
def test_rho_equals_monte_carlo_frequency(name):
    kw = {"delta": 1e-4} if name == "gaussian" else {}
    mech = make_mechanism(name, 2.5, domain=(-1, 2), **kw)
    x = np.array([0.1, 1.3, 0.5])
    lo, hi = np.array([-0.7, 0.8, -1.0]), np.array([0.6, 2.0, 2.0])
    r = rho(mech, (lo, hi), point=x, features=[0, 1])
    n = 20000
    rng = np.random.default_rng(42)
    inside = np.ones(n, dtype=bool)
    for f in (0, 1):
        s = mech.sample(x[f], n, sampler=rng)
        inside &= (s >= lo[f]) & (s <= hi[f])
    ci = stats.binomtest(int(inside.sum()), n).proportion_ci(1 - FALSE_ALARM, method="exact")
    assert ci.low <= r <= ci.high, (r, ci)


def test_pac_variants_and_record_guarantees():
    pm = make_mechanism("pm", 1.5)
    box = ([0.3, 0.0, 0.2], [0.9, 1.0, 0.7])
    x = [0.5, 0.5, 0.4]
    m = [float(pm.mass(a, b, v)) for a, b, v in zip(*box, x)]
    base = utility(pm, box, point=x, features=[0, 2])
    assert base.rho == pytest.approx(m[0] * m[2]) and base.guarantee.epsilon == 3.0 and base.guarantee.delta == 0
    ind = utility(pm, box, point=x, features=[0, 2], indicator=0.1)
    assert ind.rho == pytest.approx(0.1 + 0.9 * m[0] * m[2])
    assert ind.guarantee.epsilon == 3.0 and ind.guarantee.delta == 0.1 and ind.guarantee.pac
    prob = utility(pm, box, point=x, omega=0.05, tau=0.01)
    # box found by sampling: minus tau * volume * prod sup density (PM: e^{eps/2} around x), omega not multiplied in
    sub = 0.01 * (0.6 * 1.0 * 0.5) * math.exp(1.5 / 2) ** 3
    # the subtracted term is rounded up (by 1e-9 relative per density): below the exact value, within 1e-8
    assert m[0] * m[1] * m[2] - sub - 1e-8 <= prob.rho <= m[0] * m[1] * m[2] - sub and "probabilistic" in prob.basis
    assert prob.omega == 0.05 and prob.tau == 0.01 and prob.subtracted == pytest.approx(sub, rel=1e-8)
    assert "confidence 1 - omega = 0.95" in prob.statement
    g = make_mechanism("gaussian", 1.5, delta=0.01, calibration="pac")
    gu = utility(g, box, point=x)
    assert gu.guarantee.epsilon == pytest.approx(4.5) and gu.guarantee.delta == pytest.approx(1 - 0.99**3, rel=1e-12)
    assert gu.guarantee.pac and gu.guarantee.delta >= 1 - 0.99**3
    ga = utility(make_mechanism("gaussian", 1.5, delta=0.01), box, point=x)  # analytic: basic composition
    assert not ga.guarantee.pac and ga.guarantee.delta == pytest.approx(0.03)


def test_box_from_a_certificate_plugs_in():
    box = Box.around([0.5, 0.4], [0.2, 0.1], domain=(0, 1))
    pm = make_mechanism("pm", 2.0)
    direct = rho(pm, (box.lo, box.hi), point=box.center)
    assert rho(pm, box) == direct
    cert = Certificate(0.1, 0.1, Status.OPTIMAL, True, box=box)
    u = utility(pm, cert)
    assert u.rho == direct and u.basis.startswith("certified box")
    prob = Certificate(0.1, 0.1, Status.PROBABILISTIC, False, box=box)
    with pytest.raises(BadInput, match="omega and tau"):
        utility(pm, prob)
    sub = 0.01 * (0.4 * 0.2) * math.e**2  # tau * volume * prod e^{eps/2}
    assert direct - sub - 1e-8 <= utility(pm, prob, omega=0.05, tau=0.01).rho <= direct - sub


@pytest.mark.parametrize("kwargs,fragment", [
    ({"box": ([0.6], [0.5])}, "lo > hi"), ({"box": ([0.1], [0.5]), "point": [0.7]}, "contain the point"),
    ({"box": ([-0.5], [0.5]), "point": [0.2]}, "leaves the mechanism's domain"),
    ({"box": ([0.1, 0.2], [0.5, 0.6]), "point": [0.2]}, "values but the box"),
    ({"box": ([0.1], [0.5]), "point": [0.2], "features": [3]}, "out of range"),
    ({"box": ([0.1], [0.5]), "point": [0.2], "omega": 1.0}, "omega"),
    ({"box": ([0.1], [0.5]), "point": [0.2], "epsilon": 0}, "epsilon"),
    ({"box": ([0.1], [0.5])}, "point"),
])
def test_bad_utility_inputs(kwargs, fragment):
    with pytest.raises(BadInput, match=f"(?i){fragment}"):
        rho(make_mechanism("pm", 1.0), **kwargs)


def test_rho_batch_matches_single_evaluations():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (50, 3))
    lo = np.clip(x - rng.uniform(0, 0.4, x.shape), 0, 1)
    hi = np.clip(x + rng.uniform(0, 0.4, x.shape), 0, 1)
    eps = np.array([0.5, 2.0, 6.0])
    for name in ("laplace", "pm", "sw", "exponential", "krr"):
        mech = make_mechanism(name, 1.0)
        out = rho_batch(mech, eps, x, lo, hi, features=[0, 2])
        assert out.shape == (3, 50)
        for i in (0, 17, 49):
            np.testing.assert_allclose(out[:, i], rho(mech, (lo[i], hi[i]), point=x[i], features=[0, 2], epsilon=eps),
                                       rtol=1e-13)


@pytest.mark.parametrize("name", ["laplace", "gaussian", "pm", "sw", "exponential", "krr"])
def test_smallest_epsilon_inverts_rho(name):
    kw = {"delta": 1e-5} if name == "gaussian" else {}
    mech = make_mechanism(name, 1.0, clip=True, **kw) if name in ("laplace", "gaussian") else make_mechanism(name, 1.0)
    box, x = ([0.15, 0.4], [0.7, 0.95]), [0.35, 0.6]
    for target in (0.3, 0.7, 0.95):
        s = smallest_epsilon(mech, box, target, point=x)
        assert s.reachable and s.rho >= target
        if s.epsilon == 1e-9:  # uniform-like limit already meets it (PM/SW: rho -> box volume as eps -> 0)
            assert s.notes and target <= 0.55 * 0.55 + 1e-6
            continue
        below = rho(mech, box, point=x, epsilon=s.epsilon - 2e-9)
        assert below < target
        # no smaller epsilon on a dense grid meets the target (rho need not be monotone)
        grid = np.linspace(1e-6, s.epsilon - 2e-9, 4000)
        assert np.all(rho(mech, box, point=x, epsilon=grid) < target)


def test_smallest_epsilon_with_non_monotone_rho():
    pm = make_mechanism("pm", 1.0)
    grid = np.linspace(1e-6, 3, 3001)
    r = rho(pm, ([0.1], [1.0]), point=[0.2], epsilon=grid)
    assert r[0] > 0.899 and r.min() < 0.847  # falls before it rises
    s = smallest_epsilon(pm, ([0.1], [1.0]), 0.86, point=[0.2])
    first = grid[np.argmax(r >= 0.86)]
    assert s.epsilon <= 1e-6 + 1e-9  # met at once
    s = smallest_epsilon(pm, ([0.1], [1.0]), 0.9, point=[0.2])
    assert s.rho >= 0.9 and np.all(rho(pm, ([0.1], [1.0]), point=[0.2], epsilon=np.linspace(1e-9, s.epsilon - 2e-9, 5000)) < 0.9)
    assert first < 1e-5


def test_unreachable_target():
    sw = make_mechanism("sw", 1.0)
    s = smallest_epsilon(sw, ([0.3], [0.7]), 0.9999, point=[0.5])
    assert not s.reachable and s.epsilon is None and s.rho_at_max < 0.9999


def test_compare_mechanisms_table():
    cmp = compare_mechanisms(([0.2], [0.8]), 2.0, point=[0.5], target=0.8)
    names = [r["mechanism"] for r in cmp.rows]
    assert names[0] == "pm" and set(names) == {"laplace", "pm", "sw", "exponential", "krr"}
    assert all(a["rho"] >= b["rho"] for a, b in zip(cmp.rows, cmp.rows[1:]))
    pm_row = cmp.rows[0]
    assert abs(pm_row["epsilon_for_target"] - math.log(4)) <= 1e-9 and "pm" in str(cmp)
    with_delta = compare_mechanisms(([0.2], [0.8]), 2.0, point=[0.5], delta=1e-3)
    assert {r["record_delta"] for r in with_delta.rows} == {1e-3}
    assert "gaussian" in {r["mechanism"] for r in with_delta.rows}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["laplace", "pm", "sw", "exponential", "krr"]),
       pts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=3),
       e1=st.floats(0.05, 30), d=st.floats(0, 20))
def test_rho_invariants(name, pts, e1, d):
    x = np.array([p[0] for p in pts])
    lo = np.minimum(x, np.minimum([p[1] for p in pts], [p[2] for p in pts]))
    hi = np.maximum(x, np.maximum([p[1] for p in pts], [p[2] for p in pts]))
    mech = make_mechanism(name, 1.0)
    r1, r2 = rho(mech, (lo, hi), point=x, epsilon=[e1, e1 + d])
    assert 0 <= r1 <= 1 and 0 <= r2 <= 1
    # a larger box (containment) never has a smaller rho
    assert rho(mech, (np.maximum(lo - 0.1, 0), np.minimum(hi + 0.1, 1)), point=x, epsilon=e1) >= r1 - 1e-14
    if name == "laplace":  # monotone in eps for boxes containing x
        assert r2 >= r1 - 1e-14


def test_per_feature_mechanisms():
    mechs = [make_mechanism("pm", 1.0), make_mechanism("laplace", 2.0, domain=(0, 10), clip=True)]
    u = utility(mechs, ([0.2, 3.0], [0.6, 8.0]), point=[0.4, 5.0])
    assert u.rho == pytest.approx(float(mechs[0].mass(0.2, 0.6, 0.4)) * float(mechs[1].mass(3, 8, 5)))
    assert u.guarantee.epsilon == 3.0 and u.epsilon == [1.0, 2.0]
    assert isinstance(PiecewiseMechanism(1.0).guarantee.epsilon, float)
