"""local_lipschitz against independent oracles: activation-region enumeration, sampling, closed forms."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certify
from models.ir import sequential
from models.zoo import LIPMIP_SUITE, lipmip_suite_path
from tests.lipschitz_oracles import exact_lipschitz, jacobian, opnorm, random_weights, regions

NETS = {"a": ([2, 5, 5, 2], 0), "b": ([3, 4, 4, 3], 1), "c": ([4, 3, 3, 3, 2], 5)}
NORMS = ["linf", "l1", "l2"]


@lru_cache(maxsize=None)
def _case(name: str):
    sizes, seed = NETS[name]
    w = random_weights(sizes, seed)
    lo, hi = -np.ones(sizes[0]) * 0.8 + 0.1, np.ones(sizes[0]) * 0.8 + 0.1
    return w, sequential(w), lo, hi, regions(w, lo, hi)


def _oracle(name, p, q=None, target=None) -> float:
    w, _, lo, hi, regs = _case(name)
    best = 0.0
    for pattern in regs:
        J = jacobian(w, pattern)
        if target is not None:
            g = J.T @ target
            best = max(best, {"linf": np.abs(g).sum(), "l1": np.abs(g).max(), "l2": np.linalg.norm(g)}[p])
        else:
            best = max(best, opnorm(J, p, q))
    return float(best)


def _assert_exact(cert, value):
    assert cert.status == "optimal" and cert.exact, cert
    assert cert.lower == pytest.approx(value, rel=1e-6)
    assert cert.lower <= value * (1 + 1e-12) + 1e-12  # a replayed witness never overshoots
    assert value <= cert.upper <= value * (1 + 1e-5) + 1e-9


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("p", NORMS)
@pytest.mark.parametrize("q", NORMS)
def test_every_norm_pair_matches_region_enumeration(name, p, q):
    w, net, lo, hi, _ = _case(name)
    # the MILP and its proof (node bounds of fixed phases first, then the LP); the default method
    # closes these small nets by region enumeration first, auto's pick is tested in test_lipschitz_bab.py
    cert = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, output_norm=q, method="milp")
    _assert_exact(cert, _oracle(name, p, q))
    assert cert.method == ("miqp" if "l2" in (p, q) else "milp")
    auto = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, output_norm=q)
    _assert_exact(auto, _oracle(name, p, q))
    # the witness is a point of the box where the reported lower bound is attained
    assert np.all(cert.witness >= lo) and np.all(cert.witness <= hi)
    J = net.jacobian(cert.witness)
    assert opnorm(J, p, q) == pytest.approx(cert.lower, rel=1e-9)


@pytest.mark.parametrize("p", NORMS)
def test_margins_and_targets_match_region_enumeration(p):
    w, net, lo, hi, _ = _case("b")
    cert = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, margin=(2, 0), backend="highs" if p != "l2" else "auto")
    _assert_exact(cert, _oracle("b", p, target=np.array([-1.0, 0.0, 1.0])))
    c = np.array([0.3, -1.2, 0.7])
    cert = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, target=c)
    _assert_exact(cert, _oracle("b", p, target=c))


@pytest.mark.parametrize("backend", ["highs", "gurobi", "cbc"])
@pytest.mark.parametrize("formulation", ["forward", "backward"])
@pytest.mark.parametrize("p,q", [("linf", "l1"), ("l1", "linf"), ("linf", "linf"), ("l1", "l1")])
def test_backends_and_formulations_agree_with_enumeration(backend, formulation, p, q):
    w, net, lo, hi, _ = _case("a")
    cert = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, output_norm=q,
                                   backend=backend, formulation=formulation, method="milp")
    assert cert.backend == backend
    _assert_exact(cert, _oracle("a", p, q))


@pytest.mark.parametrize("p,q", [("l2", "l1"), ("linf", "l2"), ("l2", "l2"), ("l2", None)])
def test_l2_by_norm_interpolation_is_sound(p, q):
    """Without the MIQP: at most sqrt(L_a L_b) with the interpolating pairs (computed here from the
    oracle), at least the true constant."""
    w, net, lo, hi, _ = _case("a")
    c = np.array([1.0, -0.5]) if q is None else None
    cert = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm=p, output_norm=q or "l1",
                                   target=c, backend="highs", method="milp")
    assert cert.method == "equivalence"
    true = _oracle("a", p, q, target=c)
    if c is not None:
        pair = (_oracle("a", "l1", target=c), _oracle("a", "linf", target=c))
    elif p == "l2" and q == "l2":
        pair = (_oracle("a", "l1", "l1"), _oracle("a", "linf", "linf"))
    elif p == "l2":
        pair = (_oracle("a", "l1", q), _oracle("a", "linf", q))
    else:
        pair = (_oracle("a", p, "l1"), _oracle("a", p, "linf"))
    assert cert.lower <= true * (1 + 1e-12) <= cert.upper
    # never worse than the interpolation (the fast Jacobian bound may be tighter still)
    assert cert.upper <= np.sqrt(pair[0] * pair[1]) * (1 + 1e-5)
    assert cert.exact == (cert.status == "optimal")


def _naive_product_bound(weights, p, q) -> float:
    """||W_K||_{inf->q} prod ||W_k||_{inf->inf} ||W_0||_{p->inf} (ReLU slopes are in [0, 1])."""
    W0 = weights[0][0]
    val = {"linf": np.abs(W0).sum(axis=1).max(), "l1": np.abs(W0).max(), "l2": np.linalg.norm(W0, axis=1).max()}[p]
    for W, _ in weights[1:-1]:
        val *= np.abs(W).sum(axis=1).max()
    return float(val * opnorm(weights[-1][0], "linf", q))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 4), depth=st.integers(1, 3), width=st.integers(2, 7),
       m=st.integers(1, 3), p=st.sampled_from(["linf", "l1"]), q=st.sampled_from(["l1", "linf"]),
       radius=st.floats(0.05, 2.0))
def test_sandwich_sampled_lower_upper_naive(seed, n, depth, width, m, p, q, radius):
    w = random_weights([n] + [width] * depth + [m], seed)
    net = sequential(w)
    rng = np.random.default_rng(seed)
    center = rng.uniform(-1, 1, n)
    cert = certify.local_lipschitz(net, center, radius, input_norm=p, output_norm=q, backend="highs")
    X = rng.uniform(center - radius, center + radius, size=(200, n))
    sampled = max(opnorm(net.jacobian(x), p, q) for x in X)
    naive = _naive_product_bound(w, p, q)
    # a flat function (constant 0) keeps an interval [0, tolerance allowance] open, honestly
    assert cert.status == "optimal" or (cert.status == "open_gap" and cert.upper - cert.lower <= 1e-8 * max(naive, 1.0))
    assert sampled <= cert.lower * (1 + 1e-9) + 1e-12
    assert cert.lower <= cert.upper <= naive * (1 + 1e-6) + 1e-9


def test_tie_patterns_are_cut_only_when_provably_flat():
    """f(x) = relu(x) - relu(-x) = x: the MILP may pick slope 1 for both ReLUs at x = 0 (a
    Jacobian of 2 that no region realises). The true constant is 1: the witness replay never
    claims 2, and the exact-arithmetic proof that the tie pattern's region is flat lets us cut it."""
    net = sequential([(np.array([[1.0], [-1.0]]), np.zeros(2)), (np.array([[1.0, -1.0]]), np.zeros(1))])
    for backend in ("highs", "gurobi", "cbc"):
        cert = certify.local_lipschitz(net, [0.0], 1.0, backend=backend)
        _assert_exact(cert, 1.0)
    from solvers.regions import has_no_interior

    lo, hi = np.array([-1.0]), np.array([1.0])
    assert has_no_interior(net, [np.array([1.0, 1.0])], lo, hi)
    assert not has_no_interior(net, [np.array([1.0, 0.0])], lo, hi)
    assert not has_no_interior(net, [np.array([1.0, 0.0])], np.array([-1.0]), np.array([1e-12]))  # thin, not flat


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000))
def test_float_farkas_emptiness_agrees_with_exact_arithmetic_and_sampling(seed):
    """Whenever the float64 Farkas check (with its rounding allowance) calls a pattern's region
    empty, the exact rational check agrees and no sampled point of the box has that pattern."""
    from solvers.regions import _empty_by_float_farkas, _region_lp, _solve, has_no_interior

    rng = np.random.default_rng(seed)
    w = random_weights([2, 4, 4, 2], seed)
    net = sequential(w)
    lo = rng.uniform(-1, 0.5, 2)
    hi = lo + rng.uniform(0.05, 1.0, 2)
    pattern = [rng.integers(0, 2, 4).astype(float) for _ in range(2)]
    lp = _region_lp(net, pattern, lo, hi)
    if lp.empty:
        return
    res = _solve(lp)
    y = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=np.float64), 0.0)
    if res.status != 0 or not _empty_by_float_farkas(net, pattern, lo, hi, y):
        return
    assert has_no_interior(net, pattern, lo, hi)  # the float-first path
    from solvers.regions import _exact_region_rows, _farkas_bound

    A, b = _exact_region_rows(net, pattern, lo, hi)
    assert _farkas_bound(A, b, y, 2) <= 0  # exact arithmetic agrees
    h = rng.uniform(lo, hi, (20_000, 2))
    match = np.ones(len(h), dtype=bool)
    for (W, bias), s in zip(w[:-1], pattern):
        z = h @ W.T + bias
        match &= np.all((z >= 0) == (s > 0.5), axis=1)
        h = np.maximum(z, 0.0)
    assert not match.any()  # no sampled point realises the pattern


