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
from solvers.milp.robustness import FlipMilp
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
    (-inf for a maximum) when the box holds no flip; `flips`: replayed counterexamples."""

    bound: float
    flips: list[Flip] = field(default_factory=list)
    sound: SoundSolve | None = None
    milp: FlipMilp | None = None
    unstable: int = 0
    bound_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "optimal" if self.sound is None else self.sound.status

    def describe(self) -> dict:
        s = self.sound
        return {"backend": "none" if s is None else s.backend, "nodes": 0 if s is None else s.nodes,
                "binaries": 0 if self.milp is None else self.milp.num_binaries, "unstable": self.unstable,
                "bound_seconds": self.bound_seconds, "solver_seconds": 0.0 if s is None else s.solver_seconds,
                "proof": {} if s is None or s.proof is None else
                {"seconds": s.proof.seconds, "nodes": s.proof.nodes, "complete": s.proof.complete}}


def run_exact(question: FlipQuestion, box: Box, build: Callable, sense: str, opts: SearchOptions,
              budget: Budget, *, settle: Callable[[np.ndarray], Flip | None], to_units: Callable[[float], float],
              fallback: float | None = None, on_progress: Hook | None = None) -> ExactStage:
    """Bounds over `box`, `build(net, nb)` -> FlipMilp (minimising or maximising: `sense`) or None
    (no flip in the box), sound solve, replay of every solver point with `settle`. `to_units` turns the proven objective bound into
    the question's units (rounded so that it stays proven); `fallback`: a sound objective bound
    known already (the result is never worse)."""
    net = question.net
    nb = network_bounds(net, np.array(box.lo), np.array(box.hi), opts.bounds, lp_deadline=budget.stage(0.25))
    milp = build(net, nb)
    if milp is None:
        return ExactStage(math.inf if sense == "min" else -math.inf, unstable=nb.num_unstable, bound_seconds=nb.seconds,
                          notes=["the sound bounds prove that no point of the search box changes the class"])
    sound = sound_solve(milp.model, budget, backend="gurobi" if milp.model.is_quadratic else opts.backend,
                        mip_gap=opts.mip_gap, threads=opts.threads, fallback=fallback,
                        check_point=lambda v: milp.leaves_bounds(net, nb, v), on_progress=on_progress,
                        node_bound=milp.node_bound())
    flips = []
    for res in sound.results:
        if res.x is not None:
            flip = settle(milp.point(res.x))
            if flip is not None:
                flips.append(flip)
    bound = to_units(sound.bound) if math.isfinite(sound.bound) else sound.bound
    return ExactStage(bound, flips, sound, milp, nb.num_unstable, nb.seconds, list(sound.notes))


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


__all__ = ["ExactStage", "objective_units", "radius_units", "run_exact"]
