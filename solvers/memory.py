"""How much memory a computation may still use, so that large problems are refused before they
are built (a kernel OOM kill is exit 137 with no message; a MemoryError is an internal error).

`available_bytes()` is the smallest of: the kernel's MemAvailable, the cgroup's memory.max minus
memory.current (containers), and the address-space limit (RLIMIT_AS, e.g. `ulimit -v`) minus this
process's current virtual size. None when none of them can be read.
"""

from __future__ import annotations

import os
import resource

from models.errors import BadInput


class TooLarge(BadInput):
    """A problem whose estimated memory exceeds what is available (exit 2 in the CLI)."""


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _field_kib(path: str, name: str) -> int | None:
    """A "Name:   1234 kB" field of a /proc file, in bytes."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes() -> int | None:
    """Bytes this process can still allocate (see the module docstring), or None if unknown."""
    limits = []
    mem = _field_kib("/proc/meminfo", "MemAvailable")
    if mem is None:
        try:
            mem = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            mem = None
    if mem is not None:
        limits.append(mem)
    cap, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if cap is not None and used is not None:
        limits.append(max(cap - used, 0))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        vsize = _field_kib("/proc/self/status", "VmSize") or 0
        limits.append(max(soft - vsize, 0))
    return min(limits) if limits else None


def format_bytes(n: float) -> str:
    """1.7 GB, 350 MB."""
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def require(needed: int, what: str, alternative: str) -> None:
    """Refuse (TooLarge) when `needed` bytes exceed what is available; `what` names the problem
    and its size, `alternative` what to do instead."""
    free = available_bytes()
    if free is not None and needed > free:
        raise TooLarge(f"{what} needs about {format_bytes(needed)} of memory, more than the "
                       f"{format_bytes(free)} available; {alternative}")
