"""Extended PTR (issue 13): the test's arithmetic, the soundness of every bisection decision, the
properties of phi the privacy proof needs, Monte-Carlo release rates, the release noise and the
guarantee. Oracles are independent of certify: mpmath tails, activation-region enumeration
(`tests.lipschitz_oracles`), an analytic 1-D net, scipy's exact binomial intervals."""

from __future__ import annotations

import math
import random

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from certify.errors import BadInput
from certify.privacy import compose
from certify.privacy.sampling import NumpySampler, SecureSampler
from certify.ptr import StabilitySearch, TestGrid, ptr
from certify.ptr.decide import ACCEPT, REJECT, UNDECIDED
from certify.ptr.mechanism import release
from models.ir import sequential
from models.zoo import random_relu_net
from tests.lipschitz_oracles import exact_lipschitz, random_weights

FALSE_ALARM = 1e-6  # per Monte-Carlo check (two-sided exact binomial interval)


def _tail(k: int, epsilon: float, steps: int) -> mpmath.mpf:
    """Pr[Z >= k] for Pr[Z = z] proportional to exp(-|z| eps / m), summed term by term in mpmath."""
    with mpmath.workdps(50):
        q = mpmath.exp(-mpmath.mpf(epsilon) / steps)
        norm = (1 - q) / (1 + q)
        negative = mpmath.fsum(q ** (-z) for z in range(k, 0))  # the finite part z = k..-1 when k < 0
        return norm * (negative + mpmath.nsum(lambda z: q ** z, [max(k, 0), mpmath.inf]))


# ------------------------------------------------------------------------------------------ grid
@settings(max_examples=40)
@given(eps=st.floats(0.05, 10), delta=st.floats(1e-12, 0.9), steps=st.integers(1, 64))
def test_threshold_is_the_smallest_with_tail_at_most_half_delta(eps, delta, steps):
    g = TestGrid.make(1.0, eps, delta, tolerance=1.0 / steps)
    assert g.steps in (steps, steps + 1)  # h = R / m <= tolerance (1 / steps is rounded in float64)
    steps = g.steps
    z0 = g.threshold_units
    assert _tail(z0, eps, steps) <= delta / 2
    assert z0 == 1 or _tail(z0 - 1, eps, steps) > delta / 2
    # within a grid step of the paper's threshold R ln(1/delta) / eps (in grid units)
    assert abs(z0 - steps * math.log(1 / delta) / eps) <= 1 + steps * math.log(2) / eps


@pytest.mark.parametrize("k", [-1, 0, 5, 93, 150, 186])
def test_release_probability_matches_the_tail_sum(k):
    g = TestGrid.make(0.5, 1.0, 1e-5)
    exact = _tail(g.threshold_units - max(k, 0), 1.0, g.steps)
    assert math.isclose(g.release_probability(k), float(exact), rel_tol=1e-12)
    assert g.release_probability(0) <= 1e-5 / 2
    assert g.release_probability(g.max_index) >= 1 - 1e-5 / 2 - 1e-9


def test_grid_radii_are_rounded_up_and_cover_the_range():
    g = TestGrid.make(0.1, 1.0, 1e-3, tolerance=0.03)
    assert g.steps == 4 and float(g.step) == 0.025
    from fractions import Fraction

    for k in (0, 1, 7, g.max_index):
        assert Fraction(g.radius_at(k)) >= Fraction(0.1) + k * Fraction(0.1) / 4
    g2 = TestGrid.make(0.1, 1.0, 1e-3, max_radius=0.5)
    assert g2.radius_at(g2.max_index) <= 0.5 + 1e-15 and g2.radius_at(g2.max_index + 1) > 0.5


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(radius=0.0), "radius"), (dict(radius=-1.0), "radius"), (dict(epsilon=0.0), "epsilon"),
    (dict(epsilon=-1.0), "epsilon"), (dict(delta=0.0), "delta"), (dict(delta=1.0), "delta"),
    (dict(delta=1.5), "delta"), (dict(delta=-0.1), "delta"), (dict(proposal=0.0), "proposal"),
    (dict(proposal=-2.0), "proposal"), (dict(proposal=math.inf), "proposal"), (dict(epsilon=math.nan), "epsilon"),
])
def test_bad_parameters_are_refused(kwargs, fragment):
    net = random_relu_net((2, 4, 2), seed=0)
    args = dict(radius=0.1, epsilon=1.0, delta=1e-5, proposal=1.0) | kwargs
    radius = args.pop("radius")
    with pytest.raises(BadInput, match=fragment):
        ptr(net, [0.1, 0.2], radius, **args)


