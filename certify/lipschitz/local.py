"""Exact local Lipschitz constants of ReLU networks by mixed-integer programming.

`local_lipschitz` certifies  L = sup_{x in B} ||J(x)||_{p->q}  over a box B (or the constant of a
scalar target c^T f) as an interval [lower, upper], composed of stages shared with every other
question certify asks:

    box -> sound pre-activation bounds -> MILP encoding -> sound solve -> witness replay -> certificate

- box: `models.Box` (center +/- radius within a domain);
- bounds: interval -> symbolic -> LP (`solvers.bounds`);
- encoding: one MILP per norm pair (`solvers.milp.lipschitz`), exactly scaled by powers of two;
- sound solve: `solvers.milp.sound` (back-end choice, time budget, solver answer re-proven by a
  branch-and-bound with safe LP bounds: `upper` never rests on a solver's tolerances);
- lower: the norm of the exact Jacobian at a replayed witness point (`witness`).

l2 norms are not MILP-linear: they are solved as a nonconvex MIQP on Gurobi when it is available
and the model fits its licence (its bound proven with secant relaxations and tangent cuts), and
otherwise bounded by norm interpolation, ||w||_2^2 <= ||w||_1 ||w||_inf, i.e.
L_{2->q} <= sqrt(L_{1->q} L_{inf->q}) (likewise on the output side): sound but not exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from models.box import Box
from models.errors import BadInput
from models.ir import Network
from solvers.blas import single_threaded_blas
from solvers.bounds import network_bounds
from solvers.bounds.types import relu_blocks
from solvers.milp.backends import GurobiBackend, ModelTooLarge, choose_backend, refuse_early
from solvers.milp.lipschitz import LipschitzMilp, build_lipschitz_milp
from solvers.milp.sound import SoundSolve, sound_solve
from solvers.neuron_ties import neuron_ties
from solvers.phases import UNSTABLE
from solvers.rounding import round_up, sqrt_up
from solvers.runtime import Abandoned, Budget, ProgressCallback, interruptible, may_abandon, run_abandonable

from ..certificate import issues
from .certificate import LipschitzCertificate
from .live import LiveProgress
from .node_bound import clarke_node_bound
from .anytime import bab_certificate, fast_upper
from .bab import INPUT_SPLIT_DIM
from .exact_regions import region_stage
from .options import (AUTO_BAB_INPUTS, AUTO_MILP_INPUTS, AUTO_MILP_UNSTABLE, AUTO_REGIONS_BEFORE_BAB,
                      AUTO_REGIONS_BEFORE_MILP, DEFAULT_MIP_GAP, LP_CUTS, LocalOptions, NormQuestion)
from .witness import WitnessSearch, closed, walk_regions


@issues
def local_lipschitz(
    net: Network,
    center: Sequence[float] | np.ndarray | Box,
    radius: float | Sequence[float] | np.ndarray | None = None,
    *,
    domain: tuple | None = None,
    input_norm: str = "linf",
    output_norm: str = "l1",
    margin: tuple[int, int] | None = None,
    target: Sequence[float] | np.ndarray | None = None,
    progress: ProgressCallback | None = None,
    **options,
) -> LipschitzCertificate:
    """Certified local Lipschitz constant of `net` over a box: `local_lipschitz(net, box)` with a
    `certify.Box`, or `local_lipschitz(net, center, radius, domain=(lo, hi))`.

    - norms: `input_norm` and `output_norm` in l1, l2, linf (operator norm ||J||_{p->q}); or a
      scalar function: `margin=(i, j)` for f_i - f_j, or `target=c` for c^T f;
    - `progress`: a callable receiving `solvers.runtime.Progress` events (the certified interval
      so far) while it runs;
    - options (`certify.lipschitz.options.LocalOptions`): `backend` (auto: Gurobi when licensed
      and the model fits, else HiGHS; gurobi, highs, cbc), `time_limit` (seconds, the whole
      call), `mip_gap` (relative, default 1e-6), `bounds` (interval, symbolic, lp),
      `formulation` (forward J w, or backward J^T c as in LipMIP), `l2_method` (auto, miqp,
      equivalence), `pass_bounds` (interval, lp), `threads`, `warm_start`, `verbose`, `method`
      (auto: the MILP when at most 60 ReLUs are unstable and at most 100 inputs free, else the
      Jacobian branch-and-bound; milp; bab; bounds: the Jacobian bound alone; where the rule can
      guess wrong, auto races the MILP in a forked process against the region stage and the tree:
      `certify.lipschitz.race`),
      `race` (auto: with fork and two cores; on; off), `milp_finish` (bab: close nodes with at most
      six unstable ReLUs, or eight on nodes about to be branched, by the exact MILP; off by
      default, the tree closes such nodes about as fast).

    Returns a `LipschitzCertificate` with lower <= L <= upper, both proven. Raises `BadInput`
    for invalid arguments or a solver that cannot be used. Ctrl-C stops the solve and returns
    the sound interval reached (status "interrupted").
    """
    if not isinstance(net, Network):
        raise BadInput("net must be a certify Network (load it with certify.load_onnx or certify.from_torch)")
    box = _box(net, center, radius, domain)
    question = NormQuestion.of(net, input_norm, output_norm, margin, target)
    opts = LocalOptions.of(**options)
    budget = Budget(opts.time_limit)
    _refuse_early(net, box, question, opts)
    with interruptible(), single_threaded_blas():  # small products: BLAS threads only wait for each other
        # a branch-and-bound over input splits re-bounds every sub-box: a long LP pass on the whole
        # box pays less there
        free = int(np.sum(box.free))
        splits = (opts.method == "bab" and free <= INPUT_SPLIT_DIM) or _auto_bab(opts, box, question)
        nb = network_bounds(net, np.array(box.lo), np.array(box.hi), opts.bounds,  # type: ignore[arg-type]
                            lp_deadline=budget.stage(0.05 if splits else 0.25),
                            lp_cuts=LP_CUTS if free > AUTO_BAB_INPUTS else 0, lp_workers=2)  # (nothing else runs yet)
        search = WitnessSearch(net, box, question, budget)
        search.sample()
        fast = fast_upper(net, nb, question, budget.deadline)
        regions = opts.method == "auto" and _regions_first(net, nb, splits, question,
                                                           not splits and _race_allowed(opts, question))
        if _race(opts, nb, box, question, splits, regions):
            from .race import RaceUnavailable

            try:
                return _raced(net, box, question, opts, nb, search, budget, fast, progress, splits, regions)
            except RaceUnavailable:  # no fork possible: the rule alone, as without the race
                pass
        if regions:  # small nets: their regions, exactly
            exact, fast = region_stage(net, box, question, opts, nb, search, budget, fast)
            if exact is not None:
                LiveProgress(progress, search, budget).proven(exact.upper)
                return exact
        _walk(search, budget, splits, nb)
        live = LiveProgress(progress, search, budget)
        live.proven(fast[0])
        method = _method(opts, nb, box, question)
        if method != "milp":
            return bab_certificate(net, box, question, opts, nb, search, budget, fast, live, method)
        return _milp_path(net, box, question, opts, nb, search, budget, fast, live)


def _walk(search: WitnessSearch, budget: Budget, splits: bool, nb) -> None:
    """The region walk's lower bound before the method. Before a small tree over input splits: one
    climb from the best sampled points, no random restarts (the tree's own points find the rest:
    same nodes, 0.1-0.4 s less on the bench); larger trees, which often end at the time limit, keep
    them for their lower bound (ACAS Xu 3_3, 148 unstable, 10 s: 4.49 with them, 4.29 without)."""
    few = splits and nb.num_unstable <= WALK_RESTARTS_UNSTABLE
    walk_regions(search, budget.stage(0.1), **({"rounds": 0} if few else {}))


def _milp_path(net, box, question: NormQuestion, opts: LocalOptions, nb, search: WitnessSearch, budget: Budget,
               fast: tuple[float, str], live: LiveProgress, proof_cores: tuple[int, Callable[[], int]] | None = None
               ) -> LipschitzCertificate:
    """What `method="milp"` runs after the bounds: plan, solve, independent proof, certificate.
    `proof_cores`: the proof's worker processes (most, how many now) when not `opts.threads`."""
    try:
        plan = _plan(net, nb, question, opts, budget)
    except _NoTime:  # Ctrl-C or the deadline before the MILP was built: the fast bound it is
        return bab_certificate(net, box, question, opts, nb, search, budget, fast, live, "bounds")
    solves = [_solve_pair(pair, holder, nb, search, opts, budget, live, k, len(plan.pairs), proof_cores)
              for k, (pair, holder) in enumerate(plan.pairs)]
    return _certificate(box, question, opts, nb, search, plan, solves, budget, fast)


