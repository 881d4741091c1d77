"""The per-point tasks of a sensitivity report, run by `certify.batch.run_batch` (top-level functions,
so local processes and Dask workers can import them). Both are deterministic given their inputs,
except where a time limit cuts a computation short (the row then says so in its status)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from models.ir import Network

from ..certificate import to_jsonable
from ..ptr.grid import TestGrid
from ..ptr.mechanism import OUTPUT_NORM
from ..ptr.search import StabilitySearch, outward_box


def certify_point(index: int, point: Any, *, net: Network, radius: float, input_norm: str, domain: Any,
                  time_limit: float | None, backend: str, threads: int) -> dict:
    """The certified local constant over box(point, R) (the PTR search's first box), as a row."""
    from ..lipschitz import local_lipschitz

    from ..ptr.bounds import jacobian_upper

    x = np.asarray(point, dtype=np.float64)
    box = outward_box(x, radius, domain)
    cert = local_lipschitz(net, box, input_norm=input_norm, output_norm=OUTPUT_NORM,
                           time_limit=time_limit, backend=backend, threads=threads)
    # a certificate cut short by its time limit can end above the interval-Jacobian bound; both are
    # proven upper bounds, so the smaller one is kept (tighter proposals, never unsound)
    upper, proven_by = cert.upper, _proof_name(cert)
    if not cert.exact:
        interval = jacobian_upper(net, np.array(box.lo), np.array(box.hi), input_norm, OUTPUT_NORM)
        if interval < upper:
            upper, proven_by = interval, "interval Jacobian bound"
    return to_jsonable({"lower": cert.lower, "upper": upper, "status": cert.status, "exact": cert.exact,
                        "seconds": cert.seconds, "witness": cert.witness, "backend": cert.backend,
                        "unstable": cert.unstable, "proven_by": proven_by})


def _proof_name(cert: Any) -> str:
    """What proved a local certificate's upper bound, in words for the report."""
    if cert.method == "milp":
        return f"MILP bound ({cert.backend}) re-proven outside the solver"
    if cert.method == "bab":
        return "Lipschitz branch-and-bound"
    if cert.method == "regions":
        return "activation-region enumeration (each region's norm certified)"
    return f"{cert.method} bound"


def search_point(index: int, item: tuple[Any, dict], *, net: Network, grid: TestGrid, input_norm: str, domain: Any,
                 proposals: list[float], step_time_limit: float, time_limit: float | None, backend: str,
                 threads: int, global_bound: float | None) -> dict:
    """The PTR search at one point for every proposal, starting from the point's certificate."""
    point, cert = item
    x = np.asarray(point, dtype=np.float64)
    search = StabilitySearch(net, x, grid, input_norm=input_norm, output_norm=OUTPUT_NORM, domain=domain,
                             global_bound=global_bound, step_time_limit=step_time_limit, time_limit=time_limit,
                             backend=backend, threads=threads)
    if cert.get("upper") is not None and np.isfinite(float(cert["upper"])):
        search.add_upper(0, float(cert["upper"]))
    if cert.get("witness") is not None and cert.get("lower"):
        search.add_witness(np.asarray(cert["witness"], dtype=np.float64), float(cert["lower"]))
    rows = []
    for value in proposals:
        found = search.search(value)
        # an undecided search is refused before its test (certify.ptr.mechanism): it never releases
        rows.append({"proposal": value, "index": found.index, "phi": grid.phi(found.index),
                     "release_probability": grid.release_probability(found.index) if found.decided else 0.0,
                     "decided": found.decided,
                     "steps": len(found.steps), "seconds": sum(s.seconds for s in found.steps),
                     "methods": dict(Counter(s.method for s in found.steps))})
    return {"searches": rows}


def ptr_point(index: int, point: Any, *, net: Network, radius: float, epsilon: float, delta: float, proposal: float,
              input_norm: str = "linf", domain: Any = None, seed: int | None = None, step_time_limit: float = 10.0,
              time_limit: float | None = None, backend: str = "auto", threads: int = 1) -> dict:
    """One PTR query as a row (many queries with `run_batch`). With `seed`, query i draws its noise
    from numpy seeded with seed + i (reproducible whichever executor runs it; NOT secure);
    without, from the secure sampler."""
    from ..ptr.mechanism import ptr

    r = ptr(net, point, radius, epsilon=epsilon, delta=delta, proposal=proposal, input_norm=input_norm,
            domain=domain, sampler=None if seed is None else seed + index, step_time_limit=step_time_limit,
            time_limit=time_limit, backend=backend, threads=threads)
    return to_jsonable({"released": r.released, "output": r.output, "phi": r.phi, "r_star": r.r_star,
                        "status": r.status, "decided": r.decided, "steps": len(r.steps), "seconds": r.seconds,
                        "guarantee": None if r.guarantee is None else r.guarantee.to_dict(), "refusal": r.refusal,
                        "methods": dict(Counter(s.method for s in r.steps))})


__all__ = ["certify_point", "ptr_point", "search_point"]
