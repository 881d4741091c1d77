"""`solvers.runtime.ReportingWorker`: the one forked worker that reports one message, shared by
verification's halves (`certify.verify.split_workers`) and a layer's shared LPs
(`solvers.bounds.lp.share_neurons`). Each way a worker can end is checked against what the parent
sees, and every worker is reaped (`os.waitpid` no longer finds it)."""

from __future__ import annotations

import os
import time

import pytest

import solvers.runtime as rt
from solvers.runtime import ReportingWorker, forked_child, reporting_to

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _sends(conn, value) -> None:
    forked_child()
    with reporting_to(conn):
        conn.send(("done", value))


def _raises(conn) -> None:
    forked_child()
    with reporting_to(conn):
        raise ValueError("bad node")


def _dies(conn) -> None:  # noqa: ARG001
    os._exit(3)


def _hangs(conn) -> None:  # noqa: ARG001
    forked_child()
    time.sleep(60)


def _reaped(worker: ReportingWorker) -> bool:
    try:
        os.waitpid(worker.proc.pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _run(target, *args, end=None, stop=lambda: False):
    worker = ReportingWorker(target, args)
    t0 = time.perf_counter()
    try:
        msg = worker.wait(end, stop)
    finally:
        worker.close()
    return msg, time.perf_counter() - t0, worker


def test_a_message_is_returned_and_the_worker_reaped():
    msg, _, worker = _run(_sends, [1, 2, 3])
    assert msg == ("done", [1, 2, 3])
    # (ended by `close` if it had not exited yet after sending: 0 or SIGTERM's -15)
    assert worker.proc.code in (0, -15) and _reaped(worker)


def test_an_error_in_the_worker_comes_as_one_line():
    msg, _, worker = _run(_raises)
    assert msg[0] == "error" and "ValueError: bad node" in msg[1]
    assert _reaped(worker)


def test_a_worker_that_dies_without_a_word_is_gone():
    msg, seconds, worker = _run(_dies)
    assert msg == ("gone",) and worker.proc.code == 3 and _reaped(worker)
    assert seconds < 5


def test_a_silent_worker_is_late_at_the_end_and_killed():
    msg, seconds, worker = _run(_hangs, end=time.perf_counter() + 0.3)
    assert msg == ("late",)
    assert 0.3 <= seconds < 0.3 + 2.0
    assert worker.proc.code is not None and _reaped(worker)


def test_a_stop_gives_the_worker_report_join_seconds():
    calls = []

    def stop() -> bool:
        calls.append(time.perf_counter())
        return len(calls) >= 3

    msg, seconds, _ = _run(_hangs, stop=stop)
    assert msg == ("late",)
    # stopped at the third poll, then REPORT_JOIN more (polls of POLL_SECONDS)
    assert rt.REPORT_JOIN <= seconds < rt.REPORT_JOIN + 2.0
    assert len(calls) == 3  # (asked until it says stop, then never again)


def test_take_does_not_wait_and_keeps_the_message():
    worker = ReportingWorker(_sends, ("x",))
    try:
        t0 = time.perf_counter()
        while worker.take() is None:
            assert time.perf_counter() - t0 < 10
            time.sleep(0.01)
        assert worker.take() == ("done", "x") and worker.wait() == ("done", "x")
    finally:
        worker.close()