def _race(opts: LocalOptions, nb, box: Box, question: NormQuestion, splits: bool, regions: bool) -> bool:
    """Does auto race the MILP (a child process) against the region stage or the tree?

    `race="auto"`: only where the rule picks the MILP, on boxes whose inputs the tree does not
    split (more than AUTO_BAB_INPUTS free inputs): against the region stage where it goes first,
    else against the phase-splitting tree. There neither order wins (digits 32-32 x0: the region
    stage gives up after 3 s, the MILP closes in 7 s; digits 64 x0, same 15 unstable ReLUs: the
    region stage closes in 3 s, the MILP in 23 s; LipMIP's 10-10-10-10-10-2: the tree 4.5 s, the
    MILP 9-10 s). Boxes whose inputs the tree splits keep the tree alone: it closed every such
    bench question first (LipMIP's 2-input nets, random 5-60-60-2), and on this shared 2-core
    machine a MILP process beside it only takes its CPU. Never for l2 norms (their MILP is
    Gurobi's MIQP or an interpolation), a named back-end or method, or more than
    RACE_MAX_UNSTABLE unstable ReLUs. `race="on"`: wherever fork exists (the tree's boxes too);
    "off": the rule alone."""
    if nb.num_unstable > RACE_MAX_UNSTABLE:
        return False
    if opts.race == "auto" and (splits or not (regions or _method(opts, nb, box, question) == "milp")):
        return False
    return _race_allowed(opts, question)


