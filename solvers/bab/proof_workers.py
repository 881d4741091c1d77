"""A long proof spread over cores: the subtrees of `milp.prove_bound`'s tree on forked workers.

Against a fixed target the proof's tree does not depend on the order in which its nodes are
expanded: a node closes when its own bound is at most the target, whatever was bounded before it
(only the pseudo-costs that pick the branching variable learn on the way). So once the sequential
search holds a frontier of open nodes, their subtrees are independent proofs. Forked workers take
them one at a time, largest bound first (a shared counter, nothing pickled: the entries, the model
and the learned pseudo-costs are in the memory every worker inherits), each with its own LP, and
report every half second and when a subtree ends.

The proven bound is the largest of the sequential part's closed bound and every subtree's bound,
where a subtree's bound is its last reported sound bound: the engine's upper bound of that
subtree when it stopped (closed, deadline, Ctrl-C), else the bound it had at the split. Nothing a
worker says can lower the bound of a part of the tree it did not search. A subtree whose worker
died, or that no worker reached because a fork failed, is searched here afterwards when time is
left; otherwise it keeps its bound and the proof is incomplete.

The number of workers may grow while the proof runs (`available`): auto's race gives its MILP
side a second core once the other side only waits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..runtime import Forked, die_with_parent, forked_child, interrupted, past, reporting_to
from .engine import BabInterrupted, BabProgress, NodeBound, branch_and_bound

PROGRESS_EVERY = 0.5  # seconds between a worker's reports on its running subtree
POLL = 0.1
JOIN = 1.0  # seconds for a worker to go after the proof stopped before it is killed
# the sequential search hands its frontier to workers once it has run this long and holds this
# many open nodes (enough subtrees that the largest does not hold the whole remaining proof), or
# at least one per worker after SPLIT_LATE seconds
SPLIT_AFTER = 1.0
SPLIT_OPEN = 24
SPLIT_LATE = 2.0


def split_rule(workers: int) -> Callable[[int, int, float], bool] | None:
    """The engine's `split_when` for `workers` worker processes (None: stay sequential)."""
    if workers < 2:
        return None

    def split(nodes: int, open_nodes: int, seconds: float) -> bool:  # noqa: ARG001
        return seconds >= SPLIT_AFTER and (open_nodes >= SPLIT_OPEN or (seconds >= SPLIT_LATE and open_nodes >= workers))

    return split


@dataclass
class SubtreesResult:
    upper: float       # sound bound on the union of the subtrees (engine sense: maximising)
    complete: bool     # every subtree closed at the target
    nodes: int
    lp_solves: int     # the workers' (this process's own are counted by its LP)
    stop: str          # "closed", "time_limit", "interrupted"
    workers: int       # worker processes started
    errors: list[str]  # why workers failed (their subtrees were searched again here)


class _Subtree:
    """The engine's problem for one subtree: its root comes already bounded (at the split)."""

    def __init__(self, problem, node, nb: NodeBound) -> None:
        self.problem, self.node, self.nb = problem, node, nb

    def root(self):
        return self.node

    def bound(self, node) -> NodeBound:
        if node is self.node and self.nb is not None:
            nb, self.nb = self.nb, None
            return nb
        return self.problem.bound(node)

    def branch(self, node, nb: NodeBound, prune_level: float):
        return self.problem.branch(node, nb, prune_level)

    def bound_many(self, nodes: list) -> list[NodeBound]:  # (the root is bounded alone, by `bound`)
        return self.problem.bound_many(nodes)

    def branch_many(self, items: list, prune_level: float) -> list:
        return self.problem.branch_many(items, prune_level)


def _search(problem, entry, target: float, lower: float, deadline: float | None,
            report: Callable[[BabProgress], None] | None, stop: Callable[[], bool] = interrupted):
    """One subtree: (bound, stop, nodes) with its root not counted again; batched rounds when the
    problem says how large (`batch_size()`, with `bound_many` and `branch_many`)."""
    _, _, node, nb = entry
    try:
        res = branch_and_bound(_Subtree(problem, node, nb), target=target, lower=lower, deadline=deadline,
                               progress=report, progress_every=PROGRESS_EVERY, interrupt=stop,
                               batch=getattr(problem, "batch_size", 1))
    except BabInterrupted as exc:  # a second Ctrl-C: the sound bound of the part searched so far
        res = exc.result
    return res.upper, res.stop, max(res.nodes - 1, 0)


def _worker(conn, parent_problem, entries: list, counter, halt, target: float, lower: float,
            deadline: float | None, parent: int) -> None:
    forked_child()
    die_with_parent(parent)

    def stop() -> bool:  # a Ctrl-C (this process's own SIGINT) or the parent's stop request
        return interrupted() or bool(halt.value)

    with reporting_to(conn):  # (on an error the parent searches the subtree itself)
        problem = parent_problem.fresh()  # (its own LP, the learned pseudo-costs)
        solves0 = problem.lp.solves
        while not stop() and not past(deadline):
            with counter.get_lock():
                i = counter.value
                counter.value += 1
            if i >= len(entries):
                break
            conn.send(("start", i))

            def report(ev: BabProgress, i: int = i) -> None:
                conn.send(("progress", i, ev.upper))

            upper, how, nodes = _search(problem, entries[i], target, lower, deadline, report, stop)
            conn.send(("done", i, upper, how, nodes, problem.lp.solves - solves0))
            solves0 = problem.lp.solves


