"""Linear (CROWN-style) bounds of switched passes against exhaustive enumeration.

The value rows . M_k S_{k-1} ... S_0 M_0 u is multilinear in the slopes, so its maximum over the
slope box is attained at a vertex: on small nets every vertex is enumerated here (the oracle),
independently of the relaxation. Also: with every slope fixed the bound is the exact value; the
Clarke-Jacobian bound with linear passes is never above the interval-only one and still covers
every Jacobian of the slope box (all vertices, exact operator norms by brute force).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.bounds.jacobian import clarke_norm_bound, jacobian_maps
from solvers.bounds.jacobian_linear import chords, linear_pass_upper
from tests.lipschitz_oracles import jacobian, opnorm, random_weights

PAIRS = [("linf", "l1"), ("l1", "linf"), ("linf", "linf"), ("l1", "l1"), ("l2", "l1"), ("linf", "l2")]


def _slopes(rng, sizes, max_free):
    """Slope intervals with at most `max_free` free neurons (the rest fixed at 0 or 1)."""
    s_lo, s_hi = [], []
    for n in sizes[1:-1]:
        v = rng.integers(0, 2, n).astype(float)
        s_lo.append(v.copy())
        s_hi.append(v.copy())
    cells = [(j, i) for j, n in enumerate(sizes[1:-1]) for i in range(n)]
    for k in rng.choice(len(cells), size=min(max_free, len(cells)), replace=False):
        j, i = cells[k]
        a, b = np.sort(rng.uniform(0, 1, 2)) if rng.random() < 0.3 else (0.0, 1.0)
        s_lo[j][i], s_hi[j][i] = a, b
    return s_lo, s_hi


def _vertices(s_lo, s_hi):
    """Every vertex of the slope box (free neurons at either end)."""
    free = [(j, i) for j in range(len(s_lo)) for i in np.flatnonzero(s_lo[j] < s_hi[j])]
    for ends in itertools.product((0, 1), repeat=len(free)):
        slopes = [s.copy() for s in s_lo]
        for (j, i), e in zip(free, ends):
            slopes[j][i] = s_hi[j][i] if e else s_lo[j][i]
        yield slopes


def _jac(weights, slopes):
    return jacobian([(W, None) for W in weights], slopes)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), depth=st.integers(1, 4), width=st.integers(2, 6), n=st.integers(1, 4),
       m=st.integers(1, 3), mode=st.sampled_from(["forward", "backward"]))
def test_linear_pass_bound_covers_every_vertex(seed, depth, width, n, m, mode):
    rng = np.random.default_rng(seed)
    sizes = [n] + [width] * depth + [m]
    weights = [w for w, _ in random_weights(sizes, seed)]
    s_lo, s_hi = _slopes(rng, sizes, 9)
    maps = jacobian_maps(weights, s_lo, mode)[0]
    lo_b, hi_b = (s_lo, s_hi) if mode == "forward" else (s_lo[::-1], s_hi[::-1])
    d_in, d_out = maps[0].shape[1], maps[-1].shape[0]
    dirs = rng.standard_normal((3, d_in))
    rows = rng.standard_normal((4, d_out))
    up = linear_pass_upper(maps, [s[None] for s in lo_b], [s[None] for s in hi_b], dirs, rows, np.zeros(3, dtype=int))
    worst = np.full((3, 4), -np.inf)
    for slopes in _vertices(s_lo, s_hi):
        J = _jac(weights, slopes)
        A = J if mode == "forward" else J.T  # the pass computes J u (forward) or J^T c (backward)
        worst = np.maximum(worst, (rows @ A @ dirs.T).T)
    assert np.all(worst <= up + 1e-9 * (1 + np.abs(up)))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 100_000), depth=st.integers(1, 4))
def test_linear_pass_bound_is_exact_with_fixed_slopes(seed, depth):
    rng = np.random.default_rng(seed)
    sizes = [3] + [5] * depth + [2]
    weights = [w for w, _ in random_weights(sizes, seed)]
    slopes = [rng.uniform(0, 1, 5) for _ in range(depth)]
    dirs, rows = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    up = linear_pass_upper(weights, [s[None] for s in slopes], [s[None] for s in slopes], dirs, rows, np.zeros(2, dtype=int))
    exact = (rows @ _jac(weights, slopes) @ dirs.T).T
    assert np.allclose(up, exact, rtol=1e-9, atol=1e-9) and np.all(up >= exact - 1e-12)


@settings(max_examples=30, deadline=None)
@given(L=st.floats(-5, 5), width=st.floats(0, 5), a=st.floats(0, 1), b=st.floats(0, 1),
       t=st.floats(0, 1), d=st.floats(0, 1))
def test_chords_enclose_the_bow_tie(L, width, a, b, t, d):
    sl, sh = min(a, b), max(a, b)
    U = L + width
    a_up, b_up, a_lo, b_lo = (float(v) for v in chords(np.array(L), np.array(U), np.array(sl), np.array(sh)))
    x = L + t * width
    slope = sl + d * (sh - sl)
    tol = 1e-12 * (1 + abs(L) + abs(U))
    assert a_lo * x + b_lo - tol <= slope * x <= a_up * x + b_up + tol


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("seed", range(6))
def test_clarke_bound_with_linear_passes_covers_all_vertices(pair, seed):
    rng = np.random.default_rng(seed)
    sizes = [3, 6, 6, 6, 3]
    weights = [w for w, _ in random_weights(sizes, seed)]
    s_lo, s_hi = _slopes(rng, sizes, 8)
    linear = clarke_norm_bound(weights, s_lo, s_hi, *pair)
    interval = clarke_norm_bound(weights, s_lo, s_hi, *pair, linear_above=None)
    worst = max(opnorm(_jac(weights, v), *pair) for v in _vertices(s_lo, s_hi))
    assert worst <= linear * (1 + 1e-12) + 1e-12
    assert linear <= interval * (1 + 1e-12)
