"""Vector norms and matrix operator norms ||M||_{p->q} = max_{||x||_p <= 1} ||M x||_q.

Norm names are "l1", "l2", "linf". `operator_norm` is exact (or raises when exactness would cost
an exponential enumeration); `operator_norm_upper` always returns a certified upper bound, with the
rounding errors of float64 accounted for (`solvers.psd`); `spectral_norm_upper` proves ||M||_2 and
`affine_norm_upper` bounds an IR layer, using its convolution structure when it has one.
"""

from __future__ import annotations

import functools
import hashlib
import math
from itertools import product
from typing import Literal

import numpy as np

from models.errors import BadInput

from .choices import NORMS
from .psd import prove_psd
from .rounding import U, add_up, frobenius_up, gamma, ldexp_up, mul_up, sqrt_up

Norm = Literal["l1", "l2", "linf"]
_ALIASES = {"l1": "l1", "1": "l1", "l2": "l2", "2": "l2", "linf": "linf", "inf": "linf", "l_inf": "linf", "max": "linf"}

# enumeration of sign vectors for the linf->l1 norm is exact up to this many columns/rows
MAX_ENUMERATION = 22
# spectral norms are proven on the Gram matrix of the smaller side up to this size and cost
MAX_GRAM = 3000
MAX_GRAM_FLOPS = 4e9


def parse_norm(name: str, what: str = "norm") -> str:
    key = str(name).strip().lower()
    if key not in _ALIASES:
        raise BadInput(f"unknown {what} {name!r}; choose one of {', '.join(NORMS)}")
    return _ALIASES[key]


def dual(norm: str) -> str:
    """The dual norm: l1 <-> linf, l2 <-> l2."""
    return {"l1": "linf", "linf": "l1", "l2": "l2"}[parse_norm(norm)]


def vector_norm(v: np.ndarray, norm: str) -> float:
    norm = parse_norm(norm)
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    if norm == "l1":
        return float(np.sum(np.abs(v)))
    if norm == "l2":
        return _l2_scaled(v)
    return float(np.max(np.abs(v))) if v.size else 0.0


def _l2_scaled(v: np.ndarray) -> float:
    """||v||_2 without overflow of the squares (1e160-sized weights): v is scaled by a power of
    two near its largest entry, which is exact, so the rounding allowances of callers still hold."""
    if not v.size:
        return 0.0
    top = float(np.max(np.abs(v)))
    if not np.isfinite(top) or top == 0.0:
        return top
    e = np.frexp(top)[1]
    return float(np.ldexp(np.linalg.norm(np.ldexp(v, -e)), e))


@functools.lru_cache(maxsize=16)
def _sign_columns(bits: int) -> np.ndarray:
    """All 2^bits sign vectors as columns (read-only: shared between calls, built once per size)."""
    out = np.array(list(product((-1.0, 1.0), repeat=bits))).T if bits else np.zeros((0, 1))
    out.flags.writeable = False
    return out


def _max_over_signs(A: np.ndarray, value) -> float:
    """max over u in {-1,1}^n of value(A @ U) (column-wise, for a batch U of sign columns), for a
    value even in u: u_0 = +1 is fixed and the rest enumerated in chunks of cached sign columns."""
    n = A.shape[1]
    chunk_bits = min(n - 1, 14)
    split = n - chunk_bits  # columns [0, split) take the outer signs (u_0 = +1), the rest the chunk
    low = A[:, split:] @ _sign_columns(chunk_bits)  # the chunk's part of A u, once for all outer signs
    best = 0.0
    for high in product((-1.0, 1.0), repeat=split - 1):
        shift = A[:, 0] + A[:, 1:split] @ np.array(high, dtype=np.float64)
        best = max(best, float(np.max(value(low + shift[:, None]))))
    return best


def _inf_to_one_exact(M: np.ndarray, max_enumeration: int = MAX_ENUMERATION) -> float:
    """max_{u in {-1,1}^n} ||M u||_1, enumerating sign vectors of the smaller side."""
    if M.shape[1] > M.shape[0]:
        M = M.T  # ||M||_{inf->1} = max_{u,v} v^T M u is symmetric in the roles of u and v
    m, n = M.shape
    if n == 0 or m == 0:
        return 0.0
    if n > max_enumeration:
        raise ValueError(f"exact linf->l1 norm needs 2^{n} sign vectors")
    return _max_over_signs(M, lambda Y: np.sum(np.abs(Y), axis=0))


