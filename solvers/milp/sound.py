"""The sound-solve policy: every question certify asks of a MILP goes through `sound_solve`.

Input: a solver-neutral `MilpModel` (max or min), a `Budget` and hooks; output: a `SoundSolve`
whose `bound` is *proven* (an upper bound on a maximum, a lower bound on a minimum):

1. back-end choice (`choose_backend`: licence and size checks, fallback notes);
2. the MILP solve under the budget's stage deadline with tight tolerances, a warm start when given,
   progress events and Ctrl-C polling;
3. answers that cannot be used are discarded with a note: CBC's wrong "infeasible" verdicts, a
   rejected model, an incumbent outside the sound pre-activation bounds (`check_point` hook);
4. the `refine` hook may return a stronger model (e.g. a no-good cut of an activation pattern
   whose region provably has no interior) and the solve repeats;
5. the solver's dual bound, widened slightly, becomes the *target* of an independent proof
   (`solvers.bab.prove_bound`: branch-and-bound with safe LP bounds); the proven bound is the
   result, whether or not the solver was right, and a proof cut short by the deadline still
   returns a sound (larger) bound. `status` is "optimal" only when the solver finished and the
   proof closed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..bab import ProofResult, prove_bound
from ..lp import MilpModel
from ..runtime import Budget, interrupted
from .backends import choose_backend
from .result import MilpResult, SolveOptions

SOLVER_TOLERANCE = 1e-9
# the proof's target: the solver's bound moved outward by this (relative) and an absolute term
TARGET_SLACK = 1e-9
# share of the remaining time the MILP solve may use when a proof has to follow
SOLVE_SHARE = 0.6


@dataclass
class SoundSolve:
    """A proven bound on a MILP's optimum, with the solver's own (unproven) view beside it.

    `bound`: upper bound (max) or lower bound (min) on the optimum, proven outside the solver;
    `incumbent`: the solver's best point (callers replay it before trusting it); `status`:
    "optimal" (solver finished, proof closed), "time_limit" or "interrupted"."""

    bound: float
    incumbent: np.ndarray | None
    incumbent_value: float | None
    status: str
    solver_bound: float | None
    backend: str
    nodes: int = 0
    solver_seconds: float = 0.0
    proof: ProofResult | None = None
    results: list[MilpResult] = field(default_factory=list)
    model: MilpModel | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def proof_seconds(self) -> float:
        return 0.0 if self.proof is None else self.proof.seconds


def sound_solve(
    model: MilpModel,
    budget: Budget,
    *,
    backend: str = "auto",
    mip_gap: float = 1e-6,
    threads: int = 2,
    verbose: bool = False,
    start: np.ndarray | None = None,
    check_point: Callable[[np.ndarray], str | None] | None = None,
    refine: Callable[[MilpModel, MilpResult], MilpModel | None] | None = None,
    fallback: float | None = None,
    on_progress: Callable[[str, float | None, float | None, int], None] | None = None,
    node_bound: Callable[[np.ndarray, np.ndarray], float] | None = None,
    phase_bound: Callable[[np.ndarray, np.ndarray], float] | None = None,
    replay: Callable[[np.ndarray], object] | None = None,
    units: Callable[[float], float] | None = None,
    workers: int | None = None,
    available: Callable[[], int] | None = None,
) -> SoundSolve:
    """Solve `model` and prove the bound (see module doc). `fallback` is a bound already known to
    be sound (e.g. interval arithmetic); the result is never worse than it. `on_progress(stage,
    value, bound, nodes)` receives the solver's and then the proof's progress in objective units;
    `node_bound` and `phase_bound` are passed to the proof (`prove_bound`); `replay(x)` receives
    every usable incumbent as soon as the solver returns it (before the proof); `units` turns an objective value into the
    quantity the user asked for (a Lipschitz constant, a radius: the objective may be scaled or
    squared), for the numbers notes quote. The proof runs on up to `workers` (default `threads`)
    processes once its tree is large (`prove_bound`; `available()`: how many may run now)."""
    sign = 1.0 if model.sense == "max" else -1.0
    choice = choose_backend(backend, model)
    notes = list(choice.notes)
    results: list[MilpResult] = []
    res: MilpResult | None = None
    usable = False
    solver_seconds = 0.0
    starved = False  # the budget ended before the solver ran: no incumbent, whatever the proof says
    while True:
        deadline = budget.stage(SOLVE_SHARE)
        remaining = None if deadline is None else deadline - time.perf_counter()
        if (remaining is not None and remaining <= 0.01) or interrupted():
            notes.append("no time left for the MILP solve")
            starved = not interrupted()
            break
        progress = None if on_progress is None else (lambda v, b, n: on_progress("solve", v, b, n))
        opts = SolveOptions(time_limit=remaining, mip_gap=mip_gap, threads=threads, verbose=verbose,
                            feasibility_tol=SOLVER_TOLERANCE, integrality_tol=SOLVER_TOLERANCE, start=start,
                            on_progress=progress)
        res = choice.backend.solve(model, opts)
        results.append(res)
        solver_seconds += res.seconds
        usable = _usable(res, notes)
        if usable and res.x is not None and check_point is not None:
            reason = check_point(res.x)
            if reason:
                notes.append(f"{res.backend}'s point leaves the sound bounds ({reason}); its answer is discarded")
                usable = False
        if usable and res.x is not None and replay is not None:
            replay(res.x)  # before the proof: an incumbent raises the lower bound even if the proof runs out of time
        if not (usable and refine is not None and res.status == "optimal" and res.x is not None):
            break
        stronger = refine(model, res)
        if stronger is None:
            break
        model, start = stronger, None
    target = None
    if usable and res is not None and res.bound is not None:
        target = res.bound + sign * (TARGET_SLACK * abs(res.bound) + 1e-300)
    proof = prove_bound(model, target, deadline=budget.deadline, node_bound=node_bound, phase_bound=phase_bound,
                        workers=threads if workers is None else workers, available=available,
                        progress=None if on_progress is None else
                        (lambda ev: on_progress("proof", ev.lower if math.isfinite(ev.lower) else None, ev.upper, ev.nodes)))
    bound = proof.bound
    notes.extend(proof.notes)
    if fallback is not None and sign * fallback < sign * bound:
        bound = fallback
    if not proof.complete:
        notes.append(f"the proof of the solver's bound stopped early ({proof.stop}, {proof.nodes} nodes): the bound "
                     "is the proof's anytime bound")
    elif target is not None and sign * proof.bound > sign * target:
        shown = units or float
        notes.append(f"{res.backend}'s dual bound {shown(res.bound):.9g} was wrong; the proven bound is "
                     f"{shown(proof.bound):.9g}")
    solved = res is not None and usable and res.status == "optimal"
    if proof.complete and (solved or target is None) and not starved:
        status = "optimal"
    elif starved or proof.stop == "time_limit" or (res is not None and res.status == "time_limit") or budget.expired():
        status = "interrupted" if interrupted() else "time_limit"
    else:
        status = "interrupted"
    incumbent = res.x if (res is not None and usable) else None
    return SoundSolve(
        bound=float(bound), incumbent=incumbent, incumbent_value=None if incumbent is None else res.objective,
        status=status, solver_bound=None if res is None else res.bound, backend=res.backend if res else choice.backend.name,
        nodes=sum(r.nodes for r in results) + proof.nodes, solver_seconds=solver_seconds, proof=proof, results=results,
        model=model, notes=notes)


def _usable(res: MilpResult, notes: list[str]) -> bool:
    """Can the solver's answer (bound and incumbent) be used as a target and a witness hint?"""
    if res.status in ("infeasible", "unbounded"):
        notes.append(f"{res.backend} reported the model {res.status} ({res.message}); its answer is discarded "
                     "and the bound comes from the proof alone")
        return False
    if res.status == "error":
        notes.append(f"{res.backend} failed ({res.message}); the bound comes from the proof alone")
        return False
    return res.bound is not None or res.x is not None


__all__ = ["SoundSolve", "sound_solve"]