def _race_allowed(opts: LocalOptions, question: NormQuestion) -> bool:
    """What every race needs: `method` and `backend` auto, l1/linf norms, `race` not off, and a fork
    and the cores for it."""
    if opts.method != "auto" or opts.backend != "auto" or question.uses_l2 or opts.race == "off":
        return False
    from .race import race_possible  # (lazy: 4-6 ms of import that the questions never raced skip)

    return race_possible(cores=1 if opts.race == "on" else 2)


def _raced(net, box, question: NormQuestion, opts: LocalOptions, nb, search: WitnessSearch, budget: Budget,
           fast: tuple[float, str], progress, splits: bool, regions: bool) -> LipschitzCertificate:
    """auto's race (`race`): the MILP path in a forked child with one solver thread; here the region
    stage when the rule runs it, then the tree on boxes whose inputs it splits (or with no region
    stage, as on nets with two or more hidden layers: `_regions_first`), else nothing: the MILP
    alone from there (after a region stage that gave up, the tree would mostly take its core)."""
    from .race import CHILD_DELAY, Race, race_side_names

    live = LiveProgress(progress, search, budget)
    live.proven(fast[0])

    def milp_side(send, parent_idle) -> LipschitzCertificate:
        child_live = LiveProgress(send, search, budget)
        walk_regions(search, budget.stage(0.1))
        # one solver thread while the parent's side runs; all of them when it only waits by now (the
        # proof's workers: one until then, a second one as soon as the parent waits)
        milp_opts = replace(opts, threads=opts.threads if parent_idle() else 1, method="milp")
        return _milp_path(net, box, question, milp_opts, nb, search, budget, fast, child_live,
                          (opts.threads, lambda: opts.threads if parent_idle() else 1))

    race = Race(milp_side, search, budget, opts.mip_gap, live, CHILD_DELAY if splits else 0.0)

    def tree_side() -> LipschitzCertificate:
        quick = fast
        if regions:
            exact, quick = region_stage(net, box, question, opts, nb, search, budget, fast)
            if exact is not None:
                live.proven(exact.upper)
                return exact
        live.proven(quick[0])
        if regions and not splits:  # (no walk here either: the child walks before its MILP)
            race.wait_child()
            return bab_certificate(net, box, question, opts, nb, search, budget, quick, live, "bounds")
        _walk(search, budget, splits, nb)
        return bab_certificate(net, box, question, opts, nb, search, budget, quick, live, "bab")

    return race.run(tree_side, race_side_names)


