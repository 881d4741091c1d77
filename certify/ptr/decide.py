"""Decide "L(f, box) <= D?" with the local-Lipschitz MILP, soundly and without solving it to optimality
(and, for low-dimensional inputs, with the Lipschitz branch-and-bound: `bab_decide`).

The bisection only needs the answer for one proposal D, which is far cheaper than the constant:

- accept: the independent branch-and-bound proof (`solvers.bab.prove_bound`, safe LP bounds at
  every node) is run with the *target* D instead of the solver's optimum; it closes every node
  whose bound is <= D, which is quick unless D is within a few percent of the constant;
- reject: a replayed witness (`certify.lipschitz.witness`: the exact Jacobian at a point of the
  box where the net is certified differentiable) whose norm exceeds D. Witnesses come from sampled
  points and from the MILP solver's incumbents (its unproven numbers are never used otherwise).

Neither answer rests on solver tolerances. When neither is reached within the step's budget
the step is "undecided" (status time_limit, or open_gap when the proof ended above D without a
witness above it); the search then counts it as a violation. Every stage polls the budget: a
decider called with no time left returns "undecided" at once, and one whose time runs out
returns soon after the deadline (the solvers' own limits count from the start of their call, the
proof and the bounds stop at the deadline).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bab import prove_bound
from solvers.bounds import network_bounds
from solvers.milp.backends import choose_backend
from solvers.milp.lipschitz import LipschitzMilp, build_lipschitz_milp
from solvers.milp.result import SolveOptions
from solvers.milp.sound import SOLVER_TOLERANCE
from solvers.rounding import round_up
from solvers.runtime import Budget, interrupted

from ..certificate import Status
from ..lipschitz.options import NormQuestion
from ..lipschitz.witness import WitnessSearch

ACCEPT, REJECT, UNDECIDED = "accept", "reject", "undecided"


@dataclass
class Decision:
    """The answer for one box and proposal, with the proven interval [lower, upper] it rests on."""

    decision: str
    lower: float
    upper: float
    status: str
    witness: np.ndarray | None = None
    nodes: int = 0
    notes: list[str] = field(default_factory=list)


def _target(milp: LipschitzMilp, proposal: float) -> float:
    """The largest objective value whose Lipschitz value (rounded up) is still <= proposal."""
    t = milp.to_objective(proposal)
    for _ in range(64):
        if milp.to_lipschitz(t) <= proposal:
            return t
        t = float(np.nextafter(t, -np.inf)) if t > 0 else t - 1e-300
    return milp.to_objective(proposal) * (1 - 1e-9)


def milp_decide(net: Network, box: Box, input_norm: str, output_norm: str, proposal: float, budget: Budget, *,
                backend: str = "auto", threads: int = 1, start: np.ndarray | None = None) -> Decision:
    """Is the local constant over `box` at most `proposal`? (see the module doc)."""
    lo, hi = np.array(box.lo), np.array(box.hi)
    pair = (input_norm, output_norm)
    if budget.expired():
        return Decision(UNDECIDED, 0.0, float("inf"), Status.INTERRUPTED if interrupted() else Status.TIME_LIMIT,
                        notes=["no time left for the MILP"])
    nb = network_bounds(net, lo, hi, "lp", lp_deadline=budget.stage(0.15))
    milp = build_lipschitz_milp(net, nb, input_norm, output_norm, None, "forward", "lp", budget.stage(0.2))
    naive = milp.to_lipschitz(round_up(milp.objective.naive_upper + milp.model.obj_err, milp.objective.naive_upper, 4))
    search = WitnessSearch(net, box, NormQuestion(input_norm, output_norm), budget)
    search.sample()
    notes: list[str] = []
    upper, nodes = naive, 0

    def result(decision: str, status: str) -> Decision:
        w = None if search.point is None else np.array(search.point.x)
        return Decision(decision, float(search.lower), float(upper), status, w, nodes, notes)

    if naive <= proposal:
        return result(ACCEPT, Status.CERTIFIED)
    if search.lower > proposal:
        return result(REJECT, Status.CERTIFIED)
    # the solver first when a witness near D is plausible (the proof of D would fail anyway),
    # the proof first when the best witness is far below D (the proof of D should close quickly)
    order = ("proof", "solver") if search.lower < 0.5 * proposal else ("solver", "proof")
    solver_says_above = False
    for k, stage in enumerate(order):
        if budget.expired():
            break
        share = budget.stage(0.5) if k == 0 else budget.deadline
        if stage == "solver":
            choice = choose_backend(backend, milp.model)
            rem = None if share is None else max(share - time.perf_counter(), 0.01)
            opts = SolveOptions(time_limit=rem, mip_gap=1e-4, threads=threads, feasibility_tol=SOLVER_TOLERANCE,
                                integrality_tol=SOLVER_TOLERANCE, start=search.start(milp, pair) if start is None else start)
            res = choice.backend.solve(milp.model, opts)
            nodes += res.nodes
            if res.x is not None:
                search.replay(milp, pair, res.x)
            if search.lower > proposal:
                return result(REJECT, Status.CERTIFIED)
            # the solver's own (unproven) verdict that L > D only saves a proof that cannot succeed
            solver_says_above = (res.status == "optimal" and res.bound is not None
                                 and milp.to_lipschitz(res.bound, upward=False) > proposal * (1 + 1e-6))
        elif not solver_says_above:
            proof = prove_bound(milp.model, _target(milp, proposal), deadline=share, node_bound=milp.phase_bound)
            nodes += proof.nodes
            upper = min(upper, milp.to_lipschitz(proof.bound))
            if upper <= proposal:
                return result(ACCEPT, Status.CERTIFIED)
            if proof.complete:
                notes.append(f"the proof of {proposal:.9g} ended at {upper:.9g} without a witness above it")
    if interrupted():
        return result(UNDECIDED, Status.INTERRUPTED)
    return result(UNDECIDED, Status.TIME_LIMIT if budget.expired() else Status.OPEN_GAP)


def bab_decide(net: Network, box: Box, input_norm: str, output_norm: str, proposal: float,
               budget: Budget) -> Decision:
    """Is the local constant over `box` at most `proposal`? by the Lipschitz branch-and-bound
    (`certify.lipschitz.bab`) with D as its target: nodes whose sound Clarke-Jacobian bound is
    <= D close, so the tree closes quickly when D is above the constant (accept: its upper bound);
    a replayed witness above D rejects. No solver is involved."""
    from ..lipschitz.bab import lipschitz_bab

    question = NormQuestion.of(net, input_norm, output_norm)
    search = WitnessSearch(net, box, question, budget)
    search.sample()
    if search.lower > proposal:
        return Decision(REJECT, float(search.lower), float("inf"), Status.CERTIFIED, np.array(search.point.x))
    out = lipschitz_bab(net, box, question, search, budget, target=proposal)
    w = None if search.point is None else np.array(search.point.x)
    notes = [f"Lipschitz branch-and-bound: {out.nodes} nodes ({out.stop})"]
    if out.upper <= proposal:
        return Decision(ACCEPT, float(out.lower), float(out.upper), Status.CERTIFIED, w, out.nodes, notes)
    if out.lower > proposal:
        return Decision(REJECT, float(out.lower), float(out.upper), Status.CERTIFIED, w, out.nodes, notes)
    status = Status.INTERRUPTED if out.stop == "interrupted" else (
        Status.TIME_LIMIT if out.stop == "time_limit" else Status.OPEN_GAP)
    return Decision(UNDECIDED, float(out.lower), float(out.upper), status, w, out.nodes, notes)


__all__ = ["ACCEPT", "Decision", "REJECT", "UNDECIDED", "bab_decide", "milp_decide"]
