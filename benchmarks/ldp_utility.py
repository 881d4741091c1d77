"""LDP utility (certify.ldp): rho throughput, theory vs sampling time, mechanism comparison.

    python benchmarks/ldp_utility.py [--quick]     (from the repository root)

Writes to benchmarks/results/:
- ldp_rho_throughput.csv       rho evaluations per second (vectorised rho_batch), per mechanism
- ldp_theory_vs_sampling.csv   breast-cancer logistic regression, certified hyperrectangle on two features:
                               theoretical rho and its time vs empirical rho_hat (n = 2000) and its time,
                               per mechanism and epsilon = 1..8 (Zheng & Hu Table 2 / Fig. 6)
- ldp_exact_sampler.csv        time per value of the exact (CSPRNG) sampler vs numpy
- ldp_comparison.csv           rho at x = 0.5 for box radius theta = 0.05..0.5, eps = 2, 4, 6 (Fig. 4)
- ldp_summary.json             headline numbers
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from certify.ldp import (compare_mechanisms, empirical_rho, linear_hyperrectangle, make_mechanism,  # noqa: E402
                         rho_batch, smallest_epsilon, utility)

RESULTS = ROOT / "benchmarks" / "results"
NAMES = ("laplace", "gaussian", "pm", "sw", "exponential", "krr")


def _mech(name: str, eps: float = 1.0):
    if name == "gaussian":
        return make_mechanism(name, eps, delta=1e-5, clip=True)
    if name == "laplace":
        return make_mechanism(name, eps, clip=True)
    return make_mechanism(name, eps)


def _csv(path: Path, rows: list[dict]) -> None:
    keys = list(rows[0])
    with open(path, "w") as fh:
        fh.write(",".join(keys) + "\n")
        for r in rows:
            fh.write(",".join(f"{r[k]:.10g}" if isinstance(r[k], float) else str(r[k]) for k in keys) + "\n")


def throughput(repeats: int) -> list[dict]:
    rng = np.random.default_rng(0)
    n, d = 2000, 2
    x = rng.uniform(0, 1, (n, d))
    lo = np.clip(x - rng.uniform(0, 0.4, x.shape), 0, 1)
    hi = np.clip(x + rng.uniform(0, 0.4, x.shape), 0, 1)
    eps = np.linspace(0.5, 8, 50)
    rows = []
    for name in NAMES:
        mech = _mech(name)
        rho_batch(mech, eps, x, lo, hi)  # warm-up (Gaussian: sigma solves cached per epsilon)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            rho_batch(mech, eps, x, lo, hi)
            times.append(time.perf_counter() - t0)
        t = float(np.median(times))
        rows.append({"mechanism": mech.label, "evaluations": eps.size * n, "features": d, "seconds": t,
                     "evaluations_per_second": eps.size * n / t})
        print(f"{mech.label:32s} {eps.size * n / t:14,.0f} rho/s")
    # a single call (validation + one point), as a user calls utility()
    pm = make_mechanism("pm", 2.0)
    t0 = time.perf_counter()
    for _ in range(200):
        utility(pm, ([0.2, 0.0], [0.8, 1.0]), point=[0.5, 0.5])
    rows.append({"mechanism": "pm (single utility() call)", "evaluations": 200, "features": 2,
                 "seconds": time.perf_counter() - t0, "evaluations_per_second": 200 / (time.perf_counter() - t0)})
    return rows


def theory_vs_sampling(n: int, eps_grid) -> tuple[list[dict], dict]:
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    model = LogisticRegression(max_iter=5000).fit(X, y)
    x0, feats = X[10], [0, 9]
    t0 = time.perf_counter()
    cert = linear_hyperrectangle(model, x0, features=feats)
    box_seconds = time.perf_counter() - t0
    rows = []
    for name in NAMES:
        for eps in eps_grid:
            mech = _mech(name, eps)
            t1 = time.perf_counter()
            u = utility(mech, cert, features=feats)
            theory = time.perf_counter() - t1
            emp = empirical_rho(mech, model, cert, features=feats, n=n, sampler=int(eps * 100))
            rows.append({"mechanism": mech.label, "epsilon": float(eps), "rho": u.rho, "rho_hat": emp.rho_hat,
                         "ci_low": emp.ci[0], "ci_high": emp.ci[1], "consistent": emp.consistent,
                         "theory_ms": 1e3 * theory, "sampling_and_query_ms": 1e3 * emp.seconds})
    info = {"hyperrectangle_seconds": box_seconds, "box_lo": cert.box.lo[feats].tolist(),
            "box_hi": cert.box.hi[feats].tolist(), "point": x0[feats].tolist(), "features": feats}
    return rows, info


def exact_sampler(n: int) -> list[dict]:
    rows = []
    for name in NAMES:
        mech = _mech(name, 2.0)
        t0 = time.perf_counter()
        mech.sample(0.37, n, sampler=random.SystemRandom())
        exact_s = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        mech.sample(0.37, 100000, sampler=1)
        numpy_s = (time.perf_counter() - t0) / 100000
        rows.append({"mechanism": mech.label, "exact_ms_per_value": 1e3 * exact_s, "numpy_us_per_value": 1e6 * numpy_s})
        print(f"{mech.label:32s} exact {1e3 * exact_s:7.3f} ms/value   numpy {1e6 * numpy_s:7.3f} us/value")
    return rows


def comparison() -> list[dict]:
    rows = []
    for eps in (2.0, 4.0, 6.0):
        for theta in np.round(np.arange(0.05, 0.501, 0.05), 2):
            cmp = compare_mechanisms(([0.5 - theta], [0.5 + theta]), eps, point=[0.5])
            for r in cmp.rows:
                rows.append({"epsilon": eps, "theta": float(theta), "mechanism": r["label"], "rho": r["rho"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and samples")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    tp = throughput(3 if args.quick else 7)
    _csv(RESULTS / "ldp_rho_throughput.csv", tp)
    eps_grid = [1.0, 4.0, 8.0] if args.quick else [float(e) for e in range(1, 9)]
    tvs, box = theory_vs_sampling(2000, eps_grid)
    _csv(RESULTS / "ldp_theory_vs_sampling.csv", tvs)
    ex = exact_sampler(20 if args.quick else 100)
    _csv(RESULTS / "ldp_exact_sampler.csv", ex)
    _csv(RESULTS / "ldp_comparison.csv", comparison())
    paper = {
        "laplace_eps_for_rho_0.8_theta_0.3": smallest_epsilon(make_mechanism("laplace", 1.0), ([0.2], [0.8]), 0.8,
                                                              point=[0.5]).epsilon,
        "pm_eps_for_rho_0.8_theta_0.3": smallest_epsilon(make_mechanism("pm", 1.0), ([0.2], [0.8]), 0.8,
                                                         point=[0.5]).epsilon,
    }
    summary = {
        "rho_per_second": {r["mechanism"]: r["evaluations_per_second"] for r in tp},
        "theory_ms_median": float(np.median([r["theory_ms"] for r in tvs])),
        "sampling_and_query_ms_median": float(np.median([r["sampling_and_query_ms"] for r in tvs])),
        "all_consistent": all(r["consistent"] for r in tvs),
        "hyperrectangle": box,
        "exact_sampler_ms_per_value": {r["mechanism"]: r["exact_ms_per_value"] for r in ex},
        "paper_examples": paper,
    }
    (RESULTS / "ldp_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
