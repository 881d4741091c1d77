"""`method="auto"` races its two paths: the MILP in a forked child process, the region stage and the
Jacobian branch-and-bound in the calling process.

No unstable-ReLU count tells in advance which path closes first (digits 32-32 x0: the region
stage gives up after 3 s and the MILP closes in 7 s; digits 64 x0, same 15 unstable ReLUs: the
region stage closes in 3 s against the MILP's 23 s), and the stages hold the GIL, so the race needs
a second process. The parent keeps the live progress line and the witness search (the tree replays
points all the time); the child runs what `method="milp"` runs (plan, solve, independent proof)
with one solver thread, and sends the parent its proven upper bounds and its witness points.

What crosses the pipe is trusted for what it is and no more: an upper bound is the child's own
proof (its certificate's bound, or the proven bound of its live line); a lower bound counts only
once the parent has replayed the child's witness point itself (`WitnessSearch.offer`, which also
lets the parent's tree prune against it). The first side to close wins: the parent stops its own
side with a stop request (withdrawn afterwards unless a real Ctrl-C came) and ends the child
(terminate, then kill, always joined: no zombie, no orphan, on every path). Neither closing by the
deadline, the certificate is the combination: the smaller proven upper bound, the larger replayed
lower one. A child that dies (out of memory, a licence failure) costs only its side, with a note.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from solvers.runtime import (Budget, Progress, cores_taken, die_with_parent, forkable_cores, forked_child, interrupted,
                             past, request_stop, withdraw_stop)

from .certificate import LipschitzCertificate
from .options import DEFAULT_MIP_GAP
from .witness import WitnessSearch, closed

#: seconds the parent waits for the child's last word once its own side has stopped at the deadline
#: or at Ctrl-C (the child stops at the same moment: its solver polls the same deadline and got the
#: same SIGINT), before ending it
FINAL_WAIT = 0.4
POLL = 0.05  # the listener's wake-up period (it re-checks the combined interval)
JOIN = 1.0   # seconds for a terminated child to go before it is killed
#: against the input-splitting tree (`race="on"`) the child waits this long before its first step:
#: questions the tree closes in a fraction of a second do not share their core (LipMIP's
#: 2-20-20-20-2, 27 unstable, load 3: the tree alone 0.75 s, raced from the start 1.05 s, against an
#: idle child 0.71 s); a MILP win costs at most this much. Against the region stage (the digits
#: MLPs) it starts at once: auto 0.3-0.5 s faster there, also where the region stage closes within
#: a second (digits 32 x0 0.19 -> 0.16 s, digits 64 x1 1.16 -> 0.86 s; idle, medians of two)
CHILD_DELAY = 0.5


def race_possible(cores: int = 2) -> bool:
    """Linux's fork and at least `cores` cores for this process: else auto keeps its rule."""
    return forkable_cores() >= cores


class RaceUnavailable(Exception):
    """The child could not be started; nothing has run yet (the caller follows the rule instead)."""


@dataclass
class _Shared:
    """What the parent knows of the child, kept by the listener thread."""

    upper: float = math.inf       # the child's best proven upper bound
    claimed: float = -math.inf    # the best lower bound the child replayed itself (shown in notes only)
    final: dict | None = None     # the child's certificate, summarised
    error: str | None = None      # why the child's side was lost
    closed_by: str | None = None  # "milp": the child's proven bound closed the combined interval
    stopped: bool = False         # the parent's side was stopped by the race
    lock: threading.Lock = field(default_factory=threading.Lock)


def _summary(cert: LipschitzCertificate) -> dict:
    return {"upper": cert.upper, "lower": cert.lower, "status": cert.status, "notes": list(cert.notes),
            "backend": cert.backend, "method": cert.method, "nodes": cert.nodes, "binaries": cert.binaries,
            "solver_seconds": cert.solver_seconds, "proof": dict(cert.proof),
            "witness": None if cert.witness is None else np.asarray(cert.witness, dtype=np.float64)}


def _child_main(conn, side: Callable[[Callable[[Progress], None], Callable[[], bool]], LipschitzCertificate],
                search: WitnessSearch, parent: int, idle, delay: float) -> None:
    """The child: run `side` (the MILP path), sending its proven bound and witness on every event."""
    forked_child()
    die_with_parent(parent)
    time.sleep(delay)
    sent = [-math.inf]

    def send(ev: Progress) -> None:
        x = None
        if search.point is not None and search.lower > sent[0]:
            sent[0], x = search.lower, np.asarray(search.point.x, dtype=np.float64)
        with contextlib.suppress(OSError, ValueError):
            conn.send(("progress", float(ev.upper), float(search.lower), x))

    try:
        conn.send(("done", _summary(side(send, idle.is_set))))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, whose side goes on
        with contextlib.suppress(Exception):
            conn.send(("error", f"{type(exc).__name__}: {exc}"[:300]))
    finally:
        with contextlib.suppress(Exception):
            conn.close()


