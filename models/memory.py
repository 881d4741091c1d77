"""The memory budget: one source of truth for every large allocation certify makes.

A model, a bound computation or a sample batch that does not fit in memory is bad input ("too
large", exit 2 on the command line), never a `MemoryError` or a process killed by the kernel.
Before a large array is allocated its size is compared with the budget:

- `CERTIFY_MEMORY_LIMIT` when set (bytes, or a number with a K/M/G/T suffix in powers of 1000,
  e.g. `CERTIFY_MEMORY_LIMIT=8G`): the most all of certify's large arrays may hold at once: the
  networks alive in the process (`held_bytes`) plus the working arrays of the computation; otherwise
- half of the memory available now (`available_bytes`: the kernel's MemAvailable, the cgroup's
  memory.max minus memory.current, and the address space left under `ulimit -v`, whichever is
  smallest), for the new arrays (what is already held is no longer available): the certificate
  computed after the import needs room for at least one working copy of the network.

Where no source exists (not Linux, no cap) the budget is unlimited and an allocation that still
fails is reported the same way (`allocating`). The solvers and certify import this module (there
is no other budget).

Computations ask for their working arrays with `require_work` (refuse), `block_rows` (the largest
row block of a blocked product that fits: all rows when the whole product fits, so results do not
change where they fit) or `batch_rows` (sample batches); a whole problem (an SDP) is checked by
`require_memory` before it is built.
"""

from __future__ import annotations

import math
import os
import re
import resource
import time
import weakref
from contextlib import contextmanager
from typing import Iterator

from .errors import BadInput, ModelError

ENV_VAR = "CERTIFY_MEMORY_LIMIT"
FRACTION = 0.5
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
# working arrays smaller than this are not checked (the check reads /proc: too slow for the many
# small products of a branch-and-bound); the budget is for what grows with the model
SMALL = 1 << 20
# a blocked computation that does not fit whole works in blocks of at most this many bytes
BLOCK_BYTES = 256 << 20
# sample batches (attacks) hold at most this many bytes per array, whatever the budget
BATCH_BYTES = 256 << 20
# what the kernel reports is re-read at most this often for asks below 1/8 of it: a branch-and-bound
# asks thousands of times a second (30 us a read, 8% of a digits net's MILP proof), and the budget
# keeps half of what is available anyway
SOURCES_TTL = 0.05


class TooLarge(BadInput):
    """A problem whose memory exceeds the budget (exit 2 in the CLI)."""


class ModelTooLarge(ModelError, TooLarge):
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


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _sources() -> list[tuple[float, str]]:
    """(bytes still available, what that is) for each limit that can be read."""
    out: list[tuple[float, str]] = []
    mem = _proc_kb("/proc/meminfo", "MemAvailable")
    if mem is None:
        try:
            mem = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            mem = None
    if mem is not None:
        out.append((float(mem), "of memory available"))
    cap, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if cap is not None and used is not None:
        out.append((float(max(cap - used, 0)), "left under the container's memory limit"))
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        used = _proc_kb("/proc/self/status", "VmSize") or 0
        out.append((float(max(soft - used, 0)), "of address space left under the process limit"))
    return out


_recent: list = [-math.inf, []]  # (when read, what `_sources` returned)


def _read_sources(nbytes: float = math.inf) -> list[tuple[float, str]]:
    """`_sources()`, or its reading of the last SOURCES_TTL seconds when `nbytes` is small against it."""
    stamp, last = _recent
    now = time.monotonic()
    if last and now - stamp < SOURCES_TTL and 8 * nbytes <= min(s for s, _ in last):
        return last
    last = _sources()
    _recent[:] = [now, last]
    return last


def available_bytes() -> int | None:
    """Bytes this process can still allocate (the smallest of the sources above), None if unknown."""
    sources = _sources()
    return int(min(s for s, _ in sources)) if sources else None


