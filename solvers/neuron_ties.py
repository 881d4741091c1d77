"""Duplicated and negated ReLU neurons: pre-activations that are exact multiples of each other.

Two neurons i < j of one layer with [W_j, b_j] = alpha [W_i, b_i] (alpha a rational, checked
exactly on the float64 weights) have z_j = alpha z_i as functions of the layer's input, whatever
the network does upstream. Then on every full-dimensional activation region R of the box:

- either z_i is not identically zero on R, so it is nonzero on a dense open subset, and there the
  phases are tied: a_j = a_i when alpha > 0 (a duplicate: relu(z_j) = alpha relu(z_i), the pair
  acts as one neuron with outgoing weights W'_i + alpha W'_j), a_j = 1 - a_i when alpha < 0 (a
  negation: exactly one of relu(z_i), relu(-|alpha| z_i) is nonzero);
- or z_i == 0 on R, so its gradient vanishes on R and both phases of both neurons give R the same
  Jacobian: the tied choice is one of them.

So the local Lipschitz constant (a supremum of ||J|| over full-dimensional regions, equivalently
over the Clarke Jacobians, whose norms are bounded by the neighbouring regions' since norms are
convex) is unchanged when every search over activation patterns -- the MILP's binaries, a region
enumeration's branches -- ties these phases: the same function, a merged duplicate and a coupled
negation. Patterns that violate a tie have regions without interior (z_i = 0 on them), which is
exactly where the MILP's relaxation of ReLU ties found spurious optima.

alpha = 0 cannot occur (neuron i's row is nonzero by choice of i, and j's would be zero: a
constant neuron, left to the sound bounds).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class Tie:
    """Neuron `j` of `layer` is `alpha` times neuron `i` (i < j) exactly; `same`: alpha > 0."""

    layer: int
    i: int
    j: int
    same: bool


def neuron_ties(weights: list[np.ndarray], biases: list[np.ndarray], max_width: int = 512) -> list[Tie]:
    """Every exactly proportional pair of the hidden layers (weights[k] maps layer k's input to its
    pre-activations), each later neuron tied to the first neuron of its class. Layers wider than
    `max_width` are skipped (the pairwise scan is quadratic)."""
    ties: list[Tie] = []
    for layer, (W, b) in enumerate(zip(weights, biases)):
        if W.shape[0] > max_width or W.shape[0] < 2:
            continue
        rows = np.hstack([np.asarray(W, dtype=np.float64), np.asarray(b, dtype=np.float64).reshape(-1, 1)])
        ties.extend(_layer_ties(layer, rows))
    return ties


def _layer_ties(layer: int, rows: np.ndarray) -> list[Tie]:
    if not np.all(np.isfinite(rows)):
        return []
    lead = np.argmax(np.abs(rows) > 0, axis=1)  # first nonzero column (0 for a zero row)
    nonzero = np.any(rows != 0, axis=1)
    pivot = rows[np.arange(rows.shape[0]), lead]
    # rows normalised by their first nonzero entry: proportional rows coincide (up to rounding,
    # the exact check below decides)
    with np.errstate(divide="ignore", invalid="ignore"):
        normed = np.where(nonzero[:, None], rows / np.where(nonzero, pivot, 1.0)[:, None], 0.0)
    owner: dict[int, int] = {}
    ties: list[Tie] = []
    for j in range(rows.shape[0]):
        if not nonzero[j]:
            continue
        for i in range(j):
            if not nonzero[i] or owner.get(i, i) != i or lead[i] != lead[j]:
                continue
            if not np.allclose(normed[i], normed[j], rtol=1e-12, atol=0.0):
                continue
            if _exactly_proportional(rows[i], rows[j], int(lead[i])):
                owner[j] = i
                ties.append(Tie(layer, i, j, bool(pivot[i] * pivot[j] > 0)))
                break
    return ties


def _exactly_proportional(a: np.ndarray, b: np.ndarray, k: int) -> bool:
    """b == alpha a exactly in rationals, alpha = b_k / a_k (a_k != 0)."""
    alpha = Fraction(float(b[k])) / Fraction(float(a[k]))
    return all(Fraction(float(y)) == alpha * Fraction(float(x)) for x, y in zip(a, b))


def tied_bits(ties: list[Tie], layer: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(source, same) for one layer: source[j] = i when neuron j's phase is tied to neuron i's
    (-1 otherwise), same[j] whether it is equal (else opposite)."""
    source = np.full(size, -1, dtype=np.int64)
    same = np.ones(size, dtype=bool)
    for t in ties:
        if t.layer == layer:
            source[t.j], same[t.j] = t.i, t.same
    return source, same


__all__ = ["Tie", "neuron_ties", "tied_bits"]
