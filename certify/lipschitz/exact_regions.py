"""The exact stage of small local Lipschitz questions: a search over the box's activation regions.

On nets with few unstable ReLUs the local constant is the largest Jacobian norm among the box's
full-dimensional activation regions. `solvers.region_bab` searches them best-first: phases decided
layer by layer, a branch dropped only with a proof that its region has no interior (Farkas
certificates), stable and tied (duplicated / negated) neurons never branched on, and every partial
pattern bounded by a certified Jacobian norm over its undecided slopes (`pattern_norm_bound`), so
that the few regions of largest norm are reached first and the rest are bounded away without an
LP each (thousands of regions on a 4-input net with 14 unstable ReLUs: about 100 LPs). A complete
pattern's bound is its region's certified norm (`clarke_norm_bound` of one pattern, float64
rounding covered), and a point replayed inside it is a witness reaching it (in exact rationals
when the region is thinner than float64: `solvers.exact_witness`); a pattern that no float
witness replays is decided by its region LP solved in exact rationals (`solvers.exact_lp`,
warm-started from HiGHS's basis): an exact interior point to replay, or a dual certificate that it
has none (HiGHS's depths are only good to its 1e-7 tolerance: an empty region can look 2.6e-9 deep,
a genuine sliver -2e-11). The bound
rests on no MILP solver, on every back-end and for l2 norms too (one matrix's l2 norms are
certified directly).

When the search does not close within its share of the budget nothing is lost but that time: its
bound (the largest open one) is still sound and tightens the upper bound every later method
starts from.
"""

from __future__ import annotations

import math
import time

import numpy as np

from solvers.bounds.jacobian import clarke_norm_bound
from solvers.bounds.types import Bounds, relu_blocks
from solvers.neuron_ties import neuron_ties
from solvers.region_bab import RegionBab, region_bab
from solvers.exact_witness import decide_region
from solvers.regions import has_no_interior, interior_point
from solvers.rounding import mul_up, sqrt_up
from solvers.runtime import Budget, past

from .certificate import LipschitzCertificate
from .options import DEFAULT_MIP_GAP, LocalOptions, NormQuestion
from .witness import WitnessSearch, closed

REGION_UNSTABLE = 40    # questions with at most this many unstable ReLUs try the enumeration ...
REGION_SECONDS = 3.0    # ... for at most this long (idle, the shared degenerate nets need 0.05-0.6 s) ...
REGION_SHARE = 0.25     # ... and this share of the remaining time limit (the MILP keeps the rest),
REGION_SHARE_TINY = 0.5  # or this one up to REGION_TINY unstable ReLUs: there the search closes
REGION_TINY = 12         # where the MILP and the tree stay open (fresh degenerate nets, 10 unstable:
                         # 1.5-2 s loaded with exact LPs at sliver branches, tree/MILP open at 5 s)
REGION_LPS = 3000       # ... and this many region LPs


def region_stage(net, box, question: NormQuestion, opts: LocalOptions, nb: Bounds, search: WitnessSearch,
                 budget: Budget, fast: tuple[float, str]) -> tuple[LipschitzCertificate | None, tuple[float, str]]:
    """(the certificate when the search closed the question, else None; the fast upper bound,
    improved by the search's: sound even when it stopped early)."""
    if nb.num_unstable > REGION_UNSTABLE or budget.expired():
        return None, fast
    rem = budget.remaining()
    share = REGION_SHARE_TINY if nb.num_unstable <= REGION_TINY else REGION_SHARE
    seconds = REGION_SECONDS if rem is None else min(REGION_SECONDS, share * max(rem, 0.0))
    deadline = time.perf_counter() + seconds
    hidden = relu_blocks(net)[:-1]
    ties = neuron_ties([b.weight for b in hidden], [b.bias for b in hidden])
    lo, hi = np.asarray(nb.lo, dtype=np.float64), np.asarray(nb.hi, dtype=np.float64)
    weights = [b.weight for b in relu_blocks(net)]
    # pruned to half the gap: the interval then closes to the gap with room for round-off
    gap = 0.5 * min(opts.mip_gap, DEFAULT_MIP_GAP)

    def bound(s_lo, s_hi) -> float:
        # interval bounds only: on these tiny nets the linear ones cost ~2x per node and save few LPs
        # (soundness/net91 l2->l2: 53 LPs against 54; net171 margin: 100 against 112)
        return pattern_norm_bound(weights, s_lo, s_hi, question, None, deadline)

    def settle(pattern, point, norm: float) -> bool:
        """Replay a witness in the region; True when it turns out to have no interior (proven)."""
        if closed(search.lower, norm, gap) or past(deadline + 0.5 * seconds):
            return False
        x = interior_point(net, pattern, lo, hi)  # the region's deepest point (replays best)
        if any(p is not None and search.offer(p) >= norm * (1 - 1e-9) for p in (point, x)):
            return False
        # a region too thin for float64 (a scaled duplicate's sliver, a face of many hyperplanes)
        # (the exact LP also decides depths within the float LP's tolerance, either way)
        kind, exact = decide_region(net, pattern, lo, hi, deadline + 0.5 * seconds)
        if kind == "interior":
            search.offer_exact(exact[0], exact[1], pattern)
            return False
        if kind == "empty":
            return True
        # no witness at all: the LP's depth may be within its tolerance; a Farkas proof settles it
        return has_no_interior(net, pattern, lo, hi, deadline=deadline + 0.5 * seconds)

    res = region_bab(net, lo, hi, nb.phases(), ties, bound, settle, lambda b: closed(search.lower, b, gap),
                     deadline=deadline, max_lps=REGION_LPS)
    if res.upper < fast[0]:
        fast = (res.upper, "branch-and-bound over the box's activation regions")
    if not res.complete or search.lower > fast[0] or not closed(search.lower, fast[0], opts.mip_gap):
        return None, fast  # (a lower bound above a proven upper one is a bug: the full pipeline reports it)
    return _certificate(box, question, opts, nb, search, budget, fast[0], res, len(ties)), fast


