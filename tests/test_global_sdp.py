"""LipSDP / ECLipsE-Fast bounds against independent oracles.

Oracles: a reference LipSDP written here from the paper's formula (M = [A;B]^T [[0,T],[T,-2T]]
[A;B] + blkdiag(-rho I, 0, W_l^T W_l), full W_0, no scaling, no reduction) solved by Clarabel at
high accuracy; exact Jacobians at sampled points (lower bounds); the ECLipsE-Fast recursion in the
paper's own scaling; eigenvalues of the full LipSDP matrix rebuilt here.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.lipschitz.global_bounds import global_lipschitz
from models.ir import sequential
from models.zoo import random_relu_net
from solvers.sdp import WeightChain, validate


def _weights(net):
    maps, _ = net.affine_blocks()
    return [m.weight for m in maps]


def _paper_matrix(weights, rho, lams):
    """LipSDP matrix of Fazlyab et al. (2019), eq. (10) with alpha = 0, beta = 1, as numpy/cvxpy."""
    Ws = weights[:-1]
    n0 = Ws[0].shape[1]
    N = sum(w.shape[0] for w in Ws)
    A = np.zeros((N, n0 + N))
    r = c = 0
    for w in Ws:
        A[r : r + w.shape[0], c : c + w.shape[1]] = w
        r, c = r + w.shape[0], c + w.shape[1]
    B = np.hstack([np.zeros((N, n0)), np.eye(N)])
    T = cp.diag(lams) if isinstance(lams, cp.Expression) else np.diag(lams)
    Q = np.zeros((n0 + N, n0 + N))
    wl = weights[-1]
    Q[-wl.shape[1] :, -wl.shape[1] :] = wl.T @ wl
    E0 = np.zeros((n0 + N, n0 + N))
    E0[:n0, :n0] = np.eye(n0)
    return A.T @ T @ B + B.T @ T @ A - 2 * B.T @ T @ B + Q - rho * E0


def reference_lipsdp(weights, variant):
    """(sqrt(rho*), multipliers) of LipSDP-`variant` solved by Clarabel at 1e-10."""
    sizes = [w.shape[0] for w in weights[:-1]]
    rho = cp.Variable()
    if variant == "neuron":
        lam = cp.Variable(sum(sizes), nonneg=True)
        lams = lam
    else:
        per = cp.Variable(len(sizes), nonneg=True)
        lams = cp.hstack([per[k] * np.ones(n) for k, n in enumerate(sizes)])
    M = _paper_matrix(weights, rho, lams)
    prob = cp.Problem(cp.Minimize(rho), [-(M + M.T) / 2 >> 0])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status == "optimal"
    return math.sqrt(rho.value), np.asarray(lams.value)


def _sampled_l2(net, n=3000, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, net.input_dim)) * scale
    return max(np.linalg.norm(net.jacobian(x), 2) for x in X)


@pytest.mark.parametrize("variant", ["neuron", "layer"])
@pytest.mark.parametrize("sizes,seed", [((5, 12, 10, 3), 1), ((30, 6, 7, 2), 2)])
def test_lipsdp_agrees_with_a_high_accuracy_reference(variant, sizes, seed):
    net = random_relu_net(sizes, seed=seed)
    ref, _ = reference_lipsdp(_weights(net), variant)
    res = global_lipschitz(net, f"lipsdp-{variant}", accuracy=1e-6)
    assert res.certified and res.status == "certified"
    # a proven feasible point can never be below the optimum; and it is close to it
    assert res.upper >= ref * (1 - 1e-7)
    assert res.upper <= ref * (1 + 1e-3)
    # the validated bound is never below the solver's own (unproven) value
    assert res.upper >= res.details["solver_bound"]
    if sizes[0] > sizes[1]:  # exact input reduction 30 -> 6
        assert res.details["pieces"][0]["input_reduction"] == [30, 6]


def test_chain_of_clique_lmis_matches_the_full_lmi():
    net = random_relu_net((4, 8, 7, 6, 5, 2), seed=3)
    ref, _ = reference_lipsdp(_weights(net), "neuron")
    for structure in ("chain", "full"):
        res = global_lipschitz(net, "lipsdp-neuron", structure=structure, accuracy=1e-6)
        assert res.details["pieces"][0]["structure"] == structure
        assert ref * (1 - 1e-7) <= res.upper <= ref * (1 + 1e-3)


def test_validation_of_reference_multipliers_is_sound_and_tight():
    net = random_relu_net((6, 10, 8, 3), seed=4)
    W = _weights(net)
    ref, lams = reference_lipsdp(W, "neuron")
    raw = WeightChain(W, [0] * len(W))  # the reference solved the unscaled problem
    sizes = raw.hidden_sizes
    split = np.split(lams, np.cumsum(sizes)[:-1])
    v = validate(raw, [s * (1 + 1e-6) for s in split])
    assert v.proven
    assert v.rho >= ref**2 * (1 - 1e-7)
    assert math.sqrt(v.rho) <= ref * (1 + 1e-4)
    # independent check: the full paper matrix at the proven rho is negative semidefinite
    M = _paper_matrix(W, v.rho, np.concatenate(split) * (1 + 1e-6))
    assert np.linalg.eigvalsh((M + M.T) / 2)[-1] <= 1e-9 * np.abs(M).max()


def test_validation_rejects_multipliers_that_certify_nothing():
    net = random_relu_net((4, 6, 5, 2), seed=5)
    chain = WeightChain.from_weights(_weights(net))
    assert not validate(chain, [np.zeros(6), np.zeros(5)]).proven  # hidden block singular
    assert not validate(chain, [np.full(6, 1e-9), np.full(5, 1e-9)]).proven  # -H indefinite
    assert not validate(chain, [np.full(6, np.nan), np.ones(5)]).proven  # NaN clipped to 0


def test_sandwich_sampled_lipsdp_eclipse_naive():
    net = random_relu_net((6, 16, 16, 4), seed=6)
    sampled = _sampled_l2(net)
    neuron = global_lipschitz(net, "lipsdp-neuron").upper
    layer = global_lipschitz(net, "lipsdp-layer").upper
    eclipse = global_lipschitz(net, "eclipse-fast").upper
    naive = global_lipschitz(net, "naive").upper
    ref_layer, _ = reference_lipsdp(_weights(net), "layer")
    assert sampled <= neuron <= layer * (1 + 1e-3) <= naive
    # ECLipsE-Fast picks feasible layer multipliers: no better than the LipSDP-Layer optimum
    assert ref_layer * (1 - 1e-7) <= eclipse <= naive


def test_eclipse_fast_matches_the_papers_recursion():
    net = random_relu_net((7, 20, 15, 12, 3), seed=7)
    W = _weights(net)
    # ECLipsE-Fast as published (alpha = 0, beta = 1, m = 1/2), unscaled weights
    X = np.eye(W[0].shape[1])
    for Wi in W[:-1]:
        P = Wi @ np.linalg.inv(X) @ Wi.T
        li = 1.0 / (2 * 0.25 * np.linalg.eigvalsh(P)[-1])
        X = li * np.eye(Wi.shape[0]) - li**2 * 0.25 * P
    paper = math.sqrt(max(np.linalg.eigvals(W[-1].T @ W[-1] @ np.linalg.inv(X)).real))
    res = global_lipschitz(net, "eclipse-fast")
    assert res.details["solver_bound"] == pytest.approx(paper, rel=1e-9)
    assert res.upper >= paper
    assert res.upper <= paper * (1 + 1e-5)
    assert res.upper >= _sampled_l2(net, 1000)


def test_splitting_into_sub_networks():
    net = random_relu_net((3, 8, 8, 8, 2), seed=8)
    whole, _ = reference_lipsdp(_weights(net), "neuron")
    res = global_lipschitz(net, "lipsdp-neuron", max_neurons=10)
    assert len(res.details["pieces"]) == 2
    assert res.upper >= whole * (1 - 1e-7)  # splitting forgets the ReLU at the cut
    assert res.upper >= _sampled_l2(net, 1000)
    assert res.upper <= global_lipschitz(net, "naive").upper


def test_power_of_two_normalisation_keeps_deep_scaled_nets_exact():
    base = random_relu_net((4, 6, 6, 6, 6, 2), seed=9)
    W = _weights(base)
    scaled = sequential([(w * f, np.zeros(w.shape[0])) for w, f in zip(W, [1e3, 1e-2, 37.0, 1e4, 3e-3])])
    factor = 1e3 * 1e-2 * 37.0 * 1e4 * 3e-3
    a = global_lipschitz(base, "lipsdp-layer", accuracy=1e-6).upper
    b = global_lipschitz(scaled, "lipsdp-layer", accuracy=1e-6).upper
    assert b / factor == pytest.approx(a, rel=2e-3)
    e = global_lipschitz(scaled, "eclipse-fast")
    assert e.upper / factor == pytest.approx(global_lipschitz(base, "eclipse-fast").upper, rel=1e-6)


@pytest.mark.parametrize("p,q", [("linf", "l1"), ("l2", "l1"), ("l1", "l1"), ("linf", "linf")])
def test_norm_conversion_of_sdp_bounds(p, q):
    from solvers.norms import operator_norm

    net = random_relu_net((5, 10, 10, 3), seed=10)
    l2 = global_lipschitz(net, "eclipse-fast")
    res = global_lipschitz(net, "eclipse-fast", input_norm=p, output_norm=q)
    factor = (math.sqrt(5) if p == "linf" else 1.0) * (math.sqrt(3) if q == "l1" else 1.0)
    assert res.upper == pytest.approx(l2.upper * factor, rel=1e-12)
    assert res.upper >= l2.upper * factor
    rng = np.random.default_rng(0)
    sampled = max(operator_norm(net.jacobian(x), p, q) for x in rng.standard_normal((500, 5)) * 2)
    assert sampled <= res.upper


def test_degenerate_networks():
    rng = np.random.default_rng(11)
    W = rng.standard_normal((3, 4))
    single = sequential([(W, np.zeros(3))])  # no hidden layer: the exact spectral norm
    for method in ("lipsdp-neuron", "eclipse-fast", "naive"):
        assert global_lipschitz(single, method).upper == pytest.approx(np.linalg.norm(W, 2), rel=1e-9)
    zero = sequential([(np.zeros((4, 3)), np.ones(4)), (rng.standard_normal((2, 4)), np.zeros(2))])
    assert global_lipschitz(zero, "lipsdp-layer").upper == 0.0
    relu_last = sequential([(rng.standard_normal((5, 3)), np.zeros(5)), (rng.standard_normal((2, 5)), np.zeros(2))], final_relu=True)
    res = global_lipschitz(relu_last, "lipsdp-neuron")
    assert res.upper >= _sampled_l2(relu_last, 1000)


def test_consecutive_affine_layers_are_fused_with_a_rounding_slack():
    from models.ir import Affine, Network, ReLU

    rng = np.random.default_rng(12)
    A, B, C = rng.standard_normal((6, 4)), rng.standard_normal((5, 6)), rng.standard_normal((2, 5))
    net = Network([Affine(A, np.zeros(6)), Affine(B, np.ones(5)), ReLU(5), Affine(C, np.zeros(2))])
    ref, _ = reference_lipsdp([B @ A, C], "neuron")
    res = global_lipschitz(net, "lipsdp-neuron", accuracy=1e-6)
    assert 0 < res.details["fusion_slack"] < 1e-10 * res.upper
    assert ref * (1 - 1e-7) <= res.upper <= ref * (1 + 1e-3)
    naive = global_lipschitz(net, "naive").upper
    # the fused product B A is used when it beats ||B|| ||A||
    assert naive <= np.linalg.norm(B @ A, 2) * np.linalg.norm(C, 2) * (1 + 1e-9)
    assert res.upper >= _sampled_l2(net, 1000)


def test_clarabel_is_selectable_and_agrees():
    net = random_relu_net((4, 7, 6, 2), seed=13)
    ref, _ = reference_lipsdp(_weights(net), "neuron")
    res = global_lipschitz(net, "lipsdp-neuron", solver="CLARABEL")
    assert res.details["pieces"][0]["solver"] == "CLARABEL"
    assert ref * (1 - 1e-7) <= res.upper <= ref * (1 + 1e-3)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=2, max_size=5),
    seed=st.integers(0, 10_000),
    bias=st.sampled_from([0.0, 0.1, 3.0]),
)
def test_eclipse_fast_invariants_on_random_nets(sizes, seed, bias):
    net = random_relu_net(tuple(sizes), seed=seed, bias_scale=bias)
    res = global_lipschitz(net, "eclipse-fast")
    assert res.certified
    assert _sampled_l2(net, 200, seed=seed) <= res.upper
    assert res.upper <= global_lipschitz(net, "naive").upper * (1 + 1e-9)


def test_failed_certificates_split_down_to_proven_norm_products():
    from solvers.norms import spectral_norm_upper
    from solvers.sdp import certify_chain

    net = random_relu_net((3, 5, 6, 4, 2), seed=14)
    W = _weights(net)
    chain = WeightChain.from_weights(W)
    calls = []

    def failing(sub):
        calls.append(sub.depth)
        return None, "forced failure"

    res = certify_chain(chain, failing)
    assert res.fallback
    assert calls[0] == 3 and 1 in calls  # halved, then single hidden layers
    # every piece fell back to a product of proven spectral norms: the whole product
    product = np.prod([spectral_norm_upper(w) for w in W])
    assert res.upper == pytest.approx(product, rel=1e-12) and res.upper >= product * (1 - 1e-15)
    assert res.upper >= _sampled_l2(net, 500)


def test_sdp_bad_parameters():
    from certify.errors import BadInput

    net = random_relu_net((3, 4, 2), seed=15)
    with pytest.raises(BadInput, match="structure"):
        global_lipschitz(net, "lipsdp-neuron", structure="tree")
    with pytest.raises(BadInput, match="max_neurons"):
        global_lipschitz(net, "lipsdp-layer", max_neurons=0)
    with pytest.raises(BadInput, match="time_limit"):
        global_lipschitz(net, "lipsdp-layer", time_limit=-1)
    with pytest.raises(BadInput, match="domain"):
        global_lipschitz(net, "naive", domain=(0.0, [1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(BadInput, match="SLL"):
        global_lipschitz(net, "sll")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["lipsdp-neuron", "lipsdp-layer", "eclipse-fast"])
def test_benchmark_sized_nets_are_validated(method):
    # 784 inputs: exact input reduction to 100; 8 hidden layers: chain of clique LMIs
    for sizes in [(784, 100, 100, 10), (10,) + (50,) * 8 + (10,)]:
        net = random_relu_net(sizes, seed=0)
        res = global_lipschitz(net, method)
        assert res.certified and res.status == "certified"
        assert res.upper >= res.details["solver_bound"]
        assert _sampled_l2(net, 300) <= res.upper <= global_lipschitz(net, "naive").upper
        if method != "eclipse-fast" and sizes[0] == 784:
            assert res.details["pieces"][0]["input_reduction"] == [784, 100]


def test_too_wide_layers_fall_back_to_structured_norms():
    import torch

    from certify.lipschitz.norm_product import fused_blocks
    from models import from_torch
    from solvers.sdp import certify_chain, eclipse_piece

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(50, 3))
    net = from_torch(model, (1, 1, 5, 5))
    weights, sources, slack = fused_blocks(net)
    assert sources[0].conv is not None and slack == 0.0
    res = certify_chain(WeightChain.from_weights(weights, sources), eclipse_piece, max_width=10)
    (piece,) = res.pieces
    assert piece["method"] == "norm product" and "more than 10" in piece["fallback"]
    assert res.upper >= _sampled_l2(net, 500)
    assert res.upper == pytest.approx(global_lipschitz(net, "naive").upper, rel=1e-9)


def test_relu_only_network_has_the_identity_norms():
    """relu on R^3 (no affine layer): the constant is ||I_3||_{p->q} (closed form n^max(0, 1/q - 1/p))."""
    from models.ir import Network, ReLU

    net = Network([ReLU(3)])
    for (p, q), exact in {("linf", "l1"): 3.0, ("l2", "l1"): math.sqrt(3), ("linf", "l2"): math.sqrt(3),
                          ("l1", "l1"): 1.0, ("l2", "l2"): 1.0}.items():
        upper = global_lipschitz(net, "naive", input_norm=p, output_norm=q).upper
        assert exact <= upper <= exact * (1 + 1e-12)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow warning may leak either
@pytest.mark.parametrize("scale", [1e-110, 1e160])
def test_extreme_weight_scales_give_finite_nonzero_sound_bounds(scale):
    """Three layers x 1e-110 (a constant ~1e-330, below the smallest float) or one layer x 1e160:
    every method must stay finite and above the true constant (exact Jacobian in rationals)."""
    from fractions import Fraction

    W = [np.array([[1.0, 0.5], [0.25, 1.0]]), np.array([[1.0, 1.0]]), np.array([[1.0]])]
    W = [w * scale for w in W] if scale < 1 else [W[0] * scale, W[1], W[2]]
    net = sequential([(W[0], np.ones(2)), (W[1], np.ones(1)), (W[2], np.zeros(1))])
    # all ReLUs active near x = 0: J = W2 W1 W0 exactly; its largest entry bounds the l2 constant
    J = [sum(Fraction(W[2][0, 0]) * Fraction(W[1][0, i]) * Fraction(W[0][i, j]) for i in range(2)) for j in range(2)]
    for method in ("naive", "eclipse-fast", "lipsdp-neuron"):
        upper = global_lipschitz(net, method).upper
        assert math.isfinite(upper) and Fraction(upper) >= max(abs(v) for v in J), method
