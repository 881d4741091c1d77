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
from solvers.bounds.lp import dual_bound
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
            assert np.all(t >= tight.out_lo - 1e-12) and np.all(t <= tight.out_hi + 1e-12)