def pattern_norm_bound(weights: list[np.ndarray], s_lo: list[np.ndarray], s_hi: list[np.ndarray], question: NormQuestion,
                       above: float | None, deadline: float | None) -> float:
    """A sound upper bound of the Jacobian norm over the slopes [s_lo, s_hi] (`clarke_norm_bound`;
    `above`: its linear bounds only where the interval ones exceed this, None: never).
    With l2 norms and undecided slopes its entrywise bound is loose; the interpolations
    ||v||_2^2 <= ||v||_1 ||v||_inf (l2 outputs, or the gradient of a target with an l2 input) and
    ||J||_2^2 <= ||J||_1 ||J||_inf (Schur, l2 -> l2) bound it by two l1/linf norms, whose output
    functionals are bounded exactly; each holds for every J, hence for the suprema."""
    p, q, c = question.p, question.q, question.target
    b = clarke_norm_bound(weights, s_lo, s_hi, p, q, c, linear_above=above, deadline=deadline)
    if all(np.array_equal(a, z) for a, z in zip(s_lo, s_hi)):
        return b  # one Jacobian: its norm, already exact
    if c is None and q == "l2" and p in ("l1", "linf"):
        pairs = [(p, "l1"), (p, "linf")]
    elif c is None and p == "l2" and q == "l2":
        pairs = [("l1", "l1"), ("linf", "linf")]
    elif c is not None and p == "l2":
        pairs = [("linf", None), ("l1", None)]  # ||J^T c||_1 and ||J^T c||_inf
    else:
        return b
    a1, a2 = (clarke_norm_bound(weights, s_lo, s_hi, pp, qq, c, linear_above=above, deadline=deadline)
              for pp, qq in pairs)
    return min(b, sqrt_up(mul_up(a1, a2)))


def _certificate(box, question: NormQuestion, opts: LocalOptions, nb: Bounds, search: WitnessSearch, budget: Budget,
                 upper: float, enum: RegionBab, ties: int) -> LipschitzCertificate:
    lower = search.lower
    # closed to the user's --mip-gap ends the search; only closed to round-off is optimal
    status = "optimal" if closed(lower, upper, DEFAULT_MIP_GAP) else "open_gap"
    notes = [f"exact: branch-and-bound over activation patterns, {enum.leaves} region(s) reached, {enum.pruned} "
             "branch(es) proven to have no interior (Farkas certificates), the rest bounded by certified Jacobian "
             "norms" + (f", {ties} duplicated/negated neuron(s) tied" if ties else "")]
    if search.exact_witness:
        notes.append("the witness lies in a region thinner than float64 resolution: it was found and replayed in "
                     "exact rational arithmetic (its coordinates are rounded to float64 for display)")
    return LipschitzCertificate(
        lower=float(lower), upper=float(upper), status=status, certified=True, box=box, input_norm=question.p,
        output_norm=question.q, seconds=budget.elapsed(), notes=notes, backend="none",
        witness=None if search.point is None else search.point.x, target=question.target, margin=question.margin,
        method="regions", nodes=enum.lps, mip_gap=opts.mip_gap, time_limit=opts.time_limit, bounds=opts.bounds,
        pass_bounds=opts.pass_bounds, formulation=opts.formulation, unstable=nb.num_unstable, binaries=0,
        bound_seconds=nb.seconds, proof={"regions": enum.leaves, "pruned": enum.pruned, "lps": enum.lps,
                                         "unproven": enum.unproven, "bounded": enum.bounded, "complete": True,
                                         "seconds": enum.seconds},
        witness_direction=search.direction)


__all__ = ["REGION_UNSTABLE", "pattern_norm_bound", "region_stage"]
