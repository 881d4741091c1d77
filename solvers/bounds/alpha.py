"""Optimised lower slopes of the ReLU relaxations (alpha-CROWN's idea: Xu et al., ICLR 2021).

Any lower line alpha z with alpha in [0, 1] bounds relu(z) from below, so every choice of the
slopes of the unstable neurons gives a sound back-substituted bound. For each row being bounded
(one per box, its own slopes per earlier neuron) a few projected Adam steps on the bound,
differentiated by hand in float32, pick slopes; the bound itself is then recomputed with them by
the sound float64 back-substitution of `symbolic` (with its rounding allowance), so the
optimiser's arithmetic never enters a certified number. On ACAS Xu sub-boxes the deep layers'
bounds come close to the LP relaxation's at a fraction of its cost (the Jacobian bounds built on
them 5-60x tighter than with the fixed slopes, on three sub-boxes of net 2_8).
"""

from __future__ import annotations

import time

import numpy as np

from ..runtime import stop_requested
from .adam import projected_adam_step

ITERATIONS = 10
STEP = 0.25
WORK = 4e9  # estimated multiply-adds of one optimisation (about half a second); wider calls keep fixed slopes
RATE = 2 * WORK  # multiply-adds per second, for a time share (a layer whose one step exceeds it keeps fixed slopes)


def optimization_work(live, j: int, boxes: int, rows: int, iterations: int = ITERATIONS) -> float:
    """Multiply-adds of `optimized_lower_slopes` for `rows` rows of layer j on `boxes` boxes:
    forward and backward passes (about three back-substitutions) per step."""
    per_row = sum(w.size for w in live.weight[:j]) + live.blocks[j].weight.size
    return 3.0 * iterations * boxes * rows * per_row


def optimization_bytes(live, j: int, boxes: int, rows: int) -> float:
    """Bytes of `optimized_lower_slopes` and of the bound recomputed with its slopes: per (box, row),
    float32 slopes, Adam moments and the kept rows of every layer < j, about eight float32 working
    vectors of the widest layer, then the float64 slopes and the back-substitution's arrays."""
    sizes = [w.shape[0] for w in live.weight[:j]] + [live.blocks[j].weight.shape[1]]
    total, widest = sum(sizes), max(sizes)
    return float(boxes) * rows * (4.0 * (4 * total + 8 * widest) + 8.0 * (total + 6 * widest))


def optimized_lower_slopes(live, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                           iterations: int = ITERATIONS, step: float = STEP,
                           deadline: float | None = None) -> list[np.ndarray]:
    """Lower slopes (B, R, n_t) for each ReLU layer t < j (alive neurons of `live`), chosen to
    shrink the upper bounds of the rows `coeff` (R, n_j) or (B, R, n_j) of z_j over each box
    [lo, hi] (B, n). Stable neurons keep their exact slope; a heuristic, not a bound.

    Each step back-substitutes the rows (as `symbolic.backsubstitute_upper`, without
    rounding terms), differentiates the bound by hand in reverse (the bound is piecewise linear in
    the slopes: d bound / d alpha_t = (the row's negative part on layer t) * (the gradient flowing
    back into layer t)), and takes a projected Adam step."""
    B = lo.shape[0]
    C = np.asarray(coeff, dtype=np.float32)
    if C.ndim == 2:
        C = np.broadcast_to(C, (B,) + C.shape)
    R = C.shape[1]
    f32 = [np.asarray(w, dtype=np.float32) for w in live.weight]
    bias = [np.asarray(b, dtype=np.float32) for b in live.bias]
    lam0 = C @ np.asarray(live.blocks[j].weight[:, live.inputs_of(j)], dtype=np.float32)
    free = [((r.up_slope > 0.0) & (r.up_slope < 1.0))[:, None, :] for r in live.relax[:j]]
    up_slope = [r.up_slope[:, None, :].astype(np.float32) for r in live.relax[:j]]
    up_icpt = [r.up_icpt[:, None, :].astype(np.float32) for r in live.relax[:j]]
    # CROWN's slopes as the start: the optimiser only moves from a sound, usually good, choice
    alpha = [np.broadcast_to(r.lo_slope[:, None, :], (B, R, r.lo_slope.shape[1])).astype(np.float32)
             for r in live.relax[:j]]
    m = [np.zeros_like(a) for a in alpha]
    v = [np.zeros_like(a) for a in alpha]
    x_hi, x_lo = hi.astype(np.float32)[:, None, :], lo.astype(np.float32)[:, None, :]
    for k in range(1, iterations + 1):
        if k > 1 and (stop_requested() or (deadline is not None and time.perf_counter() >= deadline)):
            break  # (any slopes are sound: the ones reached so far)
        lams = []  # the row entering each ReLU layer t (j - 1 down to 0)
        lam = lam0
        for t in range(j - 1, -1, -1):
            lams.append(lam)
            lam = (np.maximum(lam, 0.0) * up_slope[t] + np.minimum(lam, 0.0) * alpha[t]) @ f32[t]
        grad = np.where(lam > 0.0, x_hi, x_lo)  # d bound / d (row over the input)
        for t, lam in zip(range(j), reversed(lams)):
            g = grad @ f32[t].T + bias[t]  # d bound / d (row after the relaxation of layer t)
            neg = np.minimum(lam, 0.0)
            d_alpha = np.where(free[t], g * neg, 0.0)
            grad = np.where(lam > 0.0, g * up_slope[t] + up_icpt[t], g * alpha[t])
            alpha[t], m[t], v[t] = projected_adam_step(alpha[t], d_alpha, m[t], v[t], k, step, 1.0)
    return [np.where(f, a.astype(np.float64), r.lo_slope[:, None, :]) for f, a, r in zip(free, alpha, live.relax)]


__all__ = ["optimized_lower_slopes", "optimization_bytes", "optimization_work", "ITERATIONS", "RATE", "WORK"]
