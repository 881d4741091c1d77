"""The LipSDP matrix inequality and its validation in float64.

For a chain W_0..W_l (l hidden ReLU layers of sizes n_1..n_l) and multipliers T_k = diag(lambda_k)
>= 0, LipSDP (Fazlyab et al. 2019, ReLU slopes in [0, 1]) certifies Lip_2(f) <= sqrt(rho) when

    M(rho, T) = [[-rho I, (T_1 W_0)^T, 0, ...],
                 [T_1 W_0, -2 T_1, (T_2 W_1)^T, ...],
                 [0, T_2 W_1, -2 T_2, ...],
                 ...,
                 [..., T_l W_{l-1}, -2 T_l + W_l^T W_l]]  <=  0.

Write M = [[-rho I, B^T], [B, H]] with H the hidden block (block tridiagonal) and
B = [T_1 W_0; 0; ...]. Since -rho I < 0, the Schur complement gives
    M <= 0  <=>  A(rho) := -H - (1/rho) B B^T >= 0,  B B^T = blkdiag(T_1 W_0 W_0^T T_1, 0, ...),
so W_0 only enters through G = W_0 W_0^T (exact input reduction) and, for fixed multipliers, the
smallest feasible rho is rho*(T) = lambda_max(B^T (-H)^{-1} B) when -H > 0.

Validation (what makes a solver's answer a certificate): clip lambda >= 0, recompute rho*(T) from
the multipliers alone, inflate it by a small factor and *prove* A(rho) >= 0 with
`solvers.psd.prove_psd`, every rounding error of assembling A accounted for. The solver's own
objective is never the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..psd import prove_psd
from ..rounding import U, gamma, up
from .chain import WeightChain

# relative inflations of rho*(T) tried in turn until the Cholesky proof succeeds
INFLATIONS = (1e-9, 1e-7, 1e-5, 1e-4, 1e-3)


@dataclass(frozen=True)
class Validation:
    """A proven rho (Lip_2 <= sqrt(rho) * 2^scale_log2 of the chain) or the reason there is none."""

    proven: bool
    rho: float  # proven feasible value (inf when not proven)
    rho_recomputed: float  # rho*(T) from the multipliers before inflation (nan if unavailable)
    margin: float  # proven lower bound on lambda_min(A(rho))
    reason: str = ""


def expand_multipliers(chain: WeightChain, lams) -> list[np.ndarray]:
    """Multipliers per hidden layer as float64 vectors, clipped at 0 (scalars broadcast: Layer)."""
    out = []
    for lam, n in zip(lams, chain.hidden_sizes):
        v = np.broadcast_to(np.asarray(lam, dtype=np.float64).reshape(-1), (n,)).copy()
        v[~np.isfinite(v)] = 0.0
        out.append(np.maximum(v, 0.0))
    return out


def negative_hidden_block(
    chain: WeightChain, lams: list[np.ndarray], with_error: bool = True
) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
    """-H as a dense float64 matrix, an entrywise bound on its rounding error (unless not
    `with_error`), and the block offsets."""
    sizes = chain.hidden_sizes
    offsets = [0]
    for n in sizes:
        offsets.append(offsets[-1] + n)
    N = offsets[-1]
    A = np.zeros((N, N))
    E = np.zeros((N, N)) if with_error else None
    l = chain.depth
    for k in range(l):
        s = slice(offsets[k], offsets[k + 1])
        A[s, s] = np.diag(2.0 * lams[k])  # doubling is exact
        if k + 1 < l:  # coupling T_{k+1} W_k between hidden layers k and k+1 (0-based)
            t = slice(offsets[k + 1], offsets[k + 2])
            C = -lams[k + 1][:, None] * chain.weights[k + 1]
            A[t, s] = C
            A[s, t] = C.T
            if E is not None:
                E[t, s] = U * np.abs(C)
                E[s, t] = E[t, s].T
    wl = chain.weights[-1]
    s = slice(offsets[l - 1], offsets[l])
    last = A[s, s] - wl.T @ wl
    A[s, s] = last
    if E is not None:
        a = np.abs(wl)
        E[s, s] += gamma(wl.shape[0] + 2) * (a.T @ a) * (1.0 + 4.0 * U * wl.shape[0]) + 2.0 * U * np.abs(last)
    return A, E, offsets


def rho_of_multipliers(chain: WeightChain, lams) -> float:
    """rho*(T) for (clipped) multipliers, inf when -H is not positive definite (no proof here)."""
    lams = expand_multipliers(chain, lams)
    negH, _, _ = negative_hidden_block(chain, lams, with_error=False)
    return recompute_rho(chain, lams, negH)


def recompute_rho(chain: WeightChain, lams: list[np.ndarray], negH: np.ndarray) -> float:
    """rho*(T) = ||L^{-1} B||_2^2 with L L^T = -H (a float estimate; the proof comes after)."""
    try:
        L = np.linalg.cholesky(negH)
    except np.linalg.LinAlgError:
        return math.inf
    R = chain.reduced_input()
    B = np.zeros((negH.shape[0], R.shape[1]))
    B[: R.shape[0]] = lams[0][:, None] * R
    X = scipy.linalg.solve_triangular(L, B, lower=True, check_finite=False)
    return float(np.linalg.eigvalsh(X.T @ X)[-1]) if X.size else 0.0


def validate(chain: WeightChain, lams, rho_floor: float = 0.0) -> Validation:
    """Prove M(rho, T) <= 0 for the (clipped) multipliers `lams` at the smallest rho we can.

    `rho_floor` (e.g. the solver's objective) is a value the result will not go below: the proof
    is then done at max(inflated rho*(T), rho_floor), which only makes it easier (A is monotone).
    """
    lams = expand_multipliers(chain, lams)
    negH, E_H, offsets = negative_hidden_block(chain, lams)
    rho_star = recompute_rho(chain, lams, negH)
    if not math.isfinite(rho_star):
        return Validation(False, math.inf, math.nan, 0.0, "the hidden block -H of the multipliers is not positive definite")
    G, G_err = chain.input_gram()
    lam1 = lams[0]
    TGT = lam1[:, None] * G * lam1[None, :]
    TGT_err = lam1[:, None] * G_err * lam1[None, :] + 3.0 * U * np.abs(TGT)
    n1 = offsets[1]
    last_reason = ""
    for eta in INFLATIONS:
        rho = max(up(rho_star * (1.0 + eta)), float(rho_floor), np.finfo(float).tiny)
        c = up(1.0 / rho)  # c >= 1/rho, and A(rho) >= -H - c T G T (B B^T >= 0)
        A = negH.copy()
        A[:n1, :n1] -= c * TGT
        E = E_H.copy()
        # exact: c TGT_exact; computed: fl(negH - fl(c TGT)), one rounding each
        E[:n1, :n1] += c * TGT_err * (1.0 + 4.0 * U) + 2.0 * U * (c * np.abs(TGT) + np.abs(A[:n1, :n1]))
        proof = prove_psd(A, E)
        if proof.proven:
            return Validation(True, rho, rho_star, proof.margin)
        last_reason = proof.reason
    return Validation(False, math.inf, rho_star, 0.0, f"Cholesky proof failed at every inflation ({last_reason})")
