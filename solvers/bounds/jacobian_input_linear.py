"""Linear bounds of c^T J u with the input direction u a variable of the box [-1, 1]^n: the
linf -> (any) Jacobian bound of high-dimensional inputs, where the directions cannot be enumerated.

For linf inputs, max over u in [-1, 1]^n of c^T J u = ||J^T c||_1. The interval bound of
`solvers.bounds.jacobian` bounds each entry of the row c^T J over the slopes separately and sums
them: every input picks its own worst slopes. Here the switched pass t_0 = M_0 u, s_j = d_j t_j
(d_j in [sl_j, sh_j]), t_{j+1} = M_{j+1} s_j, out = M_K s_{K-1} is relaxed as
`solvers.bounds.jacobian_linear` relaxes it (the chords of the bow tie {(t, d t)} over t in
[L, U]), but with u free in its box instead of a fixed direction: t_0 is then a linear function of
u (its interval exact), and back-substituting c^T out through the chords down to u gives one linear
function a . u + b >= c^T J u for every slope choice, whose maximum over the box is ||a||_1 + b.
All inputs share one relaxation, so their worst slopes are no longer chosen independently (on
VNN-COMP MNIST 784-256x6-10 boxes of radius 0.02 the root bound fell from 237 to 53). The signals'
[L, U] of the neurons with a free slope come from the same back-substitution (intersected with the
interval pass), as in `jacobian_linear`.

Rounding, as in `jacobian_linear`: every back-substituted sum is bounded by the |M| chain magnitude
of its row (|u| <= 1; chords have slopes in [0, 1] and intercepts at most the signal's magnitude,
each relaxed layer at most doubling the sum), so a row through j relaxed layers is widened by
4 * 2^(j+1) * gamma(N) times that magnitude (one more doubling than there: layer 0 is relaxed
too), N the longest summation chain.
"""

from __future__ import annotations

import numpy as np

from ..rounding import gamma
from .jacobian_linear import chords


def input_linear_upper(weights: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray],
                       C: np.ndarray) -> np.ndarray:
    """Sound upper bounds (c,) of max over u in [-1, 1]^n and slopes d_j in [s_lo[j], s_hi[j]]
    ((n_j,) arrays) of C[k] . (W_K D_{K-1} ... D_0 W_0 u), for each row C[k] (module doc); at
    least one ReLU layer."""
    K = len(s_lo)
    N = sum(W.shape[1] for W in weights) + C.shape[1] + 8
    relax: list = []
    mag = np.abs(weights[0]).sum(axis=1)          # |M_0| |u| with |u| <= 1
    L, U = -mag, mag.copy()                      # t_0 = M_0 u: its exact interval
    for j in range(K):
        err = 4.0 * 2.0 ** (j + 1) * gamma(N) * mag
        L, U = L - err, U + err
        if j > 0:
            free = np.flatnonzero((s_lo[j] < s_hi[j]) & (L < 0) & (U > 0))
            if free.size:  # both bounds of the free neurons' signals in one back-substitution
                lam = np.vstack([weights[j][free], -weights[j][free]])
                up = _backsubstitute(weights, relax, lam, j - 1) + np.concatenate([err[free], err[free]])
                U[free] = np.minimum(U[free], up[: free.size])
                L[free] = np.maximum(L[free], -up[free.size:])
        relax.append(chords(L, U, s_lo[j], s_hi[j]))
        if j + 1 < K:  # the interval pass of the next signal
            lo, hi = np.minimum(s_lo[j] * L, s_hi[j] * L), np.maximum(s_lo[j] * U, s_hi[j] * U)
            W = weights[j + 1]
            Wp, Wn = np.maximum(W, 0.0), np.minimum(W, 0.0)
            L, U = Wp @ lo + Wn @ hi, Wp @ hi + Wn @ lo
            mag = np.abs(W) @ (s_hi[j] * mag)
    out_mag = np.abs(C) @ (np.abs(weights[K]) @ (s_hi[K - 1] * mag))
    up = _backsubstitute(weights, relax, C @ weights[K], K - 1)
    return up + 4.0 * 2.0 ** (K + 1) * gamma(N) * out_mag + 1e-300


def _backsubstitute(weights, relax, lam: np.ndarray, i: int) -> np.ndarray:
    """Upper bounds (R,) of lam[k] . s_i (lam (R, n_i)) over u in [-1, 1]^n: the chords of t_i,
    then M_i, down to u, where the linear function's maximum is its coefficients' l1 norm."""
    const = np.zeros(lam.shape[0])
    while True:
        a_up, b_up, a_lo, b_lo = relax[i]
        pos = np.maximum(lam, 0.0)
        neg = lam - pos
        const += pos @ b_up + neg @ b_lo
        lam = (pos * a_up + neg * a_lo) @ weights[i]
        if i == 0:
            return const + np.abs(lam).sum(axis=1)
        i -= 1


__all__ = ["input_linear_upper"]
