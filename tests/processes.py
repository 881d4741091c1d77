"""Helpers of the tests that run certify in a subprocess and signal it at a chosen moment."""

from __future__ import annotations


def mapped_files(pid: int) -> str:
    """/proc/PID/maps of a running process (empty when it is gone): which libraries it has loaded,
    e.g. "onnxruntime" once the model is loaded, to time a signal."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return fh.read()
    except OSError:
        return ""
