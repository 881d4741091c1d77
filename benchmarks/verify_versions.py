"""VNN-COMP instances decided by two versions of certify, one after the other, in the same run
(issue 29): `certify verify --json` in a fresh process per (instance, version), each version a
checkout of this repository (e.g. `git worktree add /tmp/base <commit>`).

    python -m benchmarks.verify_versions --vnncomp-data DIR --instances mnist_fc:mnist-net_256x6:prop_3_0.05,...
                                         [--versions /tmp/base,.] [--timeout 60]

Per row: family, net, property, version (its `git rev-parse --short HEAD`), result, seconds, nodes,
the sound upper bound on the unsafe margin, and the VNN-COMP 2022 truth; a `sat` on an unsat
property or an `unsat` on a sat one is counted in `wrong` (the run then exits non-zero). Rows are
appended to benchmarks/results/verify_versions.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

from .results_csv import append_rows

FIELDS = ["family", "net", "property", "version", "timeout", "result", "seconds", "nodes", "upper", "truth", "wrong"]


def _truth(folder: Path) -> dict[tuple[str, str], str]:
    with open(folder / "truth.csv", newline="") as f:
        return {(Path(r["onnx"]).stem, Path(r["vnnlib"]).stem): r["truth"] for r in csv.DictReader(f)}


def _version(checkout: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout,
                           capture_output=True, text=True).stdout.strip()
    return (out.stdout.strip() or checkout.name) + ("+changes" if dirty else "")


def run(data: Path, instances: list[str], versions: list[Path], timeout: float) -> list[dict]:
    rows = []
    for item in instances:
        family, net, prop = item.split(":")
        folder = data / family
        truth = _truth(folder).get((net, prop), "")
        for checkout in versions:
            cmd = [sys.executable, "-m", "certify.cli", "verify", str(folder / "onnx" / f"{net}.onnx"),
                   str(folder / "vnnlib" / f"{prop}.vnnlib"), "--timeout", str(timeout), "--json"]
            proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)  # (cwd first on sys.path)
            try:
                d = json.loads(proc.stdout)
            except json.JSONDecodeError:
                d = {"result": f"error (exit {proc.returncode}): {proc.stderr.strip()[:200]}"}
            result = d.get("result")
            rows.append({"family": family, "net": net, "property": prop, "version": _version(checkout),
                         "timeout": timeout, "result": result, "seconds": round(d.get("seconds") or 0.0, 1),
                         "nodes": d.get("nodes"), "upper": d.get("upper"), "truth": truth,
                         "wrong": int((result == "sat" and truth == "unsat") or (result == "unsat" and truth == "sat"))})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", required=True, help="comma-separated family:net:property")
    ap.add_argument("--vnncomp-data", required=True)
    ap.add_argument("--versions", default=".", help="comma-separated checkouts (default: this one)")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    data = Path(args.vnncomp_data).resolve()  # (each version runs in its own folder)
    if not data.is_dir():
        raise SystemExit(f"{data} is not a folder: give --vnncomp-data the folder with mnist_fc/, oval21/")
    for item in args.instances.split(","):
        if item.count(":") != 2 or not (data / item.split(":")[0] / "truth.csv").is_file():
            raise SystemExit(f"instance {item!r}: write family:net:property with a family folder of "
                             f"{data} holding truth.csv (e.g. mnist_fc:mnist-net_256x6:prop_3_0.05)")
    for v in args.versions.split(","):
        if not (Path(v) / "certify" / "cli").is_dir():
            raise SystemExit(f"version {v!r} is not a checkout of certify: give folders such as `git worktree add` makes")
    rows = run(data, args.instances.split(","), [Path(v).resolve() for v in args.versions.split(",")], args.timeout)
    append_rows("verify_versions.csv", FIELDS, rows)
    if any(r["wrong"] for r in rows):
        raise SystemExit("a result contradicts VNN-COMP 2022's truth: please report")


if __name__ == "__main__":
    main()