RACE_MAX_UNSTABLE = 120
WALK_RESTARTS_UNSTABLE = 60  # trees over input splits with more unstable ReLUs keep the walk's restarts


def _box(net: Network, center, radius, domain) -> Box:
    if isinstance(center, Box):
        if radius is not None or domain is not None:
            raise BadInput("give either a Box or center, radius (and domain), not both")
        return center.check_dim(net.input_dim)
    if radius is None:
        raise BadInput("local_lipschitz needs a Box, or a center and a radius")
    return Box.around(center, radius, domain=domain, dim=net.input_dim)


def _refuse_early(net: Network, box: Box, question: NormQuestion, opts: LocalOptions) -> None:
    """An explicit back-end with a size limit is refused before any bounds when a lower bound on
    the MILP's size exceeds it. A neuron is unstable under any sound bounds when it takes both
    signs on the box: exactly decided for the first layer (its extremes are at box vertices),
    by sampled points for the others. Each unstable neuron costs two variables and three rows,
    and in the first layer also a Jacobian switch (one variable, four rows)."""
    miqp = question.uses_l2 and opts.l2_method == "miqp"
    name = "gurobi" if miqp else opts.backend
    if name != "gurobi":
        return
    lo, hi = np.array(box.lo), np.array(box.hi)
    blocks = net.affine_blocks()[0]
    first = 0
    if len(blocks) > 1:  # (a net without hidden layers has no ReLU to count)
        blk = blocks[0]
        wp, wn = np.maximum(blk.weight, 0.0), np.minimum(blk.weight, 0.0)
        zmin, zmax = wp @ lo + wn @ hi + blk.bias, wp @ hi + wn @ lo + blk.bias
        tol = 1e-12 * (np.abs(blk.weight) @ np.maximum(np.abs(lo), np.abs(hi)) + np.abs(blk.bias))
        first = int(np.sum((zmin < -tol) & (zmax > tol)))
    rng = np.random.default_rng(0)
    xs = np.vstack([rng.uniform(lo, hi, (32, lo.size)), np.where(rng.random((32, lo.size)) < 0.5, lo, hi)])
    deeper = 0
    for z in list(zip(*(net.preactivations(x) for x in xs)))[1:]:
        z = np.array(z)
        deeper += int(np.sum(np.any(z > 0, axis=0) & np.any(z < 0, axis=0)))
    unstable = first + deeper
    forward = opts.formulation == "forward"
    directions = net.input_dim if forward else 0  # w lives on the input side in the forward pass
    switches = first if forward else 0
    refuse_early(name, net.input_dim + directions + 2 * unstable + switches, 3 * unstable + 4 * switches, quadratic=miqp)


def _method(opts: LocalOptions, nb, box: Box, question: NormQuestion) -> str:
    """auto: the Jacobian branch-and-bound when it splits inputs (few free inputs: its sub-box
    bounds close the tree faster than the MILP and its proof, see `options.AUTO_MILP_UNSTABLE`;
    l1 and linf norms: l2 keeps its exact MIQP), else the MILP up to AUTO_MILP_UNSTABLE unstable
    ReLUs and AUTO_MILP_INPUTS free inputs."""
    if opts.method != "auto":
        return opts.method
    if opts.backend != "auto":  # a MILP back-end asked for by name: the MILP it is
        return "milp"
    if _auto_bab(opts, box, question):
        return "bab"
    few_inputs = int(np.sum(box.free)) <= AUTO_MILP_INPUTS
    return "milp" if nb.num_unstable <= AUTO_MILP_UNSTABLE and few_inputs else "bab"


