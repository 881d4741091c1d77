"""The Lipschitz branch-and-bound on one core and on two (`--threads 1` vs 2: half of every batch
bounded by a forked worker, `solvers.bab.bound_worker`), same questions, runs alternating.

    python -m benchmarks.lipschitz_cores [--vnncomp-data DIR] [--limit 60] [--acas-limit 10]
                                         [--fashion ONNX,IMAGES.npy] [--repeats 1] [--acas-nets all]
                                         [--out NAME]

Questions (linf -> l1): the VNN-COMP 2022 MNIST nets 784-256x4-10 and 784-256x6-10 at radius 0.02
around the midpoint of `prop_0_0.03`'s box (domain [0, 1]; with `--vnncomp-data`, or
$CERTIFY_VNNCOMP_DATA), optionally a 784-256-256-10 net and its test images (`--fashion`: an ONNX
file and a .npy of images in [0, 1]; radius 0.02 and 0.05 on the first image, 0.02 on the
second), and ACAS Xu 2_8, 4_5, 5_9 (`--acas-nets`: a list, or all 45) at radius 0.05 around
`lipschitz_scale.acas_point(net, 1000 i + j)` (the points of `lipschitz_scale acas`). Writes
results/NAME.csv (default lipschitz_cores; one row per run), NAME.png (upper / lower per question
and core count) and, with several ACAS Xu nets, the median ratios per core count on stdout.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"

import certify  # noqa: E402
from models.zoo import acasxu_path  # noqa: E402

FIELDS = ["question", "cores", "lower", "upper", "ratio", "nodes", "worker_nodes", "seconds", "status"]


def questions(args) -> list[tuple[str, str, np.ndarray, float, tuple | None, float]]:
    """(name, ONNX path, centre, radius, domain, time limit) of every question."""
    from benchmarks.lipschitz_scale import acas_point
    from certify.verify.vnnlib import load_vnnlib

    out = []
    data = args.vnncomp_data or os.environ.get("CERTIFY_VNNCOMP_DATA")
    if data:
        mnist = Path(data) / "mnist_fc"
        box = load_vnnlib(str(mnist / "vnnlib" / "prop_0_0.03.vnnlib")).disjuncts[0]
        centre = np.clip(0.5 * (box.lo + box.hi), 0.0, 1.0)
        for name in ("mnist-net_256x4", "mnist-net_256x6"):
            out.append((f"{name} r0.02", str(mnist / "onnx" / f"{name}.onnx"), centre, 0.02, (0.0, 1.0), args.limit))
    if args.fashion:
        onnx, images = args.fashion.split(",")
        xs = np.load(images).astype(np.float64)
        for k, radius in ((0, 0.02), (1, 0.02), (0, 0.05)):
            out.append((f"784-256-256-10 image {k} r{radius:g}", onnx, xs[k], radius, (0.0, 1.0), args.limit))
    nets = ([f"{i}_{j}" for i in range(1, 6) for j in range(1, 10)] if args.acas_nets == "all"
            else [n for n in args.acas_nets.split(",") if n])
    for name in nets:
        i, j = map(int, name.split("_"))
        path = str(acasxu_path(i, j))
        out.append((f"ACAS Xu {name} r0.05", path, acas_point(certify.load_onnx(path), 1000 * i + j), 0.05, None,
                    args.acas_limit))
    return out


def run(args) -> list[dict]:
    rows = []
    for name, path, centre, radius, domain, limit in questions(args):
        net = certify.load_onnx(path)
        for rep in range(args.repeats):
            for cores in ((1, 2) if rep % 2 == 0 else (2, 1)):  # (alternating: the machine's load drifts)
                t = time.perf_counter()
                cert = certify.local_lipschitz(net, centre, radius, domain=domain, method="bab", time_limit=limit,
                                               threads=cores)
                worker = next((int(n.split()[0]) for n in cert.notes if "computed on a second core" in n), 0)
                row = {"question": name, "cores": cores, "lower": cert.lower, "upper": cert.upper,
                       "ratio": cert.upper / cert.lower if cert.lower > 0 else float("inf"), "nodes": cert.nodes,
                       "worker_nodes": worker, "seconds": round(time.perf_counter() - t, 2), "status": cert.status}
                rows.append(row)
                print(f"{name:34s} cores {cores}: [{cert.lower:.4g}, {cert.upper:.4g}] ratio {row['ratio']:.3f} "
                      f"nodes {cert.nodes} ({worker} on the second core) {row['seconds']} s", flush=True)
    return rows


def plot(rows: list[dict], path: Path, key: str = "cores", label=lambda c: f"{c} core{'s' if c > 1 else ''}") -> None:
    """Bars of upper / lower (median over runs) per question, one bar per value of `key` (cores,
    or a checkout's version in `lipschitz_versions`), in the order they first appear."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["question"] for r in rows))
    groups = list(dict.fromkeys(r[key] for r in rows))
    h = 0.8 / len(groups)
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(names) * max(2, len(groups)) + 1.5))
    for k, g in enumerate(groups):
        vals = [np.median([r["ratio"] for r in rows if r["question"] == n and r[key] == g] or [np.nan]) for n in names]
        ax.barh(np.arange(len(names)) + h * k, vals, height=h, label=label(g))
    ax.set_yticks(np.arange(len(names)) + 0.4 - h / 2, names)
    ax.set_xscale("log")
    ax.set_xlabel("upper / lower (median over runs)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vnncomp-data", default=None)
    ap.add_argument("--fashion", default=None)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--acas-limit", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--acas-nets", default="2_8,4_5,5_9")
    ap.add_argument("--out", default="lipschitz_cores")
    args = ap.parse_args(argv)
    rows = run(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{args.out}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    plot(rows, RESULTS / f"{args.out}.png")
    acas = [r for r in rows if r["question"].startswith("ACAS")]
    if len({r["question"] for r in acas}) > 1:
        for cores in (1, 2):
            vals = [r["ratio"] for r in acas if r["cores"] == cores]
            print(f"ACAS Xu, {len(vals)} runs, {cores} core(s): median upper / lower {np.median(vals):.4g}, "
                  f"max {max(vals):.4g}, nodes {int(np.median([r['nodes'] for r in acas if r['cores'] == cores]))} (median)")


if __name__ == "__main__":
    main()
