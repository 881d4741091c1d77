"""Soundness fuzz of ReLU-split verification with its two-process paths forced on.

    python -m benchmarks.verify_fuzz [--cases 400] [--seed 0] [--timeout 20]

Random small nets and box properties whose exact unsafe margin lands near 0 (the property maker
of `tests/test_verify_soundness.py`), decided by `certify.verify` with ReLU splitting
(`max_split_dims=0`) and with the thresholds that keep small searches in one process set to zero:
the search shares its open subtrees with a forked worker at its first round with two open nodes
(`split_workers.SPLIT_AFTER`, `SPLIT_OPEN`) and every layer of the refined root's LPs goes to two
processes after a probe of 2 neurons, whatever the probe gained (`solvers.bounds.lp.SHARE_SECONDS`,
`PROBE`, `relu_split.ROOT_LP_MIN_GAIN`; the refined root's LPs run where the first root bound leaves
a property open), and a tree left open at the refined root is searched again with node bounds under
all splits after a first search of 0 s (even cases) or 5 ms (odd ones), however slow its nodes
(`relu_split.PLAIN_SHARE`, `DEEP_MIN_NODES`). The oracle is exact region enumeration
(`tests.vnnlib_oracle.exact_max_margin`, one LP per activation region), and a case is wrong where
`tests.vnnlib_oracle.disagreements` says so (as in the tests): `unsat` with an exact margin >= 0,
`sat` with a margin < 0 or a point the oracle's own VNNLIB evaluator rejects, or the certified
interval missing the margin.

Writes results/verify_fuzz.csv (one row per case) and prints the counts.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TOL = 1e-6  # the oracle's LP tolerance
# (region enumeration is exponential in the hidden neurons: about 20 keep a case under a second)
SIZES = [(4, 8, 8, 2), (6, 8, 6, 2), (5, 10, 6, 3), (3, 6, 6, 6, 2), (4, 10, 8, 2), (7, 8, 8, 3)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--out", default=str(RESULTS / "verify_fuzz.csv"))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    import certify.verify.relu_split as relu_split
    import certify.verify.split_workers as split_workers
    import solvers.bounds.lp as lp
    from certify.verify import parse_vnnlib, verify
    from models.zoo import random_relu_net
    from tests.test_verify_soundness import _property
    from tests.vnnlib_oracle import disagreements, exact_max_margin

    split_workers.SPLIT_AFTER, split_workers.SPLIT_OPEN = 0.0, 2
    lp.SHARE_SECONDS, lp.PROBE, relu_split.ROOT_LP_MIN_GAIN = 0.0, 2, 0.0
    shared_lps = [0]  # layers whose LPs went to two processes (counted in this process)

    class CountedWorker(lp.ReportingWorker):
        def __init__(self, *a, **k):
            shared_lps[0] += 1
            super().__init__(*a, **k)

    lp.ReportingWorker = CountedWorker
    rows, wrong = [], 0
    for case in range(args.cases):
        seed = args.seed + case
        sizes = SIZES[case % len(SIZES)]
        rng = np.random.default_rng(seed)
        net = random_relu_net(sizes, seed=seed, bias_scale=0.3)
        text, lo, hi, G, H, d = _property(rng, net, sizes[0], sizes[-1])
        exact, regions = exact_max_margin(net, lo, hi, G, H, d)
        relu_split.PLAIN_SHARE, relu_split.DEEP_MIN_NODES = (0.0 if case % 2 == 0 else 0.005 / args.timeout), 0
        t0, shared0 = time.perf_counter(), shared_lps[0]
        res = verify(net, parse_vnnlib(text), timeout=args.timeout, seed=seed, max_split_dims=0, attack_seconds=0.0)
        seconds = time.perf_counter() - t0
        why = disagreements(res, exact, text, net, lo, hi, TOL)
        wrong += bool(why)
        notes = " | ".join(res.notes)
        rows.append({"case": case, "seed": seed, "sizes": "-".join(map(str, sizes)), "regions": regions,
                     "exact": exact, "result": res.result, "lower": res.lower, "upper": res.upper,
                     "seconds": round(seconds, 3), "two_processes": "2 processes" in notes,
                     "shared_lp_layers": shared_lps[0] - shared0,
                     "second_search": "searched again from the refined root" in notes,
                     "wrong": "; ".join(why)})
        print(f"{case:4d} {rows[-1]['sizes']:>14} exact {exact:+.4f} {res.result:>8} {seconds:6.2f} s"
              f"{' search shared' if rows[-1]['two_processes'] else ''}"
              f"{' LPs shared' if rows[-1]['shared_lp_layers'] else ''}"
              f"{' searched again' if rows[-1]['second_search'] else ''}{'  WRONG: ' + rows[-1]['wrong'] if why else ''}",
              flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    results = {r["result"] for r in rows}
    counts = {k: sum(r["result"] == k for r in rows) for k in sorted(results)}
    print(f"{len(rows)} cases: {counts}; searched on two processes: {sum(r['two_processes'] for r in rows)}; "
          f"root LP layers on two processes: {shared_lps[0]}; searched again: {sum(r['second_search'] for r in rows)}; "
          f"wrong: {wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