def budget(available: float | None = None, nbytes: float = math.inf) -> tuple[float, str]:
    """(the budget in bytes, where that number comes from): CERTIFY_MEMORY_LIMIT, or half of what
    is available now (`available` replaces the measured value; `nbytes`, the size asked for, lets a
    small ask use a reading of the last SOURCES_TTL seconds)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return float(parse_size(env)), f"{ENV_VAR}={env}"
    sources = [(float(available), "of memory available")] if available is not None else _read_sources(nbytes)
    if not sources:
        return float("inf"), "no known limit"
    left, what = min(sources)
    return FRACTION * left, f"half of the {gb(left)} {what}"


# ----------------------------------------------------------------------------- what is held
_NETWORKS: "weakref.WeakSet" = weakref.WeakSet()
_reserved = [0.0]  # working arrays of the computations running now (`working`)


def track(network) -> None:
    """Count the arrays of a network (anything with `.layers` of `.weight`/`.bias`) as held while
    it lives (`held_bytes`)."""
    _NETWORKS.add(network)


def held_bytes() -> int:
    """Bytes of the weights and biases of the networks alive in this process (shared arrays once)."""
    seen: dict[int, int] = {}
    for net in list(_NETWORKS):
        for layer in getattr(net, "layers", ()):
            for name in ("weight", "bias"):
                arr = getattr(layer, name, None)
                if arr is not None and hasattr(arr, "__array_interface__"):
                    key = arr.__array_interface__["data"][0]
                    seen[key] = max(seen.get(key, 0), int(arr.nbytes))
    return sum(seen.values())


def work_left(available: float | None = None, nbytes: float = math.inf) -> tuple[float, str]:
    """(bytes a computation may still allocate, the budget described for a message); `nbytes` as in
    `budget`."""
    limit, source = budget(available, nbytes)
    if os.environ.get(ENV_VAR):
        held = held_bytes() + _reserved[0]
        of_which = f", of which {gb(held)} are held (networks, working arrays)" if held >= 0.5e6 else ""
        return limit - held, f"{gb(limit)} ({source}){of_which}"
    return limit, f"{gb(limit)} ({source})"


def fits(nbytes: float) -> bool:
    """Whether `nbytes` more bytes fit in the budget now."""
    return nbytes <= SMALL or nbytes <= work_left(nbytes=nbytes)[0]


def _refusal(nbytes: float, what: str, described: str, alternative: str) -> str:
    alt = f"{alternative.rstrip('; ')}, or " if alternative else ""
    return (f"too large: needs {gb(nbytes)} for {what}, but the memory budget is {described}; "
            f"{alt}set {ENV_VAR} (e.g. {ENV_VAR}=32G) if the machine has the memory")


def require_work(nbytes: float, what: str, alternative: str = "", available: float | None = None) -> None:
    """Raise `TooLarge` when the working arrays of a computation (`nbytes`, for `what`) do not fit in
    the budget; `alternative` says what to do instead (e.g. a cheaper method)."""
    if nbytes <= SMALL and available is None:
        return
    left, described = work_left(available, nbytes)
    if nbytes > left:
        raise TooLarge(_refusal(nbytes, what, described, alternative))


def block_rows(rows: int, row_bytes: float, what: str, fixed: float = 0.0, alternative: str = "") -> int:
    """Rows per block of a computation whose working arrays take `fixed` + `row_bytes` per row of
    the block: all `rows` when the whole computation fits (results then do not change), else the
    most that fit in BLOCK_BYTES and in half of what is left of the budget; `TooLarge` when not
    even one row fits."""
    rows = max(int(rows), 1)
    whole = fixed + rows * row_bytes
    if whole <= SMALL:
        return rows
    left, described = work_left(nbytes=whole)
    if whole <= left:
        return rows
    # half of what is left at most: the caller's other arrays (results, vectors) need room too
    k = int(min((left - fixed) / 2, BLOCK_BYTES) // max(row_bytes, 1.0))
    if k < 1 and left - fixed < row_bytes:
        raise TooLarge(_refusal(fixed + row_bytes, what, described, alternative))
    k = max(k, 1)
    return min(k, rows)


def batch_rows(wanted: int, row_bytes: float, fixed: float = 0.0) -> int:
    """How many of `wanted` sample rows (each `row_bytes` of working arrays, plus `fixed`) to process
    at once: at most BATCH_BYTES and what fits in the budget; 0 when not even one row fits."""
    wanted = max(int(wanted), 1)
    whole = fixed + wanted * row_bytes
    cap = min(work_left(nbytes=whole)[0] - fixed, BATCH_BYTES) if whole > SMALL else wanted * row_bytes
    return int(max(0, min(wanted, cap // max(row_bytes, 1.0))))


def require_memory(needed: float, what: str, alternative: str) -> None:
    """Refuse (`TooLarge`) a problem (an SDP, ...) whose memory, `needed` bytes, exceeds what is left
    of the budget; `what` names the problem and its size as a clause ("an SDP with ..., which"),
    `alternative` what to do instead."""
    left, described = work_left(available_bytes())
    if needed > left:
        raise TooLarge(f"{what} needs about {gb(needed)} of memory, more than the memory budget of {described}; "
                       f"{alternative}, or set {ENV_VAR} (e.g. {ENV_VAR}=32G) if the machine has the memory")


def require(nbytes: float, what: str, already: float = 0.0) -> None:
    """Raise `ModelTooLarge` when the model's arrays (`nbytes` in all, for `what`, of which `already`
    are allocated) exceed the budget: with CERTIFY_MEMORY_LIMIT all of them count, otherwise the
    part not yet allocated against half of what is available."""
    limit, source = budget()
    need = nbytes if os.environ.get(ENV_VAR) else nbytes - already
    if need > limit:
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


class Holding:
    """Bytes a long computation keeps between its steps (a search's open nodes), held as reserved
    until `release`: the checks made meanwhile see that much less of a CERTIFY_MEMORY_LIMIT budget."""

    def __init__(self) -> None:
        self.nbytes = 0

    def set(self, nbytes: float) -> None:
        """Hold `nbytes` from now on (replacing what was held)."""
        nbytes = int(math.ceil(nbytes))  # (whole bytes: what is added is exactly what is taken back)
        _reserved[0] += nbytes - self.nbytes
        self.nbytes = nbytes

    def release(self) -> None:
        self.set(0)


@contextmanager
def working(nbytes: float, what: str, alternative: str = "") -> Iterator[None]:
    """`require_work`, then hold `nbytes` as reserved during the block (checks made inside it see
    that much less of a CERTIFY_MEMORY_LIMIT budget), and report a `MemoryError` in the block the
    same way (exit 2)."""
    require_work(nbytes, what, alternative)
    _reserved[0] += nbytes
    try:
        yield
    except MemoryError:
        alt = f"; {alternative}" if alternative else ""
        raise TooLarge(f"too large: {what} needs about {gb(nbytes)} and the allocation failed; "
                       f"free memory or use a smaller problem{alt}") from None
    finally:
        _reserved[0] -= nbytes
