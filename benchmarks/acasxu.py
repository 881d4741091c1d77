"""ACAS Xu (VNN-COMP 2022): all 186 instances against the competition's ground truth.

    python -m benchmarks.acasxu [--timeout S] [--filter TEXT] [--fresh]

Instances and ground truth are in benchmarks/data/acasxu/ (the networks and properties themselves
are the ones bundled in models/zoo/data/acasxu). Every instance runs `certify.verify` with the
instance's timeout (116 s, the competition's) unless --timeout overrides it. Writes
benchmarks/results/acasxu_<timeout>s.csv (one row per instance; resumed unless --fresh), the
matching _cactus.png (solved instances vs time) and _summary.md, and prints solved / wrong /
median / total time. A wrong answer (sat or unsat contradicting the ground truth) makes the exit
code 1.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from certify.verify.instances import read_instances, run_instance

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "acasxu"
RESULTS = HERE / "results"
COLUMNS = ("onnx", "vnnlib", "expected", "result", "verdict", "seconds", "prepare_seconds", "nodes", "found_by", "timeout")


def ground_truth() -> dict[tuple[str, str], str]:
    with open(DATA / "ground_truth.csv", newline="") as fh:
        return {(r["onnx"], r["vnnlib"]): r["expected"] for r in csv.DictReader(fh)}


def verdict(result: str, expected: str) -> str:
    if result in ("sat", "unsat"):
        return "correct" if result == expected else "WRONG"
    return result  # timeout / unknown / error


def run(timeout: float | None, only: str | None, out: Path, fresh: bool) -> list[dict]:
    truth = ground_truth()
    done: dict[tuple[str, str], dict] = {}
    if out.exists() and not fresh:
        with open(out, newline="") as fh:
            done = {(r["onnx"], r["vnnlib"]): r for r in csv.DictReader(fh)}
    instances = [i for i in read_instances(DATA / "instances.csv")
                 if only is None or only in f"{i.onnx_path.name},{i.vnnlib_path.name}"]
    out.parent.mkdir(parents=True, exist_ok=True)
    new_file = fresh or not out.exists()
    rows = []
    with open(out, "w" if new_file else "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        if new_file:
            writer.writeheader()
        for n, inst in enumerate(instances, start=1):
            key = (inst.onnx_path.name, inst.vnnlib_path.name)
            if key in done:
                rows.append(done[key])
                continue
            r, cert = run_instance(inst, "acasxu", timeout=timeout)
            row = {"onnx": key[0], "vnnlib": key[1], "expected": truth[key], "result": r.result,
                   "verdict": verdict(r.result, truth[key]), "seconds": f"{r.run_time:.3f}",
                   "prepare_seconds": f"{r.prepare_time:.3f}", "nodes": getattr(cert, "nodes", 0),
                   "found_by": getattr(cert, "details", {}).get("found_by", ""), "timeout": timeout or inst.timeout}
            writer.writerow(row)
            fh.flush()
            rows.append(row)
            print(f"[{n}/{len(instances)}] {key[0]} {key[1]}: {r.result} ({row['verdict']}) {r.run_time:.2f}s "
                  f"{row['nodes']} nodes", flush=True)
    return rows


def summarise(rows: list[dict]) -> dict:
    solved = [float(r["seconds"]) for r in rows if r["verdict"] == "correct"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return {
        "instances": len(rows),
        "solved": len(solved),
        "solved_sat": sum(1 for r in rows if r["verdict"] == "correct" and r["result"] == "sat"),
        "solved_unsat": sum(1 for r in rows if r["verdict"] == "correct" and r["result"] == "unsat"),
        "wrong": counts.get("WRONG", 0),
        "timeout": counts.get("timeout", 0),
        "unknown": counts.get("unknown", 0),
        "error": counts.get("error", 0),
        "median_seconds_solved": statistics.median(solved) if solved else None,
        "total_seconds": sum(float(r["seconds"]) for r in rows),
        "timeouts_used": sorted({float(r["timeout"]) for r in rows}),
    }


def cactus(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = sorted(float(r["seconds"]) for r in rows if r["verdict"] == "correct")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.step(range(1, len(times) + 1), times, where="post", label="certify (input splitting, symbolic bounds)")
    ax.set_xlabel("instances solved")
    ax.set_ylabel("time per instance (s)")
    ax.set_yscale("log")
    ax.set_xlim(0, max(len(rows), 1))
    ax.set_title(f"ACAS Xu: {len(times)}/{len(rows)} solved")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timeout", type=float, help="seconds per instance (default: the instance list's, 116)")
    p.add_argument("--filter", help="only instances whose 'onnx,vnnlib' names contain this text")
    p.add_argument("--out", type=Path, help="results CSV (default benchmarks/results/acasxu_<timeout>s.csv)")
    p.add_argument("--fresh", action="store_true", help="ignore (overwrite) an existing results file")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = RESULTS / f"acasxu_{args.timeout or 116:g}s.csv"
    rows = run(args.timeout, args.filter, args.out, args.fresh)
    s = summarise(rows)
    cactus(rows, args.out.with_name(args.out.stem + "_cactus.png"))
    median = "-" if s["median_seconds_solved"] is None else f"{s['median_seconds_solved']:.2f} s"
    lines = [
        f"# ACAS Xu ({s['instances']} instances, timeout {', '.join(f'{t:g}' for t in s['timeouts_used'])} s)",
        "",
        "| solved | sat | unsat | wrong | timeout | unknown | error | median (solved) | total |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {s['solved']} | {s['solved_sat']} | {s['solved_unsat']} | {s['wrong']} | {s['timeout']} | {s['unknown']} | "
        f"{s['error']} | {median} | {s['total_seconds']:.1f} s |",
    ]
    args.out.with_name(args.out.stem + "_summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if s["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
