"""The VNN-COMP 2022 families of `certify bench verify` beyond ACAS Xu: `mnist_fc` (784 inputs,
fully connected) and `oval21` (CIFAR-10 convolutional nets), read from a data folder that is not
shipped with the package.

The folder (`--vnncomp-data DIR`, else `$CERTIFY_VNNCOMP_DATA`) holds one sub-folder per family
with `truth.csv` (onnx, vnnlib, timeout, truth, best_time, best_tool, n_tools_solved), `tools.csv`
(every 2022 tool's answer and time per instance: onnx, vnnlib, tool, result, time, score, correct)
and the `onnx/` and `vnnlib/` files the rows name (paths relative to the family folder).

Each instance runs with the competition's timeout capped by the benchmark's time limit. The report
(`family_report`) counts per family certify's correct and wrong answers against the ground truth
beside the 2022 tools' (within the same cap and at their full timeout) and draws a cactus plot of
solved instances against time, certify's curve among the 2022 tools'.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import BadInput
from ..cases import NO_BACKEND, Case, Outcome

DATA_ENV = "CERTIFY_VNNCOMP_DATA"
FAMILIES = ("mnist_fc", "oval21")
#: instances per network with --quick
QUICK_PER_NET = 2
DECIDED = ("sat", "unsat")


@dataclass(frozen=True)
class Instance:
    family: str
    onnx: Path
    vnnlib: Path
    timeout: float
    truth: str  # sat / unsat / unknown (no 2022 tool decided it)
    best_time: float | None
    best_tool: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.onnx.name, self.vnnlib.name)

    @property
    def name(self) -> str:
        return f"{self.family}_{self.onnx.stem}_{self.vnnlib.stem}"


def data_folder(given: str | os.PathLike | None = None) -> Path | None:
    """The VNN-COMP data folder: `given`, else `$CERTIFY_VNNCOMP_DATA`, else None (not configured).
    A folder that is named but missing is refused (one line, exit 2)."""
    text = str(given) if given is not None else os.environ.get(DATA_ENV, "")
    if not text.strip():
        return None
    path = Path(text).expanduser()
    source = "--vnncomp-data" if given is not None else f"${DATA_ENV}"
    if not path.is_dir():
        raise BadInput(f"the VNN-COMP data folder {path} ({source}) is not a directory; give the folder holding "
                       f"{' and '.join(f + '/' for f in FAMILIES)} (each with truth.csv, tools.csv, onnx/, vnnlib/)")
    return path


def require_folder(given: str | os.PathLike | None, families: list[str]) -> Path:
    """The data folder, which `families` need: refused with what to do when it is not configured."""
    folder = data_folder(given)
    if folder is None:
        raise BadInput(f"the VNN-COMP families {', '.join(families)} need their data folder: give --vnncomp-data DIR "
                       f"or set {DATA_ENV} (a folder holding {'/, '.join(families)}/ with truth.csv, tools.csv, "
                       "onnx/ and vnnlib/)")
    return folder


def _float(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise BadInput(f"{path} not found: a VNN-COMP family folder needs truth.csv and tools.csv (see --vnncomp-data)")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise BadInput(f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(columns)})")
        return list(reader)


TRUTH_COLUMNS = ("onnx", "vnnlib", "timeout", "truth")
TOOL_COLUMNS = ("onnx", "vnnlib", "tool", "result", "time")


def read_family(folder: Path, family: str) -> list[Instance]:
    """The instances of `family` in `folder` (its truth.csv), paths resolved in the family folder."""
    base = folder / family
    if not base.is_dir():
        raise BadInput(f"the VNN-COMP family folder {base} is missing (--vnncomp-data or ${DATA_ENV}: {folder})")
    out = []
    for line, r in enumerate(_rows(base / "truth.csv", TRUTH_COLUMNS), start=2):
        timeout = _float(r["timeout"])
        if timeout is None or timeout <= 0:
            raise BadInput(f"{base / 'truth.csv'}:{line}: timeout must be a positive number, got {r['timeout']!r}")
        truth = r["truth"].strip().lower()
        out.append(Instance(family, base / r["onnx"], base / r["vnnlib"], timeout,
                            truth if truth in DECIDED else "unknown", _float(r.get("best_time", "")),
                            r.get("best_tool", "") or ""))
    return out


def read_tools(folder: Path, family: str) -> list[dict[str, str]]:
    return _rows(folder / family / "tools.csv", TOOL_COLUMNS)


def _run(inst: Instance, time_limit: float) -> Outcome:
    from certify.verify.instances import Instance as VerifyInstance
    from certify.verify.instances import run_instance

    vi = VerifyInstance(str(inst.onnx), str(inst.vnnlib), inst.timeout, inst.onnx, inst.vnnlib, 0)
    r, cert = run_instance(vi, inst.family, timeout=min(inst.timeout, time_limit))
    status = r.result
    if status in DECIDED and inst.truth in DECIDED and status != inst.truth:
        status = "WRONG"
    note = r.message or f"load {r.prepare_time:.2f} s (not timed)"
    return Outcome(status=status, solved=status in DECIDED, nodes=getattr(cert, "nodes", None), note=note,
                   seconds=r.run_time)


def family_cases(folder: Path, families: list[str], quick: bool) -> list[Case]:
    cases = []
    for family in families:
        per_net: dict[str, int] = {}
        for inst in read_family(folder, family):
            if quick:
                per_net[inst.onnx.name] = per_net.get(inst.onnx.name, 0) + 1
                if per_net[inst.onnx.name] > QUICK_PER_NET:
                    continue
            cases.append(Case(inst.name, family, "verify", NO_BACKEND, "bab", functools.partial(_run, inst),
                              reference_value=inst.truth,
                              reference_seconds=None if inst.best_time is None else f"{inst.best_time:g}",
                              reference_source=f"VNN-COMP 2022 ground truth; fastest: {inst.best_tool or 'none'}"))
    return cases


# ----------------------------------------------------------------------------- the report
def _tool_stats(tools: list[dict[str, str]], truth: dict[tuple[str, str], str], cap: float) -> dict[str, dict]:
    """Per 2022 tool: correct answers (all, and within `cap` seconds), wrong answers, solve times."""
    stats: dict[str, dict] = {}
    for r in tools:
        key = (Path(r["onnx"]).name, Path(r["vnnlib"]).name)
        if key not in truth:
            continue
        s = stats.setdefault(r["tool"], {"solved": 0, "solved_within_cap": 0, "wrong": 0, "times": []})
        result, t = r["result"].strip().lower(), _float(r["time"])
        if result not in DECIDED or truth[key] not in DECIDED:
            continue
        if result != truth[key]:
            s["wrong"] += 1
        elif t is not None:
            s["solved"] += 1
            s["times"].append(t)
            s["solved_within_cap"] += t <= cap
    return stats


def family_report(rows: list[dict], out: Path, folder: Path, families: list[str], cap: float,
                  plot: bool = True) -> tuple[dict[str, str], str, dict]:
    """Per family: certify's solved / wrong / unchecked counts against the ground truth, the best
    2022 tool's (most correct answers; also counted within `cap`), a markdown section and the cactus
    plot `vnncomp_cactus.png`. Returns (files, markdown, data)."""
    data: dict[str, dict] = {}
    times: dict[str, dict[str, list[float]]] = {}
    for family in families:
        insts = read_family(folder, family)
        truth = {i.key: i.truth for i in insts}
        names = {i.name: i for i in insts}
        mine = [r for r in rows if r.get("family") == family and r.get("instance") in names]
        correct = [r for r in mine if r["status"] in DECIDED and r["status"] == names[r["instance"]].truth]
        unchecked = [r for r in mine if r["status"] in DECIDED and names[r["instance"]].truth not in DECIDED]
        wrong = [r for r in mine if r["status"] == "WRONG"]
        run_keys = {names[r["instance"]].key for r in mine}
        tools = _tool_stats([t for t in read_tools(folder, family)
                             if (Path(t["onnx"]).name, Path(t["vnnlib"]).name) in run_keys],
                            {k: v for k, v in truth.items() if k in run_keys}, cap)
        best = max(tools, key=lambda t: (tools[t]["solved"], -tools[t]["wrong"]), default=None)
        data[family] = {
            "instances": len(mine), "decidable": sum(names[r["instance"]].truth in DECIDED for r in mine),
            "solved": len(correct), "wrong": len(wrong), "unchecked": len(unchecked),
            "sat": sum(r["status"] == "sat" for r in correct), "unsat": sum(r["status"] == "unsat" for r in correct),
            "errors": sum(r["status"] in ("error", "skipped") for r in mine),
            "median_seconds": _median([float(r["seconds"]) for r in correct]),
            "time_cap": cap,
            "best_tool": best,
            "best_tool_solved": None if best is None else tools[best]["solved"],
            "best_tool_solved_within_cap": None if best is None else tools[best]["solved_within_cap"],
            "best_tool_wrong": None if best is None else tools[best]["wrong"],
            "tools": {t: {k: v for k, v in s.items() if k != "times"} for t, s in sorted(tools.items())},
        }
        times[family] = {"certify": sorted(float(r["seconds"]) for r in correct),
                         **{t: sorted(s["times"]) for t, s in tools.items()}}
    files: dict[str, str] = {}
    if plot and data:
        files["vnncomp_cactus"] = str(_cactus(times, data, out / "vnncomp_cactus.png", cap))
    return files, _markdown(data, cap), data


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])


def _markdown(data: dict[str, dict], cap: float) -> str:
    lines = [f"\n## VNN-COMP 2022 families (each instance's timeout capped at {cap:g} s)\n",
             "| family | instances | certify solved (sat/unsat) | wrong | unchecked | errors | median s | "
             "best 2022 tool | its solved (within the cap) | its wrong |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for family, d in data.items():
        med = "-" if d["median_seconds"] is None else f"{d['median_seconds']:.2f}"
        tool = d["best_tool"] or "-"
        ts = "-" if d["best_tool"] is None else f"{d['best_tool_solved']} ({d['best_tool_solved_within_cap']})"
        tw = "-" if d["best_tool"] is None else str(d["best_tool_wrong"])
        lines.append(f"| {family} | {d['instances']} | {d['solved']} / {d['decidable']} ({d['sat']}/{d['unsat']}) | "
                     f"{d['wrong']} | {d['unchecked']} | {d['errors']} | {med} | {tool} | {ts} | {tw} |")
    lines.append("\nsolved: answers matching the ground truth; wrong: answers contradicting it; unchecked: answers "
                 "on instances no 2022 tool decided. The 2022 tools ran with the full competition timeouts on "
                 "other machines (their times after overhead).\n")
    return "\n".join(lines)


def _cactus(times: dict[str, dict[str, list[float]]], data: dict[str, dict], path: Path, cap: float) -> Path:
    from ..plots import _plt, _save

    plt = _plt()
    fig, axes = plt.subplots(1, len(times), figsize=(6.5 * len(times), 4.5), squeeze=False)
    for ax, (family, series) in zip(axes[0], times.items()):
        for k, (name, ts) in enumerate(sorted(series.items(), key=lambda kv: (kv[0] != "certify", kv[0]))):
            style = dict(color="black", linewidth=2.5, zorder=3) if name == "certify" else dict(color=f"C{k}", alpha=0.7)
            ax.plot(range(1, len(ts) + 1), [max(t, 1e-2) for t in ts], marker=".", markersize=4,
                    label=f"{name} ({len(ts)})", **style)
        ax.axhline(cap, color="grey", linestyle=":", linewidth=1, label=f"certify's cap ({cap:g} s)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set(yscale="log", xlabel="instances solved correctly", ylabel="seconds per instance",
               title=f"{family}: {data[family]['instances']} instances (certify capped at {cap:g} s)")
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


__all__ = ["DATA_ENV", "FAMILIES", "Instance", "data_folder", "family_cases", "family_report", "read_family",
           "read_tools", "require_folder"]
