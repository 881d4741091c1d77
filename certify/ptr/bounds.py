"""Cheap sound bounds that decide most bisection steps before any MILP.

- `jacobian_upper`: an upper bound of sup_{x in box} ||J(x)||_{p->q} from sound pre-activation
  bounds: every Jacobian of the box lies in an interval matrix [L, U] (slopes 1 / 0 / [0, 1] for
  active / inactive / unstable ReLUs), so ||J|| <= || max(|L|, |U|) || for these monotone norms;
  and the Clarke-Jacobian bound of the local Lipschitz branch-and-bound over the same slopes
  (`solvers.bounds.jacobian.clarke_norm_bound`, linear bounds of the Jacobian passes), the smaller
  kept: a PTR step it decides needs no MILP.
- `global_upper`: the layer-product bound (a global constant holds on every box).
- `sampled_lower`: norms of exact Jacobians at sampled points where the net is certified
  differentiable (`certify.lipschitz.replay`): lower bounds, with the points as witnesses.
"""

from __future__ import annotations

import time

import numpy as np

from models.ir import Network
from solvers.bounds import network_bounds
from solvers.bounds.jacobian import clarke_norm_bound
from solvers.bounds.jacobian_interval import interval_jacobian, phase_slopes
from solvers.bounds.types import relu_blocks
from solvers.norms import operator_norm_upper
from solvers.rounding import gamma

from ..lipschitz.replay import differentiable_point, norm_lower


def jacobian_upper(net: Network, lo: np.ndarray, hi: np.ndarray, p: str, q: str, method: str = "symbolic",
                   deadline: float | None = None) -> float:
    """Certified upper bound of the local Lipschitz constant over [lo, hi] (interval Jacobian).
    `deadline` (`time.perf_counter()`): the Clarke bound's linear passes stop there (a looser bound,
    still sound; on 8-64-64-8 boxes they take 0.3-2 s)."""
    nb = network_bounds(net, lo, hi, method)  # type: ignore[arg-type]
    weights = [b.weight for b in relu_blocks(net)]
    s_lo, s_hi = phase_slopes(nb.phases())
    L, U = interval_jacobian(weights, s_lo, s_hi)
    entrywise = float(operator_norm_upper(np.maximum(np.abs(L), np.abs(U)), p, q))
    clarke = clarke_norm_bound(weights, s_lo, s_hi, p, q, deadline=deadline)
    return min(entrywise, clarke)


def global_upper(net: Network, p: str, q: str) -> float:
    """||  |W_k| ... |W_0|  ||_{p->q}: every Clarke Jacobian of a ReLU net is bounded entrywise by the
    product of the absolute weights (slopes in [0, 1]), so this norm bounds the constant on every
    box. Instant; `certify.global_lipschitz` gives tighter bounds to pass as `global_bound`."""
    weights = [b.weight for b in relu_blocks(net)]
    M, length = np.abs(weights[0]), weights[0].shape[1]
    for W in weights[1:]:
        M = np.abs(W) @ M
        length += W.shape[1]
    # non-negative terms: the computed product is within gamma(length) of the exact one, relatively
    return float(operator_norm_upper(M * (1.0 + 2.0 * gamma(length + 2)), p, q))


def sampled_lower(net: Network, lo: np.ndarray, hi: np.ndarray, p: str, q: str, samples: int,
                  seed: int, deadline: float | None = None) -> list[tuple[np.ndarray, float]]:
    """(point, certified lower bound) at the box centre, `samples` uniform points and as many
    random vertices (the constant of wide boxes is often reached near corners); seeded. Points
    after `deadline` (`time.perf_counter()`) are skipped (the centre is always replayed)."""
    rng = np.random.default_rng(seed)
    pts = [(lo + hi) / 2.0]
    if samples:
        pts.extend(rng.uniform(lo, hi, size=(samples, lo.size)))
        pts.extend(np.where(rng.random((samples, lo.size)) < 0.5, lo, hi))
    blocks = relu_blocks(net)
    out = []
    for i, x in enumerate(pts):
        if i and deadline is not None and time.perf_counter() >= deadline:
            break
        pt = differentiable_point(net, x, blocks)
        if pt is not None:
            out.append((pt.x, norm_lower(pt, p, q)))
    return out


__all__ = ["global_upper", "jacobian_upper", "sampled_lower"]
