"""Sound pre-activation, Jacobian-product and LP bounds (oracles: sampling, region LPs, scipy)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from models.ir import sequential
from solvers.bounds import METHODS, network_bounds
from solvers.bounds.jacobian import jacobian_maps, switched_pass_bounds
from solvers.lp import dual_bound
from tests.lipschitz_oracles import jacobian, random_weights, regions


def _exact_ranges(weights, lo, hi):
    """Exact min/max of every pre-activation over the box: one LP per region and neuron."""
    n_layers = len(weights) - 1
    mins = [np.full(w.shape[0], np.inf) for w, _ in weights[:-1]]
    maxs = [np.full(w.shape[0], -np.inf) for w, _ in weights[:-1]]
    for pattern in regions(weights, lo, hi):
        # region constraints and z_j as affine functions of x
        A, b, M, d = [], [], np.eye(lo.size), np.zeros(lo.size)
        affs = []
        for (W, bias), s in zip(weights[:-1], pattern):
            Mz, dz = W @ M, W @ d + bias
            affs.append((Mz, dz))
            sign = 2 * s - 1
            A.append(-(sign[:, None] * Mz))
            b.append(sign * dz)
            M, d = s[:, None] * Mz, s * dz
        A, b = np.vstack(A), np.concatenate(b)
        for j in range(n_layers):
            Mz, dz = affs[j]
            for i in range(Mz.shape[0]):
                for sgn in (1.0, -1.0):
                    res = linprog(sgn * Mz[i], A_ub=A, b_ub=b, bounds=list(zip(lo, hi)), method="highs")
                    val = sgn * res.fun + dz[i]
                    mins[j][i] = min(mins[j][i], val)
                    maxs[j][i] = max(maxs[j][i], val)
    return mins, maxs


@pytest.mark.parametrize("sizes,seed", [([2, 5, 5, 2], 0), ([3, 4, 4, 4, 2], 1)])
def test_bounds_contain_exact_ranges_and_tighten(sizes, seed):
    w = random_weights(sizes, seed)
    net = sequential(w)
    lo, hi = -np.ones(sizes[0]), np.ones(sizes[0])
    mins, maxs = _exact_ranges(w, lo, hi)
    widths = {}
    for method in METHODS:
        nb = network_bounds(net, lo, hi, method)
        for j in range(len(mins)):
            assert np.all(nb.pre_lo[j] <= mins[j] + 1e-12), (method, j)
            assert np.all(nb.pre_hi[j] >= maxs[j] - 1e-12), (method, j)
        widths[method] = sum(float(np.sum(h - l)) for l, h in zip(nb.pre_lo, nb.pre_hi))
    # each step intersects with the previous one and is strictly tighter somewhere on these nets
    assert widths["lp"] <= widths["symbolic"] + 1e-12 <= widths["interval"] + 2e-12
    assert widths["lp"] < widths["interval"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), depth=st.integers(1, 3), width=st.integers(2, 8), n=st.integers(1, 4),
       method=st.sampled_from(METHODS), scale=st.floats(0.01, 3.0))
def test_bounds_hold_on_samples(seed, depth, width, n, method, scale):
    w = random_weights([n] + [width] * depth + [2], seed)
    net = sequential(w)
    rng = np.random.default_rng(seed)
    center = rng.uniform(-1, 1, n)
    lo, hi = center - scale, center + scale
    nb = network_bounds(net, lo, hi, method)
    X = np.vstack([rng.uniform(lo, hi, size=(400, n)), lo, hi])
    for j, z in enumerate(net.preactivations(X)):
        assert np.all(z >= nb.pre_lo[j]) and np.all(z <= nb.pre_hi[j])
    y = net.forward(X)
    assert np.all(y >= nb.out_lo) and np.all(y <= nb.out_hi)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), mode=st.sampled_from(["forward", "backward"]))
def test_switched_pass_bounds_hold_for_every_region_jacobian(seed, mode):
    w = random_weights([2, 4, 4, 2], seed)
    net = sequential(w)
    lo, hi = -np.ones(2), np.ones(2)
    nb = network_bounds(net, lo, hi, "symbolic")
    rng = np.random.default_rng(seed)
    maps, phases = jacobian_maps([W for W, _ in w], nb.phases(), mode)
    k = maps[0].shape[1]
    pb = switched_pass_bounds(maps, phases, -np.ones(k), np.ones(k))
    for pattern in regions(w, lo, hi):
        J = jacobian(w, pattern)
        for _ in range(5):
            u = rng.choice([-1.0, 1.0], size=k) * rng.uniform(0, 1, k)
            out = J @ u if mode == "forward" else J.T @ u
            assert np.all(out >= pb.out_lo - 1e-12) and np.all(out <= pb.out_hi + 1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_dual_bound_is_weak_duality(seed):
    """dual_bound(y) >= LP optimum for any y, and ~= it at the optimal duals (oracle: scipy)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m, n = 6, 5
    A = rng.standard_normal((m, n))
    x0 = rng.uniform(-1, 1, n)
    row_lo = A @ x0 - rng.uniform(0, 1, m)
    row_hi = A @ x0 + rng.uniform(0, 1, m)
    row_lo[rng.random(m) < 0.3] = -np.inf
    col_lo, col_hi = -np.ones(n) * 2, np.ones(n) * 2
    c = rng.standard_normal(n)
    A_ub = np.vstack([A[np.isfinite(row_hi)], -A[np.isfinite(row_lo)]])
    b_ub = np.concatenate([row_hi[np.isfinite(row_hi)], -row_lo[np.isfinite(row_lo)]])
    res = linprog(-c, A_ub=A_ub, b_ub=b_ub, bounds=list(zip(col_lo, col_hi)), method="highs")
    opt = -res.fun
    As = sp.csr_matrix(A)
    for _ in range(5):
        y = rng.standard_normal(m)
        assert dual_bound(As, row_lo, row_hi, col_lo, col_hi, c, y) >= opt - 1e-12
    # scipy's marginals of A_ub x <= b_ub are <= 0 for a minimisation of -c: y_row = -marginal
    marg = -res.ineqlin.marginals
    y = np.zeros(m)
    fin_hi, fin_lo = np.flatnonzero(np.isfinite(row_hi)), np.flatnonzero(np.isfinite(row_lo))
    y[fin_hi] += marg[: fin_hi.size]
    y[fin_lo] -= marg[fin_hi.size:]
    best = dual_bound(As, row_lo, row_hi, col_lo, col_hi, c, y)
    assert opt - 1e-12 <= best <= opt + 1e-7 * (1 + abs(opt))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lp_tightened_pass_bounds_hold_for_every_region(seed):
    """LP-tightened big-M bounds of the tangent pass J w must contain t_j for every region's
    slopes and every sign vector w (w_0 = +1 by symmetry), and be no looser than interval ones."""
    from itertools import product

    from solvers.milp.lipschitz import build_lipschitz_milp

    w = random_weights([2, 6, 5, 4, 2], seed)
    net = sequential(w)
    lo, hi = -np.ones(2), np.ones(2)
    nb = network_bounds(net, lo, hi, "lp")
    milp = build_lipschitz_milp(net, nb, "linf", "l1", pass_bounds="lp")
    tight = milp.pass_bounds
    loose = build_lipschitz_milp(net, nb, "linf", "l1", pass_bounds="interval").pass_bounds
    for j in range(len(tight.t_lo)):
        assert np.all(tight.t_lo[j] >= loose.t_lo[j]) and np.all(tight.t_hi[j] <= loose.t_hi[j])
    # the MILP encodes the net with hidden neurons rescaled by powers of two: the same function
    scaled = [(b.weight, b.bias) for b in milp.blocks]
    X = np.random.default_rng(seed).uniform(lo, hi, (50, 2))
    assert np.allclose(sequential(scaled).forward(X), net.forward(X), rtol=1e-12, atol=1e-12)
    for pattern in regions(w, lo, hi):
        for signs in product((-1.0, 1.0), repeat=1):
            t = scaled[0][0] @ np.r_[1.0, signs]
            for j, s in enumerate(pattern):
                assert np.all(t >= tight.t_lo[j] - 1e-12) and np.all(t <= tight.t_hi[j] + 1e-12), j
                t = scaled[j + 1][0] @ (s * t)
            t = np.ldexp(t, milp.out_exp)  # the objective is scaled by an exact power of two
            assert np.all(t >= tight.out_lo - 1e-12) and np.all(t <= tight.out_hi + 1e-12)


