"""Degenerate tiny nets for issue 31: the seeded fuzz's nets (`fuzz_net`: exact duplicates,
negations, extreme row scalings) and fresher ones for the generalisation check (`question`), plus
an exact rational evaluation of a witness (`value_at_exactly`).

Each `question` net mixes, at random:

- exact duplicates (power-of-two multiples) and negations of a neuron;
- affinely dependent pre-activations: a neuron equal to a positive combination a z_i + b z_j of
  two others' (so the pattern z_i > 0, z_j > 0, z_k < 0 has no interior; computed in float64 the
  combination is exact only up to rounding, leaving genuine sliver regions too);
- extreme per-layer scalings 10^-7 .. 10^7 (whole layers, not only rows);
- zero rows (dead neurons) and zero columns (an input or neuron nobody reads);
- a layer made always active or always dead on the box (large biases);
- a tiny box (radius 1e-6 .. 1e-3) centred on a kink of some first-layer neuron, or a usual box.

`question(rng)` returns (weights, center, radius); the nets have 2-4 inputs and at most ~20 ReLUs.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from tests.lipschitz_oracles import jacobian, opnorm

Weights = list[tuple[np.ndarray, np.ndarray]]


def _hidden_layer(rng: np.random.Generator, n_in: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    W = rng.standard_normal((width, n_in))
    c = rng.standard_normal(width) * rng.choice([0.0, 0.3, 1.0])
    extra_W, extra_c = [], []
    for _ in range(int(rng.integers(1, 4))):
        kind = rng.choice(["duplicate", "negation", "combination", "zero"])
        i, j = rng.integers(0, width, 2)
        if kind == "duplicate":
            f = 2.0 ** int(rng.integers(-3, 4))
            extra_W.append(f * W[i]), extra_c.append(f * c[i])
        elif kind == "negation":
            f = -(2.0 ** int(rng.integers(-3, 4)))
            extra_W.append(f * W[i]), extra_c.append(f * c[i])
        elif kind == "combination":
            a, b = rng.uniform(0.1, 3.0, 2)
            extra_W.append(a * W[i] + b * W[j]), extra_c.append(a * c[i] + b * c[j])
        else:
            extra_W.append(np.zeros(n_in)), extra_c.append(float(rng.standard_normal()) * rng.choice([0.0, 1.0]))
    W = np.vstack([W] + [np.asarray(r)[None, :] for r in extra_W])
    c = np.concatenate([c, np.asarray(extra_c, dtype=np.float64)])
    perm = rng.permutation(W.shape[0])  # ties and combinations anywhere in the layer
    return W[perm], c[perm]


def net(rng: np.random.Generator) -> Weights:
    n_in = int(rng.integers(2, 5))
    depth = int(rng.integers(1, 3))
    sizes = [n_in] + [int(rng.integers(3, 6)) for _ in range(depth)]
    weights: Weights = []
    width_in = n_in
    for k in range(depth):
        W, c = _hidden_layer(rng, width_in, sizes[k + 1])
        if rng.random() < 0.2 and W.shape[1] > 1:
            W[:, int(rng.integers(0, W.shape[1]))] = 0.0  # an input (or neuron) nobody reads
        scale = 10.0 ** rng.uniform(-7, 7) if rng.random() < 0.6 else 1.0
        weights.append((W * scale, c * scale))
        width_in = W.shape[0]
    m = int(rng.integers(1, 3))
    weights.append((rng.standard_normal((m, width_in)) * 10.0 ** rng.uniform(-3, 3), rng.standard_normal(m)))
    if rng.random() < 0.1 and len(weights) > 2:  # one hidden layer always active or always dead
        k = int(rng.integers(1, len(weights) - 1))
        W, c = weights[k]
        weights[k] = (W, c + rng.choice([1.0, -1.0]) * 1e3 * (1.0 + np.abs(W).sum(axis=1)) * 1e3)
    return weights


def question(rng: np.random.Generator) -> tuple[Weights, np.ndarray, float]:
    w = net(rng)
    n_in = w[0][0].shape[1]
    center = rng.uniform(-1, 1, n_in)
    radius = float(rng.uniform(0.05, 1.0))
    W, c = w[0]
    if rng.random() < 0.3 and np.any(W != 0):
        # a tiny box around a kink of a first-layer neuron: move the centre onto its hyperplane
        i = int(rng.choice(np.flatnonzero(np.any(W != 0, axis=1))))
        center = center - (W[i] @ center + c[i]) / (W[i] @ W[i]) * W[i]
        radius = float(10.0 ** rng.uniform(-6, -3))
    return w, center, radius


def fuzz_net(rng: np.random.Generator):
    """A tiny random net with exact duplicates (power-of-two multiples), exact negations and
    extreme row scalings (which keep the ties exact: the ties are made after scaling)."""
    n_in = int(rng.integers(2, 4))
    sizes = [n_in, int(rng.integers(3, 6)), int(rng.integers(2, 5)), int(rng.integers(1, 3))]
    weights = []
    for k, (a, b) in enumerate(zip(sizes, sizes[1:])):
        W = rng.standard_normal((b, a))
        c = rng.standard_normal(b) * rng.choice([0.0, 0.3])
        scale = 10.0 ** rng.uniform(-6, 6, b)[:, None] if rng.random() < 0.5 else 10.0 ** rng.uniform(-8, 8)
        W, c = W * scale, c * scale[:, 0] if np.ndim(scale) else c * scale
        if k < len(sizes) - 2:  # hidden layers: append tied neurons
            src = rng.integers(0, b, 2)
            f = [2.0 ** int(rng.integers(-3, 4)), -(2.0 ** int(rng.integers(-3, 4)))]
            W = np.vstack([W, f[0] * W[src[0]], f[1] * W[src[1]]])
            c = np.concatenate([c, [f[0] * c[src[0]], f[1] * c[src[1]]]])
        weights.append((W, c))
    for k in range(1, len(weights)):  # widths grew: pad the next layer's inputs
        W, c = weights[k]
        extra = weights[k - 1][0].shape[0] - W.shape[1]
        weights[k] = (np.hstack([W, rng.standard_normal((W.shape[0], extra)) * np.abs(W).mean()]), c)
    return weights


def value_at_exactly(w, x, p, q, target) -> float:
    """||J|| at x when every pre-activation at x has a strict sign in exact rational arithmetic
    (x is then inside an open activation region, however thin), else 0."""
    h = [Fraction(float(v)) for v in x]
    pattern = []
    for W, c in w[:-1]:
        z = [sum((Fraction(float(W[i, j])) * h[j] for j in range(len(h))), Fraction(0)) + Fraction(float(c[i]))
             for i in range(W.shape[0])]
        if any(v == 0 for v in z):
            return 0.0
        pattern.append(np.array([1.0 if v > 0 else 0.0 for v in z]))
        h = [max(v, Fraction(0)) for v in z]
    J = jacobian(w, pattern)
    if target is not None:
        g = J.T @ target
        return float({"linf": np.abs(g).sum(), "l1": np.abs(g).max(), "l2": np.linalg.norm(g)}[p])
    return opnorm(J, p, q)


def _affine_maps(w, pattern) -> list[tuple[list[list[Fraction]], list[Fraction]]]:
    """Each hidden layer's pre-activations as exact affine maps (A, d) of x under `pattern`."""
    n = w[0][0].shape[1]
    M = [[Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    d = [Fraction(0)] * n
    out = []
    for (W, c), s in zip(w[:-1], pattern + [None]):
        Wf = [[Fraction(float(v)) for v in row] for row in W]
        A = [[sum((r[k] * M[k][j] for k in range(len(M))), Fraction(0)) for j in range(n)] for r in Wf]
        dz = [sum((r[k] * d[k] for k in range(len(d))), Fraction(0)) + Fraction(float(ci)) for r, ci in zip(Wf, c)]
        out.append((A, dz))
        if s is None:
            break
        M = [row if si else [Fraction(0)] * n for row, si in zip(A, s)]
        d = [v if si else Fraction(0) for v, si in zip(dz, s)]
    return out


def _has_interior_exactly(maps, pattern, lo, hi) -> bool:
    """Does the pattern's region have an interior point in the box? Decided by sympy's rational
    simplex (an LP solver independent of the one under test): max t s.t. every neuron's signed
    pre-activation >= t * (its scale) and lo + t <= x <= hi - t; interior iff t* > 0. Neurons
    constant zero under the pattern constrain nothing (their slope does not change the Jacobian)."""
    from sympy import Matrix, Rational
    from sympy.solvers.simplex import linprog

    n = len(lo)
    rows, rhs = [], []
    for (A_l, d_l), s in zip(maps, pattern):
        for A_row, dz, si in zip(A_l, d_l, s):
            if all(v == 0 for v in A_row) and dz == 0:
                continue
            sign = 1 if si else -1
            scale = 1 + sum(abs(v) for v in A_row) + abs(dz)
            # sign (A x + d) >= t scale  <=>  -sign A x + scale t <= sign d
            rows.append([-sign * v for v in A_row] + [scale])
            rhs.append(sign * dz)
    for k in range(n):
        e = [Fraction(0)] * n
        e[k] = Fraction(1)
        rows.append([-v for v in e] + [Fraction(1)])
        rhs.append(-Fraction(float(lo[k])))
        rows.append(list(e) + [Fraction(1)])
        rhs.append(Fraction(float(hi[k])))
    def r(v: Fraction):
        return Rational(v.numerator, v.denominator)
    # nonnegative variables only (sympy's phase 1 fails on some free-variable LPs here):
    # x = lo + u, t = v - K with u, v >= 0 and K = 1 + max |x| (every row's signed value over its
    # scale is at least -K on the box, so the optimum keeps v >= 0)
    K = 1 + max(max(abs(Fraction(float(l))), abs(Fraction(float(u)))) for l, u in zip(lo, hi))
    lo_f = [Fraction(float(l)) for l in lo]
    shift = [rhs_i - sum((a * l for a, l in zip(row[:n], lo_f)), Fraction(0)) + row[n] * K
             for row, rhs_i in zip(rows, rhs)]
    A = Matrix([[r(v) for v in row] for row in rows])
    b = Matrix([r(v) for v in shift])
    c = Matrix([0] * n + [-1])
    value, _ = linprog(c, A, b)
    return -value - r(K) > 0


def _norm(w, pattern, p, q, target) -> float:
    J = jacobian(w, [np.array(s, dtype=float) for s in pattern])
    if target is not None:
        g = J.T @ target
        return float({"linf": np.abs(g).sum(), "l1": np.abs(g).max(), "l2": np.linalg.norm(g)}[p])
    return opnorm(J, p, q)


def value_near_exactly(w, x, lo, hi, p, q, target, at_least: float) -> float:
    """A norm ||J|| >= at_least of an activation pattern near x (the float rounding of a witness in
    a region thinner than float64) whose region sympy's rational simplex proves to have an
    interior point (so a lower bound of the constant), or 0. Near x: each neuron whose pre-activation at x is within 1e-6 of
    its sensitivity (|W| chains with every slope 1, applied to 1 + |x|) takes either sign, the
    others their sign at x (at most 2^14 patterns; their norms are computed first, and only those
    reaching `at_least` are checked, those nearest to it first: at most 16)."""
    h = [Fraction(float(v)) for v in x]
    sens = np.abs(np.asarray(x, dtype=float)) + 1.0
    signs, ambiguous = [], []
    for layer, (W, c) in enumerate(w[:-1]):
        z = [sum((Fraction(float(W[i, j])) * h[j] for j in range(len(h))), Fraction(0)) + Fraction(float(c[i]))
             for i in range(W.shape[0])]
        sens = np.abs(W) @ sens + np.abs(c)
        signs.append([v > 0 for v in z])
        ambiguous += [(layer, i) for i in range(len(z)) if abs(float(z[i])) <= 1e-6 * sens[i]]
        h = [max(v, Fraction(0)) for v in z]
    if len(ambiguous) > 14:
        return 0.0
    candidates = []
    for choice in itertools.product([True, False], repeat=len(ambiguous)):
        pattern = [list(s) for s in signs]
        for (layer, i), sgn in zip(ambiguous, choice):
            pattern[layer][i] = sgn
        val = _norm(w, pattern, p, q, target)
        if val >= at_least:
            candidates.append((val, pattern))
    # the witness's own region has norm ~ at_least (its replayed value): nearest norms first
    for val, pattern in sorted(candidates, key=lambda c: abs(c[0] - at_least))[:16]:
        maps = _affine_maps(w, [np.array(s) for s in pattern[:-1]])
        if _has_interior_exactly(maps, pattern, lo, hi):
            return val
    return 0.0


__all__ = ["fuzz_net", "net", "question", "value_at_exactly", "value_near_exactly"]
