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

All restarts are one float32 batch in numpy with the gradient written out (reverse mode through
the soft Jacobian's products and the network's forward pass: `_soft_gradient`), so a question
never waits for torch to load (4 s on an idle 2-core machine, over 20 s on a loaded one). After
every step the exact (hard) Jacobian norm of every restart is estimated in the same arithmetic and
the best point of each restart's trajectory is kept. Nothing here is a bound: the caller replays
the returned points in float64 (`certify.lipschitz.replay`), and only replayed values count.

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
    f32 = np.float32
    Ws = [np.ascontiguousarray(w, dtype=f32) for w in weights]
    bs = [np.asarray(b, dtype=f32) for b in biases]
    x_lo, x_hi = np.asarray(lo, dtype=f32), np.asarray(hi, dtype=f32)
    width = x_hi - x_lo
    x = np.clip(np.asarray(starts, dtype=f32), x_lo, x_hi)
    probe = np.vstack([starts, np.random.default_rng(0).uniform(lo, hi, (SPREAD_SAMPLES, len(lo)))]).astype(f32)
    unit = [np.maximum(z.max(0) - z.min(0), f32(1e-6)) for z in _forward(Ws, bs, probe)[0]]
    signs = None
    if (p, q) == ("linf", "l1"):  # the output signs of each restart, carried from step to step
        signs = _best_signs(_jacobian(Ws, [(z > 0).astype(f32) for z in _forward(Ws, bs, x)[0]], len(x))[0])
    c_target = None if target is None else np.asarray(target, dtype=f32)
    best_x, best_v = x.copy(), np.full(x.shape[0], -np.inf, dtype=f32)
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
        zs, _ = _forward(Ws, bs, x)
        hard, _ = _jacobian(Ws, [(z > 0).astype(f32) for z in zs], len(x))
        if signs is not None:
            signs = _improve_signs(hard, signs)
        v, _ = _norm(hard, p, q, c_target, signs)
        better = v > best_v
        best_v = np.where(better, v, best_v)
        best_x[better] = x[better]
        if last or not zs:  # (no ReLU: one Jacobian everywhere)
            break
        _, grad, signs = _soft_gradient(Ws, zs, unit, kappa, p, q, c_target, signs)
        step = STEP_START * (STEP_END / STEP_START) ** frac
        x = np.minimum(np.maximum(x + f32(step) * width * np.sign(grad), x_lo), x_hi)
    if signs is not None:  # the kept points' values with their best output signs (enumerated when few)
        hard, _ = _jacobian(Ws, [(z > 0).astype(f32) for z in _forward(Ws, bs, best_x)[0]], len(best_x))
        best_v = np.maximum(best_v, _norm(hard, p, q, c_target, _best_signs(hard))[0])
    order = np.argsort(-best_v, kind="stable")
    # (clipped again in float64: a float32 point rounded from the box may lie just outside it)
    return np.clip(best_x[order].astype(np.float64), lo, hi), best_v[order].astype(np.float64)


def _soft_gradient(Ws, zs, unit, kappa: float, p: str, q: str | None, c, signs):
    """The smoothed norm at pre-activations zs (its soft slopes sigmoid(z / (kappa unit))): values
    (B,), their gradient in x (B, n), and the output signs after a few rounds of sign ascent on the
    soft Jacobian (linf -> l1; else None)."""
    f32 = np.float32
    # sigmoid(a) = (1 + tanh(a / 2)) / 2: no overflow, and its derivative is never subnormal
    th = [np.tanh(z / (f32(2 * kappa) * u)) for z, u in zip(zs, unit)]
    soft = [f32(0.5) * (1 + t) for t in th]
    J, partial = _jacobian(Ws, soft, zs[0].shape[0])
    if signs is not None:
        signs = _improve_signs(J, signs)
    v, G = _norm(J, p, q, c, signs)
    d_soft = _slope_gradients(Ws, soft, partial, G)
    d_z = [g * (f32(0.25) * (1 - t * t)) / (f32(kappa) * u) for g, t, u in zip(d_soft, th, unit)]
    return v, _input_gradient(Ws, zs, d_z), signs


def _forward(Ws, bs, x):
    """Pre-activations of every ReLU layer and the output."""
    zs, h = [], x
    for W, b in zip(Ws[:-1], bs[:-1]):
        z = h @ W.T + b
        zs.append(z)
        h = np.maximum(z, 0)
    return zs, h @ Ws[-1].T + bs[-1]


def _jacobian(Ws, slopes, B: int):
    """W_k S_{k-1} ... S_0 W_0 per point (B, m, n), multiplied from the output side, and the partial
    products P_t = W_k S_{k-1} ... W_{t+1} (B, m, n_t) met on the way (kept for `_slope_gradients`)."""
    J = np.broadcast_to(Ws[-1], (B,) + Ws[-1].shape)
    partial = [None] * len(slopes)
    for t in reversed(range(len(slopes))):
        partial[t] = J
        J = _times(J * slopes[t][:, None, :], Ws[t])
    return J, partial


