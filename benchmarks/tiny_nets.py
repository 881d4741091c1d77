"""Scoreboard of issue 31: every tiny-net question of the soundness and degenerate sets, every back-end.

    python -m benchmarks.tiny_nets [--roots branch=.,main=/work/main] [--time-limit 5] [--out results/tiny_nets.csv]

Each (net, question) of tests/data/soundness/cases.json and tests/data/degenerate (net267) runs with
the default method on the back-ends auto, highs, cbc and gurobi (gurobi skipped when unlicensed), one
subprocess per question and checkout (`--roots name=path`, interleaved so both see the same load).
Records status, interval, seconds and whether the interval is closed to 1e-6 relative with
status optimal, and checks the upper bound against the set's `proven_lower` (a region-enumeration
or replayed value: an upper bound below it is a soundness failure, printed as WRONG).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
BACKENDS = ("auto", "highs", "cbc", "gurobi")

# net267's question (tests/data/degenerate/README.md); its exact constant by region enumeration
NET267 = {"model": "net267.onnx", "dir": "degenerate",
          "center": [0.3217088919307366, 0.2827853500547665, 0.10350121818316671],
          "radius": [0.44134153437107226, 0.3892108697601822, 0.15850947858773257], "domain": [0.0, 1.0],
          "input_norm": "linf", "output_norm": "linf", "margin": None, "proven_lower": 0.05836637059234217}

PROBE = r"""
import json, sys, time, warnings
import certify
case, backends, limit = json.loads(sys.argv[1])
net = certify.load_onnx(case["path"])
rows = []
for backend in backends:
    kw = {"margin": tuple(case["margin"])} if case["margin"] else {"output_norm": case["output_norm"]}
    t = time.perf_counter()
    try:
        c = certify.local_lipschitz(net, case["center"], case["radius"], domain=case["domain"],
                                    input_norm=case["input_norm"], backend=backend, time_limit=limit, **kw)
        rows.append({"backend": backend, "lower": c.lower, "upper": c.upper, "status": c.status,
                     "method": c.method, "seconds": time.perf_counter() - t})
    except Exception as e:  # an unlicensed back-end: recorded, not fatal
        rows.append({"backend": backend, "lower": None, "upper": None, "status": "error: " + str(e)[:60],
                     "method": "", "seconds": time.perf_counter() - t})
print(json.dumps(rows))
"""


def cases() -> list[dict]:
    out = []
    for k, c in enumerate(json.loads((DATA / "soundness" / "cases.json").read_text())):
        out.append(dict(c, path=str(DATA / "soundness" / c["model"]), name=f"{c['model'][:-5]}#{k}"))
    out.append(dict(NET267, path=str(DATA / "degenerate" / "net267.onnx"), name="net267"))
    return out


def closed(lower, upper) -> bool:
    return lower is not None and upper is not None and upper - lower <= 1e-6 * abs(upper)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--roots", default=f"branch={ROOT}")
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tiny_nets.csv"))
    a = ap.parse_args(argv)
    roots = {k: str(Path(v).resolve()) for k, v in (r.split("=", 1) for r in a.roots.split(","))}
    only = set(filter(None, a.only.split(",")))
    rows = []
    for case in cases():
        if only and case["name"] not in only:
            continue
        for name, root in roots.items():
            env = dict(os.environ, PYTHONPATH=root, PYTHONWARNINGS="ignore")
            arg = json.dumps([case, a.backends.split(","), a.time_limit])
            # cwd=root: `python -c` puts the working directory ahead of PYTHONPATH
            res = subprocess.run([sys.executable, "-c", PROBE, arg], env=env, capture_output=True, text=True, cwd=root)
            if res.returncode:
                print(case["name"], name, "crashed:", res.stderr[-300:], file=sys.stderr)
                continue
            for r in json.loads(res.stdout.strip().splitlines()[-1]):
                ok = r["status"] == "optimal" and closed(r["lower"], r["upper"])
                wrong = r["upper"] is not None and r["upper"] < case["proven_lower"] * (1 - 1e-9)
                l2 = "l2" in (case["output_norm"] or "", case["input_norm"])
                row = {"case": case["name"], "root": name, "norms": f"{case['input_norm']}->{case['output_norm'] or 'margin'}",
                       "l2": l2, **r, "closed": ok, "wrong": wrong}
                rows.append(row)
                print(f"{row['case']:10s} {name:6s} {row['norms']:14s} {r['backend']:6s} {r['status'][:24]:24s} "
                      f"[{r['lower'] or 0:.10g}, {r['upper'] or 0:.10g}] {r['seconds']:6.2f}s {r['method']}"
                      f"{'  CLOSED' if ok else ''}{'  WRONG' if wrong else ''}", flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for name in roots:
        mine = [r for r in rows if r["root"] == name and not str(r["status"]).startswith("error")]
        for label, sel in (("non-l2", [r for r in mine if not r["l2"]]), ("l2", [r for r in mine if r["l2"]])):
            fast = [r for r in sel if r["closed"] and r["seconds"] < 2.0]
            print(f"{name}: {label}: closed {sum(r['closed'] for r in sel)}/{len(sel)}, closed <2 s {len(fast)}/{len(sel)},"
                  f" max {max((r['seconds'] for r in sel), default=0):.2f} s, wrong {sum(r['wrong'] for r in sel)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
