"""Tidy rows -> `runs.csv`, the per-configuration medians, and the markdown summary."""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from .runner import COLUMNS, ERROR, SKIPPED

GROUP = ("suite", "instance", "family", "question", "backend", "method", "variant")


def write_csv(rows: Iterable[dict], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: _cell(r.get(k)) for k in COLUMNS})


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("inf" if v > 0 else "-inf")
    return v


def _float(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def aggregate(rows: list[dict]) -> list[dict]:
    """One record per configuration (GROUP): median seconds with min and max over the repeats that
    ran, the statuses seen, solved repeats, and the median bound."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[tuple(r.get(k) for k in GROUP)].append(r)
    out = []
    for key, rs in groups.items():
        ran = [r for r in rs if r.get("status") not in (SKIPPED,)]
        secs = [s for s in (_float(r.get("seconds")) for r in ran) if s is not None]
        bounds = [b for b in (_float(r.get("bound")) for r in ran) if b is not None]
        lowers = [b for b in (_float(r.get("lower")) for r in ran) if b is not None]
        first = rs[0]
        rec = dict(zip(GROUP, key))
        rec.update({
            "runs": len(rs), "solved": sum(1 for r in ran if str(r.get("solved")) in ("True", "true", "1")),
            "status": "/".join(sorted({str(r.get("status")) for r in rs})),
            "median_seconds": statistics.median(secs) if secs else None,
            "min_seconds": min(secs) if secs else None, "max_seconds": max(secs) if secs else None,
            "bound": statistics.median(bounds) if bounds else None, "lower": max(lowers) if lowers else None,
            "relus": first.get("relus"), "unstable": first.get("unstable"), "binaries": first.get("binaries"),
            "reference_value": first.get("reference_value"), "reference_seconds": first.get("reference_seconds"),
            "note": next((r.get("note") for r in rs if r.get("note")), ""),
        })
        out.append(rec)
    return out


def _fmt(v: Any, digits: int = 6) -> str:
    f = _float(v)
    if f is None:
        return "" if v in (None, "") else str(v)
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f"{f:.{digits}g}"


def _secs(rec: dict) -> str:
    if rec["median_seconds"] is None:
        return ""
    s = f"{rec['median_seconds']:.3g}"
    if rec["runs"] > 1 and rec["min_seconds"] is not None:
        s += f" ({rec['min_seconds']:.3g}-{rec['max_seconds']:.3g})"
    return s


def summary_markdown(rows: list[dict], machine: dict) -> str:
    """The summary: machine line, per-suite tables of medians, solved counts per back-end/method,
    and LipMIP's times beside ours where a reference exists."""
    agg = aggregate(rows)
    lines = ["# certify bench", "",
             f"{machine.get('cpu_model')}, {machine.get('logical_cores')} logical cores, {machine.get('memory_gb')} GB; "
             f"Python {machine.get('python')}; solvers: "
             + ", ".join(f"{k} {v}" for k, v in (machine.get("solvers") or {}).items() if v)
             + f"; time limit {_fmt(machine.get('time_limit'))} s per run, {machine.get('repeat')} repeat(s), "
             f"seed {machine.get('seed')}. Times are medians (min-max over repeats).", ""]
    for suite in dict.fromkeys(r["suite"] for r in agg):
        sel = [r for r in agg if r["suite"] == suite]
        lines += [f"## {suite}", "",
                  "| instance | family | back-end | method | variant | ReLUs | unstable | status | solved | bound | "
                  "lower | seconds | reference | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sel:
            ref = ""
            if r["reference_value"] not in (None, "") or r["reference_seconds"] not in (None, ""):
                ref = f"{_fmt(r['reference_value'])} ({r['reference_seconds']} s)" if r["reference_seconds"] else _fmt(r["reference_value"])
            note = str(r["note"] or "")[:90].replace("|", "/")
            lines.append(f"| {r['instance']} | {r['family']} | {r['backend']} | {r['method']} | {r['variant']} | "
                         f"{_fmt(r['relus'])} | {_fmt(r['unstable'])} | {r['status']} | {r['solved']}/{r['runs']} | "
                         f"{_fmt(r['bound'])} | {_fmt(r['lower'])} | {_secs(r)} | {ref} | {note} |")
        lines += ["", "| back-end | method | configurations | solved | median s (solved) |", "|---|---|---|---|---|"]
        for (b, m) in dict.fromkeys((r["backend"], r["method"]) for r in sel):
            part = [r for r in sel if r["backend"] == b and r["method"] == m and not r["variant"]]
            if not part:
                continue
            ran = [r for r in part if SKIPPED not in r["status"].split("/")]
            solved = [r for r in ran if r["solved"] == r["runs"]]
            med = statistics.median([r["median_seconds"] for r in solved]) if solved else None
            lines.append(f"| {b} | {m} | {len(part)} ({len(part) - len(ran)} skipped) | {len(solved)}/{len(ran)} | "
                         f"{_fmt(med, 3)} |")
        speed = _reference_speedups(sel)
        if speed:
            lines += ["", *speed]
        lines.append("")
    errors = [r for r in rows if r.get("status") == ERROR]
    if errors:
        lines += ["## Errors", ""] + [f"- {r['suite']} {r['instance']} {r['backend']} {r['method']}: {r['note']}" for r in errors]
    return "\n".join(lines) + "\n"


def _reference_speedups(sel: list[dict]) -> list[str]:
    """'LipMIP s / our s' per back-end where a reference time range exists."""
    out = []
    for r in sel:
        ref = str(r.get("reference_seconds") or "")
        if not ref or r["median_seconds"] is None or r["variant"] or not r["solved"]:
            continue
        try:
            lo, hi = (float(x) for x in (ref.split("-") + ref.split("-"))[:2])
        except ValueError:
            continue
        out.append(f"- {r['instance']} on {r['backend']} ({r['method']}): {r['median_seconds']:.3g} s against "
                   f"{ref} s: reference time / ours = {lo / r['median_seconds']:.2g}-{hi / r['median_seconds']:.2g}")
    return out
