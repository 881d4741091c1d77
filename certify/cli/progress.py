"""A live status line on stderr for long solves (`--progress`, or automatically on a terminal)."""

from __future__ import annotations

import math
import sys
from typing import TextIO

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