def test_zero_bounds_and_stable_networks():
    """Pre-activation bounds exactly 0 (LipMIP crashed there) and a net with no unstable ReLU."""
    W1 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    b1 = np.array([1.0, -1.0, 0.0])  # over [0, 1]^2: neuron 0 active, 1 has hi = 0, 2 has lo = 0
    W2 = np.array([[2.0, 3.0, -1.0]])
    net = sequential([(W1, b1), (W2, np.zeros(1))])
    # f = 2 (x0 + 1) + 0 - (x0 + x1) on the box: gradient (1, -1), l1 norm 2
    _assert_exact(certify.local_lipschitz(net, [0.5, 0.5], 0.5, output_norm="l1"), 2.0)
    # all stable: f = 2 (x0 + 5) - (x0 + x1 + 5), gradient (1, -1) everywhere
    stable = sequential([(W1, np.array([5.0, -5.0, 5.0])), (W2, np.zeros(1))])
    for p, value in (("linf", 2.0), ("l1", 1.0), ("l2", np.sqrt(2.0))):
        cert = certify.local_lipschitz(stable, [0.5, 0.5], 0.5, input_norm=p)
        _assert_exact(cert, value)
        assert cert.unstable == 0


def test_time_limit_returns_a_sound_interval():
    net = certify.load_onnx(lipmip_suite_path(LIPMIP_SUITE[2]))
    n = net.input_dim
    cert = certify.local_lipschitz(net, np.full(n, 0.5), 0.5, margin=(0, 1), time_limit=0.5, backend="highs")
    assert cert.status == "time_limit" and not cert.exact
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, size=(500, n))
    sampled = max(np.abs(net.jacobian(x)[0] - net.jacobian(x)[1]).sum() for x in X)
    assert 0 < cert.lower <= cert.upper
    assert sampled <= cert.upper
    assert cert.seconds < 5.0