def prove_subtrees(problem, entries: list, *, target: float, lower: float,
                   closed: float, deadline: float | None, workers: int, available: Callable[[], int] | None,
                   progress: Callable[[BabProgress], None] | None, nodes0: int) -> SubtreesResult:
    """Search the subtrees rooted at `entries` (the engine's open entries at a split, engine sense)
    on up to `workers` forked processes (`available()`: how many may run now). `problem` is the
    sequential search's: it searches the subtrees left to this process, and `problem.fresh()`
    builds each worker's own copy (in the worker, after the fork); `closed` is the sequential
    part's closed bound and `nodes0` its node count (for progress)."""
    # (lazy: proofs that never split do not pay the import)
    from multiprocessing import Value
    from multiprocessing.connection import Pipe, wait

    entries = sorted(entries, key=lambda e: -e[0])
    n = len(entries)
    bound = [float(e[0]) for e in entries]
    state = ["wait"] * n  # wait, run, done (closed at the target), cut (stopped early)
    owner: dict[Any, int | None] = {}
    nodes = solves = started = 0
    errors: list[str] = []
    counter = Value("i", 0)  # the next subtree (shared memory: inherited by the forks)
    halt = Value("b", 0)  # set when the proof stops (a stop request made here reaches the workers)
    procs: dict[Any, Forked] = {}  # connection -> worker
    t0 = last = time.perf_counter()

    def spawn() -> bool:
        nonlocal started
        receive, send = Pipe(duplex=False)
        try:
            proc = Forked(_worker, (send, problem, entries, counter, halt, target, lower, deadline, os.getpid()))
        except OSError:
            receive.close()
            send.close()
            return False
        send.close()
        procs[receive] = proc
        owner[receive] = None
        started += 1
        return True

    def take(conn, msg) -> None:
        nonlocal nodes, solves
        kind = msg[0]
        if kind == "start":
            state[msg[1]], owner[conn] = "run", msg[1]
        elif kind == "progress":
            bound[msg[1]] = min(bound[msg[1]], msg[2])
        elif kind == "error":
            errors.append(msg[1])
        elif kind == "done":
            _, i, up, how, k, s = msg
            bound[i] = min(bound[i], up)
            state[i] = "done" if how == "closed" else "cut"
            owner[conn] = None
            nodes += k
            solves += s

    stop_seen: float | None = None  # when the proof was asked to stop (deadline, Ctrl-C)
    failed = False  # a fork failed or a worker did not end cleanly
    try:
        while True:
            if stop_seen is None and (interrupted() or past(deadline)):
                stop_seen = time.perf_counter()
                halt.value = 1
            stopping = stop_seen is not None
            want = min(workers, max(1, available() if available is not None else workers))
            if not stopping and not failed and not errors and len(procs) < want and counter.value < n:
                failed = not spawn()
            if not procs:
                break
            for conn in wait(list(procs), timeout=POLL):
                try:
                    take(conn, conn.recv())
                except (EOFError, OSError):  # the worker ended (normally after its last subtree)
                    i = owner.pop(conn, None)
                    if i is not None and state[i] == "run":
                        state[i] = "wait"  # died inside a subtree: its last reported bound holds
                    proc = procs.pop(conn)
                    proc.end()
                    if proc.code != 0 or i is not None:
                        failed = True  # no new workers: what is left is searched here
                    with contextlib.suppress(Exception):
                        conn.close()
            if stopping and time.perf_counter() > stop_seen + JOIN + PROGRESS_EVERY:
                break  # workers that did not stop in time are ended below; their bounds hold
            if progress is not None and time.perf_counter() - last >= PROGRESS_EVERY:
                last = time.perf_counter()
                progress(BabProgress(lower, max(closed, max(bound)), nodes0 + nodes, state.count("wait") + state.count("run"),
                                     last - t0))
    finally:
        for conn, proc in procs.items():
            proc.end()
            with contextlib.suppress(Exception):
                conn.close()
    # subtrees no worker finished: searched here while time is left (a failed fork, a dead worker)
    for i in range(n):
        if state[i] in ("wait", "run") and not interrupted() and not past(deadline):
            up, how, k = _search(problem, entries[i], target, lower, deadline, None)
            bound[i] = min(bound[i], up)
            state[i] = "done" if how == "closed" else "cut"
            nodes += k
    complete = all(s == "done" for s in state)
    stop = "closed" if complete else ("interrupted" if interrupted() else "time_limit")
    return SubtreesResult(max([closed, lower] + bound), complete, nodes, solves, stop, started, errors)


__all__ = ["SubtreesResult", "prove_subtrees", "split_rule"]
