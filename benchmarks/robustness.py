"""Robustness radii and hyperrectangles on digits MLPs: exact linf radius time, fast-bound
tightness, hyperrectangle time, and the gap between a PGD attack and the exact radius.

    python -m benchmarks.robustness [--points 50] [--nets 16,32,64,32x32] [--time-limit 120]
                                    [--box-net 32] [--sections radius,hyperrectangle]
                                    [--from-csv]

Sections
- radius: `certify.robustness_radius(net, x, norm="linf", domain=(0, 1))` at the first `--points`
          test images of each digits MLP (`models.zoo.digits_net`, 64 inputs, 10 classes), on
          HiGHS and on `auto` (Gurobi where its size-limited pip licence takes the model, HiGHS
          otherwise: the backend actually used is recorded per point). Per point: seconds, status,
          the exact radius, the fast certified lower bound (tightness = fast / exact) and the
          radius of an independent PGD attack (torch, float64, on the trained torch module:
          bisection on eps, 50 steps and 4 starts per eps), an upper bound from outside the
          project's solver. A PGD radius below the proven lower bound would be a soundness bug
          (counted as `pgd_below_lower`).
- hyperrectangle: `certify.robustness_hyperrectangle` on the `--box-net` net (64-32-10) at the same points with the
          2, 4 and 8 most sensitive pixels (largest |gradient of the margin| at the point) as the
          features that move, domain [0, 1].

Writes benchmarks/results/robustness.csv, robustness_hyperrectangle.csv, robustness_summary.md
and robustness.png.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np

import certify
from models.zoo import digits_data, digits_net
from models.zoo.digits import train_digits_mlp

RESULTS = Path(__file__).resolve().parent / "results"
RADIUS_FIELDS = ["net", "point", "label", "requested", "backend", "status", "lower", "upper", "fast_lower",
                 "tightness", "pgd", "seconds", "nodes", "unstable"]
BOX_FIELDS = ["net", "point", "features", "status", "seconds", "volume_share", "milp_sides", "sides"]


def parse_nets(text: str) -> list[tuple[int, ...]]:
    return [tuple(int(w) for w in part.split("x")) for part in text.split(",")]


def net_name(hidden: tuple[int, ...]) -> str:
    return "64-" + "-".join(map(str, hidden)) + "-10"


# ---------------------------------------------------------------------- PGD (independent of certify)
def pgd_radius(model, x0: np.ndarray, label: int, seed: int = 0, steps: int = 50, starts: int = 4,
               rounds: int = 14) -> float:
    """Smallest linf eps at which PGD (torch, float64) finds an input in [0, 1] whose argmax is not
    `label` or ties with it; the returned value is that input's exact linf distance (inf if none)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    x0t = torch.as_tensor(x0, dtype=torch.float64)

    def attack(eps: float) -> torch.Tensor | None:
        for s in range(starts):
            x = x0t.clone() if s == 0 else x0t + eps * (2 * torch.rand(x0t.shape, generator=gen, dtype=torch.float64) - 1)
            x = torch.clamp(torch.max(torch.min(x, x0t + eps), x0t - eps), 0, 1)
            for _ in range(steps):
                x.requires_grad_(True)
                y = model(x)
                other = torch.cat([y[:label], y[label + 1:]]).max()
                (g,) = torch.autograd.grad(other - y[label], x)
                with torch.no_grad():
                    x = x + (2.5 * eps / steps) * torch.sign(g)
                    x = torch.clamp(torch.max(torch.min(x, x0t + eps), x0t - eps), 0, 1)
                    y = model(x)
                    if torch.cat([y[:label], y[label + 1:]]).max() >= y[label]:
                        return x
        return None

    best = attack(1.0)  # every input in [0, 1] is within linf distance 1 of x0
    if best is None:
        return float("inf")
    lo, hi = 0.0, float(torch.max(torch.abs(best - x0t)))
    for _ in range(rounds + 4):  # bisection from 1 instead of a doubling search from 0.01
        mid = 0.5 * (lo + hi)
        x = attack(mid)
        if x is None:
            lo = mid
        else:
            best, hi = x, float(torch.max(torch.abs(x - x0t)))
    return float(torch.max(torch.abs(best - x0t)))