def test_domain_box_call_of_the_global_helper():
    """certify.lipschitz.global_bounds calls us with center (lo + hi) / 2, a radius just above the
    largest half-width, domain=(lo, hi) vectors and mip_gap=None: the certified box is [lo, hi]."""
    w, net, _, _, _ = _case("b")
    lo, hi = np.array([-0.7, -0.2, 0.1]), np.array([0.9, 0.4, 0.5])
    radius = float(np.max((hi - lo) / 2)) * (1 + 1e-9)
    cert = certify.local_lipschitz(net, (lo + hi) / 2, radius, domain=(lo, hi), input_norm="l1", output_norm="l1", mip_gap=None)
    assert np.array_equal(cert.box.lo, lo) and np.array_equal(cert.box.hi, hi)
    _assert_exact(cert, exact_lipschitz(w, lo, hi, "l1", "l1"))
    vec = certify.local_lipschitz(net, (lo + hi) / 2, (hi - lo) / 2, input_norm="l1", output_norm="l1")
    assert vec.lower == pytest.approx(cert.lower, rel=1e-9)


@pytest.mark.parametrize("backend", ["highs", "cbc", "gurobi"])
def test_badly_scaled_layers_keep_the_interval_sound(backend):
    """Weights x1e6 then x1e-6 over a +/-1000 box: the same function as the unscaled net (up to
    rounding), so region enumeration on the unscaled weights is the oracle. Unscaled big-M rows
    of 1e9 let solver tolerances move the optimum (HiGHS certified a value 8% too low)."""
    sizes, lo, hi = [3, 5, 5, 2], -np.full(3, 1000.0), np.full(3, 1000.0)
    w = random_weights(sizes, 4, bias=300.0)
    value = exact_lipschitz(w, lo, hi, "linf", "l1")
    (w1, b1), (w2, b2), last = w
    wild = sequential([(w1 * 1e6, b1 * 1e6), (w2 * 1e-6, b2), last])
    cert = certify.local_lipschitz(wild, np.zeros(3), 1000.0, backend=backend)
    assert cert.lower <= value * (1 + 1e-9) and value * (1 - 1e-9) <= cert.upper
    if backend != "gurobi":  # Gurobi may stop at an unreplayable tie pattern (open_gap, still sound)
        _assert_exact(cert, value)


