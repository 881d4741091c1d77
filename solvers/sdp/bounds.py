"""Certified l2 Lipschitz upper bounds of ReLU weight chains: LipSDP and ECLipsE-Fast.

Both methods produce multipliers that `solvers.sdp.lmi.validate` turns into a proven rho. A chain
whose hidden layers exceed `max_neurons` is split into consecutive sub-networks (each SDP then
stays small; the ReLU at a cut is 1-Lipschitz, so the product of the pieces' bounds is a bound);
a piece whose certificate cannot be proven is split in two and retried, and a single-hidden-layer
piece that still fails falls back to the product of its proven spectral norms (reported as such).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.linalg

from ..rounding import ldexp_up, mul_up, sqrt_up
from ..runtime import past, stop_requested
from .chain import WeightChain
from .lipsdp import solve_lipsdp
from .lmi import validate

MAX_NEURONS = 800  # hidden neurons per SDP before the chain is split into sub-networks
# a single hidden layer wider than this is not given to an SDP (nor to ECLipsE's dense
# eigenproblems): its piece is bounded by the product of its proven norms
MAX_LAYER_WIDTH = 4000
MARGINS = (1e-6, 1e-5, 1e-4)  # hidden-block margins tried in turn (normalised weights)


@dataclass
class PieceResult:
    bound: float  # proven Lip_2 of the normalised sub-chain
    raw: float  # the method's own (unproven) value, same scale
    info: dict = field(default_factory=dict)


@dataclass
class L2Bound:
    """Certified l2->l2 Lipschitz upper bound of a chain (biases irrelevant) and how it was obtained."""

    upper: float
    raw: float
    seconds: float
    pieces: list[dict]

    @property
    def fallback(self) -> bool:
        """Whether some piece could not be certified by the method and used a norm product."""
        return any(p.get("fallback") for p in self.pieces)

    @property
    def solver_seconds(self) -> float:
        return float(sum(p.get("solver_seconds", 0.0) for p in self.pieces))


def split_by_size(chain: WeightChain, max_neurons: int) -> list[tuple[int, int]]:
    """Consecutive weight ranges [a, b) whose inner hidden layers hold <= max_neurons neurons."""
    ranges, start, load = [], 0, 0
    for j, n in enumerate(chain.hidden_sizes):  # hidden layer j sits between weights j and j+1
        if load and load + n > max_neurons:
            ranges.append((start, j + 1))  # cut at hidden layer j: its ReLU is taken as 1-Lipschitz
            start, load = j + 1, 0
        else:
            load += n
    ranges.append((start, len(chain.weights)))
    return ranges


def check_sdp_memory(chain: WeightChain, method: str, max_neurons: int = MAX_NEURONS, max_width: int = MAX_LAYER_WIDTH,
                     structure: str = "auto") -> None:
    """Refuse (`models.memory.TooLarge`) before anything is built when the largest SDP that
    `certify_chain` would hand to LipSDP does not fit in the available memory (later retries
    split pieces, so they are smaller)."""
    from models.memory import require_memory
    from .lipsdp import estimate_bytes, lmi_blocks

    largest, blocks = 0, []
    for a, b in split_by_size(chain, max_neurons):
        sub = chain.sub_chain(a, b)
        if sub.depth == 0 or max(sub.hidden_sizes) > max_width:
            continue  # a norm, not an SDP
        need = estimate_bytes(sub, structure)
        if need > largest:
            largest, blocks = need, lmi_blocks(sub, structure)
    if largest:
        shape = " + ".join(f"{n} x {n}" for n in blocks)
        require_memory(largest, f"{method} solves an SDP with a {shape} matrix inequality (cvxpy + SCS), which",
                "use method eclipse-fast (closed form, validated the same way) or naive, or free memory")


def certify_chain(
    chain: WeightChain,
    piece: Callable[[WeightChain], tuple[PieceResult | None, str]],
    max_neurons: int = MAX_NEURONS,
    max_width: int = MAX_LAYER_WIDTH,
) -> L2Bound:
    """Run `piece` on each sub-network of at most `max_neurons` hidden neurons and multiply.

    Pieces containing a hidden layer wider than `max_width` are bounded by norm products.
    """
    t0 = time.perf_counter()
    if chain.is_zero:
        return L2Bound(0.0, 0.0, time.perf_counter() - t0, [{"weights": [0, len(chain.weights)], "method": "zero weight"}])
    pieces: list[dict] = []
    for a, b in split_by_size(chain, max_neurons):
        _certify_range(chain, a, b, piece, pieces, max_width)
    upper, raw = 1.0, 1.0
    for p in pieces:
        upper = mul_up(upper, p["bound"])
        raw *= p["raw"]
    scale = chain.scale_log2
    return L2Bound(ldexp_up(upper, scale), float(np.ldexp(raw, scale)), time.perf_counter() - t0, pieces)


def _certify_range(chain: WeightChain, a: int, b: int, piece, out: list[dict], max_width: int) -> None:
    sub = chain.sub_chain(a, b)
    where = {"weights": [a, b], "hidden_neurons": int(sum(sub.hidden_sizes))}
    if sub.depth == 0:
        norm = sub.norm_upper(0)
        out.append({**where, "method": "spectral norm", "bound": norm, "raw": norm})
        return
    if max(sub.hidden_sizes) > max_width:
        result, reason = None, f"a hidden layer has more than {max_width} neurons"
    elif past():  # Ctrl-C or the command deadline: the remaining pieces take their norm products
        result, reason = None, _stop_reason()
    else:
        result, reason = piece(sub)
    if result is not None:
        out.append({**where, "bound": result.bound, "raw": result.raw, **result.info})
        return
    if past():
        reason = _stop_reason()
        bound = _norm_product(sub)
        out.append({**where, "method": "norm product", "fallback": reason, "stopped": reason, "bound": bound, "raw": bound})
        return
    if sub.depth >= 2:  # split in the middle and retry both halves
        cut = a + sub.depth // 2  # hidden layer index (global) where the chain is cut
        _certify_range(chain, a, cut + 1, piece, out, max_width)
        _certify_range(chain, cut + 1, b, piece, out, max_width)
        return
    bound = mul_up(sub.norm_upper(0), sub.norm_upper(1))
    out.append({**where, "method": "norm product", "fallback": reason, "bound": bound, "raw": bound})


def _stop_reason() -> str:
    return "interrupted" if stop_requested() else "time_limit"


def _norm_product(sub: WeightChain) -> float:
    """The proven product of the spectral norms of every weight of `sub`."""
    bound = 1.0
    for k in range(len(sub.weights)):
        bound = mul_up(bound, sub.norm_upper(k))
    return bound


def lipsdp_piece(
    variant: str,
    *,
    solver: str = "SCS",
    structure: str = "auto",
    accuracy: float = 1e-5,
    time_limit: float | None = None,
    polish_layer: bool = True,
) -> Callable[[WeightChain], tuple[PieceResult | None, str]]:
    """A `piece` function solving LipSDP-`variant` and validating its multipliers.

    With `polish_layer`, LipSDP-Layer's few multipliers are first improved locally
    (`polish_layer_multipliers`), so a loose solver tolerance costs little tightness.
    """

    def run(sub: WeightChain) -> tuple[PieceResult | None, str]:
        reason, spent = "", 0.0
        # the proven norms first (memoised): a solve stopped by Ctrl-C or the deadline then falls
        # back to the norm product at once, not after a second of Gram proofs
        _norm_product(sub)
        for margin in MARGINS:
            if past():
                return None, _stop_reason()
            sol = solve_lipsdp(sub, variant, solver=solver, structure=structure, margin=margin,
                               accuracy=accuracy, time_limit=time_limit)
            spent += sol.seconds
            if sol.status in ("interrupted", "time_limit"):
                return None, sol.status
            if sol.status.startswith("solver_error") or not sol.lams or not math.isfinite(sol.rho):
                return None, f"{sol.solver}: {sol.status}"
            if sol.status not in ("optimal", "optimal_inaccurate"):
                reason = f"{sol.solver} status {sol.status}"
                continue
            lams, polish = sol.lams, {}
            if variant == "layer" and polish_layer:
                lams, polish = polish_layer_multipliers(sub, sol.lams)
            v = validate(sub, lams, rho_floor=max(sol.rho, 0.0))
            if v.proven:
                info = {
                    "method": f"lipsdp-{variant}",
                    "solver": sol.solver,
                    "solver_status": sol.status,
                    "solver_seconds": spent,
                    "iterations": sol.iterations,
                    "structure": sol.structure,
                    "margin": margin,
                    "rho_solver": sol.rho,
                    "rho_recomputed": v.rho_recomputed,
                    "rho_validated": v.rho,
                    "proof_margin": v.margin,
                    "input_reduction": [sub.input_dim, int(sub.reduced_input().shape[1])],
                    **polish,
                }
                return PieceResult(sqrt_up(v.rho), math.sqrt(max(sol.rho, 0.0)), info), ""
            reason = v.reason
        return None, f"validation failed: {reason}"

    return run


def polish_layer_multipliers(chain: WeightChain, lams, max_evals: int = 400) -> tuple[list[float], dict]:
    """Minimise rho*(lambda) over LipSDP-Layer's per-layer multipliers, starting from the solver's.

    rho*(lambda) = min {rho : M(rho, T(lambda)) <= 0} is convex in lambda (a projection of the
    convex LMI set), and Layer has one multiplier per hidden layer, so Nelder-Mead on log lambda
    converges quickly; an SDP solved to a loose tolerance then gives a near-optimal certificate.
    This only chooses the multipliers that `validate` will prove; it proves nothing itself.
    """
    from scipy.optimize import minimize

    from .lmi import rho_of_multipliers

    x0 = np.log(np.maximum([float(np.mean(np.asarray(l, dtype=np.float64))) for l in lams], 1e-300))

    class _Stop(Exception):
        pass

    best = [math.inf, x0]

    def f(x: np.ndarray) -> float:
        if past():  # Ctrl-C or the command deadline: keep the best multipliers so far
            raise _Stop
        r = rho_of_multipliers(chain, [math.exp(v) for v in x])
        if r < best[0]:
            best[:] = [r, np.array(x)]
        return r if math.isfinite(r) else 1e300

    try:
        f0 = f(x0)
    except _Stop:
        return list(lams), {"polish": "skipped: stopped"}
    if not f0 < 1e300:
        return list(lams), {"polish": "skipped: the solver's hidden block is not positive definite"}
    try:
        res = minimize(f, x0, method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10 * f0, "maxfev": max_evals})
    except _Stop:
        from types import SimpleNamespace

        res = SimpleNamespace(fun=best[0], x=best[1], nfev=-1)
    if not res.fun < f0:
        return list(lams), {"polish": "no improvement"}
    return [math.exp(v) for v in res.x], {"polish": {"rho_before": f0, "rho_after": float(res.fun), "evaluations": int(res.nfev)}}


def eclipse_fast_multipliers(chain: WeightChain) -> tuple[list[float], float]:
    """ECLipsE-Fast (Xu & Sivaranjani 2024): closed-form layer multipliers and its rho.

    With Lambda_k = T_k / rho the LipSDP matrix is eliminated block by block (sequential Schur
    complements): X_0 = I, P_k = W_k X_k^{-1} W_k^T, lambda_k = 1 / lambda_max(P_k) (the choice
    maximising the smallest eigenvalue of the next block), X_{k+1} = 2 lambda_k I - lambda_k^2 P_k,
    and rho = lambda_max(W_l X_l^{-1} W_l^T). (The paper's l_i = 2 lambda_k in its own scaling.)
    """
    G, _ = chain.input_gram()
    P = G
    lams: list[float] = []
    X_chol = None
    for k in range(chain.depth):
        if k > 0:
            Y = scipy.linalg.solve_triangular(X_chol, chain.weights[k].T, lower=True)  # L^{-1} W_k^T, X = L L^T
            P = Y.T @ Y
        p = float(np.linalg.eigvalsh(0.5 * (P + P.T))[-1])
        lam = 1.0 / p
        X = 2.0 * lam * np.eye(P.shape[0]) - lam * lam * P
        X_chol = np.linalg.cholesky(0.5 * (X + X.T))
        lams.append(lam)
    Y = scipy.linalg.solve_triangular(X_chol, chain.weights[-1].T, lower=True)
    rho = float(np.linalg.eigvalsh(Y.T @ Y)[-1]) if Y.size else 0.0
    return lams, rho


def eclipse_piece(sub: WeightChain) -> tuple[PieceResult | None, str]:
    """A `piece` function: ECLipsE-Fast multipliers T_k = rho (1 + 1e-6) lambda_k I, validated."""
    t0 = time.perf_counter()
    try:
        lams, rho = eclipse_fast_multipliers(sub)
    except (np.linalg.LinAlgError, ZeroDivisionError) as exc:
        return None, f"ECLipsE-Fast recursion broke down ({exc})"
    seconds = time.perf_counter() - t0
    # scaling by slightly more than rho makes the last Schur complement strictly positive
    mult = [rho * (1.0 + 1e-6) * lam for lam in lams]
    v = validate(sub, mult, rho_floor=rho)
    if not v.proven:
        return None, v.reason
    info = {
        "method": "eclipse-fast",
        "solver_seconds": seconds,
        "rho_closed_form": rho,
        "rho_recomputed": v.rho_recomputed,
        "rho_validated": v.rho,
        "proof_margin": v.margin,
    }
    return PieceResult(sqrt_up(v.rho), math.sqrt(rho), info), ""
