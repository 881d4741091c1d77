"""Rigorous PSD proofs and certified operator-norm upper bounds (oracles: LAPACK eigenvalues and
SVD in a different code path, brute-force sign enumeration, closed forms written here)."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.norms import gram_norm_upper, operator_norm, operator_norm_upper, spectral_norm_upper
from solvers.psd import prove_psd
from solvers.rounding import frobenius_up, mul_up, sqrt_up


def _random_spd(rng, n, lam_min):
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    eig = lam_min + rng.random(n) * 3.0
    eig[0] = lam_min
    return (Q * eig) @ Q.T


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 10_000), lam=st.sampled_from([-1e-3, -1e-9]))
def test_prove_psd_never_proves_an_indefinite_matrix(n, seed, lam):
    A = _random_spd(np.random.default_rng(seed), n, lam)
    assert np.linalg.eigvalsh(A)[0] < 0  # the float matrix itself is indefinite
    assert not prove_psd(A).proven
    assert not prove_psd(A, shift=1e-12).proven


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 30), seed=st.integers(0, 10_000))
def test_prove_psd_never_proves_a_singular_matrix(n, seed):
    A = _random_spd(np.random.default_rng(seed), n, 1.0)
    A[0, :] = A[:, 0] = 0.0  # e_0 is an exact null vector
    for shift in (None, 1e-300, 1e-12):
        assert not prove_psd(A, shift=shift).proven


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 10_000), lam=st.sampled_from([1e-6, 1e-2, 1.0]))
def test_prove_psd_proves_well_separated_positive_definite_matrices(n, seed, lam):
    A = _random_spd(np.random.default_rng(seed), n, lam)
    proof = prove_psd(A)
    assert proof.proven
    # the proven margin is a lower bound on the smallest eigenvalue
    assert proof.margin <= np.linalg.eigvalsh(A)[0] * (1 + 1e-9)


def test_prove_psd_respects_the_error_bound():
    A = 1e-3 * np.eye(5)
    assert prove_psd(A).proven
    # the exact matrix may be anything within 1e-3 of each entry: A - 1e-3 * ones is indefinite
    assert not prove_psd(A, error=1e-3).proven
    assert prove_psd(A, error=1e-5).proven


def test_rounding_helpers_bound_exact_values():
    from fractions import Fraction

    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = rng.random(2) * 10
        assert Fraction(mul_up(a, b)) >= Fraction(a) * Fraction(b)
        s = sqrt_up(a)
        assert Fraction(s) * Fraction(s) >= Fraction(a)
    M = rng.standard_normal((7, 9))
    exact = sum(Fraction(float(v)) ** 2 for v in M.ravel())
    f = frobenius_up(M)
    assert Fraction(f) ** 2 >= exact


@pytest.mark.parametrize("shape", [(1, 1), (3, 8), (40, 7), (100, 100), (300, 20)])
def test_spectral_norm_upper_is_a_tight_upper_bound(shape):
    rng = np.random.default_rng(sum(shape))
    M = rng.standard_normal(shape) * 3.0
    svd = np.linalg.svd(M, compute_uv=False)[0]
    bound = spectral_norm_upper(M)
    assert svd <= bound <= svd * (1 + 1e-6)


def test_spectral_norm_upper_of_a_matrix_with_equal_singular_values():
    Q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((50, 50)))
    assert 1.0 <= spectral_norm_upper(Q) <= 1 + 1e-8
    assert spectral_norm_upper(np.zeros((3, 4))) == 0.0


def test_gram_norm_upper_matches_weighted_eigenvalue():
    rng = np.random.default_rng(2)
    A, w = rng.standard_normal((20, 12)), rng.random(20)
    ref = np.linalg.eigvalsh(A.T @ np.diag(w) @ A)[-1]
    assert ref <= gram_norm_upper(A, w) <= ref * (1 + 1e-8)


def _brute_force(M, p, q):
    """max over the vertices/extreme points of the p-ball (exact for p in {l1, linf})."""
    order = {"l1": 1, "l2": 2, "linf": np.inf}
    m, n = M.shape
    if p == "linf":
        pts = np.array(list(product((-1.0, 1.0), repeat=n))).T
    else:
        pts = np.hstack([np.eye(n), -np.eye(n)])
    return max(np.linalg.norm(M @ pts[:, j], order[q]) for j in range(pts.shape[1]))


@pytest.mark.parametrize("p", ["l1", "linf"])
@pytest.mark.parametrize("q", ["l1", "l2", "linf"])
def test_operator_norm_upper_dominates_brute_force(p, q):
    rng = np.random.default_rng(3)
    for shape in [(4, 6), (9, 5), (1, 8)]:
        M = rng.standard_normal(shape)
        exact = _brute_force(M, p, q)
        bound = operator_norm_upper(M, p, q)
        assert exact <= bound <= exact * (1 + 1e-9) + 1e-12


def test_operator_norm_upper_beyond_enumeration_still_bounds_samples():
    rng = np.random.default_rng(4)
    M = rng.standard_normal((30, 40))
    bound = operator_norm_upper(M, "linf", "l1")
    signs = rng.choice([-1.0, 1.0], size=(40, 2000))
    assert np.max(np.abs(M @ signs).sum(axis=0)) <= bound
    u = rng.standard_normal((40, 2000))
    u /= np.linalg.norm(u, axis=0)
    assert np.max(np.abs(M @ u).sum(axis=0)) <= operator_norm_upper(M, "l2", "l1")
    v = rng.choice([-1.0, 1.0], size=(40, 2000))
    assert np.max(np.linalg.norm(M @ v, axis=0)) <= operator_norm_upper(M, "linf", "l2")


@pytest.mark.parametrize("shape", [(5, 16), (16, 16), (2, 17), (7, 1)])
def test_exact_sign_enumeration_beyond_one_chunk_matches_brute_force(shape):
    """The NP-hard pairs enumerate 2^14-column chunks of sign vectors (u_0 = +1 fixed): more than
    15 columns also loops over the outer signs. Oracle: every sign vector at once."""
    M = np.random.default_rng(shape[0] * 31 + shape[1]).standard_normal(shape)
    def brute(A, value):
        U = np.array(list(product((-1.0, 1.0), repeat=A.shape[1]))).T
        return float(np.max(value(A @ U)))
    l1 = lambda Y: np.abs(Y).sum(axis=0)  # noqa: E731
    l2 = lambda Y: np.linalg.norm(Y, axis=0)  # noqa: E731
    small = M if M.shape[1] <= M.shape[0] else M.T  # linf->l1 enumerates the smaller side
    for (p, q), want in {("linf", "l1"): brute(small, l1), ("linf", "l2"): brute(M, l2),
                         ("l2", "l1"): brute(M.T, l2)}.items():
        assert operator_norm(M, p, q) == pytest.approx(want, rel=1e-12)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("p,q", list(product(["l1", "l2", "linf"], repeat=2)))
@pytest.mark.parametrize("k", [-700, -300, 300, 700])
def test_operator_norm_of_huge_and_tiny_matrices(p, q, k):
    """Entries near 2^+-700 (their squares overflow or underflow): the norm is homogeneous, so
    ||2^k M|| must be 2^k ||M|| for a moderate M, exactly here since the scaling is a power of two;
    brute force over sign vectors / SVD at the moderate scale is the oracle, with no warning."""
    M = np.random.default_rng(k & 0xFF).standard_normal((3, 4))
    expected = np.ldexp(operator_norm(M, p, q), k)
    assert operator_norm(np.ldexp(M, k), p, q) == pytest.approx(expected, rel=1e-12)
    assert operator_norm_upper(np.ldexp(M, k), p, q) >= expected
