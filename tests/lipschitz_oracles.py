"""Independent oracles for Lipschitz tests (no code shared with certify/solvers).

- `regions(weights, lo, hi)`: every activation pattern whose region meets the box with non-empty
  interior, by depth-first search over neurons with one scipy LP per partial pattern.
- `exact_lipschitz(...)`: max over those regions of the operator norm of the region's Jacobian,
  with operator norms computed here by brute force / closed forms.
- `sampled_unstable(weights, lo, hi)`: neurons seen taking both signs on sampled points of the box
  (a lower bound on any sound count of unstable ReLUs).
- `write_onnx(weights, path)`: a MatMul + Add + Relu ONNX file for CLI tests.
"""

from __future__ import annotations

from itertools import product

import numpy as np
from scipy.optimize import linprog


def random_weights(sizes, seed: int, bias: float = 0.3) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((b, a)) / np.sqrt(a), rng.standard_normal(b) * bias) for a, b in zip(sizes, sizes[1:])]


def random_box_case(seed: int, n: int, width: int, depth: int, m: int, radius: float):
    """(weights, lo, hi): a random n-width^depth-m net and a box of the given radius around a
    random centre in [-0.5, 0.5]^n (the property tests' tiny questions)."""
    w = random_weights([n] + [width] * depth + [m], seed)
    center = np.random.default_rng(seed).uniform(-0.5, 0.5, n)
    return w, center - radius, center + radius


def _has_interior(A: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Does {x in [lo, hi]: A x <= b} contain a ball of radius > 1e-7 (relative to the box)?"""
    n = lo.size
    norms = np.linalg.norm(A, axis=1) if A.size else np.zeros(0)
    # rows scaled to unit norm: the LP's absolute tolerances (1e-7) would otherwise accept any
    # sign of a pre-activation of magnitude 1e-9 (extremely scaled nets); zero rows constrain
    # only through their sign (0 <= b)
    zero = norms == 0
    if np.any(zero & (b < 0)):
        return False
    A, b, norms = A[~zero] / norms[~zero, None], b[~zero] / norms[~zero], np.ones(int(np.sum(~zero)))
    A_ub = np.hstack([A, norms[:, None]]) if A.size else np.zeros((0, n + 1))
    box = np.vstack([np.hstack([np.eye(n), np.ones((n, 1))]), np.hstack([-np.eye(n), np.ones((n, 1))])])
    A_ub = np.vstack([A_ub, box])
    b_ub = np.concatenate([b, hi, -lo])
    c = np.zeros(n + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * n + [(0, None)], method="highs")
    return res.status == 0 and res.x[-1] > 1e-7 * float(np.max(hi - lo))


def regions(weights, lo, hi) -> list[list[np.ndarray]]:
    """All activation patterns (0/1 per hidden neuron) with a full-dimensional region in the box."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    hidden = weights[:-1]
    out = []

    def dfs(layer, idx, M, d, pattern, A_rows, b_rows, current):
        if layer == len(hidden):
            out.append([p.copy() for p in pattern])
            return
        W, b = hidden[layer]
        Mz, dz = W @ M, W @ d + b
        if idx == W.shape[0]:
            s = current
            dfs(layer + 1, 0, s[:, None] * Mz, s * dz, pattern + [s], A_rows, b_rows, np.zeros(0))
            return
        for bit in (1.0, 0.0):
            # active: z >= 0  <=>  -Mz x <= dz ; inactive: z <= 0  <=>  Mz x <= -dz
            row = -Mz[idx] if bit else Mz[idx]
            rhs = dz[idx] if bit else -dz[idx]
            A2 = np.vstack([A_rows, row[None, :]]) if len(A_rows) else row[None, :]
            b2 = np.append(b_rows, rhs)
            if _has_interior(A2, b2, lo, hi):
                dfs(layer, idx + 1, M, d, pattern, A2, b2, np.append(current, bit))

    n = lo.size
    dfs(0, 0, np.eye(n), np.zeros(n), [], np.zeros((0, n)), np.zeros(0), np.zeros(0))
    return out


def jacobian(weights, pattern) -> np.ndarray:
    J = weights[0][0]
    for (W, _), s in zip(weights[1:], pattern):
        J = W @ (s[:, None] * J)
    return J


def opnorm(J: np.ndarray, p: str, q: str) -> float:
    """||J||_{p->q} by brute force over the extreme points of the unit p-ball (or SVD for l2->l2)."""
    m, n = J.shape
    qn = {"l1": lambda v: np.abs(v).sum(), "l2": np.linalg.norm, "linf": lambda v: np.abs(v).max()}[q]
    if p == "l1":
        return max(qn(J[:, k]) for k in range(n))
    if p == "linf":
        return max(qn(J @ np.array(u)) for u in product((-1.0, 1.0), repeat=n))
    # p = l2: dual formulation over extreme points of the dual ball of q (q != l2), or SVD
    if q == "l2":
        return float(np.linalg.svd(J, compute_uv=False)[0])
    if q == "linf":
        return max(float(np.linalg.norm(J[i])) for i in range(m))
    return max(float(np.linalg.norm(J.T @ np.array(v))) for v in product((-1.0, 1.0), repeat=m))


def sampled_unstable(weights, lo, hi, samples: int = 4000, seed: int = 0) -> int:
    x = np.random.default_rng(seed).uniform(lo, hi, (samples, np.size(lo)))
    total, h = 0, x
    for W, b in weights[:-1]:
        z = h @ W.T + b
        total += int(np.sum((z > 0).any(axis=0) & (z < 0).any(axis=0)))
        h = np.maximum(z, 0.0)
    return total


def exact_lipschitz(weights, lo, hi, p: str, q: str | None, target=None) -> float:
    best = 0.0
    for pattern in regions(weights, lo, hi):
        J = jacobian(weights, pattern)
        if target is not None:
            g = J.T @ np.asarray(target, float)
            val = {"linf": np.abs(g).sum(), "l1": np.abs(g).max(), "l2": np.linalg.norm(g)}[p]
        else:
            val = opnorm(J, p, q)
        best = max(best, float(val))
    return best


def write_onnx(weights, path) -> str:
    """Save an MLP (ReLU between layers) as ONNX with float64 MatMul/Add/Relu."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    h = "x"
    for k, (W, b) in enumerate(weights):
        inits += [numpy_helper.from_array(np.ascontiguousarray(W.T), f"W{k}"), numpy_helper.from_array(b, f"b{k}")]
        nodes += [helper.make_node("MatMul", [h, f"W{k}"], [f"m{k}"]), helper.make_node("Add", [f"m{k}", f"b{k}"], [f"a{k}"])]
        h = f"a{k}"
        if k < len(weights) - 1:
            nodes.append(helper.make_node("Relu", [h], [f"r{k}"]))
            h = f"r{k}"
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, weights[0][0].shape[1]])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, weights[-1][0].shape[0]])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)
