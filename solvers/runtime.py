"""Time budget, interruption and progress events shared by every long computation.

- `Budget`: one deadline for a whole question (bounds, LP tightening, MILP solves, proofs, witness
  replay), with `stage(fraction)` deadlines for stages that must leave time to later ones. Every
  budget also respects the *command deadline* (`set_command_deadline`): the CLI sets it from
  `--time-limit` before the model is loaded, so every stage of a command obeys the command's wall-clock
  budget without further plumbing (a budget's deadline is the earlier of its own and the command's).
- `past(deadline)`: the one test long loops make: Ctrl-C, the command deadline or `deadline` passed.
- `interruptible()`: while active, the first Ctrl-C (SIGINT) only sets a flag that solvers poll
  (Gurobi and HiGHS through callbacks, branch-and-bound between nodes, LP and sampling loops), so a
  long solve stops cleanly and the sound interval reached so far can still be reported; a second
  Ctrl-C raises KeyboardInterrupt (in the CLI process the watchdog below exits at once instead).
- `watchdog(label)`: the CLI process's guard (`certify.cli.run`). A thread woken by the signal itself
  (`signal.set_wakeup_fd`), so it sees Ctrl-C even while the main thread is inside a C solver: it
  sets the stop flag at once, and when the command has not finished (or started printing) about a
  second later it prints "interrupted (no result)" on stderr, kills solver subprocesses and exits
  with 130. A second Ctrl-C exits at once.
  The watchdog also ends a command whose stage has not stopped OVERRUN_GRACE seconds past the
  command deadline (a C call or model loading that polls nothing): the same partial result (status
  `time_limit`, `stop_reason`) or "no result", exit 124.
- `offer_partial(render)`: the running command's sound result so far (a callable returning its
  text); the watchdog prints it on the command's stdout (`set_result_fd`) instead of "no result"
  when a solver does not stop within the grace period.
- `run_abandonable(fn, deadline)`: runs a C solver that polls nothing (SCS's set-up) in a thread the
  caller stops waiting for at Ctrl-C or at the deadline (`Abandoned`); the CLI then exits with
  `os._exit` after its output (`abandoned()`), as the thread may still be running.
- `Progress`: the event a progress callback receives (elapsed time, the certified interval so far,
  the solver's own unproven interval, nodes).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# ----------------------------------------------------------------------------- the command deadline
_COMMAND_DEADLINE: float | None = None


def set_command_deadline(deadline: float | None) -> None:
    """The wall-clock end (a `time.perf_counter()` value) of the running command, or None."""
    global _COMMAND_DEADLINE
    _COMMAND_DEADLINE = None if deadline is None else float(deadline)


def command_deadline() -> float | None:
    return _COMMAND_DEADLINE


def earliest(*deadlines: float | None) -> float | None:
    """The earliest of the given deadlines (None: no deadline)."""
    given = [d for d in deadlines if d is not None]
    return min(given) if given else None


def stop_requested() -> bool:
    """Ctrl-C (or `request_stop`) inside `interruptible()` or the CLI: a stop request left over from
    an earlier call outside any scope stops nothing."""
    return _FLAG.is_set() and bool(_SCOPES or _WATCHDOG is not None)


def past(deadline: float | None = None) -> bool:
    """Should work stop now? Ctrl-C (`stop_requested`), or the command deadline or `deadline`
    (a `time.perf_counter()` value) passed."""
    if stop_requested():
        return True
    end = earliest(deadline, _COMMAND_DEADLINE)
    return end is not None and time.perf_counter() >= end


def time_left(deadline: float | None = None) -> float | None:
    """Seconds until the earlier of `deadline` and the command deadline (None: unlimited), >= 0."""
    end = earliest(deadline, _COMMAND_DEADLINE)
    return None if end is None else max(end - time.perf_counter(), 0.0)


class Budget:
    """A time limit shared by every stage of one question (None: unlimited, up to the command deadline)."""

    def __init__(self, time_limit: float | None = None, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.time_limit = time_limit
        self.own_deadline = None if time_limit is None else self.start + time_limit

    @property
    def deadline(self) -> float | None:
        """The earlier of this budget's own deadline and the command's."""
        return earliest(self.own_deadline, _COMMAND_DEADLINE)

    def remaining(self) -> float | None:
        deadline = self.deadline
        return None if deadline is None else deadline - time.perf_counter()

    def expired(self) -> bool:
        return past(self.deadline)

    def stage(self, fraction: float) -> float | None:
        """A deadline that leaves (1 - fraction) of the remaining time to later stages."""
        rem = self.remaining()
        return None if rem is None else time.perf_counter() + max(rem, 0.0) * fraction

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


# ----------------------------------------------------------------------------- Ctrl-C
_FLAG = threading.Event()
_SCOPES = 0  # nesting depth of interruptible() in the main thread


def interrupted() -> bool:
    """True after a Ctrl-C inside `interruptible()` (solvers stop at their next check)."""
    return _FLAG.is_set()


def request_stop() -> None:
    """Ask running solves to stop as if Ctrl-C had been pressed (for tests, embedding, and solvers
    that caught the Ctrl-C themselves: Gurobi, SCS)."""
    _FLAG.set()


def withdraw_stop() -> None:
    """Take back a `request_stop` made by the program itself (auto's race stops the side that lost
    with it); never after a real Ctrl-C, which the caller must have ruled out."""
    _FLAG.clear()


def forked_child() -> None:
    """In a process forked from a command (auto's race): the watchdog thread and its signal pipe
    belong to the parent, so the child neither writes to that pipe nor counts on the watchdog (a
    Ctrl-C sets the stop flag through the inherited handler, the parent ends the child)."""
    global _WATCHDOG
    _WATCHDOG = None
    pool_worker()
    _CHILDREN.clear()
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)


def pool_worker() -> None:
    """Mark this process as one of several sharing the machine (forked from a command, or a batch
    pool's or dask's worker): its work forks no helper processes of its own (`may_fork_helpers`)."""
    global _SHARED_CORES
    _SHARED_CORES = True


def may_fork_helpers() -> bool:
    """May this process fork a helper onto another core (not a worker itself, no `cores_taken`
    block running, fork and 2+ cores)?"""
    return not _SHARED_CORES and not _CORES_TAKEN and forkable_cores() >= 2


@contextlib.contextmanager
def cores_taken() -> Iterator[None]:
    """While this block runs another process works on the other cores (auto's race): no helpers."""
    global _CORES_TAKEN
    _CORES_TAKEN += 1
    try:
        yield
    finally:
        _CORES_TAKEN -= 1


def forkable_cores() -> int:
    """The cores this process may run forked children on (Linux's affinity; 1 without fork)."""
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def die_with_parent(parent: int) -> None:
    """In a forked child (auto's race, the proof's workers), Linux: the kernel kills this process
    when its parent dies (SIGKILL, or an os._exit that skips the parent's clean-up): never an
    orphan solving on."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # (the parent went before the request took effect)
        os._exit(1)


def user_interrupt() -> None:
    """A Ctrl-C that a C solver caught itself (Gurobi, SCS install their own SIGINT handlers while
    they run, so Python never sees it): the same stop as ours, the watchdog's grace period included."""
    _FLAG.set()
    dog = _WATCHDOG
    if dog is not None:
        with contextlib.suppress(OSError):
            os.write(dog.write_fd, bytes([signal.SIGINT]))


def _handler(signum, frame) -> None:  # noqa: ARG001
    if _FLAG.is_set() and _WATCHDOG is None:
        raise KeyboardInterrupt
    _FLAG.set()  # (under the watchdog a second Ctrl-C makes it exit at once)


def restore_handler() -> None:
    """Take SIGINT back from a C solver that installed its own handler (SCS does during its
    iterations); a no-op outside `interruptible()`."""
    if _SCOPES and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _handler)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turn the first SIGINT into a stop request (see module doc); restores the handler after.

    The outermost scope clears an earlier stop request; nested scopes (a command's inside the CLI's)
    and scopes outside the main thread change nothing, so a Ctrl-C during model loading is not lost."""
    global _SCOPES
    if threading.current_thread() is not threading.main_thread() or _SCOPES:
        _SCOPES += threading.current_thread() is threading.main_thread()
        try:
            yield
        finally:
            _SCOPES -= threading.current_thread() is threading.main_thread()
        return
    _FLAG.clear()
    previous = signal.signal(signal.SIGINT, _handler)
    _SCOPES += 1
    try:
        yield
    finally:
        _SCOPES -= 1
        signal.signal(signal.SIGINT, previous)


# ----------------------------------------------------------------------------- the CLI's watchdog
#: seconds between a Ctrl-C and the forced exit when the command has not produced its result
GRACE = 1.0
INTERRUPTED_EXIT = 130
#: seconds past the command deadline after which the watchdog ends a command whose stage did not
#: stop (a long C call, model loading): printed result or none, exit TIME_LIMIT_EXIT
OVERRUN_GRACE = 1.5
TIME_LIMIT_EXIT = 124  # (as coreutils' `timeout`)
_POLL = 0.2  # the watchdog's wake-up period while no Ctrl-C came (it watches the command deadline)
_STOP_REASON = "interrupted"


def stop_reason() -> str:
    """Why the watchdog ends the command: "interrupted" (Ctrl-C) or "time_limit" (a stage ran
    OVERRUN_GRACE past the command deadline): the status of the partial result it prints."""
    return _STOP_REASON

_WATCHDOG: "_Watchdog | None" = None
_CHILDREN: set = set()
_SHARED_CORES = False  # set in worker processes (`pool_worker`)
_CORES_TAKEN = 0  # `cores_taken` blocks running
_ABANDONED = threading.Event()
_OUTPUT = threading.Event()


def register_child(proc) -> None:
    """A solver subprocess (CBC) to kill when the process is stopped."""
    _CHILDREN.add(proc)


def unregister_child(proc) -> None:
    _CHILDREN.discard(proc)


FORK_JOIN = 1.0  # seconds a forked worker gets to go after SIGTERM before SIGKILL


class Forked:
    """A worker started by a bare fork (auto's race runs the proof in a daemonic multiprocessing
    child, which multiprocessing forbids to have children of its own); `end()` stops and reaps it
    (SIGTERM, then SIGKILL after FORK_JOIN seconds)."""

    def __init__(self, target: Callable[..., None], args: tuple) -> None:
        for stream in (sys.stdout, sys.stderr):  # (a buffer copied into the worker would print twice)
            with contextlib.suppress(Exception):
                stream.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the worker: never returns into the caller's code
            code = 1
            try:
                target(*args)
                code = 0
            finally:
                os._exit(code)
        self.code: int | None = None
        register_child(self)

    def alive(self) -> bool:
        if self.code is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == 0:
                    return True
                self.code = os.waitstatus_to_exitcode(status)
            if self.code is None:
                self.code = -1  # (reaped elsewhere)
        return False

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def end(self) -> None:
        """Terminate, then kill after FORK_JOIN seconds; always reaped."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            end = time.perf_counter() + FORK_JOIN
            while self.alive() and time.perf_counter() < end:
                time.sleep(0.01)
            if self.alive():
                self.kill()
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.pid, 0)
                self.code = -9
        unregister_child(self)


