"""Rigorous positive-semidefiniteness proofs and upward-rounded arithmetic in float64.

Every certified number in `solvers.sdp` and in the spectral-norm bounds ends with a call to
`prove_psd`: a floating-point Cholesky factorisation plus a residual bound that accounts for every
rounding error, so that a `True` answer is a proof about the exact (real) matrix, not a numerical
impression. The argument (standard error analysis, Higham, *Accuracy and Stability of Numerical
Algorithms*, ch. 3 and 10; no underflow assumed, which the inputs' magnitudes guarantee):

    Let A be the exact symmetric matrix, A_hat its float64 approximation with |A - A_hat| <= E
    (elementwise; E describes how A_hat was computed). Pick a shift d > 0 and compute the float
    Cholesky factor L of fl(A_hat - d I). Then
        A = L L^T + d I + (fl(A_hat - d I) - L L^T) + (A_hat - d I - fl(A_hat - d I)) + (A - A_hat),
    and with ||X||_2 <= ||X||_F for each of the last three terms,
        lambda_min(A) >= d - ||R||_F - ||D||_F - ||E||_F,
    where R bounds the Cholesky residual (computed as fl(Ahat_d - fl(L L^T)) plus the rounding
    errors of that computation: gamma_n |L| |L|^T and u |residual|) and D the rounding of the
    diagonal shift. When the right-hand side is positive, A is positive definite.
All Frobenius norms and the final comparison are rounded upward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .rounding import U, add_up, frobenius_up, gamma

@dataclass(frozen=True)
class PsdProof:
    """Outcome of `prove_psd`: `proven` is a theorem about the exact matrix when True."""

    proven: bool
    shift: float  # d: the proof shows lambda_min(A) >= shift - error
    error: float  # upper bound of the neglected terms' spectral norm
    reason: str = ""

    @property
    def margin(self) -> float:
        """A proven lower bound on lambda_min(A) (meaningful only when proven)."""
        return self.shift - self.error


def prove_psd(A: np.ndarray, error: np.ndarray | float | None = None, shift: float | None = None) -> PsdProof:
    """Prove that every symmetric A_exact with |A_exact - A| <= error (elementwise) is positive definite.

    `A` is the float64 approximation (it is symmetrised, and that rounding is accounted for);
    `error` is an elementwise bound (matrix, or a scalar for every entry), default 0. `shift` is
    the Cholesky shift d; by default half of the smallest eigenvalue estimated by LAPACK (the
    estimate only steers the choice; the proof does not rely on it).
    """
    A = np.asarray(A, dtype=np.float64)
    n = A.shape[0]
    if A.ndim != 2 or A.shape[1] != n:
        raise ValueError(f"prove_psd needs a square matrix, got shape {A.shape}")
    if n == 0:
        return PsdProof(True, 0.0, 0.0)
    if not np.all(np.isfinite(A)):
        return PsdProof(False, 0.0, math.inf, "matrix has non-finite entries")
    E = np.zeros_like(A) if error is None else np.broadcast_to(np.asarray(error, dtype=np.float64), A.shape)
    if np.any(E < 0) or not np.all(np.isfinite(E)):
        raise ValueError("error bounds must be finite and non-negative")
    # symmetrise: (a + b) / 2 costs one rounding of the sum (the halving is exact)
    As = 0.5 * (A + A.T)
    E = 0.5 * (E + E.T) + 2.0 * U * np.abs(As)
    if shift is None:
        try:
            lam_min = float(np.linalg.eigvalsh(As)[0])
        except np.linalg.LinAlgError:
            return PsdProof(False, 0.0, math.inf, "eigenvalue estimate failed")
        if not lam_min > 0:
            return PsdProof(False, 0.0, math.inf, f"estimated smallest eigenvalue {lam_min:.3g} is not positive")
        shift = 0.5 * lam_min
    shift = float(shift)
    if not shift > 0:
        return PsdProof(False, shift, math.inf, "the shift must be positive")
    Ad = As.copy()
    Ad[np.diag_indices(n)] -= shift
    diag_round = 2.0 * U * np.abs(np.diag(Ad))  # rounding of the shifted diagonal
    try:
        L = np.linalg.cholesky(Ad)
    except np.linalg.LinAlgError:
        return PsdProof(False, shift, math.inf, "Cholesky factorisation of the shifted matrix failed")
    absL = np.abs(L)
    # fl(L L^T) has error <= gamma_n |L||L|^T; fl(|L||L|^T) itself underestimates by <= gamma_n
    prod_err = gamma(n + 2) * (absL @ absL.T) * (1.0 + 2.0 * gamma(n + 2))
    resid = Ad - L @ L.T
    resid_bound = np.abs(resid) * (1.0 + 2.0 * U) + prod_err
    total = add_up(frobenius_up(resid_bound), frobenius_up(E), frobenius_up(diag_round))
    proven = total < shift
    return PsdProof(proven, shift, total, "" if proven else f"rounding-error bound {total:.3g} >= shift {shift:.3g}")