def test_dead_and_doubled_relus_still_give_a_replayed_witness():
    """A neuron with a zero row and bias (z == 0 everywhere) and a ReLU applied twice must not block
    the witness replay. Oracle: region enumeration on the same net without the dead neuron."""
    from models.ir import Affine, Network, ReLU

    w = random_weights([3, 5, 4, 2], 11)
    (w1, b1), (w2, b2), (w3, b3) = w
    dead = [(np.vstack([w1, np.zeros((1, 3))]), np.r_[b1, 0.0]), (np.hstack([w2, np.ones((4, 1))]), b2), (w3, b3)]
    layers = [Affine(*dead[0]), ReLU(6), ReLU(6), Affine(*dead[1]), ReLU(4), Affine(*dead[2])]
    net = Network(layers)
    lo, hi = -np.ones(3), np.ones(3)
    for p, q in [("linf", "l1"), ("l1", "linf")]:
        cert = certify.local_lipschitz(net, np.zeros(3), 1.0, input_norm=p, output_norm=q, backend="highs")
        _assert_exact(cert, exact_lipschitz(w, lo, hi, p, q))


def test_cancelling_adjacent_affine_layers_are_refused():
    """[x, x, x] -> 1e16 h0 + 3 h1 - 1e16 h2 is 3x exactly, but 4x once multiplied out in float64."""
    from models.errors import ModelError
    from models.ir import Affine, Network, ReLU

    spread = Affine(np.ones((3, 1)), np.zeros(3))
    cancel = Affine(np.array([[1e16, 3.0, -1e16]]), np.zeros(1))
    net = Network([spread, cancel, ReLU(1), Affine(np.eye(1), np.zeros(1))])
    with pytest.raises(ModelError, match="cancel"):
        certify.local_lipschitz(net, [1.0], 0.5)
    benign = Network([spread, Affine(np.array([[0.5, 3.0, -0.25]]), np.zeros(1)), ReLU(1), Affine(np.eye(1), np.zeros(1))])
    assert certify.local_lipschitz(benign, [1.0], 0.5).lower == pytest.approx(3.25, rel=1e-12)


def test_an_interval_held_open_by_the_tolerance_allowance_is_not_called_exact():
    """f = 1e6 relu(x) - 1e6 relu(x) + 1e-4 relu(x + 0.1): the constant is 1e-4 (closed form), but
    the objective's interval bound is ~1e6, so the solver-tolerance allowance dominates."""
    net = sequential([(np.ones((3, 1)), np.array([0.0, 0.0, 0.1])), (np.array([[1e6, -1e6, 1e-4]]), np.zeros(1))])
    for backend in ("highs", "gurobi"):
        cert = certify.local_lipschitz(net, [0.0], 1.0, backend=backend)
        assert cert.lower <= 1e-4 * (1 + 1e-12) and 1e-4 <= cert.upper
        if cert.exact or cert.status == "optimal":
            assert cert.upper <= 1e-4 * (1 + 1e-5)


def test_a_neuron_zero_up_to_rounding_is_not_scaled_out_of_the_solver_range():
    """relu(2 x_1) with x_1 <= 0 on the box has bounds ~1e-16 from the rounding allowance: the
    power-of-two rescaling must not give it 1e15 coefficients (HiGHS rejected the model and its
    empty-model 'bound' 0 was taken as the answer). Oracle: region enumeration (the doubled ReLU
    written as an identity layer)."""
    from models.ir import Affine, Network, ReLU

    W0, b0 = np.array([[0.0, 2.0], [1.0, -2.0], [-1.0, 2.0]]), np.array([0.0, -1.0, 1.0])
    W1 = np.array([[-1.735, 0.329, -0.264], [1.735, -0.329, 0.264]])
    b1 = np.array([0.798, -0.798])
    W2, b2 = np.array([[0.757, -0.120], [-0.217, 0.289]]), np.zeros(2)
    net = Network([Affine(W0, b0), ReLU(3), ReLU(3), Affine(W1, b1), ReLU(2), Affine(W2, b2)])
    lo, hi = np.array([-0.2, -0.2]), np.array([0.7, 0.0])
    value = exact_lipschitz([(W0, b0), (np.eye(3), np.zeros(3)), (W1, b1), (W2, b2)], lo, hi, "linf", "l1")
    cert = certify.local_lipschitz(net, [0.0, -1.0], 1.0, domain=(-0.2, 0.7), backend="highs", bounds="symbolic")
    _assert_exact(cert, value)


