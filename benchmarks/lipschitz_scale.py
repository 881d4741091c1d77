"""Local Lipschitz at scale: the Jacobian branch-and-bound against the MILP alone, same run.

    python -m benchmarks.lipschitz_scale acas  [--limit 60] [--milp-limit 60] [--nets 1_1,1_2,...]
    python -m benchmarks.lipschitz_scale close [--limit 120]
    python -m benchmarks.lipschitz_scale scale [--limit 60]

- `acas`: the 45 ACAS Xu nets, linf -> l1, radius 0.05 around a seeded point of the normalised
  input box where the Jacobian is not zero; `method="bab"` for 10 s and for --limit seconds, and
  `method="milp"` (the MILP alone) for --milp-limit seconds (`--long N,..`: only those nets get the
  long runs, the others the MILP for 10 s). Writes results/lipschitz_scale_acas.csv and _summary.md.
  `--out NAME` names the files; runs split over processes (`--nets`) are joined by
  `merge --parts A,B --out NAME`.
- `close`: time to close (1e-6 relative) by BaB and by the MILP on the LipMIP suite and digits nets.
- `scale`: 64-input nets of width 64..512 and depth 2..6 trained on load_digits, radius 0.02:
  upper/lower ratio against time for BaB (plotted: lipschitz_scale_curve.png).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"

import certify  # noqa: E402
from models.zoo import LIPMIP_SUITE, acasxu_path, lipmip_suite_path  # noqa: E402
from models.zoo.digits import digits_data, digits_net  # noqa: E402

# ACAS Xu inputs are normalised; VNN-COMP's properties live in about [-0.33, 0.68] x [-0.5, 0.5]^4
ACAS_BOX = (np.array([-0.3, -0.45, -0.45, -0.45, -0.45]), np.array([0.6, 0.45, 0.45, 0.45, 0.45]))


def acas_point(net, seed: int) -> np.ndarray:
    """A seeded point of the box where the net is not locally flat (on flat points every lower
    bound is 0 and the ratio says nothing; the saturated regions of ACAS Xu are common)."""
    rng = np.random.default_rng(seed)
    while True:
        x = rng.uniform(*ACAS_BOX)
        if np.any(net.jacobian(x) != 0):
            return x


def traced(net, x, radius, method, limit, **kw):
    """Run one question; returns the certificate and its (seconds, lower, upper) trace."""
    trace: list[tuple[float, float, float]] = []

    def on(ev):
        if ev.upper is not None and np.isfinite(ev.upper):
            trace.append((ev.elapsed, ev.lower, ev.upper))

    t = time.perf_counter()
    cert = certify.local_lipschitz(net, x, radius, method=method, time_limit=limit, progress=on, **kw)
    trace.append((time.perf_counter() - t, cert.lower, cert.upper))
    return cert, trace


def at(trace, seconds: float) -> tuple[float, float]:
    """The interval reached by `seconds` (the last event at or before it)."""
    lo, up = 0.0, np.inf
    for t, a, b in trace:
        if t <= seconds:
            lo, up = max(lo, a), min(up, b)
    return lo, up


def ratio(lo: float, up: float) -> float:
    return float(up / lo) if lo > 0 else float("inf")


def run_acas(args) -> None:
    names = [f"{i}_{j}" for i in range(1, 6) for j in range(1, 10)]
    if args.nets:
        names = args.nets.split(",")
    rows = []
    for name in names:
        i, j = map(int, name.split("_"))
        net = certify.load_onnx(acasxu_path(i, j))
        x = acas_point(net, 1000 * i + j)
        # separate runs: every stage's share of the budget scales with the time limit
        bab10, _ = traced(net, x, 0.05, "bab", 10.0)
        lo10, up10 = bab10.lower, bab10.upper
        long = name in args.long.split(",") if args.long else True
        bab, _ = traced(net, x, 0.05, "bab", args.limit) if long else (bab10, None)
        milp, _ = traced(net, x, 0.05, "milp", args.milp_limit if long else 10.0)
        row = {"net": name, "unstable": bab.unstable, "long_run": long,
               "bab_lower_10s": lo10, "bab_upper_10s": up10, "bab_ratio_10s": ratio(lo10, up10),
               "bab_lower": bab.lower, "bab_upper": bab.upper, "bab_ratio": ratio(bab.lower, bab.upper),
               "bab_status": bab.status, "bab_nodes": bab.nodes, "bab_seconds": bab.seconds,
               "milp_lower": milp.lower, "milp_upper": milp.upper, "milp_ratio": ratio(milp.lower, milp.upper),
               "milp_status": milp.status, "milp_seconds": milp.seconds,
               # the best of both, as `method=auto` over the same time would not see it: reported apart
               "best_ratio": ratio(max(bab.lower, milp.lower), min(bab.upper, milp.upper))}
        rows.append(row)
        print(f"{name}: bab 10s {row['bab_ratio_10s']:.3g}  {args.limit:g}s {row['bab_ratio']:.3g}  "
              f"milp {row['milp_ratio']:.3g}  [{bab.lower:.4g}, {bab.upper:.4g}]", flush=True)
    write(rows, f"{args.out}.csv")
    summarize(rows, args)


def summarize(rows, args) -> None:
    """The summary table (median and max ratios) of ACAS rows, next to their CSV."""
    summary = ["| quantity | nets | median | max |", "|---|---|---|---|"]
    for key, sel in (("bab_ratio_10s", rows), ("milp_ratio", [r for r in rows if not r["long_run"]]),
                     ("bab_ratio", [r for r in rows if r["long_run"]]), ("milp_ratio", [r for r in rows if r["long_run"]]),
                     ("best_ratio", [r for r in rows if r["long_run"]])):
        if sel:
            vals = [float(r[key]) for r in sel]
            what = key if sel is rows or not sel[0]["long_run"] else f"{key} (long runs)"
            summary.append(f"| {what} | {len(sel)} | {statistics.median(vals):.4g} | {max(vals):.4g} |")
    text = (f"ACAS Xu, {len(rows)} nets, linf -> l1, radius 0.05; BaB {args.limit:g} s, MILP {args.milp_limit:g} s\n\n"
            + "\n".join(summary) + "\n")
    (RESULTS / f"{args.out}_summary.md").write_text(text)
    print(text)


def run_merge(args) -> None:
    """Join the CSVs of runs split over processes (`--nets`, `--out`) into `--out`."""
    rows = []
    for name in args.parts.split(","):
        with open(RESULTS / f"{name}.csv") as fh:
            rows += [dict(r, long_run=r["long_run"] == "True") for r in csv.DictReader(fh)]
    order = [f"{i}_{j}" for i in range(1, 6) for j in range(1, 10)]
    rows.sort(key=lambda r: order.index(r["net"]))
    write(rows, f"{args.out}.csv")
    summarize(rows, args)


def run_close(args) -> None:
    cases = [(n, certify.load_onnx(lipmip_suite_path(n)), None, 0.5, {"margin": (0, 1)}) for n in LIPMIP_SUITE]
    data = digits_data()
    for h in ((32,), (32, 32)):
        net = digits_net(h, seed=0)
        for k in range(3):
            cases.append((f"digits_{'-'.join(map(str, h))}_x{k}", net, data.x_test[k], 0.05, {"domain": (0, 1)}))
    rows = []
    for name, net, x, radius, kw in cases:
        x = np.full(net.input_dim, 0.5) if x is None else x
        row = {"case": name}
        for method in ("bab", "milp"):
            cert, _ = traced(net, x, radius, method, args.limit, **kw)
            row.update({f"{method}_seconds": cert.seconds, f"{method}_status": cert.status,
                        f"{method}_lower": cert.lower, f"{method}_upper": cert.upper})
        row["speedup_bab_vs_milp"] = row["milp_seconds"] / row["bab_seconds"]
        rows.append(row)
        print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "case"}, flush=True)
    write(rows, "lipschitz_scale_close.csv")


def run_scale(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = digits_data().x_test[0]
    rows, fig = [], plt.figure(figsize=(7, 4.5))
    for depth in (2, 4, 6):
        for width in (64, 128, 256, 512):
            net = digits_net((width,) * depth, seed=0)
            cert, tr = traced(net, x, 0.02, "bab", args.limit, domain=(0, 1))
            ts = [t for t, _, _ in tr]
            rs = [ratio(*at(tr, t)) for t in ts]
            plt.plot(ts, rs, label=f"{depth}x{width}")
            for t, r in zip(ts, rs):
                rows.append({"depth": depth, "width": width, "seconds": t, "ratio": r, "unstable": cert.unstable})
            print(f"{depth}x{width}: unstable {cert.unstable}, final ratio {ratio(cert.lower, cert.upper):.4g}, "
                  f"status {cert.status}", flush=True)
    plt.yscale("log")
    plt.xlabel("seconds")
    plt.ylabel("upper / lower")
    plt.title("Local Lipschitz (linf -> l1) on digits MLPs, radius 0.02: BaB interval vs time")
    plt.legend(ncol=3, fontsize=7)
    plt.tight_layout()
    fig.savefig(RESULTS / "lipschitz_scale_curve.png", dpi=120)
    write(rows, "lipschitz_scale_curve.csv")


def write(rows, name: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / name, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=("acas", "close", "scale", "merge"))
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--milp-limit", type=float, default=60.0)
    ap.add_argument("--nets", default="")
    ap.add_argument("--long", default="", help="nets that also get the --limit runs (default: all)")
    ap.add_argument("--out", default="lipschitz_scale_acas", help="acas/merge: name of the CSV and summary")
    ap.add_argument("--parts", default="", help="merge: the CSV names to join")
    args = ap.parse_args()
    {"acas": run_acas, "close": run_close, "scale": run_scale, "merge": run_merge}[args.part](args)


if __name__ == "__main__":
    main()
