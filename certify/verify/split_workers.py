"""The ReLU-splitting search on both cores: half of its open subtrees on a forked worker.

Verification runs its bounds in one process with single-threaded BLAS (its products are small), so
on a 2-core machine one core waits. Once the search has run SPLIT_AFTER seconds with SPLIT_OPEN open
nodes, the engine hands back its open entries (stop "split"); they are dealt, largest bound first,
alternately to this process and to one forked worker, and each searches its half as a search of
its own (`ReluSplitSearch.search_entries`: a fresh frontier seeded with the entries, as bounded).
The subtrees are independent: a node is closed by its own bound, whatever was bounded elsewhere.

The answer: `sat` as soon as either side has a replayed counterexample (a worker's point is
replayed again here before it counts, and the other side is stopped); `unsat` only when both
halves closed; otherwise `timeout` (or `unknown` when a side was left with nodes it could neither
split nor close, or outgrew the memory budget). The sound upper bound is the largest of the part
closed before the split and both halves' own. A worker that fails or dies leaves its half to this
process, which searches it while time is left; a half no one searched keeps the bounds it had.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable

import numpy as np

from solvers.runtime import (REPORT_JOIN, ReportingWorker, die_with_parent, forkable_cores, forked_child, interrupted,
                             reporting_to, stop_requested)

from .search import EXHAUSTED, SAT, SPLIT, TIMEOUT, UNSAT, SearchOutcome

SPLIT_AFTER = 2.0  # seconds of search before the open nodes are shared
SPLIT_OPEN = 8     # open nodes needed to share them


def split_rule(workers: int) -> Callable[[int, int, float], bool] | None:
    """The engine's `split_when` for a search on `workers` processes (None: one process)."""
    if min(workers, forkable_cores()) < 2:
        return None

    def split(nodes: int, open_nodes: int, seconds: float) -> bool:  # noqa: ARG001
        return seconds >= SPLIT_AFTER and open_nodes >= SPLIT_OPEN

    return split


def _worker(conn, search, entries: list, deadline: float, halt, parent: int) -> None:
    forked_child()
    die_with_parent(parent)
    with reporting_to(conn):  # (on an error the parent searches this half itself)
        nodes0 = search.nodes
        counts0 = {k: getattr(search, k) for k in search.COUNTERS}  # (counted here before the fork)
        out = search.search_entries(entries, deadline, interrupt=lambda: bool(halt.value))
        x = None if out.counterexample is None else np.asarray(out.counterexample.x, dtype=np.float64)
        conn.send(("done", out.status, out.upper, search.nodes - nodes0, search.max_depth, out.open_nodes,
                   len(search.stuck), x, search.compactions, search.memory_note,
                   {k: getattr(search, k) - v for k, v in counts0.items()}))


def search_halves(search, split: SearchOutcome, deadline: float) -> SearchOutcome:
    """Search the open entries of `split` (status SPLIT) on this process and one forked worker."""
    from multiprocessing import Value

    entries, closed = split.split
    mine, theirs = _deal(entries)
    search.memory_cap /= 2  # (each process keeps its own open nodes)
    halt = Value("b", 0)
    worker: ReportingWorker | None = None
    with contextlib.suppress(OSError):  # (no fork: this process searches both halves)
        worker = ReportingWorker(_worker, (search, theirs, deadline, halt, os.getpid()))
    msg: tuple | None = None

    def worker_sat() -> bool:  # polled every round here: a counterexample there ends this half
        m = worker.take() if worker is not None else None
        return m is not None and m[0] == "done" and m[7] is not None

    try:
        here = search.search_entries(mine, deadline, interrupt=worker_sat)
        if worker is not None:

            def stop() -> bool:  # the worker stops too
                if here.status == SAT or interrupted() or stop_requested():
                    halt.value = 1
                    return True
                return False

            msg = worker.wait(max(deadline + search.bound_grace, time.perf_counter()) + REPORT_JOIN, stop)
    finally:
        if worker is not None:
            worker.close()
    notes = [f"ReLU splitting on 2 processes after {split.nodes} node(s): {len(entries)} open subtrees shared"]
    there: SearchOutcome | None = None
    if msg is not None and msg[0] == "done":
        _, status, upper, nodes, depth, open_nodes, stuck, x, compactions, memory_note, counts = msg
        search.nodes += nodes
        for k, v in counts.items():  # (the worker's own counts: cut finisher, re-bounds under splits)
            setattr(search, k, getattr(search, k) + v)
        search.max_depth = max(search.max_depth, depth)
        search.stuck_elsewhere += stuck
        search.compactions += compactions
        if memory_note and not search.memory_note:
            search.memory_note = memory_note
        if x is not None and search.cex is None:
            _replay(search, x)
        there = SearchOutcome(status, None, nodes, upper, open_nodes, depth)
    elif search.cex is None and not interrupted():
        kind = msg[0] if msg else None
        why = ("its fork failed" if worker is None else f"it failed: {msg[1]}" if kind == "error"
               else "it did not report in time" if kind == "late" else "it ended early")
        notes.append(f"the worker's half was searched here ({why})")
        there = search.search_entries(theirs, deadline)
    if search.cex is not None:
        return SearchOutcome(SAT, search.cex, search.nodes, None, 0, search.max_depth, notes)
    if there is None:  # (interrupted before the worker reported: its half keeps its bounds at the split)
        there = SearchOutcome(TIMEOUT, None, 0, max((float(e[0]) for e in theirs), default=-np.inf), len(theirs))
    statuses = {here.status, there.status}
    status = UNSAT if statuses == {UNSAT} else (TIMEOUT if TIMEOUT in statuses or SPLIT in statuses else EXHAUSTED)
    uppers = [closed, here.upper, there.upper]
    upper = None if any(u is None for u in uppers[1:]) else float(max(uppers))
    return SearchOutcome(status, None, search.nodes, upper, here.open_nodes + there.open_nodes, search.max_depth, notes)


def _deal(entries: list) -> tuple[list, list]:
    """(this process's entries, the worker's): largest bound first, alternately."""
    entries = sorted(entries, key=lambda e: -e[0])
    return entries[0::2], entries[1::2]


def _replay(search, x: np.ndarray) -> None:
    """A worker's counterexample, replayed here (`Falsifier.consider`) before it counts."""
    for r, region in enumerate(search.f.regions):
        if np.all(x >= region.lo) and np.all(x <= region.hi):
            cex = search.f.consider(r, x[None], search.f.margins(r, x[None]))
            if cex is not None:
                search.cex = cex
                return


__all__ = ["search_halves", "split_rule"]
