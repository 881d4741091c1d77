"""A batched gradient search for points of a box where a ReLU network's Jacobian norm is large.

||J(x)||_{p->q} is constant on each activation region, so its gradient in x is zero almost
everywhere: a local search on it sees nothing in 784 dimensions (random perturbations almost
never change the norm). The search here ascends a smoothed norm instead: every ReLU'(z) = 1[z > 0]
in the Jacobian is replaced by sigmoid(z / tau), so the soft Jacobian J_tau(x) depends smoothly on
x, and its gradient says which neurons to switch on or off (d norm / d slope of neuron i, times
the way to move z_i) and how to move x to do so. The temperature tau (per neuron, a share of its
pre-activation range on the box) is lowered geometrically over the run, so J_tau tends to the
exact Jacobian. Steps are signed gradient steps (as projected gradient attacks take them) of a
decaying share of the box's width, projected on the box.

All restarts are one float32 batch in torch. After every step the exact (hard) Jacobian norm of
every restart is estimated in the same arithmetic and the best point of each restart's trajectory
is kept. Nothing here is a bound: the caller replays the returned points in float64
(`certify.lipschitz.replay`), and only replayed values count.

The norm smoothed: c^T J for a target c (its dual norm); for linf -> l1, ||J^T c||_1 for the
output signs c of the best sign vector of the soft Jacobian (enumerated when there are at most
`ENUMERATE_OUTPUTS` outputs, else by alternating sign ascent); the largest row (q = linf) or
column (p = l1) norm; other pairs by the Frobenius norm (a ranking surrogate only).
"""

from __future__ import annotations

import time

import numpy as np

ENUMERATE_OUTPUTS = 12    # linf -> l1: output sign vectors enumerated up to this many outputs
TAU_START, TAU_END = 0.3, 0.003  # temperature as a share of each neuron's pre-activation range
STEP_START, STEP_END = 0.1, 0.002  # signed step as a share of the box's width per input
SPREAD_SAMPLES = 16       # uniform points of the box sizing the temperature's unit (with the starts)