@contextlib.contextmanager
def reporting_to(conn) -> Iterator[None]:
    """A forked worker's body: whatever it raises goes to its parent as ("error", message) (the
    parent then does the work itself) instead of a traceback; the connection is closed after."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001
        with contextlib.suppress(Exception):
            conn.send(("error", f"{type(exc).__name__}: {exc}"[:300]))
    finally:
        with contextlib.suppress(Exception):
            conn.close()


REPORT_JOIN = 1.0  # seconds a reporting worker gets after its stop (deadline, stop request) to report


class ReportingWorker:
    """One forked worker `target(conn, *args)` that sends one message on `conn` (its body runs
    under `reporting_to`), and the parent's side of that pipe. Raises OSError when the fork fails.
    `take` reads the message without waiting long, `wait` until it comes, the worker ends without
    one (("gone",)) or the time is up (("late",)); `close` ends and reaps the worker."""

    def __init__(self, target: Callable[..., None], args: tuple) -> None:
        from multiprocessing.connection import Pipe  # (lazy: most commands never fork a worker)

        self.receive, send = Pipe(duplex=False)
        try:
            self.proc = Forked(target, (send,) + tuple(args))
        except OSError:
            self.receive.close()
            send.close()
            raise
        send.close()
        self.msg: tuple | None = None

    def take(self, timeout: float = 0.0) -> tuple | None:
        """The worker's message if it came within `timeout` seconds (("gone",) on a closed pipe)."""
        if self.msg is None and self.receive.poll(timeout):
            try:
                self.msg = self.receive.recv()
            except (EOFError, OSError):  # ended without a word
                self.msg = ("gone",)
        return self.msg

    def wait(self, end: float | None = None, stop: Callable[[], bool] = lambda: False) -> tuple:
        """The worker's message, waited for until `end` (None: no limit) or REPORT_JOIN seconds after
        `stop()` first returns true (then ("late",)); ("gone",) when the worker ended without one."""
        stopping = False
        while self.take(POLL_SECONDS) is None:
            now = time.perf_counter()
            if not self.proc.alive():
                self.msg = self.take(POLL_SECONDS) or ("gone",)
            elif not stopping and stop():
                stopping, end = True, min(math.inf if end is None else end, now + REPORT_JOIN)
            elif end is not None and now > end:
                self.msg = ("late",)
        return self.msg

    def close(self) -> None:
        self.proc.end()
        with contextlib.suppress(Exception):
            self.receive.close()


