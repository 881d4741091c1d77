"""Node bounds of a batch on two cores: part of every batch bounded by a forked copy of the problem.

A best-first search whose nodes cost tenths of a second (the Clarke-Jacobian bounds of a 784-input
Lipschitz tree) runs its bounds with single-threaded BLAS, so on a two-core machine one core
waits. Handing half of the open nodes to a second search loses the order that lowers the upper
bound fastest (the best nodes first: the halves drift apart, and the worse one decides; on MNIST
256x4 two halves gave 6.95-7.31 in 60 s where one process given 120 s, about the same node count,
reached 6.63). So the search stays one: it branches the best two open nodes per round, and their
children are bounded half here and half in a worker forked from this process.

The worker is the problem as it was at the fork (same code, same bounds, same budget); it receives
nodes and sends back their `NodeBound`s, each a proof about its own node whoever computed it.
Lower bounds are not taken from it: the lower bound of its `NodeBound`s is dropped, and its best
witness (the problem's `share()`) is replayed here by `take_share` before it counts. A worker that
fails, dies, or has not answered JOIN seconds after the deadline is given no more nodes; its
nodes of that batch are bounded here (by then, with the budget spent, a node keeps its parent's
bound: the problem's own rule).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import replace
from typing import Any, Callable

from ..runtime import Forked, die_with_parent, forked_child, may_fork_helpers, reporting_to
from .engine import NodeBound

JOIN = 1.0   # seconds past the deadline the worker's answer is waited for
POLL = 0.05


def _serve(conn, bound: Callable[[list], list[NodeBound]], share: Callable[[], Any], parent: int) -> None:
    forked_child()
    die_with_parent(parent)
    with reporting_to(conn):
        while True:
            msg = conn.recv()
            if msg[0] != "bound":
                return
            nbs = bound(msg[1])
            conn.send(("bounds", [replace(nb, lower=-math.inf, witness=None) for nb in nbs], share()))


class BoundWorker:
    """A forked worker bounding nodes with `bound` (the problem's `bound_many`, in the worker's
    copy); `share()` there and `take_share(x)` here carry its best witness across (see module doc)."""

    def __init__(self, bound: Callable[[list], list[NodeBound]], share: Callable[[], Any],
                 take_share: Callable[[Any], None], deadline: float | None) -> None:
        from multiprocessing import Pipe  # (lazy: most searches never fork)

        self.take_share, self.deadline = take_share, deadline
        self.conn, child = Pipe()
        try:
            self.proc: Forked | None = Forked(_serve, (child, bound, share, os.getpid()))
        except OSError:
            self.proc = None
        child.close()
        self.batches = self.nodes = 0  # what it bounded
        self.failure: str | None = None if self.proc is not None else "fork failed"

    @staticmethod
    def possible() -> bool:
        """May this process fork a bound worker (`solvers.runtime.may_fork_helpers`)?"""
        return may_fork_helpers()

    @property
    def alive(self) -> bool:
        return self.failure is None

    def bound_many(self, nodes: list, here: Callable[[list], list[NodeBound]]) -> list[NodeBound]:
        """The bounds of `nodes`: the second half bounded by the worker while `here` bounds the first."""
        if not self.alive or len(nodes) < 2:
            return here(nodes)
        k = len(nodes) // 2
        try:
            self.conn.send(("bound", nodes[k:]))
        except (OSError, ValueError) as exc:
            self._fail(f"send: {exc}")
            return here(nodes)
        mine = here(nodes[:k])
        theirs = self._receive()
        if theirs is None:
            return mine + here(nodes[k:])
        self.batches, self.nodes = self.batches + 1, self.nodes + len(theirs)
        return mine + theirs

    def _receive(self) -> list[NodeBound] | None:
        while True:
            try:
                if self.conn.poll(POLL):
                    msg = self.conn.recv()
                    if msg[0] == "bounds":
                        if msg[2] is not None:
                            self.take_share(msg[2])
                        return msg[1]
                    self._fail(str(msg[1]) if msg[0] == "error" else "unexpected message")
                    return None
            except (EOFError, OSError) as exc:
                self._fail(f"pipe: {exc}")
                return None
            if self.proc is not None and not self.proc.alive():
                self._fail(f"ended (exit code {self.proc.code})")
                return None
            if self.deadline is not None and time.perf_counter() > self.deadline + JOIN:
                self._fail("late past the deadline")
                return None

    def _fail(self, why: str) -> None:
        self.failure = why
        self.close()

    def close(self) -> None:
        """Stop and reap the worker (always safe to call again)."""
        if self.failure is None:
            self.failure = "closed"
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.conn.send(("stop",))
            end = time.perf_counter() + 0.2
            while self.proc.alive() and time.perf_counter() < end:
                time.sleep(0.01)
            self.proc.end()
            self.proc = None
        with contextlib.suppress(Exception):
            self.conn.close()


__all__ = ["BoundWorker"]
