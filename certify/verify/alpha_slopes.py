"""Optimised lower slopes of the ReLU relaxations (alpha-CROWN's idea: Xu et al., ICLR 2021).

Any lower line alpha z with alpha in [0, 1] bounds relu(z) from below, so every choice of the
slopes of the unstable neurons gives a sound back-substituted bound. For each row being bounded
(one per box, its own slopes per earlier neuron) a few projected Adam steps on the bound, by
automatic differentiation in float32, pick slopes; the bound itself is then recomputed with them
by the sound float64 back-substitution of `batch_bounds` (with its rounding allowance), so the
optimiser's arithmetic never enters a certified number. On ACAS Xu sub-boxes the deep layers'
bounds come within a few percent of the LP relaxation's at a fraction of its cost (the Jacobian
bounds built on them are 5-80x tighter than with CROWN's fixed slopes).
"""

from __future__ import annotations

import numpy as np

ITERATIONS = 10
STEP = 0.25
WORK = 4e9  # estimated multiply-adds of one optimisation (about half a second); wider calls keep fixed slopes


def optimization_work(live, j: int, boxes: int, rows: int, iterations: int = ITERATIONS) -> float:
    """Multiply-adds of `optimized_lower_slopes` for `rows` rows of layer j on `boxes` boxes:
    forward and backward passes (about three back-substitutions) per step."""
    per_row = sum(w.size for w in live.weight[:j]) + live.blocks[j].weight.size
    return 3.0 * iterations * boxes * rows * per_row


def optimized_lower_slopes(live, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                           iterations: int = ITERATIONS, step: float = STEP) -> list[np.ndarray]:
    """Lower slopes (B, R, n_t) for each ReLU layer t < j (alive neurons of `live`), chosen to
    shrink the upper bounds of the rows `coeff` (R, n_j) or (B, R, n_j) of z_j over each box
    [lo, hi] (B, n). Stable neurons keep their exact slope; a heuristic, not a bound."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: threads only contend with numpy's (and other runs')
    try:
        return _optimize(torch, live, j, coeff, lo, hi, iterations, step)
    finally:
        torch.set_num_threads(threads)


def _optimize(torch, live, j: int, coeff: np.ndarray, lo: np.ndarray, hi: np.ndarray, iterations: int,
              step: float) -> list[np.ndarray]:
    B = lo.shape[0]

    def T(a):
        return torch.from_numpy(np.array(a, dtype=np.float32))  # a writable copy

    C = T(coeff)
    if C.ndim == 2:
        C = C.expand(B, *C.shape)
    R = C.shape[1]
    lam0 = C @ T(live.blocks[j].weight[:, live.inputs_of(j)])
    const0 = C @ T(live.blocks[j].bias)
    free, start, up_slope, up_icpt, params = [], [], [], [], []
    for t in range(j):
        r = live.relax[t]
        unstable = (r.up_slope > 0.0) & (r.up_slope < 1.0)
        free.append(T(unstable[:, None, :]))
        start.append(T(r.lo_slope[:, None, :]))
        up_slope.append(T(r.up_slope[:, None, :]))
        up_icpt.append(T(r.up_icpt))
        # CROWN's slope as the start: the optimiser only moves from a sound, usually good, choice
        params.append(T(np.broadcast_to(r.lo_slope[:, None, :], (B, R, r.lo_slope.shape[1]))).clone().requires_grad_(True))
    weight = [T(w) for w in live.weight]
    bias = [T(b) for b in live.bias]
    t_lo, t_hi = T(lo), T(hi)
    opt = torch.optim.Adam(params, lr=step)
    for _ in range(iterations):
        lam, const = lam0, const0
        for t in range(j - 1, -1, -1):
            pos, neg = lam.clamp(min=0.0), lam.clamp(max=0.0)
            const = const + torch.einsum("brn,bn->br", pos, up_icpt[t])
            slope = free[t] * params[t] + (1.0 - free[t]) * start[t]
            lam = pos * up_slope[t] + neg * slope
            const = const + lam @ bias[t]
            lam = lam @ weight[t]
        upper = const + torch.einsum("brn,bn->br", lam.clamp(min=0.0), t_hi) + torch.einsum("brn,bn->br", lam.clamp(max=0.0), t_lo)
        opt.zero_grad()
        upper.sum().backward()
        opt.step()
        with torch.no_grad():
            for p in params:
                p.clamp_(0.0, 1.0)
    out = []
    for t, p in enumerate(params):
        r = live.relax[t]
        unstable = ((r.up_slope > 0.0) & (r.up_slope < 1.0))[:, None, :]
        out.append(np.where(unstable, p.detach().numpy().astype(np.float64), r.lo_slope[:, None, :]))
    return out


__all__ = ["optimized_lower_slopes", "optimization_work", "ITERATIONS", "WORK"]
