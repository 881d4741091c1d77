"""Independent oracles for robustness tests (no code shared with certify/solvers).

`exact_radius` enumerates the activation patterns whose regions meet a box (`lipschitz_oracles.
regions`: one scipy LP per partial pattern), and on each closed region, where the network is one
affine map, solves one convex problem per competing class (untargeted) or one for the target:
the smallest linf / l1 distance by an LP (scipy's HiGHS), l2 by a QP (cvxpy). The radius is the
smallest of them. Fixed features are folded into the first layer's bias first, so the regions
are enumerated over the moving inputs only.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from tests.lipschitz_oracles import regions


def forward(weights, x) -> np.ndarray:
    h = np.asarray(x, dtype=np.float64)
    for k, (W, b) in enumerate(weights):
        h = W @ h + b
        if k < len(weights) - 1:
            h = np.maximum(h, 0.0)
    return h


def _region(weights, pattern):
    """Rows G x <= h of the closed region of `pattern` and the affine map (A, a) of the net on it."""
    n = weights[0][0].shape[1]
    M, d = np.eye(n), np.zeros(n)
    G, h = [], []
    for (W, b), s in zip(weights[:-1], pattern):
        Mz, dz = W @ M, W @ d + b
        sign = np.where(s > 0, -1.0, 1.0)  # active: -z <= 0, inactive: z <= 0
        G.append(sign[:, None] * Mz)
        h.append(-sign * dz)
        M, d = s[:, None] * Mz, s * dz
    W, b = weights[-1]
    return np.vstack(G), np.concatenate(h), W @ M, W @ d + b


def _closest(norm, x0, lo, hi, G, h) -> float:
    """min ||x - x0|| over {G x <= h, lo <= x <= hi} (inf when empty)."""
    n = x0.size
    if norm == "l2":
        import cvxpy as cp

        x = cp.Variable(n)
        prob = cp.Problem(cp.Minimize(cp.sum_squares(x - x0)), [G @ x <= h, x >= lo, x <= hi])
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        return float(np.sqrt(max(prob.value, 0.0))) if prob.status in ("optimal", "optimal_inaccurate") else np.inf
    if norm == "linf":
        # variables (x, t): min t, -t <= x - x0 <= t
        c = np.r_[np.zeros(n), 1.0]
        A = np.vstack([np.hstack([G, np.zeros((len(h), 1))]), np.hstack([np.eye(n), -np.ones((n, 1))]),
                       np.hstack([-np.eye(n), -np.ones((n, 1))])])
        b = np.r_[h, x0, -x0]
        bounds = list(zip(lo, hi)) + [(0, None)]
    else:
        # variables (x, s): min sum s, -s <= x - x0 <= s
        c = np.r_[np.zeros(n), np.ones(n)]
        A = np.vstack([np.hstack([G, np.zeros((len(h), n))]), np.hstack([np.eye(n), -np.eye(n)]),
                       np.hstack([-np.eye(n), -np.eye(n)])])
        b = np.r_[h, x0, -x0]
        bounds = list(zip(lo, hi)) + [(0, None)] * n
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    return float(res.fun) if res.status == 0 else np.inf


def fold(weights, x0, features):
    """The network of the moving inputs only (the others fixed at x0), and the moving part of x0."""
    if features is None:
        return weights, np.asarray(x0, float)
    f = np.asarray(features)
    fixed = np.setdiff1d(np.arange(x0.size), f)
    W, b = weights[0]
    return [(W[:, f], b + W[:, fixed] @ x0[fixed])] + list(weights[1:]), np.asarray(x0, float)[f]


_REGIONS: dict[bytes, list] = {}


def _regions(weights, lo, hi) -> list:
    """`regions` cached per network and box (the tests ask several questions of one box)."""
    key = b"".join(a.tobytes() for pair in weights for a in pair) + lo.tobytes() + hi.tobytes()
    if key not in _REGIONS:
        _REGIONS[key] = regions(weights, lo, hi)
    return _REGIONS[key]


def radius_case(weights, x0, norm: str, targeted: bool, domain=None) -> tuple[int, int | None, float]:
    """The predicted class at x0, the target of a targeted question (the next class) or None, and
    the exact radius of that question (`exact_radius`)."""
    c = int(np.argmax(forward(weights, x0)))
    target = (c + 1) % weights[-1][0].shape[0] if targeted else None
    return c, target, exact_radius(weights, x0, norm, target, domain)


def exact_radius(weights, x0, norm: str, target=None, domain=None, features=None, reach: float = 3.0) -> float:
    """The robustness radius at x0 (ties are flips), searched within x0 +/- reach (and the domain);
    raises when the answer could lie beyond that box."""
    x0 = np.asarray(x0, dtype=np.float64)
    c = int(np.argmax(forward(weights, x0)))
    weights, z0 = fold(weights, x0, features)
    lo, hi = z0 - reach, z0 + reach
    if domain is not None:
        lo, hi = np.maximum(lo, domain[0]), np.minimum(hi, domain[1])
    m = weights[-1][0].shape[0]
    best = np.inf
    for pattern in _regions(weights, lo, hi):
        G, h, A, a = _region(weights, pattern)
        if target is None:  # f_j - f_c >= 0, i.e. (A_c - A_j) x <= a_j - a_c
            rows = [(A[c] - A[j], a[j] - a[c]) for j in range(m) if j != c]
            cands = [(np.vstack([G, r[None]]), np.r_[h, s]) for r, s in rows]
        else:  # f_k - f_j >= 0 for every j
            extra = np.array([A[j] - A[target] for j in range(m) if j != target])
            rhs = np.array([a[target] - a[j] for j in range(m) if j != target])
            cands = [(np.vstack([G, extra]), np.r_[h, rhs])]
        for GG, hh in cands:
            best = min(best, _closest(norm, z0, lo, hi, GG, hh))
    covered = domain is not None and np.all(z0 - reach <= domain[0]) and np.all(z0 + reach >= domain[1])
    if best > reach and not covered:
        raise ValueError(f"the radius may exceed the oracle's search box (reach {reach}); enlarge it")
    return best


def flips(y, predicted: int, target=None) -> bool:
    """Does the output y change the decision (ties count)?"""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if target is None:
        return bool(np.max(np.delete(y, predicted)) >= y[predicted])
    return bool(y[target] >= np.max(y))


def onnxruntime_outputs(path, x) -> np.ndarray:
    """The ONNX model's output at x, computed by onnxruntime (the input cast to the model's dtype)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    inp = model.graph.input[0]
    dtype = np.float64 if inp.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE else np.float32
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = sess.run(None, {inp.name: np.asarray(x, dtype=dtype).reshape(shape)})[0]
    return np.asarray(out, dtype=np.float64).reshape(-1)


# ---------------------------------------------------------------------------- test networks
def small_classifier(sizes, seed: int, spread: float = 1.0):
    """Seeded random MLP weights; `spread` > 1 scales the first layer around [0, 1]^n's center
    so that several classes share the unit box."""
    from tests.lipschitz_oracles import random_weights

    w = random_weights(sizes, seed)
    if spread != 1.0:
        W, b = w[0]
        w[0] = (W * spread, b - 0.5 * spread * W.sum(axis=1))
    return w