def _regions_first(net: Network, nb, splits: bool, question: NormQuestion, tree_races: bool = False) -> bool:
    """Does auto try the region stage before its method? Before the MILP: always for l2 questions
    (their only exact path without Gurobi), for l1/linf ones with at most AUTO_REGIONS_BEFORE_MILP
    unstable neurons not tied to another (it closes those in a fraction of the MILP's time; with
    more it ran out of its time before the MILP); before the input-splitting branch-and-bound with
    at most AUTO_REGIONS_BEFORE_BAB of them (tied ones are never branched on): measured, the
    enumeration's LPs grow faster than the tree's nodes with the unstable count (options). Where
    the tree can race the MILP (`tree_races`: a box it does not split, `_race_allowed`), never
    before the MILP on nets with two or more hidden ReLU layers: there the phase-splitting tree
    closed every bench question first (digits 32-32 x0 / x1 / x2: 1.4 / 1.6 / 0.9 s, where the
    region stage gave up after 3 s on x0 / x1 and took 2.2 s on x2); a named MILP back-end, or no
    race, keeps the region stage (the exact path on degenerate nets, where the MILP's incumbents
    may not replay)."""
    if not splits and question.uses_l2:
        return True
    if not splits and tree_races and len(relu_blocks(net)) > 2:
        return False
    limit = AUTO_REGIONS_BEFORE_BAB if splits else AUTO_REGIONS_BEFORE_MILP
    return nb.num_unstable <= limit or _free_unstable(net, nb) <= limit


def _free_unstable(net: Network, nb) -> int:
    """Unstable neurons not tied to an earlier one (`solvers.neuron_ties`). The exact tie search is
    quadratic in Python: it runs only when some layer has two rows equal after scaling by their
    first nonzero entry (exact ties by powers of two always do; a tie whose scaling rounds
    differently is missed, which only costs the region stage its turn)."""
    hidden = relu_blocks(net)[:-1]
    weights, biases = [b.weight for b in hidden], [b.bias for b in hidden]
    if not any(_scaled_duplicates(W, b) for W, b in zip(weights, biases)):
        return nb.num_unstable
    tied = {(t.layer, t.j) for t in neuron_ties(weights, biases)}
    return sum(1 for k, ph in enumerate(nb.phases()) for j in np.flatnonzero(ph == UNSTABLE) if (k, int(j)) not in tied)


def _scaled_duplicates(W: np.ndarray, b: np.ndarray) -> bool:
    rows = np.hstack([W, b.reshape(-1, 1)])
    rows = rows[np.any(rows != 0, axis=1) & np.all(np.isfinite(rows), axis=1)]
    if rows.shape[0] < 2:
        return False
    pivot = rows[np.arange(rows.shape[0]), np.argmax(rows != 0, axis=1)]
    return np.unique(rows / pivot[:, None], axis=0).shape[0] < rows.shape[0]


def _auto_bab(opts: LocalOptions, box: Box, question: NormQuestion) -> bool:
    """Does auto pick the branch-and-bound whatever the bounds (few free inputs, l1/linf)?"""
    return (opts.method == "auto" and opts.backend == "auto" and not question.uses_l2
            and int(np.sum(box.free)) <= AUTO_BAB_INPUTS)


# ----------------------------------------------------------------------------- planning
@dataclass
class _Plan:
    """[(norm pair, [MILP])] to solve (a one-element list, replaced when patterns are cut) and the
    method: milp, miqp (Gurobi's exact l2), equivalence (l2 by norm interpolation)."""

    pairs: list[tuple[tuple[str, str | None], list[LipschitzMilp]]]
    method: str
    notes: list[str] = field(default_factory=list)


class _NoTime(Exception):
    """Ctrl-C or the deadline came before the MILP was built."""


def _built(make, budget: Budget):
    """make() (a MILP build: seconds on 784-512-512 layers, polling nothing), raising `_NoTime` when
    the budget has run out; in the CLI process the build is abandoned at the deadline or at Ctrl-C
    (`solvers.runtime.run_abandonable`), elsewhere it runs to its end."""
    if budget.expired():
        raise _NoTime
    if not may_abandon():
        return make()
    try:
        return run_abandonable(make, budget.deadline)
    except Abandoned:
        raise _NoTime from None