def kill_children() -> None:
    """Stop solver subprocesses and worker processes before an `os._exit` (which would orphan them)."""
    for proc in list(_CHILDREN):
        with contextlib.suppress(Exception):  # already gone
            proc.kill()
    if "multiprocessing" in sys.modules:
        for child in sys.modules["multiprocessing"].active_children():
            with contextlib.suppress(Exception):
                child.terminate()


def output_started() -> None:
    """The command has begun printing its result: the watchdog lets it finish."""
    global _STOPPED_AT_OUTPUT
    if not _OUTPUT.is_set():
        _STOPPED_AT_OUTPUT = _FLAG.is_set()
        _OUTPUT.set()


_STOPPED_AT_OUTPUT = False


def interrupted_before_output() -> bool:
    """Did Ctrl-C come before the command began printing its result? (A Ctrl-C while a complete
    result is being printed does not make it a partial one.)"""
    return _STOPPED_AT_OUTPUT if _OUTPUT.is_set() else _FLAG.is_set()


def may_abandon() -> bool:
    """May a solver be left running in a thread (`run_abandonable`)? Only in the CLI process, which
    exits right after its output; a library call waits for its solvers."""
    return _WATCHDOG is not None


def abandoned() -> bool:
    """Was a solver thread left running (`run_abandonable`)? The process must then end with os._exit."""
    return _ABANDONED.is_set()


