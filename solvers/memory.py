"""How much memory a computation may still use, so that large problems are refused before they
are built (a kernel OOM kill is exit 137 with no message; a MemoryError is an internal error).

The budget is `models.memory`'s (the one source of truth: `CERTIFY_MEMORY_LIMIT`, or half of the
memory available); this module is its interface for the solvers. `available_bytes()` is the
smallest of: the kernel's MemAvailable, the cgroup's memory.max minus memory.current
(containers), and the address-space limit (RLIMIT_AS, e.g. `ulimit -v`) minus this process's
current virtual size. None when none of them can be read.
"""

from __future__ import annotations

from models import memory as _budget
from models.memory import BLOCK_BYTES, ENV_VAR, TooLarge, block_rows, fits, require_work, working  # noqa: F401


def available_bytes() -> int | None:
    """Bytes this process can still allocate (see the module docstring), or None if unknown."""
    return _budget.available_bytes()


def format_bytes(n: float) -> str:
    """1.7 GB, 350 MB (powers of 1000, as everywhere in certify)."""
    return _budget.gb(n)


def require(needed: int, what: str, alternative: str) -> None:
    """Refuse (TooLarge) when `needed` bytes exceed the memory budget; `what` names the problem
    and its size, `alternative` what to do instead."""
    left, described = _budget.work_left(available_bytes())
    if needed > left:
        raise TooLarge(f"{what} needs about {format_bytes(needed)} of memory, more than the memory budget of "
                       f"{described}; {alternative}, or set {ENV_VAR} (e.g. {ENV_VAR}=32G) if the machine has "
                       "the memory")