def test_lp_bounds_contain_exact_values_at_box_vertices():
    """LP bounds used to sit 4e-15 inside an exact pre-activation (the LP composes weights through
    stable neurons in float64). Oracle: exact rational forward passes at every box vertex, on the
    fuzzed case that showed it and on random nets with weights of mixed scales."""
    from fractions import Fraction
    from itertools import product

    def exact_pre(ws, x):
        h, out = [Fraction(v) for v in x], []
        for W, b in ws[:-1]:
            z = [sum((Fraction(W[i, k]) * h[k] for k in range(len(h))), Fraction(0)) + Fraction(b[i]) for i in range(W.shape[0])]
            out.append(z)
            h = [max(v, Fraction(0)) for v in z]
        return out

    h = np.vectorize(float.fromhex)
    fuzzed = [
        (h([['-0x1.08fe78d587ccap+0', '0x1.981af588a2b14p+2'], ['-0x1.ab425fc12da94p-13', '0x1.7f93ae7a8f106p-11']]),
         h(['0x1.80de1ee258357p-5', '0x1.c6007a0b7aaefp-10'])),
        (h([['0x1.0000000000000p+0', '0x1.0000000000000p+0'], ['0x0.0p+0', '0x1.0000000000000p+0'], ['-0x1.0000000000000p+1', '0x1.0000000000000p+0'], ['-0x1.0000000000000p+1', '0x1.0000000000000p+0'], ['0x1.0000000000000p+0', '0x1.0000000000000p+1'], ['0x1.0000000000000p+1', '-0x1.0000000000000p+0'], ['0x0.0p+0', '-0x1.0000000000000p+1']]),
         h(['-0x1.c066358e9330ep-2', '-0x1.5b1d1366d4165p-11', '-0x1.dd349d1369fb8p-13', '-0x1.1911918ba5b05p+0', '0x1.8818a00ec981bp+6', '0x1.24c6ff01453ddp+6', '0x1.9c30186338adep-16'])),
        (h([['-0x1.ebb720cc1919bp-14', '0x1.9e57d6ce411cbp-13', '-0x1.d36618d15e0f4p-14', '-0x1.683b762cff55ep-13', '0x1.11ab686a09519p-16', '-0x1.f97a6bfcb6ccfp-19', '0x1.6848bb94771c9p-13'], ['0x1.ce997471b15efp-17', '-0x1.78694507592b1p-14', '0x1.063d05987907ap-13', '0x1.fd004e3093862p-12', '0x1.14a5699ebfe83p-15', '0x1.70614606a7513p-13', '-0x1.97bbfadc2d518p-13'], ['-0x1.777812ce36350p-10', '0x1.dab352cd6f2d4p-8', '-0x1.e72b590fc42ecp-7', '0x1.05d65c751bb68p-8', '0x1.bb6839898aa66p-7', '0x1.24ef9c996323fp-8', '-0x1.d62caa0ea4014p-6'], ['-0x1.bc9dad12d3a73p-14', '0x1.8c0636f71bbe8p-13', '0x1.839c45ba5dc71p-16', '-0x1.860ce49370e64p-15', '-0x1.0e3843d4dcac3p-14', '-0x1.ba6f9172177c7p-15', '-0x1.99b951d5eab4fp-16'], ['0x1.8318e140b5875p+1', '0x1.12810d00c4af7p+0', '-0x1.0e7155a5957a3p+0', '-0x1.62f376dbe7850p-5', '-0x1.1c446fa466364p+0', '-0x1.1aa2a16dc2b1cp-1', '-0x1.1058d3be61276p+1'], ['0x1.92d5c6cb14269p-1', '0x1.4245a2a4d366cp-5', '0x1.add50250cbaffp-5', '-0x1.e3ba067c8c29ep-2', '0x1.18bb4b1911a38p-1', '-0x1.6e637827ddbd7p-1', '0x1.a08f040da4249p-3'], ['-0x1.6c0f4b1479f19p+1', '-0x1.de11982b71842p-3', '0x1.f0f43ebe59fd7p+0', '-0x1.3160f034cf98cp+1', '0x1.d40a337686479p-2', '-0x1.99494838659f4p+0', '-0x1.c4585349e06e4p+0']]),
         h(['0x1.751a770bd3c98p+5', '-0x1.38dadb7366767p-16', '0x1.93fb8319515bdp-11', '-0x1.73c7aaabd4656p-12', '-0x1.6c1796aa0a2c3p-1', '-0x1.4ee1b03493085p-1', '-0x1.ea1f22a7b2f26p-1'])),
        (h([['0x1.64b9eb6307929p+3', '0x1.e306784877428p+3', '-0x1.3b9d6f5f1a44cp+3', '0x1.2b6c049013747p+3', '-0x1.04d15b25b001dp+0', '0x1.4463333b030f5p+3', '0x1.6ad6fc79efe2bp+3'], ['-0x1.227c5b33f434dp-10', '0x1.0771964369526p-9', '-0x1.833f64eb14b02p-10', '-0x1.5c8dd83927ccfp-11', '-0x1.d0712afdbd345p-13', '0x1.72fca99a27dfcp-12', '-0x1.36c00677a93c9p-11']]),
         h(['0x1.8054b01b627f6p-6', '-0x1.0c2383901d360p+3'])),
    ]
    cases = [fuzzed]
    for seed in range(8):
        rng = np.random.default_rng(seed)
        sizes = [2, 7, 7, 2]
        cases.append([(rng.standard_normal((b, a)) * 10.0 ** rng.uniform(-4, 3, size=(b, 1)), rng.standard_normal(b))
                      for a, b in zip(sizes, sizes[1:])])
    lo, hi = np.array([-0.5, 0.5]), np.array([0.5, 1.5])
    for seed, ws in enumerate(cases):
        nb = network_bounds(sequential(ws), lo, hi, "lp")
        for x in product(*zip(lo, hi)):
            for j, z in enumerate(exact_pre(ws, x)):
                assert all(Fraction(nb.pre_lo[j][i]) <= v <= Fraction(nb.pre_hi[j][i]) for i, v in enumerate(z)), (seed, x, j)