def operator_norm(M: np.ndarray, p: str, q: str, max_enumeration: int = MAX_ENUMERATION) -> float:
    """Exact ||M||_{p->q}.

    Closed forms: l1->q = max column q-norm; p->linf = max row dual(p)-norm; l2->l2 = largest
    singular value. linf->l1 and linf->l2 are NP-hard in general: computed by enumerating sign
    vectors (exact; raises ValueError above 2^22), l2->l1 likewise through its dual linf->l2.
    """
    p, q = parse_norm(p, "input norm"), parse_norm(q, "output norm")
    M = np.atleast_2d(np.asarray(M, dtype=np.float64))
    if M.size == 0:
        return 0.0
    top = float(np.max(np.abs(M)))
    if np.isfinite(top) and top > 0.0 and not 2.0**-100 < top < 2.0**100:
        # squares and sums of huge or tiny entries overflow or underflow: scale by a power of two
        # (exact, and the norm is homogeneous), so every rounding allowance below still holds
        e = int(np.frexp(top)[1])
        return float(np.ldexp(operator_norm(np.ldexp(M, -e), p, q, max_enumeration), e))
    if p == "l1":
        return float(max(vector_norm(M[:, j], q) for j in range(M.shape[1])))
    if q == "linf":
        return float(max(vector_norm(M[i], dual(p)) for i in range(M.shape[0])))
    if p == "l2" and q == "l2":
        return float(np.linalg.norm(M, 2))
    if p == "linf" and q == "l1":
        return _inf_to_one_exact(M, max_enumeration)
    # linf->l2 (and its dual l2->l1): maximum of a convex function over the cube's vertices
    A = M if p == "linf" else M.T
    n = A.shape[1]
    if n > max_enumeration:
        raise ValueError(f"exact {p}->{q} norm needs 2^{n} sign vectors")
    if n == 0 or A.shape[0] == 0:
        return 0.0
    return _max_over_signs(A, lambda Y: np.linalg.norm(Y, axis=0))


def _sum_abs_up(M: np.ndarray) -> float:
    """Upper bound of sum_ij |M_ij|."""
    a = np.abs(M)
    return mul_up(float(a.sum()), 1.0 + gamma(a.size + 2))


def _closed_form_up(M: np.ndarray, p: str, q: str) -> float:
    """Rigorous version of the closed forms: column/row norms with their rounding errors."""
    value = operator_norm(M, p, q)
    n_terms = max(M.shape) + 4
    return mul_up(value, 1.0 + 2.0 * gamma(n_terms))


