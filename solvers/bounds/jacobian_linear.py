"""Linear (CROWN-style) bounds of a switched linear pass: the Jacobian-vector products of
`solvers.bounds.jacobian` bounded by back-substitution instead of interval arithmetic.

For a fixed direction u the pass t_0 = M_0 u, s_j = d_j * t_j (d_j in [sl_j, sh_j] per neuron),
t_{j+1} = M_{j+1} s_j has a constant first signal, so its only freedom is the slopes. Over
t in [L, U] the set {(t, d t)} of one neuron is the "bow tie" between the lines sl t and sh t;
its convex hull is bounded by two chords:

    d t <= a_up t + b_up   through (L, sl L) and (U, sh U)      (max(sl t, sh t) is convex)
    d t >= a_lo t + b_lo   through (L, sh L) and (U, sl U)      (min(sl t, sh t) is concave)

(exact lines sl t / sh t when t keeps one sign; a stable neuron, sl = sh, is exact). Substituting
them layer by layer, as CROWN does for ReLUs (Shi et al., NeurIPS 2022, relax the Jacobian graph
the same way), bounds any linear functional of the pass while keeping the correlations between
neurons that interval arithmetic loses (4-10x tighter on ACAS Xu sub-boxes). The signals t_j of
neurons with a free slope get their [L, U] from the same back-substitution, intersected with the
interval pass; only those neurons are back-substituted (rows tagged with their instance: a
box and a direction), and t_1 not at all (one affine map of a box: its intervals are exact).

Rounding: every back-substituted sum is bounded by the |M| chain magnitude of its row (the chords
have slopes in [0, 1] and intercepts at most the signal's magnitude; each layer at most doubles
the sum), so results are widened by 4 * 2^j * gamma(N) times that magnitude, as in
`solvers.bounds.symbolic`.
"""

from __future__ import annotations

import numpy as np

from ..rounding import gamma
from .blocked import right_abs_matmul, right_interval_matmul


def chords(L: np.ndarray, U: np.ndarray, sl: np.ndarray, sh: np.ndarray):
    """(a_up, b_up, a_lo, b_lo): the chord relaxation of d t, d in [sl, sh] (0 <= sl <= sh),
    t in [L, U] (module doc)."""
    cross = (L < 0) & (U > 0)
    den = np.where(cross, U - L, 1.0)
    a_up = np.where(L >= 0, sh, np.where(U <= 0, sl, (sh * U - sl * L) / den))
    a_lo = np.where(L >= 0, sl, np.where(U <= 0, sh, (sl * U - sh * L) / den))
    # the intercepts are >= 0 (<= 0) exactly; rounding is covered by the widening
    b_up = np.where(cross, np.maximum((sh - a_up) * U, 0.0), 0.0)
    b_lo = np.where(cross, np.minimum((sl - a_lo) * U, 0.0), 0.0)
    return a_up, b_up, a_lo, b_lo


