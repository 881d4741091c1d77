"""The exact stage of a robustness question: box -> sound bounds -> flip MILP -> sound solve -> replay.

The same stages as `certify.lipschitz.local`: sound pre-activation bounds over the box
(`solvers.bounds`), the flip MILP (`solvers.milp.robustness`, the one ReLU encoding), the
sound-solve policy (`solvers.milp.sound`: back-end choice, time budget, the solver's bound
re-proven by a safe branch-and-bound), and every solver point replayed (`replay`) before it
counts. The proven bound is all that is trusted of the solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from models.box import Box
from solvers.bounds import network_bounds
from solvers.bounds.types import Bounds
from solvers.milp.robustness import FlipMilp, FlipRows
from solvers.milp.sound import SoundSolve, sound_solve
from solvers.rounding import down
from solvers.runtime import Budget

from .options import SearchOptions
from .question import FlipQuestion
from .replay import Flip

Hook = Callable[[str, float | None, float | None, int], None]


@dataclass
class ExactStage:
    """`bound`: the proven bound in the question's units (a radius, or a side's coordinate), +inf
    (-inf for a maximum) when the box holds no flip; `flips`: replayed counterexamples; a stage
    `timed_out` stands for solves the time limit skipped (status time_limit)."""

    bound: float
    flips: list[Flip] = field(default_factory=list)
    sound: SoundSolve | None = None
    milp: FlipMilp | None = None
    unstable: int = 0
    bound_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    timed_out: bool = False  # the stage was skipped for lack of time (no solve)

    @property
    def status(self) -> str:
        if self.timed_out:
            return "time_limit"
        return "optimal" if self.sound is None else self.sound.status

    def describe(self) -> dict:
        s = self.sound
        return {"backend": "none" if s is None else s.backend, "nodes": 0 if s is None else s.nodes,
                "binaries": 0 if self.milp is None else self.milp.num_binaries, "unstable": self.unstable,
                "bound_seconds": self.bound_seconds, "solver_seconds": 0.0 if s is None else s.solver_seconds,
                "proof": {} if s is None or s.proof is None else
                {"seconds": s.proof.seconds, "nodes": s.proof.nodes, "complete": s.proof.complete}}


class BoxBounds:
    """Sound pre-activation bounds of the question's network per box, computed once per box (the
    per-class MILPs of one radius share their box)."""

    def __init__(self, question: FlipQuestion, opts: SearchOptions) -> None:
        self.net, self.method = question.net, opts.bounds
        self.cache: dict[bytes, Bounds] = {}

    def __call__(self, box: Box, budget: Budget) -> Bounds:
        key = box.lo.tobytes() + box.hi.tobytes()
        if key not in self.cache:
            self.cache[key] = network_bounds(self.net, np.array(box.lo), np.array(box.hi), self.method,
                                             lp_deadline=budget.stage(0.25))
        return self.cache[key]


def run_exact(question: FlipQuestion, nb: Bounds, build: Callable, sense: str, opts: SearchOptions,
              budget: Budget, *, settle: Callable[[np.ndarray], Flip | None], to_units: Callable[[float], float],
              fallback: float | None = None, on_progress: Hook | None = None) -> ExactStage:
    """`build(net, nb)` -> FlipMilp (minimising or maximising: `sense`) over nb's box, or None when
    the bounds prove that the box holds no flip; sound solve; every solver point replayed with
    `settle`. `to_units` turns the proven objective bound into the question's units (rounded so
    that it stays proven); `fallback`: a sound objective bound known already (the result is never
    worse). A box without flips gives +inf (min) or -inf (max)."""
    net = question.net
    milp = build(net, nb)
    if milp is None:
        return ExactStage(math.inf if sense == "min" else -math.inf, unstable=nb.num_unstable, bound_seconds=nb.seconds)
    sound = sound_solve(milp.model, budget, backend="gurobi" if milp.model.is_quadratic else opts.backend,
                        mip_gap=opts.mip_gap, threads=opts.threads, fallback=fallback,
                        check_point=lambda v: milp.leaves_bounds(net, nb, v), on_progress=on_progress,
                        node_bound=milp.node_bound(), units=to_units)
    flips = []
    for res in sound.results:
        if res.x is not None:
            flip = settle(milp.point(res.x))
            if flip is not None:
                flips.append(flip)
    bound = to_units(sound.bound) if math.isfinite(sound.bound) else sound.bound
    return ExactStage(bound, flips, sound, milp, nb.num_unstable, nb.seconds, list(sound.notes))


def per_class(flip: FlipRows, order: list[int] | None = None) -> list[FlipRows]:
    """An untargeted question as one single-row question per competing class (in `order`): each
    MILP then needs no disjunction, and its LP relaxation (the proof's) is far tighter than the
    big-M disjunction's. A targeted question stays whole (a conjunction needs no binaries)."""
    if flip.mode == "all" or flip.C.shape[0] == 1:
        return [flip]
    return [FlipRows(flip.C[[k]], "any") for k in (range(flip.C.shape[0]) if order is None else order)]


def radius_units(objective: str) -> Callable[[float], float]:
    """Proven lower bound of the MILP objective -> proven lower bound of the radius."""
    if objective == "l2sq":
        return lambda v: down(math.sqrt(max(v, 0.0))) if v > 0 else 0.0
    return lambda v: max(float(v), 0.0)


def objective_units(objective: str, radius: float) -> float:
    """A proven radius lower bound in the objective's units (rounded down)."""
    if objective == "l2sq":
        return down(radius * radius) if radius > 0 else 0.0
    return float(radius)


__all__ = ["BoxBounds", "ExactStage", "objective_units", "per_class", "radius_units", "run_exact"]
