"""`sensitivity_report`: certified local constants on data, D_p proposals, release rates, report files.

Two batch passes (`certify.batch.run_batch`: in process, local processes or a Dask cluster,
resumable through JSON lines in the output directory):

1. `certificates.jsonl`: the certified local constant over box(x, R) of every point
   (`certify.local_lipschitz`, per-point time limit);
2. `searches.jsonl`: the PTR search at every point for every proposal and for a grid of values
   between them (the "release rate vs proposal" curve); the expected release rate of a value is
   the mean over points of Pr[test passes | k(x)].

`run.json` holds the run identity (`certify.runs`: settings, model, one hash per point): rerunning
the same run resumes, another run in the same directory is refused rather than mixed (unless
`overwrite`: its files are deleted). The report (`report.json`, schema `certify.report/1` in
`certify/schema/report.schema.json`; `report.html`) is written at the end.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import platform
import time
from typing import Any

import numpy as np

from models.ir import Network

from ..batch import read_done, run_batch
from ..certificate import to_jsonable
from ..errors import BadInput
from ..privacy.params import check_metric
from ..ptr.grid import TestGrid
from ..ptr.mechanism import OUTPUT_NORM
from ..ptr.proposal import TIE_MARGIN, noise_scale, parse_rules, propose, release_rate
from ..ptr.defaults import (DEFAULT_CURVE, DEFAULT_DELTA, DEFAULT_EPSILON, DEFAULT_POINT_TIME_LIMIT,
                            DEFAULT_STEP_TIME_LIMIT, MAX_CURVE)
from ..runs import RunIdentity, claim_directory, item_sha256
from .tasks import certify_point, search_point

SCHEMA = "certify.report/1"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "schema", "report.schema.json")
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
#: fields whose values depend on the run (time, machine), not on the inputs
VOLATILE = ("created", "seconds", "timing", "machine", "wall_seconds")
JOURNALS = ("certificates.jsonl", "searches.jsonl")  # the resumable passes, in run order
PRODUCTS = ("report.json", "report.html")


def versions() -> dict[str, str | None]:
    """Versions of certify, Python and the numerical/solver packages that produced the numbers."""
    from importlib import metadata

    from .. import __version__

    out: dict[str, str | None] = {"certify": __version__, "python": platform.python_version()}
    for dist in ("numpy", "scipy", "highspy", "gurobipy", "pulp", "cvxpy", "matplotlib", "distributed"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor() or None,
            "cpus": os.cpu_count(), "python_implementation": platform.python_implementation()}


def statistics(values: np.ndarray) -> dict[str, Any]:
    v = np.asarray(values, dtype=np.float64)
    return {"count": int(v.size), "mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if v.size > 1 else 0.0,
            "min": float(np.min(v)), "max": float(np.max(v)), "median": float(np.median(v)),
            "quantiles": {f"{q:g}": float(np.quantile(v, q, method="higher")) for q in QUANTILES}}


def curve_values(uppers: np.ndarray, proposals: list[float], global_bound: float, count: int) -> list[float]:
    """Proposal values for the release-rate curve: the proposals and `count` geometric steps from the
    smallest certified constant to the global bound (or twice the largest constant when smaller)."""
    lo = max(float(np.min(uppers)) * (1 + TIE_MARGIN), 1e-300)  # not exactly on a certified constant
    hi = max(float(global_bound) if math.isfinite(global_bound) else 0.0, 2 * float(np.max(uppers)), lo * 1.01)
    grid = list(np.geomspace(lo, hi, count)) if count > 1 else ([lo] if count == 1 else [])
    return sorted(set(float(v) for v in grid) | set(proposals))


def sensitivity_report(
    net: Network,
    data: Any,
    radius: float,
    *,
    epsilon: float = DEFAULT_EPSILON,
    delta: float = DEFAULT_DELTA,
    input_norm: str = "linf",
    domain: Any = None,
    rules: Any = None,
    tolerance: float | None = None,
    max_radius: float | None = None,
    out: str | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    time_limit: float | None = DEFAULT_POINT_TIME_LIMIT,
    step_time_limit: float = DEFAULT_STEP_TIME_LIMIT,
    search_time_limit: float | None = None,
    curve: int = DEFAULT_CURVE,
    backend: str = "auto",
    threads: int = 1,
    global_bounds: tuple[str, ...] = ("naive",),
    model_source: dict | None = None,
    data_source: str | None = None,
    progress: bool | None = None,
    html: bool = True,
    overwrite: bool = False,
) -> dict:
    """Build the PTR-ready sensitivity report of `net` on `data` (an (n, d) array) at radius R.

    Returns the report dict (schema `certify.report/1`); with `out`, writes `report.json` and
    `report.html` there (and the resumable batch files). `out` holding another run is refused
    unless `overwrite`. See the module doc and docs/ptr.md.
    """
    if not isinstance(net, Network):
        raise BadInput("net must be a certify Network (load it with certify.load_onnx or certify.from_torch)")
    p = check_metric(input_norm, "input norm")
    grid = TestGrid.make(radius, epsilon, delta, tolerance=tolerance, max_radius=max_radius)
    rules = parse_rules(rules)
    if isinstance(curve, bool) or not isinstance(curve, int) or not 0 <= curve <= MAX_CURVE:
        raise BadInput(f"curve must be a number of points from 0 to {MAX_CURVE} (each one is a PTR search at every "
                       f"point), got {curve!r}")
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != net.input_dim:
        raise BadInput(f"data must be an (n, {net.input_dim}) array of points with n >= 1, got shape {list(x.shape)}")
    if not np.all(np.isfinite(x)):
        raise BadInput("data contains NaN or inf")
    if domain is not None:
        from ..ptr.mechanism import check_point

        for row in x:
            check_point(net, row, domain)
    model_hash = net.fingerprint()
    settings = {"radius": grid.radius, "input_norm": p, "output_norm": OUTPUT_NORM, "domain": domain,
                "epsilon": grid.epsilon, "delta": grid.delta, "rules": list(rules), "grid": grid.to_dict(),
                "time_limit": time_limit, "step_time_limit": step_time_limit, "search_time_limit": search_time_limit,
                "curve": curve, "backend": backend, "global_methods": list(global_bounds)}
    files: dict[str, str | None] = {"certificates": None, "searches": None}
    keys = None
    if out is not None:
        keys = [item_sha256(row) for row in x]
        identity = RunIdentity.of("report", settings, model_hash, keys, "data set")
        claim_directory(out, identity, journals=JOURNALS, products=PRODUCTS, overwrite=overwrite, check=read_done)
        files = {"certificates": os.path.join(out, JOURNALS[0]), "searches": os.path.join(out, JOURNALS[1])}
    t0 = time.perf_counter()
    executor = {"workers": workers, "scheduler": scheduler}
    certs = run_batch(certify_point, list(x), out=files["certificates"], workers=workers, scheduler=scheduler,
                      progress=progress, description="certify", keys=keys,
                      context=dict(net=net, radius=grid.radius, input_norm=p, domain=domain, time_limit=time_limit,
                                   backend=backend, threads=threads))
    t1 = time.perf_counter()
    uppers = np.array([c["upper"] for c in certs], dtype=np.float64)
    globals_ = _global_bounds(net, p, global_bounds)
    best_global = min((g["upper"] for g in globals_), default=math.inf)
    proposals = propose(uppers, grid.radius, grid.epsilon, rules)
    values = curve_values(uppers, [pr.value for pr in proposals], best_global, curve)
    searches = run_batch(search_point, [(x[i], certs[i]) for i in range(len(x))], out=files["searches"],
                         workers=workers, scheduler=scheduler, progress=progress, description="ptr search", keys=keys,
                         context=dict(net=net, grid=grid, input_norm=p, domain=domain, proposals=values,
                                      step_time_limit=step_time_limit, time_limit=search_time_limit, backend=backend,
                                      threads=threads, global_bound=best_global if math.isfinite(best_global) else None))
    t2 = time.perf_counter()
    report = _assemble(net, x, grid, settings, certs, searches, proposals, values, globals_, model_hash,
                       model_source, data_source, executor, (t1 - t0, t2 - t1))
    if out is not None:
        with open(os.path.join(out, "report.json"), "w") as fh:
            json.dump(report, fh, indent=1)
        if html:
            from .html import render_html

            with open(os.path.join(out, "report.html"), "w") as fh:
                fh.write(render_html(report))
    return report


def _global_bounds(net: Network, p: str, methods: tuple[str, ...]) -> list[dict]:
    from ..lipschitz.global_bounds import global_lipschitz

    out = []
    for method in methods:
        t = time.perf_counter()
        res = global_lipschitz(net, method, input_norm=p, output_norm=OUTPUT_NORM)
        out.append({"method": method, "upper": float(res.upper), "seconds": time.perf_counter() - t})
    return out


def _assemble(net, x, grid, settings, certs, searches, proposals, values, globals_, model_hash, model_source,
              data_source, executor, seconds) -> dict:
    uppers = np.array([c["upper"] for c in certs], dtype=np.float64)
    lowers = np.array([c["lower"] for c in certs], dtype=np.float64)
    by_value = {v: [row["searches"][j] for row in searches] for j, v in enumerate(values)}

    def rate(v: float) -> float:
        return release_rate([s["release_probability"] for s in by_value[v]])

    def decided(v: float) -> float:
        return float(np.mean([s["decided"] for s in by_value[v]]))

    props = []
    for pr in proposals:
        d = pr.to_dict()
        d.update(release_rate=rate(pr.value), decided_fraction=decided(pr.value))
        props.append(d)
    points = []
    for i, (c, s) in enumerate(zip(certs, searches)):
        ptr_rows = {pr.rule: _search_summary(next(r for r in s["searches"] if r["proposal"] == pr.value))
                    for pr in proposals}
        points.append({"index": i, "lower": c["lower"], "upper": c["upper"], "status": c["status"],
                       "exact": c["exact"], "seconds": c["seconds"], "witness": c["witness"], "backend": c["backend"],
                       "proven_by": c.get("proven_by"),
                       "ptr": ptr_rows})
    statuses: dict[str, int] = {}
    for c in certs:
        statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    stats = {"upper": statistics(uppers), "lower": statistics(lowers), "statuses": statuses,
             "exact_fraction": float(np.mean([c["exact"] for c in certs]))}
    model = {"name": net.name, "sha256": model_hash, "inputs": net.input_dim, "outputs": net.output_dim,
             "relus": net.relu_count, "layers": net.describe()["layers"], **(model_source or {})}
    report = {
        "schema": SCHEMA,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "tool": versions(),
        "machine": machine(),
        "model": model,
        "data": {"source": data_source, "points": int(x.shape[0]), "width": int(x.shape[1]),
                 "sha256": hashlib.sha256(x.tobytes()).hexdigest()},
        "settings": to_jsonable(settings),
        "norms": {"input": settings["input_norm"], "output": OUTPUT_NORM},
        "radius": grid.radius,
        "points": points,
        "statistics": stats,
        "global_bounds": globals_,
        "proposals": props,
        "curve": [{"proposal": v, "release_rate": rate(v), "decided_fraction": decided(v),
                   "noise_scale": noise_scale(v, grid.radius, grid.epsilon)} for v in values],
        "noise_vs_epsilon": [{"epsilon": e, "scales": {pr.rule: noise_scale(pr.value, grid.radius, e)
                                                       for pr in proposals}} for e in EPSILONS],
        "timing": {"certify_seconds": seconds[0], "search_seconds": seconds[1], **executor},
        "notes": _notes(certs, props),
    }
    return to_jsonable(report)


def _search_summary(row: dict) -> dict:
    return {k: row[k] for k in ("index", "phi", "release_probability", "decided", "steps", "seconds")}


def _notes(certs: list[dict], props: list[dict]) -> list[str]:
    notes = ["D_p must be proposed from data the query's owner does not control (e.g. the training set); the "
             "release rates are expectations of certify's PTR test on these points, computed exactly from the "
             "search's grid index at each point"]
    open_ = sum(1 for c in certs if not c["exact"])
    if open_:
        notes.append(f"{open_} of {len(certs)} certificates did not close (status other than optimal): their "
                     "upper bounds are still proven, so the proposals built on them are larger, never unsound")
    undecided = [p["rule"] for p in props if p["decided_fraction"] < 1]
    if undecided:
        notes.append("some PTR searches had undecided steps for: " + ", ".join(undecided) + "; certify refuses such "
                     "queries before drawing any noise (no release, no guarantee), so their release probability is "
                     "counted as 0; raise the step time limit")
    return notes


def comparable(report: dict) -> dict:
    """The report without its run-dependent fields (`VOLATILE`): what two runs on the same inputs share."""
    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k not in VOLATILE}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj
    return strip(report)


def load_report_schema() -> dict:
    with open(SCHEMA_PATH) as fh:
        return json.load(fh)


__all__ = ["SCHEMA", "VOLATILE", "comparable", "load_report_schema", "sensitivity_report"]
