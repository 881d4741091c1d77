"""Progress events of a running robustness question: the certified interval [lower, upper] of the
radius as it shrinks (the fast bound first, then the attack, then the MILP), with the solver's own
unproven interval beside it while it runs."""

from __future__ import annotations

import math
import time
from typing import Callable

from solvers.runtime import Budget, Progress, ProgressCallback

MIN_INTERVAL = 0.1  # seconds between solver events


class RadiusProgress:
    """Holds the certified interval and forwards it to a `Progress` callback (or nothing)."""

    def __init__(self, callback: ProgressCallback | None, budget: Budget) -> None:
        self.callback, self.budget = callback, budget
        self.lower, self.upper = 0.0, math.inf
        self._last = 0.0

    def update(self, stage: str, lower: float | None = None, upper: float | None = None) -> None:
        if lower is not None:
            self.lower = max(self.lower, lower)
        if upper is not None:
            self.upper = min(self.upper, upper)
        if self.callback is not None:
            self.callback(Progress(self.budget.elapsed(), self.lower, self.upper, stage))

    def _due(self) -> bool:
        """Throttle solver events to one per MIN_INTERVAL."""
        now = time.perf_counter()
        if now - self._last < MIN_INTERVAL:
            return False
        self._last = now
        return True

    def solver_hook(self, to_radius: Callable[[float], float]) -> Callable[[str, float | None, float | None, int], None] | None:
        """`sound_solve`'s on_progress for a radius MILP (objective values -> radii, unproven,
        except the proof's running bound)."""
        if self.callback is None:
            return None

        def radius(v: float | None) -> float | None:
            return None if v is None or not math.isfinite(v) else to_radius(v)

        def on(stage: str, value: float | None, bound: float | None, nodes: int) -> None:
            if not self._due():
                return
            lo, hi = radius(bound), radius(value)
            if stage == "proof" and lo is not None:
                self.lower = max(self.lower, min(lo, self.upper))
            self.callback(Progress(self.budget.elapsed(), self.lower, self.upper, stage, nodes, lo, hi))
        return on


__all__ = ["RadiusProgress"]
