"""Witness replay: lower bounds that hold outside any solver.

A lower bound on the Lipschitz constant over a box B is ||J(x0)|| for a point x0 of B where f is
differentiable with Jacobian J(x0): f is affine near x0, so pairs of points near x0 realise any
direction. We certify differentiability in float64: every pre-activation at x0 must be farther
from 0 than a bound on its rounding error. The MILP returns an activation pattern, often at a
vertex where pre-activations tie at 0, so we replay an interior point of that pattern's region
(`solvers.regions.interior_point`, one LP) instead of the solver's point.
Norm values are rounded down by a bound on the float64 error (`solvers.rounding`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.ir import Network
from solvers.rounding import gamma, round_down
from solvers.bounds.blocked import abs_matmul
from solvers.bounds.types import relu_blocks
from solvers.norms import dual, operator_norm, vector_norm

# exact operator norms by sign enumeration are used up to this many signs (2^16 products)
EXACT_ENUMERATION = 16


@dataclass
class DifferentiablePoint:
    """A point where f is certified differentiable, with its Jacobian and |.|-chain magnitude."""

    x: np.ndarray
    jacobian: np.ndarray
    magnitude: np.ndarray  # |W_k| D ... D |W_0| >= |J| entrywise, sizes rounding errors
    pattern: list[np.ndarray]
    rounding: int  # length of the longest rounding chain


def differentiable_point(net: Network, x: np.ndarray, blocks: list | None = None) -> DifferentiablePoint | None:
    """J(x) when every pre-activation at x has a certain sign in float64, else None.

    `blocks` (the net's `relu_blocks`) may be passed to avoid recomputing them. The Jacobian is
    multiplied out from the smaller side (outputs or inputs), so a point of a 784-1024-1024-10
    net costs a few megaflops, not gigaflops."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # overflow: no certified sign
        return _differentiable_point(net, x, blocks)


def _differentiable_point(net: Network, x: np.ndarray, blocks: list | None) -> DifferentiablePoint | None:
    blocks = relu_blocks(net) if blocks is None else blocks
    x = np.asarray(x, dtype=np.float64)
    h, mag = x, np.abs(x)
    pattern = []
    chain = 0
    for j, blk in enumerate(blocks[:-1]):
        z = blk.weight @ h + blk.bias
        # (in blocks of rows when |W| of the layer does not fit: 4.3 GB for a CIFAR-style conv layer)
        mag = abs_matmul(blk.weight, mag, "the rounding bound of a sampled point") + np.abs(blk.bias)
        chain += blk.in_dim + 1
        # |computed z - exact z| <= gamma(chain) * 2^j * mag (each ReLU layer may double the bound);
        # mag == 0 with a zero Jacobian row: z is exactly 0 on a neighbourhood (upstream signs are
        # certain), so relu(z) == 0 there whichever slope is chosen (a dead or doubled ReLU)
        if not (np.all(np.isfinite(z)) and np.all(np.isfinite(mag))):
            return None  # overflowed: no sign is certain
        uncertain = np.abs(z) <= 4.0 * 2.0**j * gamma(chain + 2) * mag + 1e-300
        if np.any(uncertain) and np.any(uncertain & ~_flat_rows(blocks, pattern, j, mag)):
            return None
        s = (z > 0).astype(np.float64)
        pattern.append(s)
        h = s * z
        mag = s * mag
    chain += blocks[-1].in_dim + 1
    J, Jabs = _jacobian(blocks, pattern)
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(Jabs))):
        return None
    return DifferentiablePoint(x, J, Jabs, pattern, chain + x.size)


def _flat_rows(blocks, pattern, j: int, mag: np.ndarray) -> np.ndarray:
    """Neurons of layer j whose pre-activation is constant near the point (zero magnitude and a
    zero Jacobian row): their ReLU slope does not matter."""
    if not np.any(mag == 0):
        return np.zeros(mag.shape, dtype=bool)
    _, Jabs = _jacobian(blocks[: j + 1], pattern[:j])
    return (mag == 0) & ~np.any(Jabs, axis=1)


