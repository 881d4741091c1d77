"""Product of per-layer operator norms (`method="naive"`), with the best intermediate norms.

ReLU is 1-Lipschitz in every l_p norm, so Lip_{p->q}(f) <= prod_k ||A_k||_{r_k -> r_{k+1}} for
any chain of norms r_0 = p, ..., r_L = q between the affine blocks A_k; a dynamic programme over
{l1, l2, linf} picks the best chain. Each ||A_k|| is a certified upper bound
(`solvers.norms.affine_norm_upper`: exact closed forms rounded up, proven spectral norms,
structured bounds for convolutions). Runs of consecutive affine layers are bounded both layer by
layer and as their float64 product widened by its rounding error (`fuse_run`).
"""

from __future__ import annotations

import time

import numpy as np

from models.ir import Affine, Network, ReLU
from solvers.norms import NORMS, affine_norm_upper, spectral_norm_upper
from solvers.rounding import U, add_up, frobenius_up, gamma, mul_up, sqrt_up

from .global_result import GlobalLipschitzResult

# sign-vector enumeration cap for the NP-hard pairs inside the product (2^16 vectors)
NAIVE_ENUMERATION = 16


def _segments(net: Network) -> list[list[Affine]]:
    """Runs of consecutive affine layers (a ReLU between runs); an empty run stands for identity."""
    runs: list[list[Affine]] = [[]]
    for layer in net.layers:
        if isinstance(layer, ReLU):
            runs.append([])
        else:
            runs[-1].append(layer)
    return runs


def fuse_run(run: list[Affine]) -> tuple[np.ndarray, np.ndarray]:
    """The product W_r ... W_1 of a run of affine maps in float64 and an entrywise bound E on its
    distance to the exact product: fl(L P) = L P + F with |F| <= gamma_k |L| |P|, so the error of
    the running product obeys E' = |L| E + gamma_k |L| |P| (the biases do not matter)."""
    W = run[0].weight
    E = np.zeros_like(W)
    for layer in run[1:]:
        L = layer.weight
        absL = np.abs(L)
        E = absL @ E + gamma(L.shape[1] + 2) * (absL @ np.abs(W)) * (1.0 + 4.0 * U * L.shape[1])
        W = L @ W
    return W, E


def fused_blocks(net: Network) -> tuple[list[np.ndarray], list[Affine | None], float]:
    """Weights of the alternating form A_1, ReLU, ..., A_k of `net`, their source layers, and an
    additive l2 slack.

    Runs of consecutive affine maps are multiplied out in float64 (identity where two ReLUs meet
    or at an end); the source is the IR layer when a run has exactly one (its convolution
    structure stays usable), else None. Replacing each exact product A_i by its float64 value
    changes the Lipschitz constant by at most
    sum_i ||A_i - fl(A_i)||_2 prod_{j != i} (||fl(A_j)||_2 + ||E_j||_F)
    (triangle inequality, one block at a time); that sum, rounded up, is the slack.
    """
    weights, sources, errors = [], [], []
    for run in _segments(net):
        if not run:
            n = weights[-1].shape[0] if weights else net.input_dim
            weights.append(np.eye(n))
            sources.append(None)
            errors.append(None)
            continue
        W, E = fuse_run(run)
        weights.append(W)
        sources.append(run[0] if len(run) == 1 else None)
        errors.append(E if len(run) > 1 and np.any(E) else None)
    if all(E is None for E in errors):
        return weights, sources, 0.0
    err_norms = [0.0 if E is None else frobenius_up(E) for E in errors]
    norms = [add_up(spectral_norm_upper(W), e) for W, e in zip(weights, err_norms)]
    slack = 0.0
    for i, e in enumerate(err_norms):
        if e > 0:
            slack = add_up(slack, mul_up(e, *[v for j, v in enumerate(norms) if j != i]))
    return weights, sources, slack


# 1/p for the norms: ||I_n||_{r->s} = n^max(0, 1/s - 1/r)
_INVERSE = {"l1": 1.0, "l2": 0.5, "linf": 0.0}


def _identity_norm(n: int, r: str, s: str) -> float:
    e = max(0.0, _INVERSE[s] - _INVERSE[r])
    return 1.0 if e == 0 else (float(n) if e == 1.0 else sqrt_up(n))


def _run_norms(run: list[Affine], n: int) -> dict[tuple[str, str], float]:
    """Upper bounds ||A_run||_{r->s} for all norm pairs of a run of affine maps (an empty run is
    the identity on R^n, between two ReLUs or at an end)."""
    if not run:
        return {(r, s): _identity_norm(n, r, s) for r in NORMS for s in NORMS}
    best = {(r, s): affine_norm_upper(run[0], r, s, NAIVE_ENUMERATION) for r in NORMS for s in NORMS}
    for layer in run[1:]:
        step = {(r, s): affine_norm_upper(layer, r, s, NAIVE_ENUMERATION) for r in NORMS for s in NORMS}
        best = _compose(best, step)
    if len(run) > 1 and sum(l.weight.size for l in run) <= 4_000_000:
        # the float64 product, widened by its rounding error: ||E||_{r->s} <= sum_ij |E_ij|
        W, E = fuse_run(run)
        slack = mul_up(float(E.sum()), 1.0 + 2.0 * gamma(E.size + 2))
        fused = Affine(W, np.zeros(W.shape[0]))
        for key in best:
            best[key] = min(best[key], add_up(affine_norm_upper(fused, *key, NAIVE_ENUMERATION), slack))
    return best


def _compose(first: dict, second: dict) -> dict:
    out = {}
    for r in NORMS:
        for s in NORMS:
            cands = [mul_up(first[(r, m)], second[(m, s)]) for m in NORMS if (r, m) in first and (m, s) in second]
            if cands:
                out[(r, s)] = min(cands)
    return out


def naive_bound(net: Network, p: str, q: str) -> GlobalLipschitzResult:
    """Product of per-layer operator norms with the best intermediate norms (dynamic programme)."""
    t0 = time.perf_counter()
    cost = {p: 1.0}
    path: dict[str, list[str]] = {p: [p]}
    dim = net.input_dim
    for run in _segments(net):
        norms = _run_norms(run, dim)
        dim = run[-1].out_dim if run else dim
        new_cost, new_path = {}, {}
        for (r, s), value in norms.items():
            if r in cost:
                v = mul_up(cost[r], value)
                if s not in new_cost or v < new_cost[s]:
                    new_cost[s], new_path[s] = v, path[r] + [s]
        cost, path = new_cost, new_path
    upper = cost[q]  # every run offers every norm pair, so q is always reached
    details = {"intermediate_norms": path.get(q, [])[1:-1], "layers": len(net.layers)}
    return GlobalLipschitzResult(None, upper, "certified", input_norm=p, output_norm=q,
                                 seconds=time.perf_counter() - t0, method="naive", details=details)