def linear_pass_upper(maps: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray],
                      directions: np.ndarray, rows: np.ndarray, box_of: np.ndarray) -> np.ndarray:
    """Sound upper bounds (P, r) of rows[c] . (M_k S_{k-1} ... S_0 M_0 u_i) over every slope choice
    S_j = diag(d), d in [s_lo[j][b], s_hi[j][b]] with b = box_of[i], for each instance i.

    maps: M_0..M_k; s_lo, s_hi: k arrays (B, n_j); directions (P, n): instance i's direction u_i;
    rows (r, m). Back-substituted rows carry their instance index, so each layer is one matrix
    product however the free neurons are spread over instances."""
    K = len(s_lo)
    P = directions.shape[0]
    N = sum(M.shape[1] for M in maps) + rows.shape[1] + 8  # longest summation chain
    sl, sh = [np.take(s, box_of, axis=0) for s in s_lo], [np.take(s, box_of, axis=0) for s in s_hi]
    t0 = directions @ maps[0].T  # (P, n_0)
    s0_lo, s0_hi = np.minimum(sl[0] * t0, sh[0] * t0), np.maximum(sl[0] * t0, sh[0] * t0)
    # interval pass and |M| chain magnitudes of every t_j (P, n_j)
    # (|M|, M+ and M- are copies of a map: made in column blocks when they do not fit in memory)
    what = "linear bounds of the Jacobian passes"
    mag = right_abs_matmul(np.abs(directions), maps[0].T, what)
    lo, hi = s0_lo, s0_hi
    relax: list = [None]  # chords of switch layer j >= 1 (layer 0 is a box: its input is constant)
    for j in range(1, K):
        M = maps[j]
        mag = right_abs_matmul(mag * sh[j - 1], M.T, what)
        err = 4.0 * 2.0**j * gamma(N) * mag
        L, U = right_interval_matmul(lo, hi, M.T, what)
        L, U = L - err, U + err
        # t_1 = M_1 s_0 is one affine map of a box: its interval bounds are already exact
        inst, neuron = np.nonzero((sl[j] < sh[j]) & (L < 0) & (U > 0)) if j > 1 else ((), ())
        if len(inst):  # back-substitute the free neurons' signals: both bounds in one pass
            lam = np.concatenate([M[neuron], -M[neuron]])
            up = _backsubstitute(maps, relax, s0_lo, s0_hi, j - 1, lam, np.concatenate([inst, inst]))
            e = err[inst, neuron]
            U[inst, neuron] = np.minimum(U[inst, neuron], up[: len(inst)] + e)
            L[inst, neuron] = np.maximum(L[inst, neuron], -up[len(inst):] - e)
        relax.append(chords(L, U, sl[j], sh[j]))
        lo, hi = np.minimum(sl[j] * L, sh[j] * L), np.maximum(sl[j] * U, sh[j] * U)
    last, last_mag = _rows_through(rows, maps[K])
    out_mag = (mag * sh[K - 1]) @ last_mag.T  # (P, r)
    r = rows.shape[0]
    lam = np.broadcast_to(last, (P, r, maps[K].shape[1]))
    # lam is on s_{K-1}: the chords of t_{K-1}, then M_{K-1}, ... (s_0 directly when K = 1)
    up = _backsubstitute(maps, relax, s0_lo, s0_hi, K - 1, lam, None)
    return up + 4.0 * 2.0**K * gamma(N) * out_mag


def _rows_through(rows: np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows @ M, |rows| @ |M|). Rows that are signed unit vectors (the +-e_k of every entry of a
    Jacobian row: 2n x n) select rows of M: the same floats as the products (each sum has one
    nonzero term, +-1 times an entry), without their 2n x n x m multiply-adds (on MNIST's 784
    inputs a quarter of the linear passes' time)."""
    nonzero = rows != 0
    if np.all(nonzero.sum(axis=1) == 1):
        idx = np.argmax(nonzero, axis=1)
        sign = rows[np.arange(rows.shape[0]), idx]
        if np.all(np.abs(sign) == 1.0):
            picked = M[idx]
            return np.where(sign[:, None] > 0, picked, -picked), np.abs(picked)
    return rows @ M, np.abs(rows) @ np.abs(M)


def _backsubstitute(maps, relax, s0_lo, s0_hi, i: int, lam: np.ndarray, owner: np.ndarray | None) -> np.ndarray:
    """Upper bound of lam[k] . s_i of instance owner[k] (lam (R, n_i)), or of lam[p, k] . s_i of
    instance p when `owner` is None (lam (P, r, n_i)): the chords of t_i, then M_i, down to the
    box of s_0. (Positive and negative parts multiplied separately: np.where is several times
    slower on these shapes.)"""
    def take(a):  # (np.take gathers rows 2-3x faster than a[owner] on these shapes)
        return np.take(a, owner, axis=0) if owner is not None else a[:, None, :]

    const = np.zeros(lam.shape[:-1])
    while i > 0:
        a_up, b_up, a_lo, b_lo = relax[i]
        pos = np.maximum(lam, 0.0)
        neg = lam - pos
        const += _rowdot(pos, take(b_up)) + _rowdot(neg, take(b_lo))
        lam = pos * take(a_up)
        lam += neg * take(a_lo)
        lam = lam @ maps[i]
        i -= 1
    pos = np.maximum(lam, 0.0)
    return const + _rowdot(pos, take(s0_hi)) + _rowdot(lam - pos, take(s0_lo))


def _rowdot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """sum over the last axis of x * y (y broadcast over x's rows)."""
    return np.einsum("...n,...n->...", x, np.broadcast_to(y, x.shape))
