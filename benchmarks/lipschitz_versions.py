"""The Lipschitz branch-and-bound of several checkouts of certify on the same questions, one after
the other in the same run (issue 29: before / after a change, e.g. `git worktree add /tmp/base
<commit>`), each question and checkout in a fresh process.

    python -m benchmarks.lipschitz_versions [--versions /tmp/base,.] [--vnncomp-data DIR]
        [--fashion ONNX,IMAGES.npy] [--cifar] [--acas-nets 2_8,4_5] [--limit 60] [--acas-limit 10]
        [--threads 2] [--repeats 1] [--out lipschitz_versions]

The questions are those of `benchmarks.lipschitz_cores` (linf -> l1, `method="bab"`); `--cifar`
adds oval21's `cifar_base_kw` at radius 2/255 around the midpoint of img2578's box (normalised
inputs, no domain) under CERTIFY_MEMORY_LIMIT=4G. Per row: question, version (its
`git rev-parse --short HEAD`, "+changes" when dirty), lower, upper, ratio, nodes, seconds, status
and the process's peak RSS; rows are appended to results/NAME.csv, and NAME.png shows upper /
lower per question and version (the median over runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from .lipschitz_cores import plot, questions
from .results_csv import append_rows
from .verify_versions import _version

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FIELDS = ["question", "version", "threads", "lower", "upper", "ratio", "nodes", "seconds", "status", "peak_mb"]

# one question in the checkout the process runs in (its folder first on sys.path)
CHILD = r"""
import json, resource, sys, time
import numpy as np
import certify
a = json.loads(sys.argv[1])
net = certify.load_onnx(a["onnx"])
t = time.perf_counter()
cert = certify.local_lipschitz(net, np.array(a["centre"]), a["radius"], domain=a["domain"], method="bab",
                               time_limit=a["limit"], threads=a["threads"])
print(json.dumps({"lower": cert.lower, "upper": cert.upper, "nodes": cert.nodes, "status": cert.status,
                  "seconds": time.perf_counter() - t,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _cifar(args) -> list[tuple]:
    from certify.verify.vnnlib import load_vnnlib

    data = args.vnncomp_data or os.environ.get("CERTIFY_VNNCOMP_DATA")
    if not data:
        raise SystemExit("--cifar needs --vnncomp-data (or $CERTIFY_VNNCOMP_DATA)")
    oval = Path(data) / "oval21"
    box = load_vnnlib(str(oval / "vnnlib" / "cifar_base_kw-img2578-eps0.021176470588235297.vnnlib")).disjuncts[0]
    return [("cifar_base_kw r2/255", str(oval / "onnx" / "cifar_base_kw.onnx"), 0.5 * (box.lo + box.hi), 2 / 255,
             None, args.limit)]


def run(args) -> list[dict]:
    todo = questions(args) + (_cifar(args) if args.cifar else [])
    versions = [Path(v).resolve() for v in args.versions.split(",")]
    rows = []
    for name, onnx, centre, radius, domain, limit in todo:
        env = dict(os.environ, CERTIFY_MEMORY_LIMIT="4G") if name.startswith("cifar") else None
        for rep in range(args.repeats):
            for checkout in (versions if rep % 2 == 0 else versions[::-1]):  # (the machine's load drifts)
                arg = json.dumps({"onnx": str(Path(onnx).resolve()), "centre": centre.tolist(), "radius": radius,
                                  "domain": None if domain is None else list(domain), "limit": limit,
                                  "threads": args.threads})
                proc = subprocess.run([sys.executable, "-c", CHILD, arg], cwd=checkout, capture_output=True,
                                      text=True, env=env)
                try:
                    d = json.loads(proc.stdout.strip().splitlines()[-1])
                except (json.JSONDecodeError, IndexError):
                    d = {"status": f"error (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"}
                lower, upper = d.get("lower"), d.get("upper")
                ratio = upper / lower if lower and upper and lower > 0 else float("nan")
                rows.append({"question": name, "version": _version(checkout), "threads": args.threads,
                             "lower": lower, "upper": upper, "ratio": ratio, "nodes": d.get("nodes"),
                             "seconds": round(d.get("seconds") or 0.0, 2), "status": d.get("status"),
                             "peak_mb": round(d.get("peak_mb") or 0.0)})
                print(f"{name:30s} {rows[-1]['version']:>16s}: [{lower}, {upper}] ratio {ratio:.3f} "
                      f"nodes {d.get('nodes')} {rows[-1]['seconds']} s {rows[-1]['peak_mb']} MB", flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default=".")
    ap.add_argument("--vnncomp-data", default=None)
    ap.add_argument("--fashion", default=None)
    ap.add_argument("--cifar", action="store_true")
    ap.add_argument("--acas-nets", default="")
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--acas-limit", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="lipschitz_versions")
    args = ap.parse_args(argv)
    rows = run(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    append_rows(f"{args.out}.csv", FIELDS, rows)
    plot(rows, RESULTS / f"{args.out}.png", key="version", label=str)


if __name__ == "__main__":
    main()
