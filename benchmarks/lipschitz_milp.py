"""Exact local Lipschitz constants by MILP: runtime, values and the effect of bound tightening.

    python -m benchmarks.lipschitz_milp [--repeats 3] [--sections lipmip,ablation,random,digits]
                                        [--time-limit 300] [--lipmip-formulation]

Sections
- lipmip:   the three nets of LipMIP's suite (c = [1, -1], [0, 1]^n, l_inf input) on Gurobi, HiGHS
            (and CBC on the two small ones), default settings, against LipMIP's values and times
            (Gurobi, 2 threads: 0.15 s, 2.1 s, 211-421 s). `--lipmip-formulation` also runs
            LipMIP's own formulation (backward pass, interval bounds) on our stack, once.
- ablation: bounds interval / symbolic / lp and the LP-tightened Jacobian-product bounds:
            unstable ReLUs, bound time, MILP time (Gurobi and HiGHS).
- random:   seeded random nets (`models.zoo.random_relu_net`) of growing width and depth,
            linf -> l1 over a standard-normal center (seed 0) +/- 0.1.
- digits:   64-input MLPs trained on scikit-learn's digits, linf -> l1 over test images +/- 0.05
            intersected with [0, 1], on HiGHS (and Gurobi for the ratio).

Every configuration runs `--repeats` times (the machine is shared: medians are reported, with
min and max). Writes benchmarks/results/lipschitz_milp.csv, lipschitz_milp_summary.md and
lipschitz_milp.png.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np

import certify
from models.zoo import LIPMIP_SUITE, digits_data, digits_net, lipmip_suite_path, random_relu_net
from solvers.bounds import METHODS, network_bounds

RESULTS = Path(__file__).resolve().parent / "results"
LIPMIP_REFERENCE = {  # value, seconds (min, max) of LipMIP's reference code, Gurobi 2 threads
    "lipmip_2-16-16-2": (0.335242, 0.15, 0.18),
    "lipmip_2-20-20-20-2": (0.0969398, 2.1, 2.3),
    "lipmip_10-10-10-10-10-2": (0.0746016, 211.0, 421.0),
}
RANDOM_SHAPES = [(5, w, w, 2) for w in (10, 20, 40, 60)] + [(5,) + (16,) * d + (2,) for d in (1, 2, 3, 4)] + [(5, 32, 32, 32, 2)]
RANDOM_RADIUS = 0.1


def random_center(n: int) -> np.ndarray:
    """A typical input of the He-scaled random nets (at 0 every pre-activation is a small bias)."""
    return np.random.default_rng(0).standard_normal(n)
DIGITS_HIDDEN = [(32,), (64,), (32, 32)]
FIELDS = ["section", "instance", "shape", "backend", "bounds", "pass_bounds", "formulation", "norm", "status", "lower",
          "upper", "reference", "median_seconds", "min_seconds", "max_seconds", "repeats", "bound_seconds",
          "solver_seconds", "nodes", "unstable", "binaries"]


def measure(section, instance, shape, net, center, radius, repeats, time_limit, norm="linf->l1", **kw) -> dict:
    times, cert = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        cert = certify.local_lipschitz(net, center, radius, time_limit=time_limit, **kw)
        times.append(time.perf_counter() - t0)
    row = {
        "section": section, "instance": instance, "shape": "-".join(map(str, shape)), "backend": cert.backend,
        "bounds": cert.bounds, "pass_bounds": cert.pass_bounds, "formulation": cert.formulation, "norm": norm,
        "status": cert.status, "lower": cert.lower, "upper": cert.upper, "reference": "",
        "median_seconds": statistics.median(times), "min_seconds": min(times), "max_seconds": max(times),
        "repeats": repeats, "bound_seconds": cert.bound_seconds, "solver_seconds": cert.solver_seconds,
        "nodes": cert.nodes, "unstable": cert.unstable, "binaries": cert.binaries,
    }
    print(f"{section:8s} {instance:26s} {row['backend']:7s} {cert.bounds:8s} {cert.pass_bounds:8s} {cert.formulation:8s} "
          f"{cert.status:10s} [{cert.lower:.7g}, {cert.upper:.7g}] median {row['median_seconds']:.2f}s "
          f"(min {min(times):.2f}, max {max(times):.2f}) unstable {cert.unstable}", flush=True)
    return row


def lipmip_section(repeats, time_limit, lipmip_formulation) -> list[dict]:
    rows = []
    for k, name in enumerate(LIPMIP_SUITE):
        net = certify.load_onnx(lipmip_suite_path(name))
        n = net.input_dim
        shape = (n,) + tuple(net.relu_sizes) + (net.output_dim,)
        backends = ["gurobi", "highs"] + (["cbc"] if k < 2 else [])
        for backend in backends:
            row = measure("lipmip", name, shape, net, np.full(n, 0.5), 0.5, repeats, time_limit, norm="margin 0-1",
                          margin=(0, 1), backend=backend)
            row["reference"] = LIPMIP_REFERENCE[name][0]
            rows.append(row)
        if lipmip_formulation:
            row = measure("lipmip", name, shape, net, np.full(n, 0.5), 0.5, 1, time_limit, norm="margin 0-1",
                          margin=(0, 1), backend="gurobi", formulation="backward", bounds="interval",
                          warm_start=False)
            row["section"] = "lipmip-formulation"
            row["reference"] = LIPMIP_REFERENCE[name][0]
            rows.append(row)
    return rows


def ablation_section(repeats, time_limit) -> list[dict]:
    cases = []
    for name in LIPMIP_SUITE[1:]:
        net = certify.load_onnx(lipmip_suite_path(name))
        n = net.input_dim
        cases.append((name, (n,) + tuple(net.relu_sizes) + (2,), net, np.full(n, 0.5), 0.5, dict(margin=(0, 1)), "margin 0-1"))
    net = random_relu_net((5, 32, 32, 32, 2), seed=0)
    cases.append(("random_5-32-32-32-2", (5, 32, 32, 32, 2), net, random_center(5), RANDOM_RADIUS, {}, "linf->l1"))
    data = digits_data()
    net = digits_net((32, 32))
    cases.append(("digits_32-32_x0", (64, 32, 32, 10), net, data.x_test[0], 0.05, dict(domain=(0, 1)), "linf->l1"))
    rows = []
    for name, shape, net, center, radius, kw, norm in cases:
        for bounds, pass_bounds in [("interval", "interval"), ("symbolic", "interval"), ("lp", "interval"), ("lp", "lp")]:
            for backend in ("gurobi", "highs"):
                rows.append(measure("ablation", name, shape, net, center, radius, repeats, time_limit, norm=norm,
                                    bounds=bounds, pass_bounds=pass_bounds, backend=backend, **kw))
    return rows


def random_section(repeats, time_limit) -> list[dict]:
    rows = []
    for shape in RANDOM_SHAPES:
        net = random_relu_net(shape, seed=0)
        for backend in ("gurobi", "highs"):
            rows.append(measure("random", "random_" + "-".join(map(str, shape)), shape, net, random_center(shape[0]),
                                RANDOM_RADIUS, repeats, time_limit, backend=backend))
    return rows


def digits_section(repeats, time_limit, points: int = 3) -> list[dict]:
    data = digits_data()
    rows = []
    for hidden in DIGITS_HIDDEN:
        net = digits_net(hidden)
        shape = (64,) + hidden + (10,)
        for i in range(points):
            for backend in ("highs", "gurobi"):
                rows.append(measure("digits", f"digits_{'-'.join(map(str, hidden))}_x{i}", shape, net, data.x_test[i], 0.05,
                                    repeats, time_limit, domain=(0, 1), backend=backend))
    return rows


def bound_counts() -> list[dict]:
    """Unstable ReLUs and bound seconds per pipeline step for every benchmark net."""
    out = []
    nets = [(name, certify.load_onnx(lipmip_suite_path(name)), None, 0.5) for name in LIPMIP_SUITE]
    nets += [("random_" + "-".join(map(str, s)), random_relu_net(s, seed=0), random_center(s[0]), RANDOM_RADIUS) for s in RANDOM_SHAPES]
    data = digits_data()
    nets += [(f"digits_{'-'.join(map(str, h))}_x0", digits_net(h), data.x_test[0], 0.05) for h in DIGITS_HIDDEN]
    for name, net, center, radius in nets:
        n = net.input_dim
        if center is None:
            center = np.full(n, 0.5)
        lo, hi = center - radius, center + radius
        if name.startswith("digits"):
            lo, hi = np.maximum(lo, 0.0), np.minimum(hi, 1.0)
        row = {"instance": name, "relus": net.relu_count}
        for method in METHODS:
            t0 = time.perf_counter()
            nb = network_bounds(net, lo, hi, method)
            row[f"unstable_{method}"] = nb.num_unstable
            row[f"seconds_{method}"] = time.perf_counter() - t0
        out.append(row)
        print("bounds  ", row, flush=True)
    return out


def summarize(rows: list[dict], counts: list[dict]) -> str:
    lines = ["# Local Lipschitz MILP benchmark (medians)", ""]
    by = {(r["section"], r["instance"], r["backend"], r["bounds"], r["pass_bounds"], r["formulation"]): r for r in rows}
    suite = [r for r in rows if r["section"] == "lipmip"]
    if suite:
        lines += ["## LipMIP suite (c = [1, -1], [0, 1]^n, linf input)", "",
                  "| net | backend | value [lower, upper] | LipMIP value | median s | LipMIP s | speed-up |", "|---|---|---|---|---|---|---|"]
        for r in suite:
            ref, lo_s, hi_s = LIPMIP_REFERENCE[r["instance"]]
            speed = f"{lo_s / r['median_seconds']:.1f}x-{hi_s / r['median_seconds']:.1f}x" if r["backend"] == "gurobi" else ""
            lines.append(f"| {r['instance']} | {r['backend']} | [{r['lower']:.7f}, {r['upper']:.7f}] ({r['status']}) | {ref} | "
                         f"{r['median_seconds']:.2f} | {lo_s}-{hi_s} | {speed} |")
        lines.append("")
        for r in suite:
            if r["backend"] == "highs":
                g = by.get(("lipmip", r["instance"], "gurobi", r["bounds"], r["pass_bounds"], r["formulation"]))
                if g:
                    lines.append(f"- HiGHS / Gurobi on {r['instance']}: {r['median_seconds'] / g['median_seconds']:.1f}x")
        lines.append("")
    lf = [r for r in rows if r["section"] == "lipmip-formulation"]
    if lf:
        lines += ["LipMIP's formulation (backward pass, interval bounds) on our stack, Gurobi, one run:", ""]
        lines += [f"- {r['instance']}: {r['status']} [{r['lower']:.7f}, {r['upper']:.7f}] in {r['median_seconds']:.1f} s, "
                  f"{r['nodes']} nodes" for r in lf]
        lines.append("")
    for section, title in (("ablation", "Bound tightening (unstable ReLUs, bound s, total s)"),
                           ("random", "Random nets, linf -> l1, normal center +/- 0.1"),
                           ("digits", "Digits MLPs, linf -> l1, test image +/- 0.05 in [0, 1]")):
        sel = [r for r in rows if r["section"] == section]
        if not sel:
            continue
        lines += [f"## {title}", "", "| instance | backend | bounds | pass | unstable | binaries | status | upper | bound s | median s | min-max s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sel:
            lines.append(f"| {r['instance']} | {r['backend']} | {r['bounds']} | {r['pass_bounds']} | {r['unstable']} | {r['binaries']} | "
                         f"{r['status']} | {r['upper']:.6g} | {r['bound_seconds']:.2f} | {r['median_seconds']:.2f} | "
                         f"{r['min_seconds']:.2f}-{r['max_seconds']:.2f} |")
        ratios = []
        for r in sel:
            if r["backend"] == "highs":
                g = by.get((section, r["instance"], "gurobi", r["bounds"], r["pass_bounds"], r["formulation"]))
                if g and g["status"] == "optimal" and r["status"] == "optimal":
                    ratios.append(r["median_seconds"] / g["median_seconds"])
        if ratios:
            lines += ["", f"HiGHS / Gurobi time ratio: median {statistics.median(ratios):.1f}x, range {min(ratios):.1f}x-{max(ratios):.1f}x "
                      f"over {len(ratios)} instances solved by both"]
        lines.append("")
    if counts:
        lines += ["## Unstable ReLUs after each bound step", "", "| net | ReLUs | interval | symbolic | lp | lp seconds |", "|---|---|---|---|---|---|"]
        for c in counts:
            lines.append(f"| {c['instance']} | {c['relus']} | {c['unstable_interval']} | {c['unstable_symbolic']} | {c['unstable_lp']} | {c['seconds_lp']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def plot(rows: list[dict], counts: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    main = [r for r in rows if r["section"] in ("lipmip", "random", "digits") and r["backend"] in ("gurobi", "highs")]
    names = list(dict.fromkeys(r["instance"] for r in main))
    xs = np.arange(len(names))
    for k, backend in enumerate(("gurobi", "highs")):
        vals = [next((r["median_seconds"] for r in main if r["instance"] == n and r["backend"] == backend), np.nan) for n in names]
        ax.bar(xs + (k - 0.5) * 0.4, vals, 0.4, label=backend)
    ref = [LIPMIP_REFERENCE[n][1] if n in LIPMIP_REFERENCE else np.nan for n in names]
    ax.scatter(xs, ref, color="k", marker="_", s=200, label="LipMIP (Gurobi)", zorder=3)
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=70, fontsize=7)
    ax.set_ylabel("median seconds")
    ax.set_title("exact local Lipschitz constant")
    ax.legend(fontsize=8)
    ax = axes[1]
    if counts:
        cn = [c["instance"] for c in counts]
        xs = np.arange(len(cn))
        for k, method in enumerate(METHODS):
            ax.bar(xs + (k - 1) * 0.27, [c[f"unstable_{method}"] for c in counts], 0.27, label=method)
        ax.set_xticks(xs)
        ax.set_xticklabels(cn, rotation=70, fontsize=7)
        ax.set_ylabel("unstable ReLUs (binaries)")
        ax.set_title("effect of each bound step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _read_csv(path: Path) -> list[dict]:
    def conv(v: str):
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                return v

    with open(path, newline="") as fh:
        return [{k: conv(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sections", default="lipmip,ablation,random,digits")
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--lipmip-formulation", action="store_true", help="also run LipMIP's formulation on our stack (slow)")
    ap.add_argument("--from-csv", action="store_true", help="only rebuild the summary and plot from the saved CSVs")
    args = ap.parse_args(argv)
    if args.from_csv:
        rows, counts = _read_csv(RESULTS / "lipschitz_milp.csv"), _read_csv(RESULTS / "lipschitz_milp_bounds.csv")
        summary = summarize(rows, counts)
        (RESULTS / "lipschitz_milp_summary.md").write_text(summary + "\n")
        plot(rows, counts, RESULTS / "lipschitz_milp.png")
        print(summary)
        return
    sections = args.sections.split(",")
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    counts = bound_counts()
    if "lipmip" in sections:
        rows += lipmip_section(args.repeats, args.time_limit, args.lipmip_formulation)
    if "ablation" in sections:
        rows += ablation_section(args.repeats, args.time_limit)
    if "random" in sections:
        rows += random_section(args.repeats, args.time_limit)
    if "digits" in sections:
        rows += digits_section(args.repeats, args.time_limit)
    with open(RESULTS / "lipschitz_milp.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    with open(RESULTS / "lipschitz_milp_bounds.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(counts[0]))
        writer.writeheader()
        writer.writerows(counts)
    summary = summarize(rows, counts)
    (RESULTS / "lipschitz_milp_summary.md").write_text(summary + "\n")
    plot(rows, counts, RESULTS / "lipschitz_milp.png")
    print(summary)


if __name__ == "__main__":
    main()
