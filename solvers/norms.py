"""Vector norms and matrix operator norms ||M||_{p->q} = max_{||x||_p <= 1} ||M x||_q.

Norm names are "l1", "l2", "linf". `operator_norm` is exact (or raises when exactness would cost
an exponential enumeration); `operator_norm_upper` always returns a certified upper bound.
"""

from __future__ import annotations

from itertools import product
from typing import Literal

import numpy as np

from models.errors import BadInput

Norm = Literal["l1", "l2", "linf"]
NORMS: tuple[str, ...] = ("l1", "l2", "linf")
_ALIASES = {"l1": "l1", "1": "l1", "l2": "l2", "2": "l2", "linf": "linf", "inf": "linf", "l_inf": "linf", "max": "linf"}

# enumeration of sign vectors for the linf->l1 norm is exact up to this many columns/rows
MAX_ENUMERATION = 22


def parse_norm(name: str, what: str = "norm") -> str:
    key = str(name).strip().lower()
    if key not in _ALIASES:
        raise BadInput(f"unknown {what} {name!r}; choose one of l1, l2, linf")
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
        return float(np.linalg.norm(v))
    return float(np.max(np.abs(v))) if v.size else 0.0


def _inf_to_one_exact(M: np.ndarray) -> float:
    """max_{u in {-1,1}^n} ||M u||_1, enumerating sign vectors of the smaller side."""
    if M.shape[1] > M.shape[0]:
        M = M.T  # ||M||_{inf->1} = max_{u,v} v^T M u is symmetric in the roles of u and v
    m, n = M.shape
    if n == 0 or m == 0:
        return 0.0
    if n > MAX_ENUMERATION:
        raise ValueError(f"exact linf->l1 norm needs 2^{n} sign vectors")
    best = 0.0
    # fix u_0 = +1 (u and -u give the same value); enumerate the rest in chunks
    rest = n - 1
    chunk_bits = min(rest, 14)
    low = np.array(list(product((-1.0, 1.0), repeat=chunk_bits))).T if chunk_bits else np.zeros((0, 1))
    for high in product((-1.0, 1.0), repeat=rest - chunk_bits):
        signs = np.vstack([np.ones((1, low.shape[1])), np.tile(np.array(high)[:, None], (1, low.shape[1])), low])
        best = max(best, float(np.max(np.sum(np.abs(M @ signs), axis=0))))
    return best


def operator_norm(M: np.ndarray, p: str, q: str) -> float:
    """Exact ||M||_{p->q}.

    Closed forms: l1->q = max column q-norm; p->linf = max row dual(p)-norm; l2->l2 = largest
    singular value. linf->l1 and linf->l2 are NP-hard in general: computed by enumerating sign
    vectors (exact; raises ValueError above 2^22), l2->l1 likewise through its dual linf->l2.
    """
    p, q = parse_norm(p, "input norm"), parse_norm(q, "output norm")
    M = np.atleast_2d(np.asarray(M, dtype=np.float64))
    if M.size == 0:
        return 0.0
    if p == "l1":
        return float(max(vector_norm(M[:, j], q) for j in range(M.shape[1])))
    if q == "linf":
        return float(max(vector_norm(M[i], dual(p)) for i in range(M.shape[0])))
    if p == "l2" and q == "l2":
        return float(np.linalg.norm(M, 2))
    if p == "linf" and q == "l1":
        return _inf_to_one_exact(M)
    # linf->l2 (and its dual l2->l1): maximum of a convex function over the cube's vertices
    A = M if p == "linf" else M.T
    n = A.shape[1]
    if n > MAX_ENUMERATION:
        raise ValueError(f"exact {p}->{q} norm needs 2^{n} sign vectors")
    signs = np.array(list(product((-1.0, 1.0), repeat=n))).T
    return float(np.max(np.linalg.norm(A @ signs, axis=0)))


def operator_norm_upper(M: np.ndarray, p: str, q: str) -> float:
    """A certified upper bound on ||M||_{p->q}; exact whenever `operator_norm` is cheap."""
    p, q = parse_norm(p, "input norm"), parse_norm(q, "output norm")
    M = np.atleast_2d(np.asarray(M, dtype=np.float64))
    try:
        return operator_norm(M, p, q)
    except ValueError:
        pass
    m, n = M.shape
    spectral = float(np.linalg.norm(M, 2))
    if (p, q) == ("linf", "l1"):
        return float(min(np.abs(M).sum(), np.sqrt(m * n) * spectral, m * operator_norm(M, "linf", "linf"), n * operator_norm(M, "l1", "l1")))
    if (p, q) == ("linf", "l2"):
        return float(min(np.sqrt(n) * spectral, np.sqrt(np.sum(np.sum(np.abs(M), axis=1) ** 2))))
    if (p, q) == ("l2", "l1"):
        return float(min(np.sqrt(m) * spectral, np.sum(np.linalg.norm(M, axis=1))))
    raise AssertionError(f"unreachable norm pair {p}->{q}")