def gram_norm_upper(A: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Certified upper bound on lambda_max(A^T diag(weights) A) (weights >= 0; default all ones).

    The eigenvalue s2 is estimated by LAPACK, then mu = s2 (1 + f) is proven to satisfy
    mu I - G_exact >= 0 with `solvers.psd.prove_psd`, the rounding errors of forming G included
    (f grows from 1e-12 until the proof succeeds). When G would be larger than `MAX_GRAM` or cost
    more than `MAX_GRAM_FLOPS`, returns the cheaper rigorous bound
    max(w) * min(||A||_F^2, ||A||_1 ||A||_inf) (both bound ||A||_2^2).
    """
    A = np.atleast_2d(np.asarray(A, dtype=np.float64))
    m, k = A.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape != (m,) or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be m finite non-negative numbers")
    if A.size == 0 or not np.any(A) or not np.any(w):
        return 0.0
    wmax = float(w.max())
    cheap = mul_up(wmax, min(mul_up(frobenius_up(A), frobenius_up(A)),
                             mul_up(_closed_form_up(A, "l1", "l1"), _closed_form_up(A, "linf", "linf"))))
    if k > MAX_GRAM or float(m) * k * k > MAX_GRAM_FLOPS:
        return cheap
    G = A.T @ (w[:, None] * A)
    absA = np.abs(A)
    # w_i a_ij a_ik: two roundings per product, m-term sums: gamma(m + 4)
    g_err = gamma(m + 4) * (absA.T @ (w[:, None] * absA)) * (1.0 + 2.0 * gamma(m + 4))
    s2 = float(np.linalg.eigvalsh(0.5 * (G + G.T))[-1])
    if not s2 > 0:
        return cheap
    for f in (1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2):
        mu = mul_up(s2, 1.0 + f)
        gap = mu * np.eye(k) - G
        if prove_psd(gap, g_err + 2.0 * U * np.abs(gap)).proven:
            return min(mu, cheap)
    return cheap


def spectral_norm_upper(M: np.ndarray) -> float:
    """Certified upper bound on ||M||_2 (never a power-iteration estimate): the square root of
    `gram_norm_upper` on the smaller side, or min(||M||_F, sqrt(||M||_1 ||M||_inf)) for huge M.
    Results are memoised by the matrix's SHA-256 (norm tables ask for the same layer repeatedly)."""
    M = np.atleast_2d(np.asarray(M, dtype=np.float64))
    if M.size == 0 or not np.any(M):
        return 0.0
    key = (M.shape, hashlib.sha256(np.ascontiguousarray(M).tobytes()).hexdigest())
    if key in _SPECTRAL_CACHE:
        return _SPECTRAL_CACHE[key]
    # an exact power-of-two scaling keeps the Gram matrix away from overflow and underflow
    e = math.frexp(float(np.max(np.abs(M))))[1]
    S = np.ldexp(M, -e)
    if not np.array_equal(np.ldexp(S, e), M):  # subnormal entries would round: no scaling
        S, e = M, 0
    A = S if S.shape[0] >= S.shape[1] else S.T  # Gram of the smaller side
    cheap = min(frobenius_up(S), sqrt_up(mul_up(_closed_form_up(S, "l1", "l1"), _closed_form_up(S, "linf", "linf"))))
    value = ldexp_up(min(sqrt_up(gram_norm_upper(A)), cheap), e)
    if len(_SPECTRAL_CACHE) >= 256:
        _SPECTRAL_CACHE.pop(next(iter(_SPECTRAL_CACHE)))
    _SPECTRAL_CACHE[key] = value
    return value


_SPECTRAL_CACHE: dict[tuple, float] = {}


def operator_norm_upper(M: np.ndarray, p: str, q: str, max_enumeration: int = MAX_ENUMERATION) -> float:
    """A certified upper bound on ||M||_{p->q}, rounding errors of float64 included.

    Exact (up to an upward rounding of a few ulps) whenever `operator_norm` is cheap; l2->l2 is
    proven by `spectral_norm_upper`; the NP-hard pairs beyond the enumeration limit use norm
    inequalities (entrywise sums, sqrt(dim) * spectral norm, dim * row/column norms).
    `max_enumeration` caps the sign-vector enumeration (2^k vectors) before falling back to those.
    """
    p, q = parse_norm(p, "input norm"), parse_norm(q, "output norm")
    M = np.atleast_2d(np.asarray(M, dtype=np.float64))
    if M.size == 0:
        return 0.0
    m, n = M.shape
    if (p, q) == ("l2", "l2"):
        return spectral_norm_upper(M)
    if p == "l1" or q == "linf":
        return _closed_form_up(M, p, q)
    try:
        exact = operator_norm(M, p, q, max_enumeration)
    except ValueError:
        pass
    else:  # enumeration: each value sums m*n products, error <= gamma_{m+n+2} sum |M_ij|
        return add_up(exact, mul_up(gamma(m + n + 2), _sum_abs_up(M)))
    spectral = spectral_norm_upper(M)
    if (p, q) == ("linf", "l1"):
        return float(min(_sum_abs_up(M), mul_up(sqrt_up(m * n), spectral),
                         mul_up(m, _closed_form_up(M, "linf", "linf")), mul_up(n, _closed_form_up(M, "l1", "l1"))))
    if (p, q) == ("linf", "l2"):
        rows = mul_up(float(np.sqrt(np.sum(np.sum(np.abs(M), axis=1) ** 2))), 1.0 + 2.0 * gamma(m + n + 4))
        return float(min(mul_up(sqrt_up(n), spectral), rows))
    if (p, q) == ("l2", "l1"):
        rows = mul_up(float(np.sum(np.linalg.norm(M, axis=1))), 1.0 + 2.0 * gamma(m + n + 4))
        return float(min(mul_up(sqrt_up(m), spectral), rows))
    raise AssertionError(f"unreachable norm pair {p}->{q}")


def affine_norm_upper(layer, p: str, q: str, max_enumeration: int = MAX_ENUMERATION) -> float:
    """Certified upper bound on ||W||_{p->q} of an IR `Affine` layer, using its conv structure.

    For l2->l2 a layer that carries a `ConvSpec` is bounded by the smaller of
    `solvers.conv_norm.conv_spectral_norm_upper` and `spectral_norm_upper` of the unrolled matrix
    (a proof when it is small enough, the cheap bound otherwise).
    """
    p, q = parse_norm(p, "input norm"), parse_norm(q, "output norm")
    W = layer.weight
    if (p, q) != ("l2", "l2") or getattr(layer, "conv", None) is None:
        return operator_norm_upper(W, p, q, max_enumeration)
    from .conv_norm import conv_spectral_norm_upper, spec_reproduces

    if not spec_reproduces(layer.conv, W):  # a stale structure record must never lower the bound
        return operator_norm_upper(W, p, q, max_enumeration)
    return min(conv_spectral_norm_upper(layer.conv), spectral_norm_upper(W))
