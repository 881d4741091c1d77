"""Scoreboard of issue 31: every tiny-net question of the soundness and degenerate sets, every back-end.

    python -m benchmarks.tiny_nets [--roots branch=.,main=/work/main] [--time-limit 5] [--out results/tiny_nets.csv]
    python -m benchmarks.tiny_nets --generated 30 --seed 31 [--roots ...] [--out results/tiny_nets_generated.csv]

Each (net, question) of tests/data/soundness/cases.json and tests/data/degenerate (net267) runs with
the default method on the back-ends auto, highs, cbc and gurobi (gurobi skipped when unlicensed), one
subprocess per question and checkout (`--roots name=path`, interleaved so both see the same load).
Records status, interval, seconds and whether the interval is closed to 1e-6 relative with
status optimal, and checks the upper bound against the set's `proven_lower` (a region-enumeration
or replayed value: an upper bound below it is a soundness failure, printed as WRONG).

`--generated N` instead draws N fresh degenerate nets (`tests.degenerate_nets`: duplicates,
negations, positive combinations of two neurons, extreme layer scalings, zero rows/columns, dead or
always-active layers, tiny boxes on kinks) and asks every non-l2 norm pair (and a class margin when
the net has two outputs); the oracle is region enumeration (`tests.lipschitz_oracles`, regions at
least 1e-7 deep), raised to the witness's value when an exact rational evaluation confirms the
witness's pattern, or to the patterns around it whose regions sympy's rational simplex proves to
have an interior (extreme scalings make genuine regions thinner than the enumeration sees).
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
import numpy as np
import certify
case, backends, limit = json.loads(sys.argv[1])
if case["path"].endswith(".npz"):
    from models.ir import sequential
    data = np.load(case["path"])
    net = sequential([(data[f"W{k}"], data[f"b{k}"]) for k in range(len(data.files) // 2)])
else:
    net = certify.load_onnx(case["path"])
rows = []
for backend in backends:
    kw = {"margin": tuple(case["margin"])} if case["margin"] else {"output_norm": case["output_norm"]}
    t = time.perf_counter()
    try:
        c = certify.local_lipschitz(net, case["center"], case["radius"], domain=case["domain"],
                                    input_norm=case["input_norm"], backend=backend, time_limit=limit, **kw)
        rows.append({"backend": backend, "lower": c.lower, "upper": c.upper, "status": c.status,
                     "method": c.method, "seconds": time.perf_counter() - t,
                     "witness": None if c.witness is None else np.asarray(c.witness, dtype=float).tolist()})
    except Exception as e:  # an unlicensed back-end: recorded, not fatal
        rows.append({"backend": backend, "lower": None, "upper": None, "status": "error: " + str(e)[:60],
                     "method": "", "seconds": time.perf_counter() - t, "witness": None})
print(json.dumps(rows))
"""


def cases() -> list[dict]:
    out = []
    for k, c in enumerate(json.loads((DATA / "soundness" / "cases.json").read_text())):
        out.append(dict(c, path=str(DATA / "soundness" / c["model"]), name=f"{c['model'][:-5]}#{k}"))
    out.append(dict(NET267, path=str(DATA / "degenerate" / "net267.onnx"), name="net267"))
    return out


PAIRS = (("linf", "linf"), ("l1", "l1"), ("linf", "l1"), ("l1", "linf"))