def ascend(weights: list[np.ndarray], biases: list[np.ndarray], lo: np.ndarray, hi: np.ndarray,
           starts: np.ndarray, p: str, q: str | None, target: np.ndarray | None = None, steps: int = 60,
           deadline: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(points (B, n), their estimated exact norms (B,)): for each start, the best point of its
    ascent on the smoothed norm (module doc), by the exact norm estimated in float32.

    `weights`, `biases`: the affine maps (ReLU between consecutive ones); `starts` (B, n) inside
    [lo, hi]. The temperature's unit is each neuron's spread of pre-activations over the starts and
    `SPREAD_SAMPLES` uniform points of the box (the
    ranges of sound bounds, wider, gave smaller norms on MNIST nets). `deadline`
    (`time.perf_counter()`): the schedule of temperatures and step sizes runs by the time left
    (at most `steps` steps), and the run ends at the first step past it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small products on a shared machine: threads only wait for each other
    denormal = torch.set_flush_denormal(True)  # saturated sigmoids: slow subnormal arithmetic otherwise
    try:
        with torch.enable_grad():
            return _ascend(torch, weights, biases, lo, hi, starts, p, q, target, steps, deadline)
    finally:
        torch.set_num_threads(threads)
        if denormal:
            torch.set_flush_denormal(False)


def _ascend(torch, weights, biases, lo, hi, starts, p, q, target, steps, deadline):
    f32 = torch.float32
    Ws = [torch.tensor(w, dtype=f32) for w in weights]
    bs = [torch.tensor(b, dtype=f32) for b in biases]
    x_lo, x_hi = torch.tensor(lo, dtype=f32), torch.tensor(hi, dtype=f32)
    width = x_hi - x_lo
    x = torch.tensor(np.clip(starts, lo, hi), dtype=f32)
    probe = np.vstack([starts, np.random.default_rng(0).uniform(lo, hi, (SPREAD_SAMPLES, len(lo)))])
    with torch.no_grad():
        zs, _ = _forward(torch, Ws, bs, torch.tensor(probe, dtype=f32))
    unit = [torch.clamp(z.max(0).values - z.min(0).values, min=1e-6) for z in zs]
    signs = None
    if (p, q) == ("linf", "l1"):  # the output signs of each restart, carried from step to step
        with torch.no_grad():
            zs, _ = _forward(torch, Ws, bs, x)
            signs = _best_signs(torch, _jacobian(torch, Ws, [(z > 0).to(f32) for z in zs]))
    c_target = None if target is None else torch.tensor(np.asarray(target, dtype=np.float64), dtype=f32)
    best_x, best_v = x.detach().clone(), torch.full((x.shape[0],), -np.inf)
    t0 = time.perf_counter()
    span = None if deadline is None else max(deadline - t0, 1e-9)
    for k in range(steps + 1):
        # progress through the schedule: by steps, or by time when a deadline is given (whichever is
        # further), so that a run cut by its deadline still ends at a low temperature
        frac = k / max(steps, 1)
        if span is not None:
            frac = max(frac, (time.perf_counter() - t0) / span)
        last = k == steps or frac >= 1.0
        frac = min(frac, 1.0)
        kappa = TAU_START * (TAU_END / TAU_START) ** frac
        x.requires_grad_(True)
        zs, _ = _forward(torch, Ws, bs, x)
        soft = [torch.sigmoid(z / (kappa * u)) for z, u in zip(zs, unit)]
        with torch.no_grad():
            hard = _jacobian(torch, Ws, [(z > 0).to(f32) for z in zs])
            if signs is not None:
                signs = _improve_signs(torch, hard, signs)
            v = _norm(torch, hard, p, q, c_target, signs)
            better = v > best_v
            best_v = torch.where(better, v, best_v)
            best_x[better] = x.detach()[better]
        if last:
            break
        J = _jacobian(torch, Ws, soft)
        if signs is not None:
            with torch.no_grad():
                signs = _improve_signs(torch, J.detach(), signs)
        obj = _norm(torch, J, p, q, c_target, signs)
        (grad,) = torch.autograd.grad(obj.sum(), x)
        step = STEP_START * (STEP_END / STEP_START) ** frac
        with torch.no_grad():
            x = torch.minimum(torch.maximum(x + step * width * torch.sign(grad), x_lo), x_hi)
    if signs is not None:  # the kept points' values with their best output signs (enumerated when few)
        with torch.no_grad():
            zs, _ = _forward(torch, Ws, bs, best_x)
            hard = _jacobian(torch, Ws, [(z > 0).to(f32) for z in zs])
            best_v = torch.maximum(best_v, _norm(torch, hard, p, q, c_target, _best_signs(torch, hard)))
    order = torch.argsort(best_v, descending=True)
    # (clipped again in float64: a float32 point rounded from the box may lie just outside it)
    return np.clip(best_x[order].double().numpy(), lo, hi), best_v[order].double().numpy()


def _forward(torch, Ws, bs, x):
    """Pre-activations of every ReLU layer and the output."""
    zs, h = [], x
    for W, b in zip(Ws[:-1], bs[:-1]):
        z = h @ W.T + b
        zs.append(z)
        h = torch.relu(z)
    return zs, h @ Ws[-1].T + bs[-1]


def _jacobian(torch, Ws, slopes):
    """W_k S_{k-1} ... S_0 W_0 per point (B, m, n), multiplied from the output side."""
    B = slopes[0].shape[0] if slopes else 1
    J = Ws[-1].expand(B, -1, -1)
    for W, s in zip(reversed(Ws[:-1]), reversed(slopes)):
        J = (J * s[:, None, :]) @ W
    return J


def _best_signs(torch, J):
    """linf -> l1: output signs c (B, m) of the largest ||J^T c||_1 of each Jacobian: enumerated
    with few outputs (one point at a time: 2^(m-1) x n values), else alternating ascent."""
    m = J.shape[1]
    if m > ENUMERATE_OUTPUTS:
        return _improve_signs(torch, J, torch.sign(J.sum(2)) + (J.sum(2) == 0).to(J.dtype), rounds=20)
    grid = np.array(np.meshgrid(*([[1.0]] + [[-1.0, 1.0]] * (m - 1)), indexing="ij")).reshape(m, -1).T
    C = torch.tensor(grid, dtype=J.dtype)
    return C[torch.stack([torch.einsum("km,mn->kn", C, j).abs().sum(-1).argmax() for j in J])]


def _improve_signs(torch, J, signs, rounds: int = 3):
    """Alternating sign ascent on ||J^T c||_1 = max_u c^T J u from the signs c (B, m): u = sign(J^T c),
    c = sign(J u), each kept only where it does not lower the value."""
    value = torch.einsum("bm,bmn->bn", signs, J).abs().sum(-1)
    for _ in range(rounds):
        u = torch.sign(torch.einsum("bm,bmn->bn", signs, J))
        c = torch.sign(torch.einsum("bmn,bn->bm", J, u))
        c = c + (c == 0).to(J.dtype)
        v = torch.einsum("bm,bmn->bn", c, J).abs().sum(-1)
        up = v > value
        if not bool(up.any()):
            break
        signs, value = torch.where(up[:, None], c, signs), torch.maximum(v, value)
    return signs


def _norm(torch, J, p: str, q: str | None, c, signs):
    """The norm smoothed (module doc) of each Jacobian J (B, m, n): values (B,); `signs` (B, m):
    the output signs of linf -> l1."""
    def dual_norm(g, d):  # ||g||_d over the last axis
        return g.abs().sum(-1) if d == "l1" else g.abs().amax(-1) if d == "linf" else g.norm(dim=-1)

    pd = {"l1": "linf", "linf": "l1", "l2": "l2"}[p]
    if c is not None:
        return dual_norm(torch.einsum("m,bmn->bn", c, J), pd)
    if signs is not None:
        return torch.einsum("bm,bmn->bn", signs, J).abs().sum(-1)
    if q == "linf":
        return dual_norm(J, pd).amax(-1)
    if p == "l1":
        return dual_norm(J.transpose(1, 2), {"l1": "l1", "l2": "l2"}.get(str(q), "l2")).amax(-1)
    return J.pow(2).sum((1, 2)).sqrt()


__all__ = ["ascend"]
