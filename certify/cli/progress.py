"""A live status line on stderr for long solves (`--progress`, or automatically on a terminal)."""

from __future__ import annotations

import json
import math
import sys
from typing import Callable, TextIO

from solvers.runtime import Progress


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return "inf" if math.isinf(v) else f"{v:.6g}"


class StatusLine:
    """Renders `Progress` events as one updating line (carriage return, no scrolling). Nothing is
    written to stdout, so `--json` output stays one JSON object."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.shown = False

    def __call__(self, ev: Progress) -> None:
        gap = "" if math.isinf(ev.gap) else f"  gap {100 * ev.gap:.3g}%"
        solver = ""
        if ev.solver_lower is not None or ev.solver_upper is not None:
            solver = f"  solver [{_num(ev.solver_lower)}, {_num(ev.solver_upper)}] (unproven)"
        nodes = f"  {ev.nodes} nodes" if ev.nodes else ""
        text = (f"{ev.elapsed:7.1f}s  certified [{_num(ev.lower)}, {_num(ev.upper)}]{gap}  {ev.stage}{nodes}{solver}")
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


class LiveResult:
    """The progress callback of a command: the status line (when shown) and the last certified
    interval, which the CLI's watchdog prints as the command's result if a solver does not stop
    within a second of Ctrl-C (`solvers.runtime.offer_partial`). `describe(event)` turns an event
    into the command's JSON result (a partial certificate, status interrupted)."""

    def __init__(self, args, describe: Callable[[Progress], dict]) -> None:
        from solvers.runtime import offer_partial

        self.line = status_line(args)
        self.describe = describe
        self.json = bool(getattr(args, "json", False))
        self.last: Progress | None = None
        offer_partial(self.render)

    def __call__(self, ev: Progress) -> None:
        self.last = ev
        if self.line is not None:
            self.line(ev)

    def render(self) -> str | None:
        """The partial result's text (runs in the watchdog thread), None before the first event."""
        from ..certificate import to_jsonable

        ev = self.last
        if ev is None:
            return None
        if self.line is not None:
            self.line.close()
        result = self.describe(ev)
        if self.json:
            return json.dumps(to_jsonable(result)) + "\n"
        return (f"{result['kind']}: certified [{_num(result['lower'])}, {_num(result['upper'])}] "
                f"(status {result['status']}, after {ev.elapsed:.1f}s)\n")

    def close(self) -> None:
        from solvers.runtime import offer_partial

        offer_partial(None)
        if self.line is not None:
            self.line.close()


def partial_certificate(kind: str, ev: Progress, **fields) -> dict:
    """A certificate (schema certify.certificate/1) of the interval of a progress event, status
    interrupted: what the watchdog prints when a solver does not stop in time (see LiveResult)."""
    from solvers.runtime import OVERRUN_GRACE, stop_reason

    from ..certificate import SCHEMA

    reason = stop_reason()
    why = (f"the time limit passed while a stage was running; it did not stop within {OVERRUN_GRACE:g} s"
           if reason == "time_limit" else "interrupted while a solver was running; it did not stop within a second")
    return {"schema": SCHEMA, "kind": kind, "lower": ev.lower, "upper": ev.upper, "status": reason,
            "certified": True, "exact": False, "seconds": ev.elapsed,
            "notes": [why + ", so this is the certified interval reported by the last progress event (its lower "
                      "bound's witness point is not included)"], **fields}


def status_line(args) -> StatusLine | None:
    """The renderer when asked (--progress) or when stderr is a terminal (and not --no-progress)."""
    wanted = getattr(args, "progress", None)
    if wanted is None:
        wanted = sys.stderr.isatty()
    return StatusLine() if wanted else None


def add_progress_flags(parser, what: str = "status line") -> None:
    """--progress / --no-progress (default: on when stderr is a terminal); `what` names the display."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help=f"show a live {what} on stderr (default: when stderr is a terminal)")
    group.add_argument("--no-progress", dest="progress", action="store_false", help=f"no {what}")