def generated_cases(n: int, seed: int, folder: Path) -> list[dict]:
    """n fresh degenerate nets (saved as .npz in `folder`), each with every non-l2 norm pair and a
    margin when it has two outputs; `proven_lower` from region enumeration, `weights` kept for the
    exact witness check."""
    import numpy as np

    from tests.degenerate_nets import question
    from tests.lipschitz_oracles import exact_lipschitz

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        w, center, radius = question(rng)
        path = folder / f"gen{seed}_{k}.npz"
        np.savez(path, **{f"W{i}": W for i, (W, _) in enumerate(w)}, **{f"b{i}": b for i, (_, b) in enumerate(w)})
        lo, hi = center - radius, center + radius
        qs = [(p, q, None) for p, q in PAIRS] + ([("linf", None, (0, 1))] if w[-1][0].shape[0] >= 2 else [])
        for p, q, margin in qs:
            target = None if margin is None else np.eye(w[-1][0].shape[0])[0] - np.eye(w[-1][0].shape[0])[1]
            exact = exact_lipschitz(w, lo, hi, p, q, target)
            out.append({"model": path.name, "path": str(path), "name": f"gen{seed}_{k}", "center": center.tolist(),
                        "radius": radius, "domain": None, "input_norm": p, "output_norm": q,
                        "margin": None if margin is None else list(margin), "proven_lower": exact,
                        "weights": w, "target": target})
    return out


def exact_value(case: dict, witness, lower) -> float:
    """The oracle raised to the witness's value when its pattern is confirmed in rationals."""
    if witness is None or "weights" not in case:
        return case["proven_lower"]
    import numpy as np

    from tests.degenerate_nets import value_at_exactly, value_near_exactly
    w, x, p, q, c = case["weights"], np.asarray(witness), case["input_norm"], case["output_norm"], case["target"]
    truth = max(case["proven_lower"], value_at_exactly(w, x, p, q, c))
    if lower is not None and lower > truth * (1 + 1e-9):
        lo, hi = np.asarray(case["center"]) - case["radius"], np.asarray(case["center"]) + case["radius"]
        truth = max(truth, value_near_exactly(w, x, lo, hi, p, q, c, lower * (1 - 1e-9)))
    return truth


def closed(lower, upper) -> bool:
    # (a zero constant's upper bound carries the rounding allowance 1e-300)
    return lower is not None and upper is not None and upper - lower <= 1e-6 * abs(upper) + 2e-300


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--roots", default=f"branch={ROOT}")
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--out", default=None)
    ap.add_argument("--generated", type=int, default=0, help="fresh degenerate nets instead of the data sets")
    ap.add_argument("--seed", type=int, default=31)
    a = ap.parse_args(argv)
    name_out = "tiny_nets_generated.csv" if a.generated else "tiny_nets.csv"
    a.out = a.out or str(ROOT / "benchmarks" / "results" / name_out)
    roots = {k: str(Path(v).resolve()) for k, v in (r.split("=", 1) for r in a.roots.split(","))}
    only = set(filter(None, a.only.split(",")))
    rows = []
    import tempfile
    tmp = tempfile.TemporaryDirectory()
    todo = generated_cases(a.generated, a.seed, Path(tmp.name)) if a.generated else cases()
    for case in todo:
        if only and case["name"] not in only:
            continue
        for name, root in roots.items():
            env = dict(os.environ, PYTHONPATH=root, PYTHONWARNINGS="ignore")
            arg = json.dumps([{k: v for k, v in case.items() if k not in ("weights", "target")},
                              a.backends.split(","), a.time_limit])
            # cwd=root: `python -c` puts the working directory ahead of PYTHONPATH
            res = subprocess.run([sys.executable, "-c", PROBE, arg], env=env, capture_output=True, text=True, cwd=root)
            if res.returncode:
                print(case["name"], name, "crashed:", res.stderr[-300:], file=sys.stderr)
                continue
            for r in json.loads(res.stdout.strip().splitlines()[-1]):
                truth = exact_value(case, r.pop("witness"), r["lower"])
                ok = r["status"] == "optimal" and closed(r["lower"], r["upper"])
                # (the data sets' proven_lower may be a lower bound only: lower bounds are checked
                # against the generated nets' exact oracle)
                wrong = r["upper"] is not None and (r["upper"] < truth * (1 - 1e-9) - 1e-300 or (
                    "weights" in case and r["lower"] > truth * (1 + 1e-9) + 1e-300))
                l2 = "l2" in (case["output_norm"] or "", case["input_norm"])
                row = {"case": case["name"], "root": name, "norms": f"{case['input_norm']}->{case['output_norm'] or 'margin'}",
                       "truth": truth,
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
