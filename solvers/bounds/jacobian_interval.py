"""Interval bounds of the Clarke Jacobians of a ReLU network over slope boxes, and slope patterns.

Every Clarke Jacobian J = W_k D_{k-1} W_{k-1} ... D_0 W_0 of a box has diagonal slopes D_j within
[s_lo, s_hi]: 1 on active, 0 on inactive and [0, 1] on unstable neurons (`phase_slopes`), so it
lies in an interval matrix [L, U] computed by interval arithmetic through the products. Its
float64 rounding is bounded by the |W| chain: 4 gamma(N) |W_k| S_{k-1} ... |W_0| entrywise, with
S_j = diag(s_hi) and N the length of the summation chain (inputs of every map, plus 2).
"""

from __future__ import annotations

import numpy as np

from ..phases import ACTIVE, INACTIVE, UNSTABLE
from ..rounding import gamma
from .blocked import abs_matmul, interval_matmul


def phase_slopes(phases: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(s_lo, s_hi) per ReLU layer: the slope interval of each neuron given its phase (any shape)."""
    return ([(ph == ACTIVE).astype(np.float64) for ph in phases],
            [(ph != INACTIVE).astype(np.float64) for ph in phases])


def interval_jacobian(weights: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray],
                      chain: int | None = None, what: str = "interval bounds of the Jacobian") -> tuple[np.ndarray, np.ndarray]:
    """(L, U): entrywise bounds (m, n) of every Jacobian with slopes in [s_lo[j], s_hi[j]] ((n_j,)
    arrays), widened by the rounding allowance; a batch of slope boxes ((B, n_j) arrays) gives
    (B, m, n). The same list passed as s_lo and s_hi fixes every slope: the one Jacobian of each
    box is multiplied out (`fixed_jacobian`). `chain`: the summation chain length when the
    caller's products extend it (default: the maps' inputs plus 2)."""
    if s_lo is s_hi:  # one slope per neuron (e.g. vertex patterns): each box holds one Jacobian
        M, E = fixed_jacobian(weights, s_lo, chain, what)
        return M - E, M + E
    W0 = weights[0]
    batch = s_lo[0].shape[:-1] if s_lo else ()
    L = U = np.broadcast_to(W0, batch + W0.shape)
    mag = np.abs(L)
    for sl, sh, W in zip(s_lo, s_hi, weights[1:]):
        sl, sh = sl[..., None], sh[..., None]
        # slope s in [s_lo, s_hi] (a subset of [0, 1]) times an entry in [L, U]
        L, U = np.minimum(sl * L, sh * L), np.maximum(sl * U, sh * U)
        L, U = interval_matmul(W, L, U, what)
        mag = abs_matmul(W, sh * mag, what)
    E = rounding_allowance(weights, mag, chain)
    return L - E, U + E


def fixed_jacobian(weights: list[np.ndarray], slopes: list[np.ndarray], chain: int | None = None,
                   what: str = "the Jacobian") -> tuple[np.ndarray, np.ndarray]:
    """(M, E): the Jacobian W_k D_{k-1} ... D_0 W_0 with the given slopes ((n_j,) or a batch
    (B, n_j)) multiplied out in float64, and E >= 0 bounding its rounding error entrywise (the
    allowance of the module docstring): the exact Jacobian lies in [M - E, M + E]."""
    M = np.broadcast_to(weights[0], (slopes[0].shape[:-1] if slopes else ()) + weights[0].shape)
    mag = np.abs(M)
    for s, W in zip(slopes, weights[1:]):
        s = s[..., None]
        M, mag = W @ (s * M), abs_matmul(W, s * mag, what)
    return M, rounding_allowance(weights, mag, chain)


def rounding_allowance(weights: list[np.ndarray], mag: np.ndarray, chain: int | None = None) -> np.ndarray:
    """The bound of the float64 rounding error of Jacobian products whose magnitude chain is `mag`
    (|W_k| S_{k-1} ... |W_0|, or a row c^T of it): 4 gamma(N) mag, N the summation chain
    (default: the maps' inputs plus 2). The one place this allowance is written."""
    if chain is None:
        chain = sum(W.shape[1] for W in weights) + 2
    return 4.0 * gamma(chain) * mag


def slope_patterns(phases: list[np.ndarray]) -> list[np.ndarray]:
    """The 2^k vertex slope patterns of k unstable neurons (each 0 or 1; active 1, inactive 0), per
    ReLU layer a (2^k, n_j) array; pattern p sets the i-th unstable neuron (layer by layer) to bit
    k-1-i of p (the order of itertools.product). J is affine in each slope, so a convex norm of J
    over slopes in [0, 1] is largest at one of these patterns."""
    free = [np.flatnonzero(ph == UNSTABLE) for ph in phases]
    k = sum(f.size for f in free)
    P = 2**k
    bits = ((np.arange(P)[:, None] >> np.arange(k - 1, -1, -1)[None, :]) & 1).astype(np.float64)
    out, used = [], 0
    for ph, f in zip(phases, free):
        s = np.repeat((ph == ACTIVE).astype(np.float64)[None, :], P, axis=0)
        s[:, f] = bits[:, used: used + f.size]
        used += f.size
        out.append(s)
    return out


__all__ = ["fixed_jacobian", "interval_jacobian", "phase_slopes", "rounding_allowance", "slope_patterns"]
