"""Certified global Lipschitz upper bounds: `certify.global_lipschitz`.

Methods (each returns a certified upper bound; none reports a solver's number unchecked):

- "naive": product of per-layer operator norms with the best intermediate norms
  (`certify.lipschitz.norm_product`); every norm pair is supported.
- "lipsdp-neuron", "lipsdp-layer": LipSDP (cvxpy, SCS by default) with multipliers validated by a
  float64 Cholesky proof (`solvers.sdp`).
- "eclipse-fast": the closed-form ECLipsE-Fast multipliers, validated the same way.
- "mip": the exact constant over a domain box from the local-Lipschitz MILP
  (`certify.lipschitz.local.local_lipschitz`), reporting its certified dual bound and its
  witness-backed lower bound; l1/linf norms only.
- "all": every applicable method, plus the best (smallest) global upper bound (and the best over
  the domain, which may be the "mip" value, when a domain is given).

The SDP methods bound the l2->l2 constant; other norm pairs are converted soundly by norm
equivalence: ||x||_2 <= sqrt(n) ||x||_inf and ||x||_2 <= ||x||_1 on the input side,
||y||_1 <= sqrt(m) ||y||_2 and ||y||_inf <= ||y||_2 on the output side, so
Lip_{p->q} <= c_p c_q Lip_{2->2} with c_linf = sqrt(n), c_l1(out) = sqrt(m), 1 otherwise.
A global bound holds on every domain, so `domain` only matters to "mip".
"""

from __future__ import annotations

import math
import time
from typing import Any


from models.box import Box, parse_domain
from models.errors import BadInput
from models.ir import Network
from solvers.blas import single_threaded_blas
from models.memory import TooLarge
from solvers.norms import parse_norm
from solvers.rounding import add_up, mul_up

from ..certificate import Status, issues
from .global_result import GlobalLipschitzComparison, GlobalLipschitzResult, norm_conversion
from .norm_product import fused_blocks, naive_bound

METHODS = ("naive", "eclipse-fast", "lipsdp-layer", "lipsdp-neuron", "mip")
MIP_NORMS = ("l1", "linf")
# SDP solver tolerance; LipSDP-Layer's few multipliers are polished locally after the solve
DEFAULT_ACCURACY = {"neuron": 1e-5, "layer": 1e-3}


# --------------------------------------------------------------------------------------- API
@issues
def global_lipschitz(
    net,
    method: str = "naive",
    *,
    input_norm: str = "l2",
    output_norm: str = "l2",
    domain: tuple[Any, Any] | None = None,
    solver: str = "SCS",
    accuracy: float | None = None,
    structure: str = "auto",
    max_neurons: int | None = None,
    time_limit: float | None = None,
    backend: str = "auto",
    mip_gap: float | None = None,
) -> GlobalLipschitzResult | GlobalLipschitzComparison:
    """Certified global Lipschitz upper bound of `net` from input norm p to output norm q.

    `net` is a `models.Network` (any feed-forward ReLU net, convolutions included) or an
    `models.sll.SLLNetwork` (1-Lipschitz residual layers; certified layer by layer, method "sll",
    which "naive" and "all" select). `solver` ("SCS", "CLARABEL", "MOSEK"), `accuracy` (solver
    tolerance; default 1e-5 for Neuron, 1e-3 for Layer, whose few multipliers are then polished
    locally before validation), `structure` ("auto", "full", "chain") and `max_neurons` (hidden
    neurons per SDP before the net is split into sub-networks) tune the SDP methods;
    `domain` = (lo, hi) (scalars or vectors), `backend`, `time_limit` and `mip_gap` the MILP.
    The other methods accept a domain and note that a global bound holds on it.
    """
    with single_threaded_blas():
        return _global_lipschitz(net, method, input_norm, output_norm, domain, solver, accuracy, structure,
                                 max_neurons, time_limit, backend, mip_gap)