def _plan(net, nb, question: NormQuestion, opts: LocalOptions, budget: Budget) -> _Plan:
    p, q, c = question.p, question.q, question.target
    notes: list[str] = []

    def build(pair) -> list[LipschitzMilp]:
        milp = _built(lambda: build_lipschitz_milp(net, nb, pair[0], pair[1], c, opts.formulation, "interval"), budget)
        # an explicit back-end that cannot take the model is refused before the costly LP pass
        choose_backend("gurobi" if method == "miqp" else opts.backend, milp.model)
        if opts.pass_bounds == "lp":
            try:  # (the interval MILP stands when there is no time for the LP pass)
                milp = _built(lambda: build_lipschitz_milp(net, nb, pair[0], pair[1], c, opts.formulation, "lp",
                                                           budget.stage(0.25)), budget)
            except _NoTime:
                pass
        return [milp]

    method = "milp"
    if not question.uses_l2:
        return _Plan([((p, q), build((p, q)))], method, notes)
    if opts.l2_method != "equivalence" and opts.backend in ("auto", "gurobi"):
        gurobi = GurobiBackend()
        milp = _built(lambda: build_lipschitz_milp(net, nb, p, q, c, opts.formulation, "interval"), budget)
        reason = gurobi.unavailable_reason() if not gurobi.available() else gurobi.unsupported_reason(milp.model)
        if not reason:
            method = "miqp"
            return _Plan([((p, q), build((p, q)))], method, notes)
        if opts.l2_method == "miqp":
            raise ModelTooLarge(f"the exact l2 MIQP needs Gurobi: {reason}; use --l2-method equivalence")
        notes.append(f"exact l2 MIQP skipped ({reason}); using the norm-interpolation bound")
    elif opts.l2_method == "miqp":
        raise BadInput(f"the exact l2 MIQP needs --backend gurobi (or auto), not {opts.backend}")
    method = "equivalence"
    if c is not None:
        pairs = [("l1", None), ("linf", None)]
    elif p == "l2" and q == "l2":
        pairs = [("l1", "l1"), ("linf", "linf")]
    elif p == "l2":
        pairs = [("l1", q), ("linf", q)]
    else:
        pairs = [(p, "l1"), (p, "linf")]
    return _Plan([(pair, build(pair)) for pair in pairs], method, notes)


# ----------------------------------------------------------------------------- solving
@dataclass
class _Solved:
    pair: tuple[str, str | None]
    milp: LipschitzMilp
    sound: SoundSolve
    upper: float


def _solve_pair(pair, holder: list[LipschitzMilp], nb, search: WitnessSearch, opts: LocalOptions, budget: Budget,
                live: LiveProgress, k: int, n: int, proof_cores: tuple[int, Callable[[], int]] | None = None) -> _Solved:
    rem = budget.remaining()
    share = budget if rem is None or n - k == 1 else Budget(max(rem, 0.0) / (n - k))
    milp = holder[0]
    fallback = round_up(milp.objective.naive_upper + milp.model.obj_err, milp.objective.naive_upper, 4)
    if n == 1:
        live.proven(milp.to_lipschitz(fallback))
    start = search.start(milp, pair) if opts.warm_start else None
    sound = sound_solve(milp.model, share, backend="gurobi" if milp.model.is_quadratic else opts.backend,
                        mip_gap=opts.mip_gap, threads=opts.threads, verbose=opts.verbose, start=start,
                        check_point=search.check_point(nb, milp), refine=search.refine(holder, pair, opts.mip_gap),
                        fallback=fallback, on_progress=live.hook(holder, n == 1),
                        node_bound=lambda lo, hi: holder[0].phase_bound(lo, hi),
                        phase_bound=clarke_node_bound(search.net, search.box, nb, milp, pair, search.question.target),
                        replay=lambda x: search.replay(holder[0], pair, x),
                        units=lambda v: holder[0].to_lipschitz(v),
                        workers=None if proof_cores is None else proof_cores[0],
                        available=None if proof_cores is None else proof_cores[1])
    if sound.incumbent is not None and sound.incumbent_value is not None:
        # every incumbent was replayed before the proof; one that fell short of its objective says why
        claimed = holder[0].to_lipschitz(sound.incumbent_value, upward=False)
        got = search.replay(holder[0], pair, sound.incumbent)
        if not closed(got, claimed, opts.mip_gap) and got < claimed:
            sound.notes.append(f"{sound.backend}'s incumbent {claimed:.9g} did not replay: "
                               + search.why_short(holder[0], sound.incumbent, got))
    upper = holder[0].to_lipschitz(sound.bound)
    live.proven(upper if n == 1 else None)
    return _Solved(pair, holder[0], sound, upper)