# ---------------------------------------------------------------------- sections
def radius_section(nets, points: int, time_limit: float) -> list[dict]:
    data = digits_data()
    rows = []
    for hidden in nets:
        net = digits_net(hidden, seed=0)
        model = train_digits_mlp(hidden, 0).double()
        for k, x0 in enumerate(data.x_test[:points]):
            label = int(np.argmax(net.forward(x0)))
            pgd = pgd_radius(model, x0, label, seed=k)
            for requested in ("highs", "auto"):
                t0 = time.perf_counter()
                cert = certify.robustness_radius(net, x0, norm="linf", domain=(0, 1), backend=requested,
                                                 time_limit=time_limit)
                seconds = time.perf_counter() - t0
                exact = cert.radius
                rows.append({
                    "net": net_name(hidden), "point": k, "label": label, "requested": requested,
                    "backend": cert.backend, "status": cert.status, "lower": cert.lower, "upper": cert.upper,
                    "fast_lower": cert.fast_lower,
                    "tightness": None if not exact else cert.fast_lower / exact, "pgd": pgd, "seconds": seconds,
                    "nodes": cert.solver["nodes"], "unstable": cert.solver["unstable"]})
            print(f"{net_name(hidden)} point {k}: exact {rows[-1]['upper']} ({rows[-1]['status']}, "
                  f"{rows[-2]['seconds']:.2f}s highs / {rows[-1]['seconds']:.2f}s {rows[-1]['backend']}), "
                  f"fast {rows[-1]['fast_lower']:.4g}, pgd {pgd:.4g}", flush=True)
    return rows


def sensitive_features(net, x0: np.ndarray, k: int) -> list[int]:
    """The k pixels with the largest |d (f_c - f_runner-up) / dx_i| at x0."""
    y = net.forward(x0)
    c, r = np.argsort(-y)[:2]
    jac = net.jacobian(x0)
    return [int(i) for i in np.argsort(-np.abs(jac[c] - jac[r]), kind="stable")[:k]]


def hyperrectangle_section(hidden, points: int, time_limit: float) -> list[dict]:
    data = digits_data()
    net = digits_net(hidden, seed=0)
    rows = []
    for k, x0 in enumerate(data.x_test[:points]):
        for m in (2, 4, 8):
            feats = sensitive_features(net, x0, m)
            t0 = time.perf_counter()
            cert = certify.robustness_hyperrectangle(net, x0, features=feats, domain=(0, 1), backend="auto",
                                                     time_limit=time_limit)
            seconds = time.perf_counter() - t0
            widths = (cert.box.hi - cert.box.lo)[feats]
            rows.append({"net": net_name(hidden), "point": k, "features": m, "status": cert.status,
                         "seconds": seconds, "volume_share": float(np.prod(widths)),
                         "milp_sides": sum(s["proof"] == "milp" for s in cert.sides), "sides": len(cert.sides)})
        print(f"hyperrectangle point {k}: " + ", ".join(f"{r['features']} features {r['seconds']:.2f}s"
                                                        for r in rows[-3:]), flush=True)
    return rows


# ---------------------------------------------------------------------- report
def _stats(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} / {max(values):.3f}"