def _global_lipschitz(net, method, input_norm, output_norm, domain, solver, accuracy, structure,
                      max_neurons, time_limit, backend, mip_gap):
    method = str(method).strip().lower()
    if method not in METHODS + ("all", "sll"):
        raise BadInput(f"unknown method {method!r}; choose one of {', '.join(METHODS + ('all', 'sll'))}")
    p, q = parse_norm(input_norm, "input norm"), parse_norm(output_norm, "output norm")
    if time_limit is not None:
        time_limit = _positive(time_limit, "time_limit")
    from models.sll import SLLNetwork

    if isinstance(net, SLLNetwork):
        if method not in ("sll", "naive", "all"):
            raise BadInput(
                f"method {method!r} needs a feed-forward Network; SLL networks are certified layer by "
                "layer: use method='sll'"
            )
        from .sll import sll_lipschitz

        result = sll_lipschitz(net, p, q)
        return GlobalLipschitzComparison.of([result], {}) if method == "all" else result
    if not isinstance(net, Network):
        raise BadInput(f"global_lipschitz expects a models.Network or SLLNetwork, got {type(net).__name__}")
    if method == "sll":
        raise BadInput("method 'sll' certifies SLL networks (models.sll.SLLNetwork); this is a feed-forward Network")
    box = Box.from_bounds(*parse_domain(domain, net.input_dim)) if domain is not None else None
    if accuracy is not None:
        accuracy = _positive(accuracy, "accuracy")
    sdp = dict(solver=solver, accuracy=accuracy, structure=structure, max_neurons=max_neurons, time_limit=time_limit)
    if method == "all":
        return _all(net, p, q, box, sdp, backend, time_limit, mip_gap)
    return _run(net, method, p, q, box, sdp, backend, time_limit, mip_gap)


def _run(net, method, p, q, box, sdp, backend, time_limit, mip_gap) -> GlobalLipschitzResult:
    if method == "mip":
        return mip_bound(net, p, q, box, backend=backend, time_limit=time_limit, mip_gap=mip_gap)
    result = naive_bound(net, p, q) if method == "naive" else sdp_bound(net, method, p, q, **sdp)
    if box is not None:  # say that the domain was not used, rather than ignore it silently
        result.details["domain"] = "a global bound: it holds on the domain too (only mip uses it)"
        result.notes.append(f"the domain is not used by {method}: its bound holds for every input, so on the "
                            "domain too (only method mip computes a constant over the domain)")
    return result


def _all(net, p, q, box, sdp, backend, time_limit, mip_gap) -> GlobalLipschitzComparison:
    results, skipped = [], {}
    for method in METHODS:
        if method == "mip":
            reason = _mip_unavailable(p, q, box)
            if reason:
                skipped[method] = reason
                continue
        try:
            results.append(_run(net, method, p, q, box, sdp, backend, time_limit, mip_gap))
        except TooLarge as exc:  # an SDP that does not fit is skipped, the others still run
            skipped[method] = str(exc)
    return GlobalLipschitzComparison.of(results, skipped)


# ----------------------------------------------------------------------------------- helpers
def _positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise BadInput(f"{name} must be a positive number, got {value!r}")
    return v


