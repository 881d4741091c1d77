"""The exact stage of small local Lipschitz questions: enumerate the box's activation regions.

On nets with few unstable ReLUs the box holds few activation regions, and the local constant is
the largest Jacobian norm among the full-dimensional ones. `solvers.region_enum` lists them with a
proof that every dropped branch has no interior (Farkas certificates) and with stable and tied
(duplicated / negated) neurons never branched on; each leaf's Jacobian norm is certified
(`clarke_norm_bound` of one fixed pattern: its float64 rounding covered), so the maximum is a
sound upper bound that rests on no solver, and a replayed point inside the best region is a
witness reaching it. This closes exactly the degenerate nets (ties everywhere, regions without
interior, extreme scalings) on which MILP relaxations of ReLU ties leave gaps, on every back-end
and for l2 norms too (a single matrix's l2 norms are certified directly).

When the enumeration does not finish within its share of the budget nothing is lost but that
time; when it finishes but no witness closes the interval, its bound still tightens the upper
bound every later method starts from.
"""

from __future__ import annotations

import time

import numpy as np

from solvers.bounds.jacobian import clarke_norm_bound
from solvers.bounds.types import Bounds, relu_blocks
from solvers.neuron_ties import neuron_ties
from solvers.region_enum import Enumeration, enumerate_regions
from solvers.exact_witness import exact_region_point
from solvers.regions import interior_point
from solvers.runtime import Budget, past

from .certificate import LipschitzCertificate
from .options import DEFAULT_MIP_GAP, LocalOptions, NormQuestion
from .witness import WitnessSearch, closed

REGION_UNSTABLE = 40    # questions with at most this many unstable ReLUs try the enumeration ...
REGION_SECONDS = 3.0    # ... for at most this long (idle, the shared degenerate nets need 0.05-0.6 s) ...
REGION_SHARE = 0.25     # ... and this share of the remaining time limit (the MILP keeps the rest)
REGION_LPS = 3000       # ... and this many region LPs


def region_stage(net, box, question: NormQuestion, opts: LocalOptions, nb: Bounds, search: WitnessSearch,
                 budget: Budget, fast: tuple[float, str]) -> tuple[LipschitzCertificate | None, tuple[float, str]]:
    """(the certificate when the enumeration closed the question, else None; the fast upper bound,
    improved by the enumeration's when it finished)."""
    if nb.num_unstable > REGION_UNSTABLE or budget.expired():
        return None, fast
    rem = budget.remaining()
    seconds = REGION_SECONDS if rem is None else min(REGION_SECONDS, REGION_SHARE * max(rem, 0.0))
    deadline = time.perf_counter() + seconds
    hidden = relu_blocks(net)[:-1]
    ties = neuron_ties([b.weight for b in hidden], [b.bias for b in hidden])
    lo, hi = np.asarray(nb.lo, dtype=np.float64), np.asarray(nb.hi, dtype=np.float64)
    enum = enumerate_regions(net, lo, hi, nb.phases(), ties, deadline=deadline, max_nodes=REGION_LPS)
    if not enum.complete or not enum.leaves:
        return None, fast
    weights = [b.weight for b in relu_blocks(net)]
    bounds = np.array([clarke_norm_bound(weights, leaf.pattern, leaf.pattern, question.p, question.q, question.target)
                       for leaf in enum.leaves])
    upper = float(np.max(bounds))
    if upper < fast[0]:
        fast = (upper, "enumeration of the box's activation regions")
    for k in np.argsort(-bounds):
        if closed(search.lower, upper, opts.mip_gap) or bounds[k] <= search.lower or past(deadline + 0.5 * seconds):
            break
        leaf = enum.leaves[k]
        x = interior_point(net, leaf.pattern, lo, hi)  # the region's deepest point (replays best)
        if any(p is not None and search.offer(p) >= bounds[k] * (1 - 1e-9) for p in (x, leaf.point)):
            continue
        # a region too thin for float64 (a scaled duplicate's sliver, a face of many hyperplanes)
        exact = exact_region_point(net, leaf.pattern, lo, hi)
        if exact is not None:
            search.offer_exact(exact[0], exact[1], leaf.pattern)
    if search.lower > fast[0] or not closed(search.lower, fast[0], opts.mip_gap):
        return None, fast  # (a lower bound above a proven upper one is a bug: the full pipeline reports it)
    return _certificate(box, question, opts, nb, search, budget, fast[0], enum, len(ties)), fast


def _certificate(box, question: NormQuestion, opts: LocalOptions, nb: Bounds, search: WitnessSearch, budget: Budget,
                 upper: float, enum: Enumeration, ties: int) -> LipschitzCertificate:
    lower = search.lower
    # closed to the user's --mip-gap ends the search; only closed to round-off is optimal
    status = "optimal" if closed(lower, upper, DEFAULT_MIP_GAP) else "open_gap"
    notes = [f"exact: {len(enum.leaves)} activation region(s) enumerated, {enum.pruned} branch(es) proven to have "
             "no interior (Farkas certificates)" + (f", {ties} duplicated/negated neuron(s) tied" if ties else "")]
    if search.exact_witness:
        notes.append("the witness lies in a region thinner than float64 resolution: it was found and replayed in "
                     "exact rational arithmetic (its coordinates are rounded to float64 for display)")
    return LipschitzCertificate(
        lower=float(lower), upper=float(upper), status=status, certified=True, box=box, input_norm=question.p,
        output_norm=question.q, seconds=budget.elapsed(), notes=notes, backend="none",
        witness=None if search.point is None else search.point.x, target=question.target, margin=question.margin,
        method="regions", nodes=enum.lps, mip_gap=opts.mip_gap, time_limit=opts.time_limit, bounds=opts.bounds,
        pass_bounds=opts.pass_bounds, formulation=opts.formulation, unstable=nb.num_unstable, binaries=0,
        bound_seconds=nb.seconds, proof={"regions": len(enum.leaves), "pruned": enum.pruned, "lps": enum.lps,
                                         "unproven": enum.unproven, "complete": True, "seconds": enum.seconds},
        witness_direction=search.direction)


__all__ = ["REGION_UNSTABLE", "region_stage"]
