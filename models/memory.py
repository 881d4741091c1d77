"""Memory budget for large allocations, and the error for a model that does not fit.

A model whose unrolled affine maps cannot be held in memory is bad input ("model too large",
exit 2 on the command line), never a `MemoryError` or a process killed by the kernel. Before a
large array is allocated its size is compared with the budget:

- `CERTIFY_MEMORY_LIMIT` when set (bytes, or a number with a K/M/G/T suffix in powers of 1000,
  e.g. `CERTIFY_MEMORY_LIMIT=8G`); otherwise
- half of the memory available now (`MemAvailable` in /proc/meminfo): the certificate computed
  after the import needs room for at least one working copy of the network; and, in a process
  whose address space is capped (`ulimit -v`, RLIMIT_AS), half of the address space left.

Where neither source exists (not Linux, no cap) the budget is unlimited and an allocation that
still fails is reported the same way.
"""

from __future__ import annotations

import os
import re
import resource
from contextlib import contextmanager
from typing import Iterator

from .errors import ModelError

ENV_VAR = "CERTIFY_MEMORY_LIMIT"
FRACTION = 0.5
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


class ModelTooLarge(ModelError):
    """An allocation the model needs exceeds the memory budget."""


def gb(nbytes: float) -> str:
    """'26.9 GB' (powers of 1000, like the budget's suffixes)."""
    return f"{nbytes / 1e9:.3g} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.3g} MB"


def parse_size(text: str) -> int:
    """'8G' -> 8000000000; '512M', '1.5G', '1000000' likewise (powers of 1000)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)B?\s*", text.upper())
    if not m or float(m.group(1)) <= 0:
        raise ModelError(f"{ENV_VAR}={text!r} is not a size: use bytes or a number with K/M/G/T, e.g. 8G")
    return int(float(m.group(1)) * _SUFFIX[m.group(2)])


def _proc_kb(path: str, key: str) -> int | None:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def budget() -> tuple[float, str]:
    """(bytes a single import may allocate now, where that number comes from)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return float(parse_size(env)), f"{ENV_VAR}={env}"
    limits: list[tuple[float, str]] = []
    available = _proc_kb("/proc/meminfo", "MemAvailable")
    if available is not None:
        limits.append((FRACTION * available, f"half of the {gb(available)} of memory available"))
    cap = resource.getrlimit(resource.RLIMIT_AS)[0]
    if cap != resource.RLIM_INFINITY:
        used = _proc_kb("/proc/self/status", "VmSize") or 0
        left = max(cap - used, 0)
        limits.append((FRACTION * left, f"half of the {gb(left)} of address space left under the process limit"))
    if not limits:
        return float("inf"), "no known limit"
    return min(limits)


def require(nbytes: float, what: str, already: float = 0.0) -> None:
    """Raise `ModelTooLarge` when `nbytes` (for `what`, of which `already` is allocated) exceed the budget."""
    limit, source = budget()
    if nbytes - already > limit:
        held = f" ({gb(already)} of it already allocated)" if already > 0.1 * nbytes else ""
        raise ModelTooLarge(
            f"model too large: needs {gb(nbytes)} for {what}{held}, but the budget is {gb(limit)} ({source}); "
            f"use a smaller model or set {ENV_VAR} (e.g. {ENV_VAR}=32G) if the machine has the memory"
        )


@contextmanager
def allocating(nbytes: float, what: str) -> Iterator[None]:
    """Check `nbytes` against the budget, then report a `MemoryError` in the block the same way."""
    require(nbytes, what)
    try:
        yield
    except MemoryError:
        raise ModelTooLarge(
            f"model too large: needs {gb(nbytes)} for {what} and the allocation failed; "
            f"free memory or use a smaller model"
        ) from None
