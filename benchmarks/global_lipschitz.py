"""Global Lipschitz bounds: certified bound and time per method on the issue's reference nets.

    python -m benchmarks.global_lipschitz [--repeats 3] [--nets 20-100-100-10,...] [--methods ...]

Nets are seeded random ReLU MLPs (`models.zoo.random_relu_net`, He-scaled weights):
20-100-100-10, 50-200-200-10, 784-100-100-10 (exercises the exact input reduction 784 -> 100)
and 10-(50 x 8)-10 (eight hidden layers of 50; the chain of clique LMIs). Every method runs
`--repeats` times (the machine is shared: medians are reported; bounds are deterministic up to
the solver). Writes benchmarks/results/global_lipschitz.csv and .png and prints the issue's
targets: LipSDP-Neuron on 20-100-100-10 under 15 s, ECLipsE-Fast on 784-100-100-10 under 1 s.
Bounds are l2->l2; the ratio column is bound / product of spectral norms (naive).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

from certify.lipschitz.global_bounds import global_lipschitz
from models.zoo import random_relu_net

RESULTS = Path(__file__).resolve().parent / "results"
NETS = {
    "20-100-100-10": (20, 100, 100, 10),
    "50-200-200-10": (50, 200, 200, 10),
    "784-100-100-10": (784, 100, 100, 10),
    "10-50x8-10": (10,) + (50,) * 8 + (10,),
}
METHODS = ("naive", "eclipse-fast", "lipsdp-layer", "lipsdp-neuron")
TARGETS = {("20-100-100-10", "lipsdp-neuron"): 15.0, ("784-100-100-10", "eclipse-fast"): 1.0}


def run(nets: list[str], methods: list[str], repeats: int) -> list[dict]:
    rows = []
    for name in nets:
        net = random_relu_net(NETS[name], seed=0)
        naive = None
        for method in methods:
            times, result = [], None
            for _ in range(repeats):
                t0 = time.perf_counter()
                result = global_lipschitz(net, method)
                times.append(time.perf_counter() - t0)
            if method == "naive":
                naive = result.upper
            pieces = result.details.get("pieces", [])
            row = {
                "net": name,
                "method": method,
                "upper": result.upper,
                "ratio_to_naive": result.upper / naive if naive else float("nan"),
                "median_seconds": statistics.median(times),
                "min_seconds": min(times),
                "max_seconds": max(times),
                "repeats": repeats,
                "certified": result.certified,
                "status": result.status,
                "solver_bound": result.details.get("solver_bound", result.upper),
                "pieces": len(pieces) if pieces else 1,
                "structure": ",".join(sorted({str(p.get("structure")) for p in pieces if p.get("structure")})),
                "iterations": ",".join(str(p.get("iterations")) for p in pieces if p.get("iterations") is not None),
            }
            rows.append(row)
            target = TARGETS.get((name, method))
            mark = "" if target is None else f"  target < {target:g}s: {'met' if row['median_seconds'] < target else 'MISSED'}"
            print(f"{name:>16} {method:>14}: bound {row['upper']:.6g} (x{row['ratio_to_naive']:.3f} of naive), "
                  f"median {row['median_seconds']:.3f}s [{row['min_seconds']:.3f}, {row['max_seconds']:.3f}]{mark}", flush=True)
    return rows


def write(rows: list[dict], stem: str = "global_lipschitz") -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    nets = list(dict.fromkeys(r["net"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        sel = {r["net"]: r for r in rows if r["method"] == m}
        xs = [i + j * width for i in range(len(nets))]
        axes[0].bar(xs, [sel[n]["ratio_to_naive"] if n in sel else 0 for n in nets], width, label=m)
        axes[1].bar(xs, [sel[n]["median_seconds"] if n in sel else 0 for n in nets], width, label=m)
    for ax, title in zip(axes, ("certified l2 bound / product of norms", "median seconds (log)")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(nets))], nets, rotation=15)
        ax.set_title(title)
    axes[1].set_yscale("log")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{stem}.png", dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--methods", default=",".join(METHODS))
    args = ap.parse_args()
    rows = run(args.nets.split(","), args.methods.split(","), args.repeats)
    write(rows)


if __name__ == "__main__":
    main()