def _times(A, W):
    """A (B, m, k) times W (k, l) as one product (numpy's batched matmul loops over B)."""
    B, m, k = A.shape
    return (A.reshape(B * m, k) @ W).reshape(B, m, W.shape[1])


def _slope_gradients(Ws, slopes, partial, G):
    """d <G, J> / d slope_t (B, n_t) per layer, J = P_t S_t W_t ... S_0 W_0 (`_jacobian`): reverse mode
    through the products from the input side, G (B, m, n) the norm's gradient in J."""
    out = [None] * len(slopes)
    for t in range(len(slopes)):
        H = _times(G, Ws[t].T)                   # d / d (P_t S_t), (B, m, n_t)
        out[t] = (H * partial[t]).sum(1)
        G = H * slopes[t][:, None, :]            # d / d P_t
    return out


def _input_gradient(Ws, zs, d_z):
    """d obj / d x (B, n) from d obj / d z_t of every ReLU layer through the network's forward pass
    (z_{t+1} = W_{t+1} relu(z_t) + b; relu'(0) = 0)."""
    carry = np.zeros_like(zs[-1])
    for t in reversed(range(len(zs))):
        delta = d_z[t] + carry
        back = delta @ Ws[t]
        if t:
            carry = back * (zs[t - 1] > 0)
    return back


def _best_signs(J):
    """linf -> l1: output signs c (B, m) of the largest ||J^T c||_1 of each Jacobian: enumerated
    with few outputs (one point at a time: 2^(m-1) x n values), else alternating ascent."""
    m = J.shape[1]
    if m > ENUMERATE_OUTPUTS:
        s = J.sum(2)
        return _improve_signs(J, np.sign(s) + (s == 0), rounds=20)
    C = np.array(np.meshgrid(*([[1.0]] + [[-1.0, 1.0]] * (m - 1)), indexing="ij")).reshape(m, -1).T.astype(J.dtype)
    return C[[int(np.abs(C @ j).sum(-1).argmax()) for j in J]]


def _improve_signs(J, signs, rounds: int = 3):
    """Alternating sign ascent on ||J^T c||_1 = max_u c^T J u from the signs c (B, m): u = sign(J^T c),
    c = sign(J u), each kept only where it does not lower the value."""
    value = np.abs(_left(signs, J)).sum(-1)
    for _ in range(rounds):
        u = np.sign(_left(signs, J))
        c = np.sign((J @ u[:, :, None])[:, :, 0])
        c = c + (c == 0)
        v = np.abs(_left(c, J)).sum(-1)
        up = v > value
        if not up.any():
            break
        signs, value = np.where(up[:, None], c, signs), np.maximum(v, value)
    return signs


def _left(c, J):
    """c_b^T J_b per point: (B, m) x (B, m, n) -> (B, n)."""
    return (c[:, None, :] @ J)[:, 0]


def _dual(g, d):
    """||g||_d over the last axis and its (sub)gradient in g."""
    if d == "l1":
        return np.abs(g).sum(-1), np.sign(g)
    if d == "linf":
        k = np.abs(g).argmax(-1)[..., None]
        top = np.take_along_axis(g, k, -1)
        grad = np.zeros_like(g)
        np.put_along_axis(grad, k, np.sign(top), -1)
        return np.abs(top[..., 0]), grad
    n = np.sqrt((g * g).sum(-1))
    return n, g / np.maximum(n, np.finfo(g.dtype).tiny)[..., None]


def _norm(J, p: str, q: str | None, c, signs):
    """The norm smoothed (module doc) of each Jacobian J (B, m, n): values (B,) and their gradient in
    J (B, m, n); `signs` (B, m): the output signs of linf -> l1."""
    pd = {"l1": "linf", "linf": "l1", "l2": "l2"}[p]
    B = np.arange(J.shape[0])
    if c is not None or signs is not None:  # c^T J's dual norm, c fixed (the target or the signs)
        cs = np.broadcast_to(c, J.shape[:2]) if c is not None else signs
        v, du = _dual(_left(cs, J), pd if c is not None else "l1")
        return v, cs[:, :, None] * du[:, None, :]
    G = np.zeros_like(J)
    if q == "linf":  # the largest row's dual norm
        rows, drows = _dual(J, pd)
        i = rows.argmax(-1)
        G[B, i] = drows[B, i]
        return rows[B, i], G
    if p == "l1":  # the largest column's q-norm
        cols, dcols = _dual(J.transpose(0, 2, 1), {"l1": "l1", "l2": "l2"}.get(str(q), "l2"))
        k = cols.argmax(-1)
        G[B, :, k] = dcols[B, k]
        return cols[B, k], G
    v = np.sqrt((J * J).sum((1, 2)))
    return v, J / np.maximum(v, np.finfo(J.dtype).tiny)[:, None, None]


__all__ = ["ascend"]
