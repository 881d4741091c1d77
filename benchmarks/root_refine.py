"""The ReLU-split search's root bound before and after `_refine_roots` (issue 29): the largest clause
margin bound of each VNN-COMP 2022 `mnist_fc` / `oval21` property at the root, from the first pass
(optimised slopes only on layers within `alpha.WORK`) and after the open roots' slopes are optimised
on every layer, with the seconds of each, in one run of the same code.

    python -m benchmarks.root_refine --vnncomp-data DIR [--families mnist_fc,oval21] [--time-limit 60]

A root bound below 0 closes the property at the root (unsat). Both bounds are sound whatever the
slopes; the property's VNN-COMP truth checks them independently: a negative bound on a `sat`
property would be wrong (counted as `contradictions`). Writes benchmarks/results/root_refine.csv
and root_refine.png (first-pass against refined bound, log-log).
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
FIELDS = ["family", "onnx", "vnnlib", "truth", "first_bound", "first_seconds", "refined_bound", "refine_seconds",
          "first_unstable", "refined_unstable", "contradictions"]


def _root(onnx: Path, vnnlib: Path, time_limit: float) -> dict:
    import numpy as np

    from certify.verify.attack import Falsifier
    from certify.verify.relu_split import ReluSplitSearch
    from certify.verify.vnnlib import load_vnnlib
    from models.onnx_reference import resolve_model
    from solvers.blas import single_threaded_blas

    net, reference, _, _ = resolve_model(str(onnx), None)
    spec = load_vnnlib(vnnlib)
    unstable = lambda n: sum(int(np.sum((l < 0) & (u > 0))) for l, u in zip(n.pre_lo, n.pre_hi))  # noqa: E731
    with single_threaded_blas():
        search = ReluSplitSearch(Falsifier(net, spec, reference, 0), net)
        t = time.perf_counter()
        search.deadline = t + time_limit
        roots = search.roots()
        search._refined = True  # (the first pass alone)
        first = search.bound_many(roots)
        t1 = time.perf_counter()
        out = {"first_bound": max(b.upper for b in first), "first_seconds": round(t1 - t, 2),
               "first_unstable": sum(unstable(n) for n in roots)}
        open_roots = [n for n, b in zip(roots, first) if not b.leaf and n.open.any()]
        if open_roots and search.cex is None and search._refine_roots(open_roots):
            again = search.bound_many(open_roots)
            out["refined_bound"] = max([b.upper for b in again] + [b.upper for n, b in zip(roots, first)
                                                                    if n not in open_roots])
        else:
            out["refined_bound"] = out["first_bound"]
        out["refine_seconds"] = round(time.perf_counter() - t1, 2)
        out["refined_unstable"] = sum(unstable(n) for n in roots)
    return out


def run(data: Path, families: list[str], time_limit: float) -> list[dict]:
    rows = []
    for family in families:
        folder = data / family
        if not (folder / "truth.csv").is_file():
            raise SystemExit(f"{folder} holds no truth.csv: give --vnncomp-data the folder with {family}/")
        with open(folder / "truth.csv", newline="") as f:
            instances = list(csv.DictReader(f))
        for inst in instances:
            row = {"family": family, "onnx": inst["onnx"], "vnnlib": inst["vnnlib"], "truth": inst["truth"]}
            row.update(_root(folder / inst["onnx"], folder / inst["vnnlib"], time_limit))
            row["contradictions"] = int(inst["truth"] == "sat" and min(row["first_bound"], row["refined_bound"]) < 0)
            rows.append(row)
            print(row, flush=True)
    return rows


def plot(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if float(r["first_bound"]) > 0 and float(r["refined_bound"]) > 0]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for i, family in enumerate(sorted({r["family"] for r in rows})):
        mine = [r for r in rows if r["family"] == family]
        ax.scatter([float(r["first_bound"]) for r in mine], [float(r["refined_bound"]) for r in mine], s=14,
                   color=f"C{i}", label=family)
    lims = [min(min(float(r["first_bound"]), float(r["refined_bound"])) for r in rows) / 1.5,
            max(float(r["first_bound"]) for r in rows) * 1.5] if rows else [1e-3, 1.0]
    ax.plot(lims, lims, "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("root margin bound, first pass")
    ax.set_ylabel("root margin bound, refined")
    ax.legend(title="roots left open")
    ax.grid(True, which="major", lw=0.3)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="mnist_fc,oval21")
    ap.add_argument("--vnncomp-data", required=True)
    ap.add_argument("--time-limit", type=float, default=60.0, help="the search's time limit (the refine's share)")
    args = ap.parse_args()
    rows = run(Path(args.vnncomp_data), args.families.split(","), args.time_limit)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "root_refine.csv"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    plot(out)
    closed = [sum(float(r[k]) < 0 for r in rows) for k in ("first_bound", "refined_bound")]
    print(f"closed at the root: {closed[0]} -> {closed[1]} of {len(rows)}")
    if any(r["contradictions"] for r in rows):
        raise SystemExit("a root bound contradicts VNN-COMP 2022's answer: please report")


if __name__ == "__main__":
    main()