# --------------------------------------------------------------------------------------- SDP
def sdp_bound(
    net: Network,
    method: str,
    p: str,
    q: str,
    *,
    solver: str = "SCS",
    accuracy: float | None = None,
    structure: str = "auto",
    max_neurons: int | None = None,
    time_limit: float | None = None,
) -> GlobalLipschitzResult:
    """LipSDP-Neuron / LipSDP-Layer / ECLipsE-Fast: validated l2 bound, converted to p->q."""
    from solvers.sdp import WeightChain, certify_chain, eclipse_piece, lipsdp_piece
    from solvers.sdp.bounds import MAX_NEURONS, check_sdp_memory
    from solvers.sdp.lipsdp import STRUCTURES, check_solver

    t0 = time.perf_counter()
    if structure not in STRUCTURES:
        raise BadInput(f"unknown LMI structure {structure!r}; choose one of {', '.join(STRUCTURES)}")
    limit = MAX_NEURONS if max_neurons is None else int(max_neurons)
    if limit < 1:
        raise BadInput(f"max_neurons must be a positive integer, got {max_neurons!r}")
    if method == "eclipse-fast":
        piece = eclipse_piece
    else:
        variant = method.split("-")[1]
        piece = lipsdp_piece(variant, solver=check_solver(solver), structure=structure,
                             accuracy=accuracy or DEFAULT_ACCURACY[variant], time_limit=time_limit)
    weights, sources, slack = fused_blocks(net)
    chain = WeightChain.from_weights(weights, sources)
    if method != "eclipse-fast":
        check_sdp_memory(chain, method, limit, structure=structure)
    l2 = certify_chain(chain, piece, limit)
    l2_upper = add_up(l2.upper, slack) if slack else l2.upper
    c, why = norm_conversion(p, q, net.input_dim, net.output_dim)
    details = {
        "l2_bound": l2_upper,
        "fusion_slack": slack,
        "solver_bound": mul_up(l2.raw, c) if l2.raw > 0 else 0.0,
        "norm_conversion": c,
        "conversion": why,
        "pieces": l2.pieces,
        "solver_seconds": l2.solver_seconds,
    }
    status = Status.FALLBACK if l2.fallback else Status.CERTIFIED
    stopped = {piece.get("stopped") for piece in l2.pieces}
    notes = []
    if stopped - {None}:  # Ctrl-C or the time limit cut a solve short: its piece is a norm product
        status = Status.INTERRUPTED if "interrupted" in stopped else Status.TIME_LIMIT
        notes.append(f"{'Ctrl-C' if status == Status.INTERRUPTED else 'the time limit'} stopped the SDP: the pieces "
                     "it did not solve are bounded by their proven norm products")
    return GlobalLipschitzResult(None, mul_up(l2_upper, c), status, input_norm=p, output_norm=q,
                                 seconds=time.perf_counter() - t0, notes=notes, method=method, details=details)


# --------------------------------------------------------------------------------------- MIP
def _mip_unavailable(p: str, q: str, box) -> str:
    if box is None:
        return "needs a domain (lo, hi)"
    if p not in MIP_NORMS or q not in MIP_NORMS:
        return f"the MILP is exact for l1/linf norms only, not {p}->{q}"
    return ""


def mip_bound(
    net: Network,
    p: str,
    q: str,
    box: Box | None,
    *,
    backend: str = "auto",
    time_limit: float | None = None,
    mip_gap: float | None = None,
) -> GlobalLipschitzResult:
    """The exact constant over the domain box from the local-Lipschitz MILP (its proven bound)."""
    if box is None:
        raise BadInput("method mip certifies the constant over a domain: pass domain=(lo, hi) (--domain LO,HI)")
    if p not in MIP_NORMS or q not in MIP_NORMS:
        raise BadInput(
            f"method mip is exact for l1/linf norms only, not {p}->{q}; use lipsdp-neuron for l2 bounds"
        )
    from .local import local_lipschitz

    t0 = time.perf_counter()
    cert = local_lipschitz(net, box, input_norm=p, output_norm=q, backend=backend, time_limit=time_limit, mip_gap=mip_gap)
    upper = float(cert.upper)
    details = {"backend": cert.backend, "certificate": cert.to_dict()}
    return GlobalLipschitzResult(float(cert.lower), upper, cert.status, cert.certified and math.isfinite(upper), cert.box,
                                 p, q, time.perf_counter() - t0, list(cert.notes), method="mip", details=details)


__all__ = ["GlobalLipschitzComparison", "GlobalLipschitzResult", "METHODS", "global_lipschitz", "mip_bound", "sdp_bound"]