# ------------------------------------------------------------------------------ soundness of steps
@pytest.mark.parametrize("seed", range(4))
def test_every_decision_agrees_with_region_enumeration(seed):
    weights = random_weights((2, 8, 8, 2), seed)
    net = sequential(weights)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, 2)
    g = TestGrid.make(0.1, 1.0, 1e-3, max_radius=1.0)
    search = StabilitySearch(net, x, g, step_time_limit=20)
    checked = 0
    for k in (0, 3, 9, g.max_index):
        box = search.box(k)
        exact = exact_lipschitz(weights, box.lo, box.hi, "linf", "l1")
        for proposal in (0.5 * exact, 0.97 * exact, 1.03 * exact, 2 * exact):
            s = search.decide(k, proposal)
            assert s.decision != UNDECIDED, s
            assert (s.decision == ACCEPT) == (exact <= proposal), (k, proposal, exact, s)
            if s.upper is not None:
                assert s.upper >= exact * (1 - 1e-9)
            if s.lower is not None:
                assert s.lower <= exact * (1 + 1e-9)
            checked += 1
    assert checked == 16


def test_milp_stage_decides_like_the_oracle():
    """The MILP decision alone (splitting switched off, as for inputs beyond 16 dimensions)."""
    from certify.ptr.decide import milp_decide
    from certify.ptr.search import outward_box
    from solvers.runtime import Budget

    weights = random_weights((3, 6, 6, 2), 7)
    net = sequential(weights)
    box = outward_box(np.array([0.2, -0.1, 0.3]), 0.4, None)
    exact = exact_lipschitz(weights, box.lo, box.hi, "linf", "l1")
    for proposal, want in ((0.8 * exact, REJECT), (1.25 * exact, ACCEPT)):
        d = milp_decide(net, box, "linf", "l1", proposal, Budget(30))
        assert d.decision == want, (proposal, exact, d)
        assert d.lower <= exact * (1 + 1e-9) and d.upper >= exact * (1 - 1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_bab_stage_decides_like_the_oracle(seed):
    """The Lipschitz branch-and-bound decision alone, near the constant and far from it."""
    from certify.ptr.decide import bab_decide
    from certify.ptr.search import outward_box
    from solvers.runtime import Budget

    weights = random_weights((3, 6, 6, 2), 20 + seed)
    net = sequential(weights)
    box = outward_box(np.random.default_rng(seed).uniform(-0.5, 0.5, 3), 0.4, None)
    exact = exact_lipschitz(weights, box.lo, box.hi, "linf", "l1")
    for proposal, want in ((0.5 * exact, REJECT), (0.97 * exact, REJECT), (1.03 * exact, ACCEPT),
                           (2 * exact, ACCEPT)):
        d = bab_decide(net, box, "linf", "l1", proposal, Budget(30))
        assert d.decision == want, (proposal, exact, d)
        assert d.lower <= exact * (1 + 1e-9) and d.upper >= exact * (1 - 1e-9)
        assert (d.upper <= proposal) if want == ACCEPT else (d.lower > proposal)
        if want == REJECT and d.notes:  # the tree ran: it stopped at the first witness above D_p
            assert d.notes[0].endswith("(above)"), d.notes


# ---------------------------------------------------------------------------------- phi properties
def _index(net, x, grid, proposal) -> int:
    found = StabilitySearch(net, x, grid, step_time_limit=20).search(proposal)
    assert found.decided
    return found.index


def test_phi_is_monotone_in_the_proposal():
    net = random_relu_net((2, 8, 8, 2), seed=3)
    g = TestGrid.make(0.1, 1.0, 1e-3)
    for x in np.random.default_rng(0).uniform(-1, 1, (3, 2)):
        shared = StabilitySearch(net, x, g, step_time_limit=20)
        ks = [_index(net, x, g, d) for d in (0.5, 1.0, 1.5, 2.0, 3.0, 6.0)]
        assert ks == sorted(ks), ks
        assert [shared.search(d).index for d in (6.0, 3.0, 2.0, 1.5, 1.0, 0.5)] == ks[::-1]  # caches change nothing


def test_phi_is_1_lipschitz_in_the_point():
    """|k(x) - k(x')| <= m exactly for neighbours (d <= R), and |phi - phi'| <= d + h for any pair."""
    net = random_relu_net((2, 8, 8, 2), seed=5)
    g = TestGrid.make(0.1, 1.0, 1e-3)
    rng = np.random.default_rng(1)
    proposal = 1.6
    for _ in range(6):
        x = rng.uniform(-1, 1, 2)
        for scale in (0.1, 0.05, 0.3):
            xp = x + rng.uniform(-scale, scale, 2)
            d = float(np.max(np.abs(x - xp)))
            k, kp = _index(net, x, g, proposal), _index(net, xp, g, proposal)
            assert abs(g.phi(k) - g.phi(kp)) <= d + float(g.step) + 1e-12
            if d <= g.radius:
                assert abs(max(k, 0) - max(kp, 0)) <= g.steps


def test_phi_never_exceeds_the_distance_to_instability_unlike_the_papers_half():
    """f(x) = 10 relu(x - 1), D_p = 1, R = 0.5: x' is unstable iff its R-box reaches past 1, so the
    distance to instability is gamma(x) = max(0, 1 - R - x). Our phi stays below it; the paper's
    R*/2 (R* = 1 - x) exceeds it for every x in (0, 0.5): the erratum of docs/ptr.md."""
    net = sequential([(np.array([[1.0]]), np.array([-1.0])), (np.array([[10.0]]), np.array([0.0]))])
    R = 0.5
    g = TestGrid.make(R, 1.0, 1e-3)
    for x in np.linspace(-1.5, 0.75, 10) + 0.0137:  # off the grid: a box edge exactly at the kink is a sliver
        gamma = max(0.0, 1 - R - x)
        phi = g.phi(_index(net, np.array([x]), g, 1.0))
        assert phi <= gamma + 1e-12
        assert phi >= gamma - float(g.step) - 1e-12 or gamma == 0  # and within a grid step of it
        if 0 < x < 0.5:
            assert (1 - x) / 2 > gamma  # the paper's phi


# ------------------------------------------------------------------------ Monte Carlo and noise
def _found(net, x, grid, proposal):
    return StabilitySearch(net, x, grid, step_time_limit=20).search(proposal)


@pytest.mark.parametrize("make_sampler", [lambda: NumpySampler(11), lambda: SecureSampler(random.Random(12))],
                         ids=["numpy", "exact"])
def test_release_rate_with_a_failing_proposal_is_about_half_delta(make_sampler):
    net = random_relu_net((2, 8, 8, 2), seed=0)
    x = np.array([0.2, -0.3])
    delta = 0.2  # large, so that delta / 2 is measurable
    g = TestGrid.make(0.1, 1.0, delta)
    found = _found(net, x, g, 1e-3)  # far below the constant at x
    assert found.index == -1
    sampler = make_sampler()
    n = 3000
    hits = sum(release(net, x, g, found, 1e-3, "linf", sampler).released for _ in range(n))
    ci = binomtest(hits, n).proportion_ci(1 - FALSE_ALARM, method="exact")
    q = math.exp(-1.0 / g.steps)
    # exact rate: q^z0 / (1 + q), in (q delta / 2, delta / 2]; the paper's continuous test gives delta / 2
    assert ci.low <= g.release_probability(0) <= ci.high
    assert q * delta / 2 < g.release_probability(0) <= delta / 2
    assert ci.low <= delta / 2 and ci.high >= q * delta / 2


def test_release_rate_with_an_ample_proposal_is_close_to_one():
    net = random_relu_net((2, 8, 8, 2), seed=0)
    x = np.array([0.2, -0.3])
    g = TestGrid.make(0.1, 1.0, 0.2)
    found = _found(net, x, g, 1e3)
    assert found.index == g.max_index
    sampler = NumpySampler(5)
    n = 2000
    hits = sum(release(net, x, g, found, 1e3, "linf", sampler).released for _ in range(n))
    assert binomtest(hits, n).proportion_ci(1 - FALSE_ALARM, method="exact").high >= 1 - 0.2 / 2
    assert hits >= 0.85 * n


def test_noise_scale_never_depends_on_the_points_own_constant():
    net = random_relu_net((2, 8, 8, 2), seed=2)
    g = TestGrid.make(0.1, 1.0, 0.2)
    xs = np.random.default_rng(3).uniform(-2, 2, (6, 2))
    from certify import local_lipschitz

    constants = [local_lipschitz(net, x, 0.1).upper for x in xs]
    proposal = float(np.median(constants))  # some points pass at R, some fail
    founds = [_found(net, x, g, proposal) for x in xs]
    assert len({f.index for f in founds}) > 1  # the points differ in their local constants
    for sampler, scale in ((NumpySampler(1), proposal * 0.1), (SecureSampler(random.Random(2)), proposal * 0.1 * (1 + 2**-10))):
        scales = {release(net, x, g, f, proposal, "linf", sampler).noise_scale for x, f in zip(xs, founds)}
        assert len(scales) == 1 and math.isclose(scales.pop(), scale, rel_tol=1e-12)
    # the released noise has that scale (Laplace: std = sqrt(2) b), whichever point
    found = _found(net, xs[0], g, 1e3)
    outs = [release(net, xs[0], g, found, 1e3, "linf", NumpySampler(s)).output for s in range(3000)]
    outs = np.array([o for o in outs if o is not None]) - net.forward(xs[0])
    b = 1e3 * 0.1 / 1.0
    assert abs(np.std(outs) / (math.sqrt(2) * b) - 1) < 0.1


def test_seeded_runs_are_reproducible_and_labelled():
    net = random_relu_net((2, 8, 8, 2), seed=0)
    a = ptr(net, [0.1, 0.2], 0.1, epsilon=1.0, delta=0.2, proposal=50.0, sampler=7)
    b = ptr(net, [0.1, 0.2], 0.1, epsilon=1.0, delta=0.2, proposal=50.0, sampler=7)
    assert a.released == b.released and a.phi_noisy == b.phi_noisy
    assert (a.output is None and b.output is None) or np.array_equal(a.output, b.output)
    assert "NOT secure" in a.sampler
    assert ptr(net, [0.1, 0.2], 0.1, epsilon=1.0, delta=0.2, proposal=50.0).sampler == "secure"


def test_guarantee_is_two_eps_half_delta_and_composes():
    net = random_relu_net((2, 8, 8, 2), seed=0)
    r = ptr(net, [0.1, 0.2], 0.1, epsilon=0.7, delta=1e-4, proposal=2.0, sampler=1)
    g = r.guarantee
    assert (g.epsilon, g.delta, g.alpha, g.metric) == (1.4, 5e-5, 0.1, "linf")
    twice = compose(g, g)
    assert (twice.epsilon, twice.delta) == (2.8, 1e-4)
    d = r.to_dict()
    assert d["guarantee"]["radius"] == 0.1 and d["kind"] == "ptr"
    for key in ("released", "output", "phi", "phi_noisy", "threshold", "noise_scale", "r_star", "steps"):
        assert key in d
    assert d["phi_noisy"] >= d["threshold"] if d["released"] else d["phi_noisy"] < d["threshold"]


def test_undecided_steps_count_as_violations_and_are_flagged():
    """No MILP, no splitting and a proposal between the sampled and the interval bound: undecided."""
    net = random_relu_net((20, 16, 16, 2), seed=0)  # 20 inputs: no input splitting
    x = np.zeros(20)
    g = TestGrid.make(0.5, 1.0, 0.2)
    search = StabilitySearch(net, x, g, use_milp=False)
    box = search.box(0)
    from certify.ptr.bounds import jacobian_upper, sampled_lower

    lower = max(v for _, v in sampled_lower(net, np.array(box.lo), np.array(box.hi), "linf", "l1", 16, 1))
    upper = jacobian_upper(net, np.array(box.lo), np.array(box.hi), "linf", "l1")
    assert lower < upper
    found = search.search(math.sqrt(lower * upper))
    assert not found.decided and found.index == -1
    r = release(net, x, g, found, math.sqrt(lower * upper), "linf", NumpySampler(0))
    assert not r.decided and r.status in ("open_gap", "time_limit") and r.notes


def test_shared_bounds_reuse_across_queries_and_refuse_other_networks():
    """With a domain the widest box of every query is the domain itself: the second query decides it
    from the first one's proof (method "cache"), with the same answer as a fresh search."""
    from certify.ptr import SharedBounds

    net = random_relu_net((2, 8, 8, 2), seed=6)
    g = TestGrid.make(0.2, 1.0, 1e-3)
    shared = SharedBounds(net)
    xs = np.random.default_rng(4).uniform(0, 1, (4, 2))
    for i, x in enumerate(xs):
        fresh = StabilitySearch(net, x, g, domain=(0, 1), step_time_limit=20).search(4.0)
        reused = StabilitySearch(net, x, g, domain=(0, 1), step_time_limit=20, shared=shared).search(4.0)
        assert fresh.decided and reused.decided and fresh.index == reused.index
        if i:
            assert reused.steps[0].method == "cache"
    assert len(shared) > 0
    with pytest.raises(BadInput, match="another network"):
        StabilitySearch(random_relu_net((2, 8, 8, 2), seed=7), xs[0], g, shared=shared)
    with pytest.raises(BadInput, match="another network"):
        StabilitySearch(net, xs[0], g, input_norm="l1", shared=shared)


def test_aligned_widest_box_serves_later_queries_without_a_domain():
    """Without a domain each query's widest box differs; in a stream the first query proves D_p on an
    aligned superset box, which the next queries' widest boxes fall into (method "cache"). Answers
    equal those of fresh searches, and the aligned box contains the query's box."""
    from certify.ptr import SharedBounds

    net = random_relu_net((2, 8, 8, 2), seed=6)
    g = TestGrid.make(0.2, 1.0, 1e-3)
    shared = SharedBounds(net)
    xs = np.random.default_rng(5).uniform(-0.5, 0.5, (4, 2))
    methods = []
    for x in xs:
        fresh = StabilitySearch(net, x, g, step_time_limit=20).search(8.0)
        stream = StabilitySearch(net, x, g, step_time_limit=20, shared=shared)
        wide = stream.aligned_box(g.max_index)
        box = stream.box(g.max_index)
        assert wide is not None and np.all(wide.lo <= box.lo) and np.all(wide.hi >= box.hi)
        reused = stream.search(8.0)
        assert fresh.decided and reused.decided and fresh.index == reused.index
        methods.append(reused.steps[0].method)
    assert methods[0] == "milp-aligned"
    assert methods[1:].count("cache") >= 2, methods
