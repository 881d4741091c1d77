"""PTR step and query time limits: how far past its limit does a step (and a query) run? (issue 26)

    .venv/bin/python benchmarks/ptr_time_limits.py --label after                 # this checkout
    .venv/bin/python benchmarks/ptr_time_limits.py --label before --code /tmp/old  # another checkout
    .venv/bin/python benchmarks/ptr_time_limits.py --quick ...                   # fewer cells

Each cell is one `certify.ptr.ptr` query (eps = 1, delta = 1e-5, l_inf -> l1, default grid, seeded
noise) on a seeded random ReLU net (`models.zoo.random_relu_net`) at a seeded point, with a
proposal chosen to make steps hard: 1.0x (or 1.3x) the largest exact Jacobian norm (l_inf -> l1)
of 4000 sampled points of the grid box at a given fraction of the grid (a proposal near the true
local constant of that box, so neither the cheap bounds nor the samples decide it). The same
proposals for every code version (computed here in numpy, independent of the code measured).

Per step: its wall seconds (measured around `StabilitySearch.decide`, and the `seconds` it reports;
the larger is kept) over the step limit; per query: wall seconds of `ptr()` over its `time_limit`.
Nets: 2-16-16-2, 4-16-16-4 and 8-32-32-8 (splitting, branch-and-bound, MILP), 8-64-64-8 (slow
Clarke bounds), 20-64-64-8 and 20-100-100-10 (MILP only); back-ends highs and cbc on the 8- and
20-input nets, and auto (Gurobi when licensed and within its size limit, else HiGHS) on the 20-input ones.
A "report" cell runs one `StabilitySearch` with a time limit over three proposals (what
`certify report` does per point) and checks the limit of the whole search.

Writes benchmarks/results/ptr_time_limits.csv (rows of every label run so far: one per step, and
one per query with step = -1), ptr_time_limits_summary.md (max and median of seconds / limit per
label) and ptr_time_limits.png.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CSV = RESULTS / "ptr_time_limits.csv"
EPS, DELTA = 1.0, 1e-5
FIELDS = ["label", "cell", "net", "backend", "step_limit", "time_limit", "step", "index", "radius", "decision",
          "method", "status", "seconds", "ratio", "over"]


def cells(quick: bool) -> list[dict]:
    """(net, seed, R, grid fraction of the hard box and proposal factor, backend, step limit, query limit)."""
    out = []
    # (sizes, seed, R, ((fraction, factor), ...)): the proposal is factor x the sampled constant of
    # the grid box at that fraction (1.3 at the widest box: the branch-and-bound's strong splits)
    nets = [((2, 16, 16, 2), 0, 0.5, ((0.3, 1.0),)), ((4, 16, 16, 4), 0, 0.5, ((0.3, 1.0),)),
            ((8, 32, 32, 8), 0, 0.5, ((1.0, 1.3), (1.0, 1.0), (0.0, 1.0))), ((8, 32, 32, 8), 1, 0.1, ((0.5, 1.0),)),
            ((8, 32, 32, 8), 4, 0.5, ((0.15, 1.0),)), ((8, 64, 64, 8), 0, 0.2, ((0.2, 1.0),)),
            ((20, 64, 64, 8), 0, 0.1, ((0.3, 1.0),)), ((20, 100, 100, 10), 0, 0.1, ((1.0, 1.0),))]
    limits = (0.5, 2.0) if quick else (0.5, 1.0, 2.0)
    for (sizes, seed, radius, fracs), limit in itertools.product(nets, limits):
        for frac, factor in fracs[:1] if quick else fracs:
            backends = ["highs"]
            if sizes[0] in (8, 20) and not quick:
                backends.append("cbc")
            if sizes[0] == 20 and not quick:
                backends.append("auto")
            for b in backends:
                out.append(dict(sizes=sizes, seed=seed, radius=radius, frac=frac, factor=factor, backend=b,
                                step_limit=limit, time_limit=None))
    # query limits: a search with several hard steps cut by the query's limit
    for sizes, seed, radius, frac in [((8, 32, 32, 8), 1, 0.1, 0.5), ((8, 32, 32, 8), 4, 0.5, 0.15),
                                      ((20, 64, 64, 8), 0, 0.1, 0.3)]:
        for b in ("highs",) if quick else ("highs", "cbc"):
            out.append(dict(sizes=sizes, seed=seed, radius=radius, frac=frac, factor=1.0, backend=b, step_limit=2.0,
                            time_limit=3.0))
    return out


def jacobian_norms(blocks, X):
    """Exact ||J(x)||_{inf -> 1} at each row of X (activation pattern of each point; ties count as 0)."""
    import numpy as np

    out = []
    for x in X:
        h, J = x, np.eye(x.size)
        for b in blocks[:-1]:
            z = b.weight @ h + b.bias
            s = (z > 0).astype(float)
            J, h = s[:, None] * (b.weight @ J), s * z
        J = blocks[-1].weight @ J
        m, n = J.shape
        if m <= n:
            V = np.array(list(itertools.product((-1.0, 1.0), repeat=m)))
            out.append(float(np.max(np.abs(V @ J).sum(axis=1))))
        else:
            U = np.array(list(itertools.product((-1.0, 1.0), repeat=n)))
            out.append(float(np.max(np.abs(J @ U.T).sum(axis=0))))
    return np.array(out)


def hard_proposal(net, x, radius: float, samples: int = 4000, seed: int = 0) -> float:
    import numpy as np

    from solvers.bounds.types import relu_blocks

    rng = np.random.default_rng(seed)
    X = rng.uniform(x - radius, x + radius, (samples, x.size))
    face = rng.random(X.shape) < 0.3
    X = np.where(face, np.where(rng.random(X.shape) < 0.5, x - radius, x + radius), X)
    return float(jacobian_norms(relu_blocks(net), X).max())


def run_cell(c: dict, label: str) -> list[dict]:
    import numpy as np

    from certify.ptr import ptr
    from certify.ptr.grid import TestGrid
    from certify.ptr.search import StabilitySearch
    from models.zoo import random_relu_net

    net = random_relu_net(c["sizes"], c["seed"])
    x = np.random.default_rng(c["seed"] + 100).uniform(-1, 1, c["sizes"][0])
    grid = TestGrid.make(c["radius"], EPS, DELTA)
    k = int(round(c["frac"] * grid.max_index))
    proposal = c["factor"] * hard_proposal(net, x, grid.radius_at(k))
    walls: list[float] = []
    original = StabilitySearch.decide

    def timed(self, k, p):
        t = time.perf_counter()
        try:
            return original(self, k, p)
        finally:
            walls.append(time.perf_counter() - t)

    StabilitySearch.decide = timed
    try:
        t = time.perf_counter()
        res = ptr(net, x, c["radius"], epsilon=EPS, delta=DELTA, proposal=proposal, step_time_limit=c["step_limit"],
                  time_limit=c["time_limit"], backend=c["backend"], sampler=0)
        wall = time.perf_counter() - t
    finally:
        StabilitySearch.decide = original
    name = "-".join(map(str, c["sizes"])) + f" s{c['seed']} R={c['radius']:g} D_p={proposal:.4g}"
    cell = f"{name} {c['backend']} step {c['step_limit']:g}" + (f" query {c['time_limit']:g}" if c["time_limit"] else "")
    rows = []
    for i, (s, w) in enumerate(zip(res.steps, walls)):
        sec = max(w, s.seconds)
        rows.append(dict(label=label, cell=cell, net=name, backend=c["backend"], step_limit=c["step_limit"],
                         time_limit=c["time_limit"] or "", step=i, index=s.index, radius=s.radius,
                         decision=s.decision, method=s.method, status=s.status, seconds=sec,
                         ratio=sec / c["step_limit"], over=sec - c["step_limit"]))
    limit = c["time_limit"]
    rows.append(dict(label=label, cell=cell, net=name, backend=c["backend"], step_limit=c["step_limit"],
                     time_limit=limit or "", step=-1, index=res.test.get("index", ""), radius="",
                     decision="decided" if res.decided else "undecided", method="query", status=res.status,
                     seconds=wall, ratio=wall / limit if limit else "", over=wall - limit if limit else ""))
    steps = [r for r in rows if r["step"] >= 0]
    print(f"  [{label}] {cell}: {len(steps)} steps, max {max(r['seconds'] for r in steps):.2f} s "
          f"({max(r['ratio'] for r in steps):.2f}x), query {wall:.2f} s"
          + (f" (limit {limit:g})" if limit else "") + f", undecided {sum(r['decision'] == 'undecided' for r in steps)}",
          flush=True)
    return rows


def run_report_cell(label: str, backend: str = "highs", limit: float = 3.0) -> list[dict]:
    """What `certify report` runs per point: one StabilitySearch with a time limit, several proposals."""
    import numpy as np

    from certify.ptr.grid import TestGrid
    from certify.ptr.search import StabilitySearch
    from models.zoo import random_relu_net

    sizes, seed, radius = (8, 32, 32, 8), 1, 0.1
    net = random_relu_net(sizes, seed)
    x = np.random.default_rng(seed + 100).uniform(-1, 1, sizes[0])
    grid = TestGrid.make(radius, EPS, DELTA)
    proposals = [hard_proposal(net, x, grid.radius_at(int(f * grid.max_index))) for f in (0.5, 0.2, 0.05)]
    t = time.perf_counter()
    search = StabilitySearch(net, x, grid, step_time_limit=2.0, time_limit=limit, backend=backend)
    undecided = 0
    for p in proposals:
        undecided += not search.search(p).decided
    wall = time.perf_counter() - t
    cell = f"report search 8-32-32-8 s1 R=0.1 3 proposals {backend} step 2 query {limit:g}"
    print(f"  [{label}] {cell}: {wall:.2f} s (limit {limit:g})", flush=True)
    return [dict(label=label, cell=cell, net="8-32-32-8 s1 R=0.1", backend=backend, step_limit=2.0, time_limit=limit,
                 step=-1, index="", radius="", decision="undecided" if undecided else "decided", method="report",
                 status="", seconds=wall, ratio=wall / limit, over=wall - limit)]


def summarise(rows: list[dict]) -> list[str]:
    lines = ["# PTR time limits (`benchmarks/ptr_time_limits.py`)", "",
             "Step seconds / step limit and query seconds / query limit (issue 26: every step within limit + 1 s,",
             "every query within its limit + 1 s). Cells: hard proposals on random nets (module doc).", "",
             "| label | steps | max step s / limit | median step s / limit | max step overrun s | steps over limit + 1 s "
             "| undecided steps | queries with a limit | max query overrun s |", "|---|---|---|---|---|---|---|---|---|"]
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        steps = [r for r in mine if int(r["step"]) >= 0]
        queries = [r for r in mine if int(r["step"]) < 0 and r["time_limit"] not in ("", None)]
        ratios = [float(r["ratio"]) for r in steps]
        overs = [float(r["over"]) for r in steps]
        qover = [float(r["over"]) for r in queries]
        lines.append(f"| {label} | {len(steps)} | {max(ratios):.2f} | {statistics.median(ratios):.3f} | {max(overs):.2f} | "
                     f"{sum(o > 1.0 for o in overs)} | {sum(r['decision'] == 'undecided' for r in steps)} | "
                     f"{len(queries)} | {max(qover, default=float('nan')):.2f} |")
    lines += ["", "Per step limit:", "", "| label | step limit s | steps | max s | median s | max s / limit |",
              "|---|---|---|---|---|---|"]
    for label in dict.fromkeys(r["label"] for r in rows):
        for lim in sorted({float(r["step_limit"]) for r in rows if r["label"] == label}):
            st = [float(r["seconds"]) for r in rows if r["label"] == label and int(r["step"]) >= 0
                  and float(r["step_limit"]) == lim]
            if st:
                lines.append(f"| {label} | {lim:g} | {len(st)} | {max(st):.2f} | {statistics.median(st):.3f} | "
                             f"{max(st) / lim:.2f} |")
    lines += ["", "Worst step per cell:", "", "| label | cell | worst step s | method | decision |", "|---|---|---|---|---|"]
    for label in dict.fromkeys(r["label"] for r in rows):
        for cell in dict.fromkeys(r["cell"] for r in rows if r["label"] == label):
            st = [r for r in rows if r["label"] == label and r["cell"] == cell and int(r["step"]) >= 0]
            q = [r for r in rows if r["label"] == label and r["cell"] == cell and int(r["step"]) < 0]
            if st:
                w = max(st, key=lambda r: float(r["seconds"]))
                lines.append(f"| {label} | {cell} | {float(w['seconds']):.2f} | {w['method']} | {w['decision']} |")
            elif q:
                lines.append(f"| {label} | {cell} | query {float(q[0]['seconds']):.2f} | {q[0]['method']} | "
                             f"{q[0]['decision']} |")
    return lines


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [[float(r["ratio"]) for r in rows if r["label"] == lab and int(r["step"]) >= 0] for lab in labels]
    axes[0].boxplot(steps, orientation="horizontal")
    axes[0].set_yticks(range(1, len(labels) + 1), labels)
    axes[0].axvline(1.0, color="#7f7f7f", linestyle=":")
    axes[0].set_xlabel("step seconds / step limit")
    for lab in labels:
        st = [r for r in rows if r["label"] == lab and int(r["step"]) >= 0]
        axes[1].scatter([float(r["step_limit"]) for r in st], [float(r["over"]) for r in st], s=10, label=lab, alpha=0.6)
    axes[1].axhline(1.0, color="#d62728", linestyle="--", label="limit + 1 s")
    axes[1].set_xlabel("step limit (s)")
    axes[1].set_ylabel("step seconds - limit")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "ptr_time_limits.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="after", help="name of this run in the CSV (rows of other labels are kept)")
    ap.add_argument("--code", help="measure the code of another checkout (its root is put first on sys.path)")
    ap.add_argument("--quick", action="store_true", help="fewer cells (one fraction per net, limits 0.5 and 2)")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.code).resolve()) if args.code else str(ROOT))
    import certify.ptr.search as search_module

    print(f"measuring {Path(search_module.__file__).resolve().parents[2]} as {args.label!r}", flush=True)
    rows = []
    for c in cells(args.quick):
        rows += run_cell(c, args.label)
    rows += run_report_cell(args.label)
    RESULTS.mkdir(parents=True, exist_ok=True)
    old = []
    if CSV.exists():
        with open(CSV, newline="") as fh:
            old = [r for r in csv.DictReader(fh) if r["label"] != args.label]
    allrows = old + rows
    with open(CSV, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for r in allrows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    lines = summarise(allrows)
    (RESULTS / "ptr_time_limits_summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(allrows)


if __name__ == "__main__":
    main()
