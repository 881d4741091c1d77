"""Progress events of a running Lipschitz question (the certified interval as it shrinks)."""

from __future__ import annotations

import math
import time
from typing import Callable

from solvers.milp.lipschitz import LipschitzMilp
from solvers.runtime import Budget, Progress, ProgressCallback

MIN_INTERVAL = 0.1  # seconds between events


class LiveProgress:
    """Turns solver and proof progress (objective units) into `Progress` events (Lipschitz units):
    `lower` is the best replayed witness, `upper` the best proven bound so far, and the solver's
    own interval is shown beside them (unproven)."""

    def __init__(self, callback: ProgressCallback | None, search, budget: Budget) -> None:
        self.callback, self.search, self.budget = callback, search, budget
        self.upper = math.inf
        self._last = 0.0

    def hook(self, holder: list[LipschitzMilp], single: bool) -> Callable[[str, float | None, float | None, int], None] | None:
        """The `on_progress` hook of one MILP (`single`: it is the whole question, so its proven
        bound is the question's upper bound; an l2 interpolation has two)."""
        if self.callback is None:
            return None

        def on(stage: str, value: float | None, bound: float | None, nodes: int) -> None:
            now = time.perf_counter()
            if now - self._last < MIN_INTERVAL:
                return
            self._last = now
            milp = holder[0]
            solver_lo = None if value is None else milp.to_lipschitz(value, upward=False)
            solver_hi = None if bound is None else milp.to_lipschitz(bound, upward=False)
            upper = self.upper
            if stage == "proof" and single and bound is not None:
                upper = min(upper, milp.to_lipschitz(bound))
            self.callback(Progress(self.budget.elapsed(), self.search.lower, upper, stage, nodes,
                                   solver_lo if stage == "solve" else None, solver_hi if stage == "solve" else None))
        return on

    @property
    def active(self) -> bool:
        return self.callback is not None

    def emit(self, event: Progress) -> None:
        """Forward an event built elsewhere (the branch-and-bound), throttled."""
        now = time.perf_counter()
        if self.callback is not None and now - self._last >= MIN_INTERVAL:
            self._last = now
            self.callback(event)

    def proven(self, upper: float | None) -> None:
        if upper is not None:
            self.upper = min(self.upper, upper)
        if self.callback is not None:
            self.callback(Progress(self.budget.elapsed(), self.search.lower, self.upper, "done"))
