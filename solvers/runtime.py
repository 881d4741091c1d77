"""Time budget, interruption and progress events shared by every long computation.

- `Budget`: one deadline for a whole question (bounds, LP tightening, MILP solves, proofs, witness
  replay), with `stage(fraction)` deadlines for stages that must leave time to later ones.
- `interruptible()`: while active, the first Ctrl-C (SIGINT) only sets a flag that solvers poll
  (Gurobi and HiGHS through callbacks, branch-and-bound between nodes), so a long solve stops
  cleanly and the sound interval reached so far can still be reported; a second Ctrl-C raises
  KeyboardInterrupt as usual.
- `Progress`: the event a progress callback receives (elapsed time, the certified interval so far,
  the solver's own unproven interval, nodes).
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator


class Budget:
    """A time limit shared by every stage of one question (None: unlimited)."""

    def __init__(self, time_limit: float | None = None, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.time_limit = time_limit
        self.deadline = None if time_limit is None else self.start + time_limit

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def expired(self) -> bool:
        return interrupted() or (self.deadline is not None and time.perf_counter() >= self.deadline)

    def stage(self, fraction: float) -> float | None:
        """A deadline that leaves (1 - fraction) of the remaining time to later stages."""
        rem = self.remaining()
        return None if rem is None else time.perf_counter() + max(rem, 0.0) * fraction

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


_FLAG = threading.Event()


def interrupted() -> bool:
    """True after a Ctrl-C inside `interruptible()` (solvers stop at their next check)."""
    return _FLAG.is_set()


def request_stop() -> None:
    """Ask running solves to stop as if Ctrl-C had been pressed (for tests and embedding)."""
    _FLAG.set()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turn the first SIGINT into a stop request (see module doc); restores the handler after."""
    _FLAG.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001
        if _FLAG.is_set():
            raise KeyboardInterrupt
        _FLAG.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class Progress:
    """What a long solve reports: the certified interval so far ([lower, upper], both sound),
    the solver's own interval when it has one (not proven), nodes, and the stage running."""

    elapsed: float
    lower: float
    upper: float
    stage: str = ""
    nodes: int = 0
    solver_lower: float | None = None
    solver_upper: float | None = None

    @property
    def gap(self) -> float:
        if not (math.isfinite(self.upper) and math.isfinite(self.lower)) or self.upper <= 0:
            return math.inf
        return max(self.upper - self.lower, 0.0) / abs(self.upper)


ProgressCallback = Callable[[Progress], None]

__all__ = ["Budget", "Progress", "ProgressCallback", "interrupted", "interruptible", "request_stop"]
