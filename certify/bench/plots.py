"""The benchmark plots (PNG, matplotlib's Agg backend): runtime vs network size per back-end, a
cactus plot per back-end and method, bound tightness per method, and the bound-tightening
ablation. Each function returns the path it wrote, or None when the rows hold nothing to plot."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .tables import _float, aggregate


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _series(r: dict) -> str:
    return r["backend"] if r["method"] == "milp" else (r["method"] if r["backend"] == "none" else f"{r['method']} ({r['backend']})")


def runtime_vs_size(rows: list[dict], path: Path) -> Path | None:
    """Median seconds against ReLU count, one series per back-end (MILP) or method; hollow markers
    for configurations that did not close within the time limit."""
    agg = [r for r in aggregate(rows) if not r["variant"] and r["median_seconds"] is not None and _float(r["relus"])]
    if not agg:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, name in enumerate(dict.fromkeys(_series(r) for r in agg)):
        sel = sorted((r for r in agg if _series(r) == name), key=lambda r: float(r["relus"]))
        color = f"C{k}"
        xs = [float(r["relus"]) for r in sel]
        ys = [r["median_seconds"] for r in sel]
        sizes = sorted(set(xs))  # the line joins the median over the instances of each size
        ax.plot(sizes, [float(np.median([y for x, y in zip(xs, ys) if x == v])) for v in sizes], "-", color=color,
                alpha=0.4)
        solved = [r["solved"] == r["runs"] for r in sel]
        ax.scatter([x for x, s in zip(xs, solved) if s], [y for y, s in zip(ys, solved) if s], color=color, label=name)
        ax.scatter([x for x, s in zip(xs, solved) if not s], [y for y, s in zip(ys, solved) if not s],
                   facecolors="none", edgecolors=color)
    ax.set(xscale="log", yscale="log", xlabel="ReLUs in the network", ylabel="median seconds",
           title="runtime vs network size (hollow: not closed)")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def cactus(rows: list[dict], path: Path) -> Path | None:
    """Instances solved within t seconds, against t, per back-end and method (VNN-COMP style)."""
    agg = [r for r in aggregate(rows) if not r["variant"] and r["median_seconds"] is not None]
    if not agg:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in dict.fromkeys(_series(r) for r in agg):
        times = sorted(r["median_seconds"] for r in agg if _series(r) == name and r["solved"] == r["runs"])
        if times:
            ax.step([0.0] + times, range(len(times) + 1), where="post", label=f"{name} ({len(times)})")
    ax.set(xscale="symlog", xlabel="seconds", ylabel="instances solved", title="cactus plot (higher and further left is better)")
    ax.set_xlim(left=0)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def tightness(rows: list[dict], path: Path) -> Path | None:
    """Per instance, each method's certified bound divided by the best certified lower bound any
    run found for that instance (1 = exact)."""
    agg = [r for r in aggregate(rows) if not r["variant"] and r["bound"] is not None]
    best: dict[tuple, float] = {}
    for r in aggregate(rows):
        lo = _float(r["lower"])
        if lo is not None and lo > 0:
            key = (r["suite"], r["instance"])
            best[key] = max(best.get(key, 0.0), lo)
    pts = [(r, r["bound"] / best[(r["suite"], r["instance"])]) for r in agg if (r["suite"], r["instance"]) in best
           and math.isfinite(r["bound"])]
    if not pts:
        return None
    plt = _plt()
    instances = list(dict.fromkeys(r["instance"] for r, _ in pts))
    methods = list(dict.fromkeys(_series(r) for r, _ in pts))
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(instances) + 3), 4.5))
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        vals = {r["instance"]: v for r, v in pts if _series(r) == m}
        ax.bar([i + j * width for i in range(len(instances))], [vals.get(n, math.nan) for n in instances], width, label=m)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(instances))], instances, rotation=60, fontsize=7, ha="right")
    ax.set(yscale="log", ylabel="certified bound / best lower bound", title="bound tightness per method (1 = exact)")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def ablation(rows: list[dict], path: Path) -> Path | None:
    """Unstable ReLUs, binaries and seconds per pre-activation bound method (rows with variant
    `bounds=...`)."""
    agg = [r for r in aggregate(rows) if str(r["variant"]).startswith("bounds=")]
    if not agg:
        return None
    plt = _plt()
    labels = list(dict.fromkeys(f"{r['instance']}\n{r['backend']}" for r in agg))
    variants = list(dict.fromkeys(r["variant"] for r in agg))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    width = 0.8 / len(variants)
    for ax, field, title in zip(axes, ("unstable", "binaries", "median_seconds"),
                                ("unstable ReLUs", "binaries in the MILP", "median seconds")):
        for j, v in enumerate(variants):
            vals = {f"{r['instance']}\n{r['backend']}": _float(r[field]) for r in agg if r["variant"] == v}
            ax.bar([i + j * width for i in range(len(labels))], [vals.get(n) or math.nan for n in labels], width,
                   label=v.split("=", 1)[1])
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, fontsize=7)
        ax.set_title(title)
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=8, title="bounds")
    fig.suptitle("bound-tightening ablation (MILP)")
    return _save(plt, fig, path)


PLOTS = {"runtime_vs_size": runtime_vs_size, "cactus": cactus, "tightness": tightness, "ablation": ablation}
#: plots written by suites' own reports (`Suite.report`), deleted with a benchmark's other files
SUITE_PLOTS = ("vnncomp_cactus.png",)


def write_plots(rows: list[dict], out_dir: Path) -> list[Path]:
    return [p for name, fn in PLOTS.items() if (p := fn(rows, out_dir / f"{name}.png")) is not None]
