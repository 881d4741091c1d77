"""Progressive bound tightening, layer by layer: interval -> symbolic -> LP (MIPVerify-style).

Layer j is bounded from the final bounds of layers < j; each step is intersected with the previous
one and the LP step only touches neurons still unstable. Step times and unstable counts are
recorded so their effect can be measured (`NetworkBounds.steps`).
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np

from models.errors import BadInput
from models.ir import Network

from ..choices import BOUND_METHODS
from .interval import affine_interval, magnitudes
from .lp import lp_tighten_layer
from .symbolic import relu_relaxation, symbolic_layer_bounds
from .types import NetworkBounds, StepStats, phases, relu_blocks

BoundMethod = Literal["interval", "symbolic", "lp"]
METHODS = BOUND_METHODS


def network_bounds(
    net: Network,
    lo: np.ndarray,
    hi: np.ndarray,
    method: BoundMethod = "lp",
    *,
    lp_deadline: float | None = None,
    lp_output: bool = False,
    fixed: list[np.ndarray] | None = None,
    prior: NetworkBounds | None = None,
) -> NetworkBounds | None:
    """Sound pre-activation bounds of every ReLU layer of `net` over lo <= x <= hi.

    `method` is the last step of the pipeline: "interval", "symbolic" (interval then CROWN-style
    back-substitution) or "lp" (then LP tightening of the remaining unstable neurons, stopping at
    `lp_deadline`, a `time.perf_counter()` value). `lp_output` also LP-tightens the output bounds.

    Branch-and-bound nodes pass `fixed` (per ReLU layer: +1 neuron assumed active, -1 inactive,
    0 free) and `prior` (the parent's bounds, intersected layer by layer): the bounds then hold
    on the part of the box where the fixed phases hold, and None means that part is empty.
    """
    if method not in METHODS:
        raise BadInput(f"unknown bounds method {method!r}; choose one of {', '.join(METHODS)}")
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.shape != (net.input_dim,) or hi.shape != (net.input_dim,) or np.any(lo > hi):
        raise BadInput(f"the input box must be two vectors of {net.input_dim} values with lo <= hi")
    blocks = relu_blocks(net)
    mags = magnitudes([b.weight for b in blocks], [b.bias for b in blocks], lo, hi)
    steps = {name: StepStats(name) for name in METHODS[: METHODS.index(method) + 1]}
    pre_lo: list[np.ndarray] = []
    pre_hi: list[np.ndarray] = []
    relax: list = []  # relaxations of the layers bounded so far (symbolic step)
    n_relu = len(blocks) - 1
    for j in range(len(blocks)):
        t = time.perf_counter()
        if j == 0:
            prev_lo, prev_hi = lo, hi
        else:
            prev_lo, prev_hi = np.maximum(pre_lo[-1], 0.0), np.maximum(pre_hi[-1], 0.0)
        l, u = affine_interval(blocks[j].weight, blocks[j].bias, prev_lo, prev_hi)
        steps["interval"].seconds += time.perf_counter() - t
        _count(steps["interval"], j, n_relu, l, u)
        if prior is not None:  # a sub-box of the prior's: never looser than its bounds
            pl, pu = (prior.pre_lo[j], prior.pre_hi[j]) if j < n_relu else (prior.out_lo, prior.out_hi)
            l, u = np.maximum(l, pl), np.minimum(u, pu)
        if j > 0 and "symbolic" in steps:
            t = time.perf_counter()
            # with a prior, only neurons still unstable need back-substitution (the rest keep their
            # phase on any sub-box); without one every neuron is bounded (sizes the next layers)
            rows = None if prior is None or j == n_relu else np.flatnonzero((l < 0) & (u > 0))
            if rows is None or rows.size:
                while len(relax) < j:
                    relax.append(relu_relaxation(pre_lo[len(relax)], pre_hi[len(relax)]))
                ls, us = symbolic_layer_bounds(blocks, pre_lo, pre_hi, j, lo, hi, mags[j], rows, relax)
                if rows is None:
                    l, u = np.maximum(l, ls), np.minimum(u, us)
                else:
                    l[rows], u[rows] = np.maximum(l[rows], ls), np.minimum(u[rows], us)
            steps["symbolic"].seconds += time.perf_counter() - t
        if "symbolic" in steps:
            _count(steps["symbolic"], j, n_relu, l, u)
        if j > 0 and "lp" in steps and (j < n_relu or lp_output):
            t = time.perf_counter()
            l, u, lps = lp_tighten_layer(blocks, pre_lo + [l], pre_hi + [u], j, lo, hi, deadline=lp_deadline)
            steps["lp"].seconds += time.perf_counter() - t
            steps["lp"].lps += lps
        if "lp" in steps:
            _count(steps["lp"], j, n_relu, l, u)
        if fixed is not None and j < n_relu:
            l = np.where(fixed[j] > 0, np.maximum(l, 0.0), l)
            u = np.where(fixed[j] < 0, np.minimum(u, 0.0), u)
        if np.any(l > u):
            if fixed is not None:
                return None  # the fixed phases contradict each other on this box
            # two sound bounds cannot cross
            raise RuntimeError(f"internal error: crossing bounds in layer {j}; please report this model")
        pre_lo.append(l)
        pre_hi.append(u)
    out_lo, out_hi = pre_lo.pop(), pre_hi.pop()
    bounds = NetworkBounds(lo, hi, pre_lo, pre_hi, out_lo, out_hi, method, list(steps.values()))
    return bounds


def _count(step: StepStats, j: int, n_relu: int, l: np.ndarray, u: np.ndarray) -> None:
    if j < n_relu:
        step.unstable.append(int(np.sum(phases(l, u) == 0)))


def unstable_after_each_step(net: Network, lo: np.ndarray, hi: np.ndarray) -> dict[str, dict]:
    """Run the pipeline up to each step and report unstable counts and seconds (for benchmarks)."""
    out = {}
    for method in METHODS:
        t = time.perf_counter()
        b = network_bounds(net, lo, hi, method)
        out[method] = {"unstable": b.unstable_counts(), "unstable_total": b.num_unstable, "seconds": time.perf_counter() - t}
    return out


__all__ = ["METHODS", "BoundMethod", "network_bounds", "unstable_after_each_step", "phases"]