class _Watchdog:
    def __init__(self, label: str) -> None:
        self.label = label
        self.done = threading.Event()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)
        self.thread = threading.Thread(target=self._run, name="certify-watchdog", daemon=True)

    def _run(self) -> None:
        first: float | None = None
        while not self.done.is_set():
            timeout = _POLL if first is None else max(first + GRACE - time.perf_counter(), 0.0)
            if first is not None and timeout <= 0:
                if _OUTPUT.is_set():  # printing the result: let it finish
                    self.done.wait()
                    return
                self.exit()
            end = _COMMAND_DEADLINE
            if first is None and end is not None and time.perf_counter() >= end + OVERRUN_GRACE \
                    and not _OUTPUT.is_set() and not self.done.is_set():
                self.exit(time_limit=True)
            ready, _, _ = select.select([self.read_fd], [], [], timeout)
            if not ready:
                continue
            try:
                data = os.read(self.read_fd, 64)
            except OSError:
                return
            for sig in data:
                if sig != signal.SIGINT or self.done.is_set():
                    continue
                if first is None:
                    first = time.perf_counter()
                    _FLAG.set()
                elif not _OUTPUT.is_set():  # a second Ctrl-C: stop now
                    self.exit()

    def exit(self, time_limit: bool = False) -> None:
        global _STOP_REASON
        if time_limit:
            _STOP_REASON = "time_limit"
            _FLAG.set()  # solvers still polling stop; the partial result says time_limit
        kill_children()
        if time_limit:
            what = (f"time limit: a stage did not stop within {OVERRUN_GRACE:g} s of --time-limit (no result)")
        else:
            what = "interrupted (no result)"
        if _write_partial():
            what = ((f"time limit: a stage did not stop within {OVERRUN_GRACE:g} s of --time-limit" if time_limit else
                     "interrupted: a solver did not stop within a second")
                    + ", so the sound interval it had reached is printed (no witness point)")
        try:
            os.write(2, f"certify{' ' + self.label if self.label else ''}: {what}\n".encode())
        except OSError:
            pass
        os._exit(TIME_LIMIT_EXIT if time_limit else INTERRUPTED_EXIT)


