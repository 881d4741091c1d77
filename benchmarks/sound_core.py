"""The sound-solve core against the code before it, on the LipMIP suite and the digits nets.

    python -m benchmarks.sound_core [--old PATH] [--repeats 3] [--backends gurobi,highs]

Three variants of `certify.local_lipschitz` run interleaved on every instance (same machine, same
load): `before` (a checkout of the code before the core, given with --old; its upper bound was the
solver's widened dual bound, not a proof), `core` (the new pipeline with the proof step replaced by
the solver's widened bound: the refactor alone) and `proven` (the default: the bound re-proven by
the safe branch-and-bound). Reports values, statuses, seconds (median of --repeats) and the proof's
seconds and share of the total. Writes results/sound_core.csv and sound_core_summary.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]

# one instance: (name, builder expression, center expression, radius, kwargs)
INSTANCES = [
    ("lipmip_2-16-16-2", "load_onnx(lipmip_suite_path('lipmip_2-16-16-2'))", "np.full(2, 0.5)", 0.5, {"margin": [0, 1]}),
    ("lipmip_2-20-20-20-2", "load_onnx(lipmip_suite_path('lipmip_2-20-20-20-2'))", "np.full(2, 0.5)", 0.5, {"margin": [0, 1]}),
    ("lipmip_10-10-10-10-10-2", "load_onnx(lipmip_suite_path('lipmip_10-10-10-10-10-2'))", "np.full(10, 0.5)", 0.5,
     {"margin": [0, 1]}),
] + [
    (f"digits_{'-'.join(map(str, h))}_x{k}", f"digits_net({h!r}, seed=0)", f"digits_data().x_test[{k}]", 0.05,
     {"domain": [0, 1], "input_norm": "linf", "output_norm": "l1"})
    for h in ((32,), (32, 32)) for k in range(3)
]

PROBE = r"""
import json, sys, time
import numpy as np
import certify
from certify import load_onnx
from models.zoo import digits_data, digits_net, lipmip_suite_path
variant, build, center, radius, kw, backend = json.loads(sys.argv[1])
if variant == "core":  # the proof step replaced by the solver's widened bound (the refactor alone)
    import solvers.milp.sound as sound
    from solvers.bab.milp import ProofResult
    def unproven(model, target, **_):
        return ProofResult(target if target is not None else float("inf"), target is not None, 0, 0.0, "closed")
    sound.prove_bound = unproven
net = eval(build)
t = time.perf_counter()
cert = certify.local_lipschitz(net, eval(center), radius, backend=backend, **kw)
d = cert.to_dict()
print(json.dumps({"seconds": time.perf_counter() - t, "lower": d["lower"], "upper": d["upper"], "status": d["status"],
                  "proof_seconds": (d.get("proof") or {}).get("seconds", 0.0)}))
"""


def run(variant: str, code: Path, inst, backend: str) -> dict:
    name, build, center, radius, kw = inst
    env = dict(os.environ, PYTHONPATH=str(code))
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps([variant, build, center, radius, kw, backend])],
                       cwd=code, env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="/tmp/old", help="checkout of the code before the core (git worktree)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", default="gurobi,highs")
    args = ap.parse_args()
    variants = [("before", Path(args.old)), ("core", ROOT), ("proven", ROOT)]
    rows = []
    for inst in INSTANCES:
        for backend in args.backends.split(","):
            runs: dict[str, list[dict]] = {v: [] for v, _ in variants}
            for _ in range(args.repeats):
                for variant, code in variants:  # interleaved: the same load for every variant
                    runs[variant].append(run(variant, code, inst, backend))
            for variant, _ in variants:
                ok = [r for r in runs[variant] if "error" not in r]
                if not ok:
                    rows.append({"instance": inst[0], "backend": backend, "variant": variant, "error": runs[variant][0]["error"]})
                    continue
                med = statistics.median(r["seconds"] for r in ok)
                proof = statistics.median(r["proof_seconds"] for r in ok)
                rows.append({"instance": inst[0], "backend": backend, "variant": variant, "status": ok[-1]["status"],
                             "lower": ok[-1]["lower"], "upper": ok[-1]["upper"], "median_seconds": round(med, 3),
                             "min_seconds": round(min(r["seconds"] for r in ok), 3),
                             "max_seconds": round(max(r["seconds"] for r in ok), 3),
                             "proof_seconds": round(proof, 3), "proof_share": round(proof / med, 3) if med else 0.0,
                             "repeats": len(ok)})
                print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    fields = ["instance", "backend", "variant", "status", "lower", "upper", "median_seconds", "min_seconds",
              "max_seconds", "proof_seconds", "proof_share", "repeats", "error"]
    with open(RESULTS / "sound_core.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    _summary(rows)


def _summary(rows: list[dict]) -> None:
    by = {(r["instance"], r["backend"], r["variant"]): r for r in rows}
    lines = ["# Sound-solve core: before / core (refactor, proof off) / proven (default)", "",
             "| instance | backend | before s | core s | core/before | proven s | proof s (share) | value before | value proven | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for inst in INSTANCES:
        for backend in sorted({r["backend"] for r in rows}):
            b, c, p = (by.get((inst[0], backend, v), {}) for v in ("before", "core", "proven"))
            if "median_seconds" not in b or "median_seconds" not in p or "median_seconds" not in c:
                continue
            lines.append(f"| {inst[0]} | {backend} | {b['median_seconds']:.2f} | {c['median_seconds']:.2f} | "
                         f"{c['median_seconds'] / b['median_seconds']:.2f}x | {p['median_seconds']:.2f} | "
                         f"{p['proof_seconds']:.2f} ({100 * p['proof_share']:.0f}%) | {b['upper']:.10g} | "
                         f"{p['upper']:.10g} | {p['status']} |")
    (RESULTS / "sound_core_summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