class Race:
    """One race (see module doc): `run(parent_side)` returns the combined certificate."""

    def __init__(self, child_side: Callable[[Callable[[Progress], None], Callable[[], bool]], LipschitzCertificate],
                 search: WitnessSearch, budget: Budget, mip_gap: float, live, delay: float = CHILD_DELAY) -> None:
        self.child_side, self.search, self.budget, self.mip_gap, self.live = child_side, search, budget, mip_gap, live
        self.delay = delay  # seconds before the child's first step
        self.shared = _Shared()
        self.real_interrupt = False
        self._done = threading.Event()

    # ------------------------------------------------------------------ parent
    def run(self, parent_side: Callable[[], LipschitzCertificate], parent_name: Callable[[LipschitzCertificate], str]
            ) -> LipschitzCertificate:
        import multiprocessing as mp  # (lazy: the small questions that never race do not pay its import)

        ctx = mp.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        self._idle = ctx.Event()  # set when the parent only waits: the child may take both cores
        for stream in (sys.stdout, sys.stderr):  # a buffer copied into the child would be printed twice
            with contextlib.suppress(Exception):
                stream.flush()
        child = ctx.Process(target=_child_main, args=(send, self.child_side, self.search, os.getpid(), self._idle,
                                                           self.delay),
                            daemon=True,
                            name="certify-race-milp")
        try:
            child.start()
        except OSError as exc:  # (no memory or process slot for a fork): nothing ran yet
            for end in (receive, send):
                end.close()
            raise RaceUnavailable(f"could not fork: {exc}") from exc
        previous = self._watch_sigint()
        send.close()
        listener = threading.Thread(target=self._listen, args=(receive,), name="certify-race", daemon=True)
        listener.start()
        try:
            with cores_taken():  # (the child's MILP has the other core: no LP helpers forked here)
                cert = parent_side()
            self._finish(cert, listener, child)
        finally:
            self._done.set()
            _end(child)
            listener.join(JOIN)
            with contextlib.suppress(Exception):
                receive.close()
            if self.shared.stopped and not self.real_interrupt:
                withdraw_stop()
            self._restore_sigint(previous)
        if self.shared.error == "the MILP process ended without a result":
            self.shared.error += f" (exit code {child.exitcode})"
        return self._combine(cert, parent_name(cert), child.exitcode)

    def wait_child(self) -> None:
        """The parent's side is out of moves: wait for the child's result (or the combined interval
        closing, the deadline, Ctrl-C), showing the combined interval on the live line."""
        sh = self.shared
        self._idle.set()
        while sh.final is None and sh.error is None and not past(self.budget.deadline):
            time.sleep(POLL)
            if self.live is not None:
                self.live.emit(Progress(self.budget.elapsed(), self.search.lower, self.live.upper, "milp (race)"))

    def _finish(self, cert: LipschitzCertificate, listener: threading.Thread, child) -> None:
        """After the parent's side: when it did not close by itself (deadline, Ctrl-C, stopped by
        the race, open gap), give the child a moment for its final word."""
        if cert.status == "optimal" and not self.shared.stopped:
            return
        if self.shared.final is None and self.shared.error is None:
            end = time.perf_counter() + FINAL_WAIT
            while listener.is_alive() and time.perf_counter() < end and self.shared.final is None:
                listener.join(POLL)

    def _listen(self, conn) -> None:
        """Receive the child's events and replay its witnesses; stop the parent's side when the
        combined interval closes (checked every POLL seconds: the parent's lower bound rises too)."""
        sh = self.shared
        eof = False
        while not self._done.is_set():
            if eof:
                self._done.wait(POLL)
            else:
                try:
                    msg = conn.recv() if conn.poll(POLL) else None
                except (EOFError, OSError):
                    eof, msg = True, None
                    if sh.final is None and sh.error is None and not self._done.is_set():
                        # (its exit code is read once the main thread has joined it: one waiter only)
                        sh.error = "the MILP process ended without a result"
                if msg is not None:
                    self._take(msg)
            if not sh.stopped and sh.upper < math.inf and self._closed():
                self._stop_parent()  # (and listen on: the child's last word is on its way)
            if eof and sh.stopped:
                return

    def _take(self, msg: tuple) -> None:
        sh = self.shared
        kind = msg[0]
        if kind == "progress":
            _, upper, claimed, x = msg
            self._upper(upper)
            sh.claimed = max(sh.claimed, claimed)
            if x is not None:
                self.search.offer(x)  # the parent's own replay: the only way a lower bound crosses
        elif kind == "done":
            final = msg[1]
            self._upper(final["upper"])
            sh.claimed = max(sh.claimed, final["lower"])
            if final["witness"] is not None:
                self.search.offer(final["witness"])
            sh.final = final
        elif kind == "error":
            sh.error = f"the MILP process failed: {msg[1]}"

    def _upper(self, value: float) -> None:
        if value < self.shared.upper:
            self.shared.upper = value
            if self.live is not None:
                self.live.upper = min(self.live.upper, value)

    def _closed(self) -> bool:
        return closed(self.search.lower, self.shared.upper, self.mip_gap)

    def _stop_parent(self) -> None:
        """The MILP's proven bound closed the combined interval: stop the parent's side."""
        with self.shared.lock:
            if self._done.is_set() or self.shared.stopped:
                return
            self.shared.closed_by, self.shared.stopped = "milp", True
            request_stop()

    def _watch_sigint(self):
        """Record a real Ctrl-C (the race's own stop request must not hide one, nor be taken for one)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum, frame):
            self.real_interrupt = True
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.default_int_handler:
                raise KeyboardInterrupt

        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, handler)
            return previous
        return None

    def _restore_sigint(self, previous) -> None:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, previous)

    # ------------------------------------------------------------------ the certificate
    def _combine(self, cert: LipschitzCertificate, parent_name: str, exitcode: int | None) -> LipschitzCertificate:
        sh, search = self.shared, self.search
        final = sh.final
        notes = list(cert.notes)
        milp_upper = sh.upper
        upper = min(cert.upper, milp_upper)
        lower = max(cert.lower, search.lower)
        base = cert
        if final is not None and milp_upper < cert.upper:  # the MILP gave the bound: its fields
            base = replace(cert, method=final["method"], backend=final["backend"], nodes=final["nodes"],
                           binaries=final["binaries"], solver_seconds=final["solver_seconds"], proof=final["proof"])
            notes = [n for n in final["notes"] if not n.startswith("upper bound:")] + \
                [n for n in notes if not n.startswith("upper bound:")]
        if sh.claimed > lower * (1 + 1e-9) and sh.claimed > 0:
            notes.append(f"race: the MILP process replayed {sh.claimed:.9g}, which the parent's own replay of "
                         "its witness did not reach (not counted)")
        if lower > upper:  # both are proofs: only a bug gets here
            notes.append(f"internal inconsistency: the replayed lower bound {lower!r} exceeds the proven upper bound "
                         f"{upper!r}; reporting the larger value as the upper bound (please report this model)")
            upper = lower
        winner = self._winner(cert, parent_name, final)
        if closed(lower, upper, DEFAULT_MIP_GAP):
            status = "optimal"
        elif self.real_interrupt or (interrupted() and not sh.stopped):
            status = "interrupted"
        elif self.budget.expired() or cert.status == "time_limit":
            status = "time_limit"
        elif closed(lower, upper, self.mip_gap):
            status = "open_gap"
            notes.append(f"the interval closed only to the requested gap {self.mip_gap:g}")
        else:
            status = cert.status if cert.status != "optimal" else "open_gap"
        if sh.error is not None:
            notes.append(f"race: {sh.error}; the {parent_name} side went on alone")
        elif winner:
            notes.append(f"race: the {winner} closed first ({parent_name} in this process, milp in a second one)")
        else:
            notes.append(f"race: neither side closed; the interval combines the {parent_name}'s and the milp's")
        race = {"winner": winner, "parent": parent_name, "child": "milp", "milp_upper": milp_upper,
                "child_error": sh.error, "child_exit": exitcode}
        return replace(base, lower=float(lower), upper=float(upper), status=status, notes=notes,
                       seconds=self.budget.elapsed(),
                       witness=None if search.point is None else np.asarray(search.point.x),
                       witness_direction=search.direction,
                       race=race)

    def _winner(self, cert: LipschitzCertificate, parent_name: str, final: dict | None) -> str | None:
        sh = self.shared
        if sh.closed_by == "milp":
            return "milp"
        if cert.status == "optimal":
            return parent_name
        if final is not None and final["status"] == "optimal":
            return "milp"
        return None


def _end(child) -> None:
    """Stop and reap the child whatever happened: terminate, then kill; always joined."""
    with contextlib.suppress(Exception):
        if child.is_alive():
            child.terminate()
            child.join(JOIN)
        if child.is_alive():
            child.kill()
        child.join(JOIN)


def race_side_names(cert: LipschitzCertificate) -> str:
    """The parent side's name for notes and the certificate's `race` field: regions (the region
    stage closed, or gave up and left the question to the MILP: "bounds"), or bab."""
    return "regions" if cert.method in ("regions", "bounds") else cert.method


__all__ = ["Race", "RaceUnavailable", "race_possible", "race_side_names"]