def summary(radius_rows: list[dict], box_rows: list[dict], points: int, time_limit: float) -> str:
    lines = [f"# Robustness benchmark (digits MLPs, first {points} test images, linf, domain [0, 1], "
             f"time limit {time_limit:g} s)", ""]
    if radius_rows:
        lines += ["## Exact linf radius", "",
                  "| net | backend asked | backends used | optimal | seconds median / max | fast/exact median / min "
                  "| PGD/exact median / max | PGD > 1.01 exact | PGD below proven lower |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for net in dict.fromkeys(r["net"] for r in radius_rows):
            for req in ("highs", "auto"):
                rs = [r for r in radius_rows if r["net"] == net and r["requested"] == req]
                used = ", ".join(f"{b} x{sum(r['backend'] == b for r in rs)}" for b in sorted({r["backend"] for r in rs}))
                tight = [r["tightness"] for r in rs if r["tightness"] is not None]
                gap = [r["pgd"] / r["upper"] for r in rs if r["upper"] and np.isfinite(r["pgd"])]
                below = sum(r["pgd"] < r["lower"] for r in rs)
                lines.append(f"| {net} | {req} | {used} | {sum(r['status'] == 'optimal' for r in rs)}/{len(rs)} | "
                             f"{_stats([r['seconds'] for r in rs])} | "
                             f"{statistics.median(tight):.3f} / {min(tight):.3f} | "
                             f"{statistics.median(gap):.3f} / {max(gap):.3f} | {sum(g > 1.01 for g in gap)}/{len(gap)} | "
                             f"{below} |")
        auto = [r for r in radius_rows if r["requested"] == "auto"]
        fallback = sum("gurobi" not in str(r["backend"]) for r in auto)
        lines += ["", f"`auto` fell back from Gurobi to HiGHS on {fallback} of {len(auto)} points (the pip licence "
                  "takes models up to 2000 variables and constraints; each per-class radius MILP is checked before "
                  "solving). Seconds are wall time per point, all stages (fast bound, attack, MILPs, proof, "
                  "replay), on a shared 2-core machine.", ""]
    if box_rows:
        lines += ["## Hyperrectangle", "", "| net | sensitive features | certified | seconds median / max | sides "
                  "needing a MILP |", "|---|---|---|---|---|"]
        for m in (2, 4, 8):
            rs = [r for r in box_rows if r["features"] == m]
            lines.append(f"| {rs[0]['net']} | {m} | {sum(r['status'] == 'certified' for r in rs)}/{len(rs)} | "
                         f"{_stats([r['seconds'] for r in rs])} | {sum(r['milp_sides'] for r in rs)} of "
                         f"{sum(r['sides'] for r in rs)} |")
    return "\n".join(lines) + "\n"


def plot(radius_rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
    for net in dict.fromkeys(r["net"] for r in radius_rows):
        rs = [r for r in radius_rows if r["net"] == net and r["requested"] == "highs" and r["upper"]]
        ex = [r["upper"] for r in rs]
        a.scatter(ex, [r["pgd"] for r in rs], s=12, label=f"{net} PGD")
        a.scatter(ex, [r["fast_lower"] for r in rs], s=12, marker="x", label=f"{net} fast bound")
        for req, style in (("highs", "-"), ("auto", "--")):
            secs = sorted(r["seconds"] for r in radius_rows if r["net"] == net and r["requested"] == req)
            b.plot(secs, range(1, len(secs) + 1), style, label=f"{net} {req}")
    top = max((r["upper"] for r in radius_rows if r["upper"]), default=1.0)
    a.plot([0, top], [0, top], "k:", lw=1)
    a.set(xlabel="exact linf radius", ylabel="PGD radius (above) / fast bound (below)", title="radius vs exact")
    b.set(xlabel="seconds", ylabel="points solved", xscale="log", title="exact radius: cactus plot")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_csv(rows: list[dict], fields: list[str], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def read_csv(path: Path) -> list[dict]:
    """Rows written by `write_csv`, numbers parsed back, empty cells as None."""

    def conv(v: str):
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return None if v == "" else v

    with open(path, newline="") as fh:
        return [{k: conv(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=50)
    ap.add_argument("--nets", default="16,32,64,32x32", help="hidden widths, e.g. 16,32,32x32")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--box-net", default="32", help="hidden widths of the hyperrectangle section's net")
    ap.add_argument("--sections", default="radius,hyperrectangle")
    ap.add_argument("--from-csv", action="store_true", help="only rewrite the summary and plot from the CSVs")
    args = ap.parse_args(argv)
    if args.from_csv:
        radius_rows, box_rows = read_csv(RESULTS / "robustness.csv"), read_csv(RESULTS / "robustness_hyperrectangle.csv")
        plot(radius_rows, RESULTS / "robustness.png")
        text = summary(radius_rows, box_rows, args.points, args.time_limit)
        (RESULTS / "robustness_summary.md").write_text(text)
        print(text)
        return
    nets = parse_nets(args.nets)
    sections = args.sections.split(",")
    RESULTS.mkdir(parents=True, exist_ok=True)
    radius_rows = radius_section(nets, args.points, args.time_limit) if "radius" in sections else []
    if radius_rows:
        write_csv(radius_rows, RADIUS_FIELDS, RESULTS / "robustness.csv")
        plot(radius_rows, RESULTS / "robustness.png")
    box_rows = hyperrectangle_section(parse_nets(args.box_net)[0], args.points, args.time_limit) if "hyperrectangle" in sections else []
    if box_rows:
        write_csv(box_rows, BOX_FIELDS, RESULTS / "robustness_hyperrectangle.csv")
    text = summary(radius_rows, box_rows, args.points, args.time_limit)
    (RESULTS / "robustness_summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