def _jacobian(blocks, pattern) -> tuple[np.ndarray, np.ndarray]:
    """W_k D_{k-1} ... D_0 W_0 and the same product of |W|, from the cheaper side."""
    ws = [b.weight for b in blocks]
    what = "the Jacobian at a sampled point"  # |W| by row blocks when it does not fit (abs_matmul)
    if ws[-1].shape[0] <= ws[0].shape[1]:  # few outputs: multiply from the output side
        J, Jabs = ws[-1], np.abs(ws[-1])
        for w, s in zip(reversed(ws[:-1]), reversed(pattern)):
            J, Jabs = (J * s[None, :]) @ w, abs_matmul(w.T, (Jabs * s[None, :]).T, what).T
        return J, Jabs
    J, Jabs = ws[0], np.abs(ws[0])
    for w, s in zip(ws[1:], pattern):
        J, Jabs = w @ (s[:, None] * J), abs_matmul(w, s[:, None] * Jabs, what)
    return J, Jabs


def norm_lower(
    point: DifferentiablePoint,
    input_norm: str,
    output_norm: str | None,
    target: np.ndarray | None = None,
    hint: np.ndarray | None = None,
    hint_side: str = "input",
) -> float:
    """A sound lower bound on ||J||_{p->q} (or on ||J^T c||_{p*} for a target c) at `point`.

    Exact when cheap (closed forms, or sign enumeration of the smaller side up to 2^16);
    otherwise the best of the solver's direction `hint` (w with ||J w||_q, or c with
    ||J^T c||_{p*}) improved by alternating sign ascent.
    """
    # extreme nets: products and norms may overflow; an infinite or NaN value proves nothing
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        val = _norm_lower(point, input_norm, output_norm, target, hint, hint_side)
    return val if np.isfinite(val) else 0.0


def _norm_lower(point: DifferentiablePoint, input_norm: str, output_norm: str | None, target, hint,
                hint_side: str) -> float:
    J, Jabs = point.jacobian, point.magnitude
    n_round = point.rounding + J.size + 4
    if target is not None:
        c = np.asarray(target, dtype=np.float64)
        val = vector_norm(J.T @ c, dual(input_norm))
        mag = vector_norm(Jabs.T @ np.abs(c), dual(input_norm))
        return max(0.0, round_down(val, mag + val, n_round))
    mag = float(np.sum(Jabs)) + 1e-300
    try:
        if _cheap(J.shape, input_norm, str(output_norm)):
            val = operator_norm(J, input_norm, str(output_norm))
            return max(0.0, round_down(val, mag + val, n_round))
    except ValueError:
        pass
    best = 0.0
    starts = []
    if hint is not None:
        starts.append((np.asarray(hint, dtype=np.float64), hint_side))
    starts.append((np.sign(J.sum(axis=0)) + (J.sum(axis=0) == 0), "input"))
    for vec, side in starts:
        best = max(best, _ascent(J, vec, side, input_norm, str(output_norm)))
    return max(0.0, round_down(best, mag + best, n_round))


def _cheap(shape: tuple[int, int], p: str, q: str) -> bool:
    m, n = shape
    if p == "l1" or q == "linf" or (p, q) == ("l2", "l2"):
        return True
    if (p, q) == ("linf", "l1"):
        return min(m, n) <= EXACT_ENUMERATION
    if (p, q) == ("linf", "l2"):
        return n <= EXACT_ENUMERATION
    if (p, q) == ("l2", "l1"):
        return m <= EXACT_ENUMERATION
    return False


def _value_of_input(J: np.ndarray, w: np.ndarray, p: str, q: str) -> float:
    nrm = vector_norm(w, p)
    return vector_norm(J @ w, q) / nrm if nrm > 0 else 0.0


def _value_of_output(J: np.ndarray, c: np.ndarray, p: str, q: str) -> float:
    nrm = vector_norm(c, dual(q))
    return vector_norm(J.T @ c, dual(p)) / nrm if nrm > 0 else 0.0


def _ascent(J: np.ndarray, vec: np.ndarray, side: str, p: str, q: str, rounds: int = 50) -> float:
    """Alternating ascent for the NP-hard pairs (linf->l1, linf->l2, l2->l1) from a start vector."""
    best = _value_of_input(J, vec, p, q) if side == "input" else _value_of_output(J, vec, p, q)
    if side == "output":
        vec = _best_input_for(J.T @ vec, p)
    for _ in range(rounds):
        y = J @ vec
        c = _best_output_for(y, q)
        w = _best_input_for(J.T @ c, p)
        val = max(_value_of_input(J, w, p, q), _value_of_output(J, c, p, q))
        if val <= best * (1 + 1e-15):
            best = max(best, val)
            break
        best, vec = val, w
    return best


