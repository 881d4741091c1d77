"""`auto` (the race) against each single method, and against another checkout's `auto` (issue 30).

    python -m benchmarks.auto_race [--roots branch=.,main=/work/main] [--repeat 2] [--time-limit 60]
                                   [--instances digits_32-32_x0,...] [--out benchmarks/results/auto_race.csv]

One subprocess per run (the race forks: a fresh process each time), the checkouts' `auto` and the
single methods (`bab`, `milp` with Gurobi and with HiGHS, run from the first root) interleaved
round by round so that all see the same load. Instances are the bench's questions
(`certify.bench.suites.lipschitz`): digits MLPs (radius 0.05, domain [0, 1]), random 5-60-60-2
(radius 0.1, seed 0), LipMIP's suite (margin 0,1, centre 0.5, radius 0.5). Writes one CSV row per
run and prints auto/best per instance (best: the fastest single method that closed; medians).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ("digits_32-32_x0", "digits_32-32_x1", "digits_64_x0", "digits_64_x2", "random_5-60-60-2",
             "lipmip_2-16-16-2", "lipmip_2-20-20-20-2", "lipmip_10-10-10-10-10-2")
SINGLE = ("bab", "milp:gurobi", "milp:highs")


def _question(name: str):
    """(net, center, radius, keyword arguments) of one bench instance."""
    import numpy as np

    from certify.bench.suites import lipschitz as suite

    if name.startswith("digits_"):
        _, hidden, point = name.split("_")
        net, x = suite.digits_setup(tuple(int(h) for h in hidden.split("-")), 0, int(point[1:]))
        return net, x, 0.05, {"domain": (0.0, 1.0)}
    if name.startswith("random_"):
        shape = tuple(int(s) for s in name.split("_")[1].split("-"))
        return suite.random_net(shape, 0), np.random.default_rng(0).standard_normal(shape[0]), 0.1, {}
    net = suite.lipmip_net(name)
    return net, np.full(net.input_dim, 0.5), 0.5, {"margin": (0, 1)}


def one(name: str, method: str, time_limit: float) -> dict:
    import certify
    from certify.bench.suites.lipschitz import warm_up

    warm_up()  # (lazy imports are start-up, not any method's time: as in the bench)
    net, center, radius, kw = _question(name)
    if ":" in method:
        method, kw["backend"] = method.split(":")
    t = time.perf_counter()
    cert = certify.local_lipschitz(net, center, radius, method=method, time_limit=time_limit, **kw)
    wall = time.perf_counter() - t
    race = getattr(cert, "race", None) or {}
    return {"wall": wall, "seconds": cert.seconds, "lower": cert.lower, "upper": cert.upper, "status": cert.status,
            "method_used": cert.method, "backend_used": cert.backend, "winner": race.get("winner") or ""}


def _run(root: Path, name: str, method: str, time_limit: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    # -P: neither this script's folder nor the working directory before PYTHONPATH (the checkout
    # under test must be the one imported, not this file's)
    cmd = [sys.executable, "-P", str(Path(__file__).resolve()), "--one", name, method, str(time_limit)]
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=time_limit * 3 + 120)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"status": f"error {out.returncode}: {out.stderr.strip().splitlines()[-1:]}", "wall": float("nan")}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=3, metavar=("INSTANCE", "METHOD", "TIME_LIMIT"), help=argparse.SUPPRESS)
    ap.add_argument("--roots", default=f"branch={ROOT},main=/work/main")
    ap.add_argument("--instances", default=",".join(INSTANCES))
    ap.add_argument("--single", default=",".join(SINGLE), help="single methods to time (from the first root)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "auto_race.csv"))
    args = ap.parse_args(argv)
    if args.one:
        import certify

        print(json.dumps({**one(args.one[0], args.one[1], float(args.one[2])), "code": str(Path(certify.__file__).parents[1])}))
        return 0
    roots = [tuple(kv.split("=", 1)) for kv in args.roots.split(",")]
    singles = [m for m in args.single.split(",") if m]
    rows = []
    for rep in range(args.repeat):
        for name in args.instances.split(","):
            plan = [(label, Path(root), "auto") for label, root in roots]
            plan += [(roots[0][0], Path(roots[0][1]), m) for m in singles]
            if rep % 2:
                plan.reverse()
            for label, root, method in plan:
                r = _run(root, name, method, args.time_limit)
                row = {"instance": name, "root": label, "method": method, "repeat": rep, **r}
                rows.append(row)
                print(json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("instance", "root", "method", "repeat"), k))
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    _summary(rows, roots)
    return 0


def _summary(rows: list[dict], roots) -> None:
    print("instance | " + " | ".join(f"auto {lab}" for lab, _ in roots) + " | best single | auto/best per root")
    for name in dict.fromkeys(r["instance"] for r in rows):
        def med(root: str, method: str) -> tuple[float, bool]:
            rs = [r for r in rows if r["instance"] == name and r["root"] == root and r["method"] == method]
            ok = [r for r in rs if r.get("status") == "optimal"]
            return (statistics.median(r["wall"] for r in rs) if rs else float("nan"), len(ok) == len(rs) and bool(rs))

        singles = {r["method"] for r in rows if r["instance"] == name and r["method"] != "auto"}
        closed = [med(roots[0][0], m)[0] for m in singles if med(roots[0][0], m)[1]]
        best = min(closed) if closed else float("nan")
        autos = [med(lab, "auto") for lab, _ in roots]
        print(f"{name} | " + " | ".join(f"{t:.2f}{'' if ok else ' (open)'}" for t, ok in autos)
              + f" | {best:.2f} | " + " ".join(f"{t / best:.2f}" for t, _ in autos))


if __name__ == "__main__":
    sys.exit(main())