def test_wide_weight_ranges_on_the_backward_formulation():
    """Weights from 2^-17 to 2^9 over a +/-1000 box (found by fuzzing): rescaling every neuron to
    unit bounds made HiGHS and CBC return bounds far below the truth on the backward
    formulation. Oracle: region enumeration."""
    h = np.vectorize(float.fromhex)
    w = [(h(np.array([["0x1.27a7e3dc9852ap+9"], ["0x1.ef4d78bfb674bp-9"]])),
          h(np.array(["-0x1.1c0785e15ad34p-17", "-0x1.afc25272bdc8ap-9"]))),
         (h(np.array([["0x1.1c64bc392c173p+6", "-0x1.5b6ee415ca399p+8"], ["-0x1.0463351f29b46p-11", "0x1.ff34ff87ff34ep-11"]])),
          h(np.array(["0x1.273076bcffddcp-7", "0x1.0ff5e9c3ee422p+0"]))),
         (h(np.array([["0x1.c4e28d1c4b22ap-13", "0x1.3625833c34393p-13"], ["0x1.6f279a23260abp+2", "-0x1.a7c17dacfcb12p+1"]])),
          h(np.array(["-0x1.7afd88186667fp+5", "-0x1.e2a20a40213b0p+2"])))]
    net, c = sequential(w), 0.04149623765299077
    value = exact_lipschitz(w, np.array([c - 1000.0]), np.array([c + 1000.0]), "linf", "linf")
    for backend in ("highs", "cbc"):
        cert = certify.local_lipschitz(net, [c], 1000.0, input_norm="linf", output_norm="linf",
                                       backend=backend, formulation="backward")
        assert cert.lower <= value * (1 + 1e-9) and value * (1 - 1e-9) <= cert.upper
        assert cert.status == "optimal" and cert.upper <= value * (1 + 1e-5)


def test_fusion_error_bound_is_sound_and_wide_layers_are_accepted():
    """The fused-product error bound dominates the exact error (rationals, sampled entries), and
    an ordinary pair of wide adjacent layers is not mistaken for a cancellation."""
    from fractions import Fraction

    from models.ir import Affine, Network, ReLU
    from solvers.bounds.types import FUSION_TOLERANCE, relu_blocks

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((512, 5)), rng.standard_normal((512, 512)) / 20
    net = Network([Affine(A, np.zeros(512)), Affine(B, rng.standard_normal(512)), ReLU(512), Affine(np.ones((1, 512)), np.zeros(1))])
    assert net.fusion_error() < FUSION_TOLERANCE
    fused = relu_blocks(net)[0]
    for i in rng.integers(0, 512, 3):
        exact = [sum(Fraction(B[i, k]) * Fraction(A[k, j]) for k in range(512)) for j in range(5)]
        err = sum(abs(Fraction(fused.weight[i, j]) - exact[j]) for j in range(5))
        assert err <= Fraction(net.fusion_error()) * Fraction(float(np.abs(fused.weight[i]).sum() + abs(fused.bias[i])))


def test_tie_patterns_with_poor_float_duals_are_still_cut():
    """Duplicated neurons and opposite output rows (found by fuzzing): the solver's optimum is a
    tie pattern without interior (value ~10.7 against 0.80); its flatness proof needs exact
    multipliers solved on the float support. Oracle: region enumeration."""
    h = np.vectorize(float.fromhex)
    w = [(h(np.array([["0x1.50c89530e5b07p-1", "0x1.8bf5b69bc9764p-1"]])), h(np.array(["-0x1.46e77bfd85924p-2"]))),
         (h(np.array([["0x1.9b5008fbf3629p-3"], ["0x1.9b5008fbf3629p-3"], ["-0x1.54806c8691d46p+0"]])), np.zeros(3)),
         (h(np.array([["-0x1.0a72c998f5758p-1", "-0x1.df7bdf3a916c9p-4", "-0x1.431baaf726376p+0"],
                      ["0x1.0a72c998f5758p-1", "0x1.df7bdf3a916c9p-4", "0x1.431baaf726376p+0"],
                      ["0x1.43a8f592bf4b5p+0", "0x1.06185409dbee3p-2", "-0x1.84def820533cfp+1"]])),
          h(np.array(["-0x1.14d5ddf89517fp-5", "0x1.14d5ddf89517fp-5", "0x1.a68b352343427p-5"])))]
    value = exact_lipschitz(w, np.array([0.0, -2.0]), np.array([2.0, 0.0]), "linf", "l1")
    cert = certify.local_lipschitz(sequential(w), [1.0, -1.0], 1.0, bounds="symbolic", backend="highs")
    _assert_exact(cert, value)
