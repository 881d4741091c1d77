"""Propose-Test-Release latency per query and batch throughput (issue 13).

    python benchmarks/ptr.py [--queries 20] [--throughput 200]     (from the repository root)

Two networks, l_inf input norm, l1 output norm, eps = 1, delta = 1e-5:

- `obfuscator`: a seeded random 8-32-32-8 ReLU net (the paper's obfuscator size), R = 0.5,
  inputs uniform in [-1, 1]^8, no input domain (boxes are unbounded);
- `digits`: `models.zoo.digits_net((32,))` (64-32-10, trained on scikit-learn's 8x8 digits),
  R = 0.1, input domain [0, 1]^64, queries from its test set.

D_p is proposed from 16 public points (training points / other random points): certified local
constants over box(x, R) with a 20 s time limit each (their proven upper bounds), then the
`mean+3std` and `q0.95` rules. Latency is the wall time of `certify.ptr.ptr` per query, in
process, each query from scratch ("fresh") and as a stream sharing `SharedBounds` ("shared").
Throughput: 200 obfuscator queries (mean+3std) through `certify.batch.run_batch` on 1 and 2 local
processes and on a 2-worker Dask LocalCluster on loopback (one thread per worker).
Noise is seeded numpy (reproducible; not secure): the timing of the test is what is measured.

Writes benchmarks/results/ptr.csv (latency), ptr_throughput.csv, ptr_summary.md and ptr.png.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import Counter
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from certify.batch import run_batch  # noqa: E402
from certify.ptr import SharedBounds, propose, ptr  # noqa: E402
from certify.report.tasks import certify_point, ptr_point  # noqa: E402
from models.zoo import digits_net, random_relu_net  # noqa: E402
from models.zoo.digits import digits_data  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
EPS, DELTA = 1.0, 1e-5
CERT_TIME = 20.0
RULES = ("mean+3std", "q0.95")


def setups() -> list[dict]:
    rng = np.random.default_rng(1)
    d = digits_data(0)
    return [
        dict(name="obfuscator 8-32-32-8", net=random_relu_net((8, 32, 32, 8), seed=0), radius=0.5, domain=None,
             public=rng.uniform(-1, 1, (16, 8)), queries=np.random.default_rng(2).uniform(-1, 1, (200, 8))),
        dict(name="digits 64-32-10", net=digits_net((32,), 0), radius=0.1, domain=(0.0, 1.0),
             public=d.x_train[:16], queries=d.x_test[:200]),
    ]


def proposals(s: dict) -> list:
    t = time.perf_counter()
    certs = run_batch(certify_point, list(s["public"]), workers=2, progress=False,
                      context=dict(net=s["net"], radius=s["radius"], input_norm="linf", domain=s["domain"],
                                   time_limit=CERT_TIME, backend="auto", threads=1))
    s["proposal_seconds"] = time.perf_counter() - t
    uppers = [c["upper"] for c in certs]
    s["public_uppers"] = uppers
    return propose(uppers, s["radius"], EPS, RULES)


def latency(s: dict, value: float, n: int, mode: str) -> list[dict]:
    shared = SharedBounds(s["net"]) if mode == "shared" else None
    rows = []
    for i, x in enumerate(s["queries"][:n]):
        t = time.perf_counter()
        r = ptr(s["net"], x, s["radius"], epsilon=EPS, delta=DELTA, proposal=value, domain=s["domain"], sampler=i,
                shared=shared)
        rows.append({"seconds": time.perf_counter() - t, "released": r.released, "decided": r.decided,
                     "steps": len(r.steps), "phi": r.phi, "methods": [st.method for st in r.steps]})
    return rows


def throughput(s: dict, value: float, n: int) -> list[dict]:
    items = list(s["queries"][:n])
    ctx = dict(net=s["net"], radius=s["radius"], epsilon=EPS, delta=DELTA, proposal=value, domain=s["domain"], seed=0)
    out = []
    runs: list[tuple[str, dict]] = [("1 process", dict(workers=1)), ("2 processes", dict(workers=2))]
    try:
        import distributed
    except ImportError:
        distributed = None
    for label, kw in runs + ([("dask LocalCluster 2x1", {})] if distributed else []):
        cluster = None
        if not kw:
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                               dashboard_address=None)
            kw = dict(scheduler=cluster.scheduler_address)
        try:
            t = time.perf_counter()
            rows = run_batch(ptr_point, items, context=ctx, progress=False, **kw)
            wall = time.perf_counter() - t
        finally:
            if cluster is not None:
                cluster.close()
        out.append({"executor": label, "queries": n, "wall_seconds": wall, "queries_per_second": n / wall,
                    "released": sum(r["released"] for r in rows), "undecided": sum(not r["decided"] for r in rows),
                    "outputs": [r["released"] for r in rows]})
        print(f"  throughput {label}: {n} queries in {wall:.1f} s ({n / wall:.2f}/s)", flush=True)
    same = all(o["outputs"] == out[0]["outputs"] for o in out)
    for o in out:
        o["same_decisions_as_1_process"] = same
        del o["outputs"]
    return out


def summarise(seconds: list[float]) -> dict:
    v = sorted(seconds)
    return {"median_s": statistics.median(v), "mean_s": statistics.fmean(v), "p90_s": v[int(0.9 * (len(v) - 1))],
            "max_s": v[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=20, help="queries per latency cell (default 20)")
    ap.add_argument("--throughput", type=int, default=200,
                    help="queries of the throughput runs (default 200; 0: keep the last throughput results)")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    lat_rows, thr_rows, per_query = [], [], {}
    for s in setups():
        props = proposals(s)
        print(f"{s['name']}: proposals from 16 public points in {s['proposal_seconds']:.1f} s: "
              + ", ".join(f"{p.rule} = {p.value:.6g}" for p in props), flush=True)
        for p in props:
            for mode in ("fresh", "shared"):
                rows = latency(s, p.value, args.queries, mode)
                per_query[(s["name"], p.rule, mode)] = [r["seconds"] for r in rows]
                row = {"net": s["name"], "radius": s["radius"], "rule": p.rule, "proposal": p.value,
                       "noise_scale": p.noise_scale, "mode": mode, "queries": len(rows), **summarise(per_query[(s["name"], p.rule, mode)]),
                       "release_fraction": np.mean([r["released"] for r in rows]),
                       "undecided_fraction": np.mean([not r["decided"] for r in rows]),
                       "mean_steps": np.mean([r["steps"] for r in rows]), "mean_phi": np.mean([r["phi"] for r in rows]),
                       "methods": " ".join(f"{k}:{v}" for k, v in sorted(Counter(m for r in rows for m in r["methods"]).items()))}
                lat_rows.append(row)
                print(f"  {p.rule:<10} {mode:<6} median {row['median_s']:.3f} s  mean {row['mean_s']:.3f} s  "
                      f"p90 {row['p90_s']:.3f} s  released {row['release_fraction']:.2f}  "
                      f"undecided {row['undecided_fraction']:.2f}", flush=True)
        if s["name"].startswith("obfuscator") and args.throughput:
            value = props[0].value
            for r in throughput(s, value, args.throughput):
                thr_rows.append({"net": s["name"], "rule": props[0].rule, "proposal": value, **r})
    _write_csv(RESULTS / "ptr.csv", lat_rows)
    if thr_rows:
        _write_csv(RESULTS / "ptr_throughput.csv", thr_rows)
    elif (RESULTS / "ptr_throughput.csv").exists():  # --throughput 0: keep (and show) the last throughput run
        thr_rows = _read_throughput(RESULTS / "ptr_throughput.csv")
    _summary(lat_rows, thr_rows)
    _plot(per_query, thr_rows)


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def _read_throughput(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for key in ("queries", "released", "undecided"):
            r[key] = int(r[key])
        for key in ("wall_seconds", "queries_per_second", "proposal"):
            r[key] = float(r[key])
    return rows


def _summary(lat: list[dict], thr: list[dict]) -> None:
    lines = ["# PTR benchmark (`python benchmarks/ptr.py`)", "",
             f"eps = {EPS}, delta = {DELTA}, l_inf -> l1; D_p from 16 public points (certificates, {CERT_TIME:g} s each).",
             "Latency per query in process; target <= 0.5 s (the paper: 2 s per image with LipMIP).", "",
             "| net | R | rule | D_p | mode | median s | mean s | p90 s | max s | released | undecided | step methods |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in lat:
        lines.append(f"| {r['net']} | {r['radius']:g} | {r['rule']} | {r['proposal']:.6g} | {r['mode']} | "
                     f"{r['median_s']:.3f} | {r['mean_s']:.3f} | {r['p90_s']:.3f} | {r['max_s']:.3f} | "
                     f"{r['release_fraction']:.2f} | {r['undecided_fraction']:.2f} | {r['methods']} |")
    if thr:
        lines += ["", "| executor | D_p | queries | wall s | queries/s | released | undecided | same decisions |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in thr:
            lines.append(f"| {r['executor']} | {r['proposal']:.6g} | {r['queries']} | {r['wall_seconds']:.1f} | "
                         f"{r['queries_per_second']:.2f} | "
                         f"{r['released']} | {r['undecided']} | {r['same_decisions_as_1_process']} |")
    (RESULTS / "ptr_summary.md").write_text("\n".join(lines) + "\n")


def _plot(per_query: dict, thr: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [2.2, 1]})
    keys = list(per_query)
    axes[0].boxplot([per_query[k] for k in keys], orientation="horizontal")
    axes[0].set_yticks(range(1, len(keys) + 1), [f"{n.split()[0]} {r} {m}" for n, r, m in keys], fontsize=8)
    axes[0].axvline(0.5, color="#d62728", linestyle="--", label="target 0.5 s")
    axes[0].axvline(2.0, color="#7f7f7f", linestyle=":", label="paper (LipMIP) 2 s")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("seconds per PTR query")
    axes[0].legend(fontsize=8)
    if thr:
        axes[1].bar([r["executor"] for r in thr], [r["queries_per_second"] for r in thr], color="#1f77b4")
        axes[1].set_ylabel(f"queries / s ({thr[0]['queries']} obfuscator queries)")
        axes[1].tick_params(axis="x", labelsize=8, rotation=15)
    fig.tight_layout()
    fig.savefig(RESULTS / "ptr.png", dpi=110)


if __name__ == "__main__":
    main()
