"""Neutral results and options of MILP back-ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class MilpResult:
    """Neutral outcome of a solve.

    `objective` is the incumbent's value (None without one), `bound` the solver's dual bound
    (an upper bound for maximisation), `x` the incumbent. Statuses: optimal, time_limit,
    interrupted, infeasible, unbounded, error.
    """

    status: str
    objective: float | None
    bound: float | None
    x: np.ndarray | None
    nodes: int
    seconds: float
    backend: str
    gap: float | None = None
    message: str = ""


@dataclass(frozen=True)
class SolveOptions:
    """Limits and tolerances common to every back-end.

    Tolerances are set far below the defaults (1e-9 instead of ~1e-6) so that solver slack has a
    negligible effect on the reported bounds; see `certify.lipschitz` for the widening applied.
    """

    time_limit: float | None = None
    mip_gap: float = 1e-6
    abs_gap: float = 1e-9
    threads: int = 2
    feasibility_tol: float = 1e-9
    integrality_tol: float = 1e-9
    verbose: bool = False
    start: np.ndarray | None = None
    # called by back-ends that can (Gurobi, HiGHS) with (incumbent value, dual bound, nodes) while
    # they run; they also stop when `solvers.runtime.interrupted()` becomes true
    on_progress: Callable[[float | None, float | None, int], None] | None = None