def direction_pair(J: np.ndarray, p: str, q: str | None, target: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A good (w, c): input direction w in the unit p-ball and output functional c in the unit
    q*-ball with c^T J w close to ||J||_{p->q} (exact for closed-form pairs), for warm starts."""
    if target is not None:
        c = np.asarray(target, dtype=np.float64)
        return _best_input_for(J.T @ c, p), c
    q = str(q)
    if p == "l1":
        k = int(np.argmax([vector_norm(J[:, j], q) for j in range(J.shape[1])]))
        w = np.zeros(J.shape[1])
        w[k] = 1.0
    else:
        w = _best_input_for(J.sum(axis=0) + 1e-12, p)
        for _ in range(50):
            c = _best_output_for(J @ w, q)
            w_new = _best_input_for(J.T @ c, p)
            if np.allclose(w_new, w):
                break
            w = w_new
    return w, _best_output_for(J @ w, q)


def _best_input_for(g: np.ndarray, p: str) -> np.ndarray:
    """argmax over the unit p-ball of <g, w>."""
    if p == "linf":
        return np.where(g >= 0, 1.0, -1.0)
    if p == "l1":
        w = np.zeros_like(g)
        k = int(np.argmax(np.abs(g)))
        w[k] = 1.0 if g[k] >= 0 else -1.0
        return w
    nrm = np.linalg.norm(g)
    return g / nrm if nrm > 0 else np.ones_like(g) / np.sqrt(g.size)


def _best_output_for(y: np.ndarray, q: str) -> np.ndarray:
    """argmax over the unit dual(q)-ball of <c, y>."""
    return _best_input_for(y, dual(q))


def sample_lower(
    net: Network,
    lo: np.ndarray,
    hi: np.ndarray,
    input_norm: str,
    output_norm: str | None,
    target: np.ndarray | None,
    samples: int = 32,
    seed: int = 0,
    blocks: list | None = None,
    deadline: float | None = None,
) -> tuple[float, DifferentiablePoint | None]:
    """Best certified lower bound over the box centre and `samples` uniform random points
    (fewer when `deadline`, a `time.perf_counter()` value, passes)."""
    from solvers.runtime import past

    rng = np.random.default_rng(seed)
    points = np.vstack([(lo + hi) / 2.0, rng.uniform(lo, hi, size=(samples, lo.size))])
    blocks = relu_blocks(net) if blocks is None else blocks
    best, best_pt = 0.0, None
    for x in points:
        if past(deadline):  # (Ctrl-C and the command deadline too; no point found yet: lower bound 0)
            break
        pt = differentiable_point(net, x, blocks)
        if pt is None:
            continue
        val = norm_lower(pt, input_norm, output_norm, target)
        if val > best or best_pt is None:
            best, best_pt = val, pt
    return best, best_pt


def batch_jacobians(blocks, X: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Jacobians at the rows of X (B, outputs, inputs), the pattern taken with ReLU'(0) = 0, in
    `dtype` (float32 for ranking only); one matrix product per layer over the whole batch,
    multiplied out from the smaller side."""
    h, pattern = np.asarray(X, dtype=dtype), []
    for blk in blocks[:-1]:
        z = h @ blk.weight.astype(dtype, copy=False).T + blk.bias.astype(dtype, copy=False)
        s = (z > 0).astype(dtype)
        pattern.append(s)
        h = s * z
    return pattern_jacobians(blocks, pattern, dtype, batch=X.shape[0])


def pattern_jacobians(blocks, pattern: list[np.ndarray], dtype=np.float64, batch: int | None = None) -> np.ndarray:
    """The Jacobians (B, outputs, inputs) of a batch of activation patterns (per ReLU layer (B, n_j)
    slopes; `batch` = B, needed only without ReLU layers), multiplied out from the smaller side."""
    ws = [b.weight.astype(dtype, copy=False) for b in blocks]
    pattern = [np.asarray(s, dtype=dtype) for s in pattern]
    B = pattern[0].shape[0] if batch is None else batch
    if ws[-1].shape[0] <= ws[0].shape[1]:  # few outputs: rows of J from the output side
        J = np.broadcast_to(ws[-1], (B,) + ws[-1].shape)
        for w, s in zip(reversed(ws[:-1]), reversed(pattern)):
            J = ((J * s[:, None, :]).reshape(-1, w.shape[0]) @ w).reshape(B, -1, w.shape[1])
        return J
    Jt = np.broadcast_to(ws[0].T, (B,) + ws[0].T.shape)  # J^T, (B, inputs, width)
    for w, s in zip(ws[1:], pattern):
        Jt = ((Jt * s[:, None, :]).reshape(-1, w.shape[1]) @ w.T).reshape(B, -1, w.shape[0])
    return Jt.transpose(0, 2, 1)


def norm_estimates(blocks, X: np.ndarray, input_norm: str, output_norm: str | None,
                   target: np.ndarray | None, dtype=np.float64) -> np.ndarray:
    """Float64 Jacobian norms at the rows of X, vectorised (the pattern taken with ReLU'(0) = 0).
    NOT sound: they only rank points, and the best are replayed (`differentiable_point`,
    `norm_lower`). Norms without a cheap closed form are ranked by the Frobenius norm. `dtype`
    float32 halves the cost of ranking."""
    with np.errstate(over="ignore", invalid="ignore"):  # far out (or in float32) a norm overflows to inf: ranked
        return _norm_estimates(blocks, X, input_norm, output_norm, target, dtype)  # first, then replayed (harmless)


def _norm_estimates(blocks, X: np.ndarray, input_norm: str, output_norm: str | None, target: np.ndarray | None,
                    dtype) -> np.ndarray:
    return jacobian_norms(batch_jacobians(blocks, X, dtype), input_norm, output_norm, target)


def jacobian_norms(J: np.ndarray, input_norm: str, output_norm: str | None, target: np.ndarray | None,
                   exact_outputs: bool = False) -> np.ndarray:
    """The ranking norms of `norm_estimates` for a batch of Jacobians J (B, outputs, inputs).
    `exact_outputs`: linf -> l1 with at most EXACT_ENUMERATION outputs by their sign vectors
    (max_s ||J^T s||_1, exact) rather than by the Frobenius norm when the inputs are many."""
    if target is not None:
        g = np.abs(np.einsum("m,bmn->bn", np.asarray(target, dtype=J.dtype), J))
        d = dual(input_norm)
        return g.sum(axis=1) if d == "l1" else (g.max(axis=1) if d == "linf" else np.sqrt((g * g).sum(axis=1)))
    p, q = input_norm, str(output_norm)
    if p == "l1":  # the largest column's q-norm
        cols = {"l1": np.abs(J).sum(axis=1), "linf": np.abs(J).max(axis=1)}.get(q)
        return (np.sqrt((J * J).sum(axis=1)) if cols is None else cols).max(axis=1)
    if q == "linf":
        return (np.abs(J).sum(axis=2) if p == "linf" else np.sqrt((J * J).sum(axis=2))).max(axis=1)
    n = J.shape[2]
    if (p, q) == ("linf", "l1") and n > EXACT_ENUMERATION and exact_outputs and J.shape[1] <= EXACT_ENUMERATION:
        return jacobian_norms(J.transpose(0, 2, 1), "linf", "l1", None)  # ||J||_{inf->1} = ||J^T||_{inf->1}
    if (p, q) == ("linf", "l1") and n <= EXACT_ENUMERATION:
        U = np.array(np.meshgrid(*([[1.0]] + [[-1.0, 1.0]] * (n - 1)), indexing="ij")).reshape(n, -1).astype(J.dtype)
        rows = max(1, int(4e6 // (J.shape[1] * U.shape[1])))  # at most ~4e6 products held at once
        return np.concatenate([np.abs(J[k: k + rows] @ U).sum(axis=1).max(axis=1) for k in range(0, J.shape[0], rows)])
    return np.sqrt((J * J).sum(axis=(1, 2)))


__all__ = ["DifferentiablePoint", "differentiable_point", "direction_pair", "batch_jacobians", "norm_estimates", "jacobian_norms",
           "norm_lower", "pattern_jacobians", "sample_lower"]
