"""The machine and software a benchmark ran on (written as `machine.json` beside the CSV), and
which MILP back-ends can run here."""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import subprocess
from typing import Any

from .cases import MILP_BACKENDS


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _physical_cores() -> int | None:
    try:
        with open("/proc/cpuinfo") as fh:
            pairs = set()
            phys = core = None
            for line in fh:
                if line.startswith("physical id"):
                    phys = line.split(":", 1)[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":", 1)[1].strip()
                    pairs.add((phys, core))
            return len(pairs) or None
    except OSError:
        return None


@functools.lru_cache(maxsize=None)
def solver_versions() -> dict[str, str | None]:
    """Version strings of the MILP back-ends (None: not installed)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    try:
        import gurobipy

        out["gurobi"] = ".".join(map(str, gurobipy.gurobi.version()))
    except ImportError:
        out["gurobi"] = None
    try:
        out["highs"] = metadata.version("highspy")
    except metadata.PackageNotFoundError:
        out["highs"] = None
    out["cbc"] = _cbc_version()
    return out


def _cbc_version() -> str | None:
    from solvers.milp.cbc import cbc_executable

    path = cbc_executable()
    if path is None:
        return None
    try:
        text = subprocess.run([path, "-quit"], capture_output=True, text=True, timeout=10).stdout
    except Exception:  # noqa: BLE001 - a missing or broken CBC binary is reported as None
        return None
    for line in text.splitlines():
        if line.strip().lower().startswith("version:"):
            return line.split(":", 1)[1].strip()
    return None


@functools.lru_cache(maxsize=None)
def backend_status(name: str) -> tuple[bool, str]:
    """(usable, reason) of a MILP back-end on this machine; the reason says why not, or notes a
    size-limited licence."""
    from solvers.milp.backends import get_backend

    backend = get_backend(name)
    if not backend.available():
        return False, backend.unavailable_reason()
    if name == "gurobi":
        from solvers.milp.gurobi import RESTRICTED_LINEAR_LIMIT, licence

        if licence().restricted:
            return True, f"size-limited licence ({RESTRICTED_LINEAR_LIMIT} variables/constraints)"
    return True, ""


def machine_info(**extra: Any) -> dict[str, Any]:
    """CPU, cores, memory, OS, Python and package/solver versions, plus `extra` (the run settings)."""
    from ..report.build import machine, versions

    info: dict[str, Any] = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **machine(),  # platform, machine, processor, cpus (the report's record)
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": _physical_cores(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "packages": versions(),
        "solvers": solver_versions(),
        "backends": {b: dict(zip(("usable", "note"), backend_status(b))) for b in MILP_BACKENDS},
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    info.update(extra)
    return info