_PARTIAL: Callable[[], str | None] | None = None
_RESULT_FD: int | None = None


def offer_partial(render: Callable[[], str | None] | None) -> None:
    """Register (None: withdraw) the running command's sound result so far, as a callable returning
    the text to print (or None when there is none yet); called from the watchdog thread."""
    global _PARTIAL
    _PARTIAL = render


def set_result_fd(fd: int | None) -> None:
    """The file descriptor of the command's own stdout (the CLI's stdout guard)."""
    global _RESULT_FD
    _RESULT_FD = fd


def _write_partial() -> bool:
    """Print the offered partial result on the command's stdout; True when something was printed."""
    render, fd = _PARTIAL, _RESULT_FD
    if render is None or fd is None:
        return False
    try:
        text = render()
        if not text:
            return False
        data = text.encode()
        while data:
            data = data[os.write(fd, data):]
    except Exception:  # noqa: BLE001 - a failed emergency print must not hide the exit
        return False
    return True


@contextlib.contextmanager
def watchdog(label: str) -> Iterator[None]:
    """The CLI process's guard (module doc); only in the main thread, else a no-op."""
    global _WATCHDOG
    if threading.current_thread() is not threading.main_thread() or _WATCHDOG is not None:
        yield
        return
    dog = _Watchdog(label)
    try:
        previous_fd = signal.set_wakeup_fd(dog.write_fd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        yield
        return
    _WATCHDOG = dog
    dog.thread.start()
    try:
        yield
    finally:
        dog.done.set()
        _WATCHDOG = None
        signal.set_wakeup_fd(previous_fd)
        os.write(dog.write_fd, b"\0")  # wake the thread so that it ends
        dog.thread.join(0.5)
        for fd in (dog.read_fd, dog.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


# ----------------------------------------------------------------------------- abandonable solves
class Abandoned(Exception):
    """`run_abandonable` stopped waiting: `reason` is "interrupted" or "time_limit"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


POLL_SECONDS = 0.05


def run_abandonable(fn: Callable[[], Any], deadline: float | None = None) -> Any:
    """fn() in a daemon thread, waited for until Ctrl-C or `deadline` (or the command deadline),
    whichever comes first (then `Abandoned`; the thread runs on, see `abandoned`). For C solvers
    that release the GIL but poll nothing; exceptions of fn are raised here."""
    if past(deadline):
        raise Abandoned("interrupted" if interrupted() else "time_limit")
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="certify-solver", daemon=True)
    worker.start()
    while True:
        worker.join(POLL_SECONDS)
        if not worker.is_alive():
            break
        restore_handler()
        if past(deadline):
            _ABANDONED.set()
            raise Abandoned("interrupted" if interrupted() else "time_limit")
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ----------------------------------------------------------------------------- progress events
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

__all__ = ["Abandoned", "Budget", "FORK_JOIN", "Forked", "REPORT_JOIN", "ReportingWorker", "reporting_to", "Progress", "ProgressCallback", "abandoned", "command_deadline", "cores_taken", "earliest", "may_fork_helpers", "pool_worker",
           "interrupted", "interrupted_before_output", "interruptible", "may_abandon", "offer_partial",
           "output_started", "forked_child", "withdraw_stop", "past", "register_child", "request_stop", "restore_handler", "run_abandonable",
           "set_command_deadline", "set_result_fd", "stop_requested", "time_left", "unregister_child",
           "user_interrupt", "watchdog"]