# ----------------------------------------------------------------------------- result
def _certificate(box, question: NormQuestion, opts: LocalOptions, nb, search: WitnessSearch, plan: _Plan,
                 solves: list[_Solved], budget: Budget, fast: tuple[float, str]) -> LipschitzCertificate:
    notes = list(plan.notes)
    for s in solves:
        notes.extend(s.sound.notes)
    if search.cuts:
        notes.append(f"cut {search.cuts} activation pattern(s) whose regions have no interior in the box (ReLU ties)")
    upper = _combine([s.upper for s in solves])
    if fast[0] < upper:  # never worse than the fast bound (a MILP cut short by the budget)
        upper = fast[0]
        notes.append(f"upper bound: {fast[1]} (below the MILP's)")
    lower = search.lower
    statuses = {s.sound.status for s in solves}
    status = "time_limit" if "time_limit" in statuses else "interrupted" if "interrupted" in statuses else "optimal"
    if lower > upper:
        # both numbers are proofs, so this cannot happen unless certify has a bug: keep the larger
        notes.append(f"internal inconsistency: the replayed lower bound {lower!r} exceeds the proven upper bound "
                     f"{upper!r}; reporting the larger value as the upper bound (please report this model)")
        upper, status = lower, "open_gap" if status == "optimal" else status
    if status == "optimal" and not closed(lower, upper, DEFAULT_MIP_GAP):
        status = "open_gap"
        if plan.method == "equivalence":
            notes.append("l2 norm bounded by norm interpolation (sound, not exact)")
        elif closed(lower, upper, opts.mip_gap):
            notes.append(f"the interval closed only to the requested gap {opts.mip_gap:g}")
        else:
            notes.append("no replayed witness reaches the proven bound (a degenerate optimum, or the MILP's "
                         "relaxation of ReLU ties)")
    proof_seconds = sum(s.sound.proof_seconds for s in solves)
    return LipschitzCertificate(
        lower=float(lower), upper=float(upper), status=status, certified=True, box=box,
        input_norm=question.p, output_norm=question.q, seconds=budget.elapsed(), notes=notes,
        backend="+".join(sorted({s.sound.backend for s in solves})), witness=None if search.point is None else search.point.x,
        target=question.target, margin=question.margin, method=plan.method,
        nodes=sum(s.sound.nodes for s in solves), mip_gap=opts.mip_gap, time_limit=opts.time_limit, bounds=opts.bounds,
        pass_bounds=opts.pass_bounds, formulation=opts.formulation, unstable=nb.num_unstable,
        binaries=max(s.milp.num_binaries for s in solves), bound_seconds=nb.seconds,
        solver_seconds=sum(s.sound.solver_seconds for s in solves),
        proof={"seconds": proof_seconds, "nodes": sum(s.sound.proof.nodes for s in solves if s.sound.proof),
               "complete": all(s.sound.proof.complete for s in solves if s.sound.proof),
               "share": proof_seconds / max(budget.elapsed(), 1e-9)},
        witness_direction=search.direction,
    )


def _combine(uppers: list[float]) -> float:
    if len(uppers) == 1:
        return uppers[0]
    a, b = uppers
    return sqrt_up(round_up(a * b, a * b, 1)) if math.isfinite(a * b) else math.inf
