"""Certified boxes of tree ensembles (certify.robustness.classifiers.trees): exact hyperrectangle and radius time.

    python benchmarks/ldp_trees.py [--quick]     (from the repository root)

breast_cancer scaled to [0, 1], models trained on 70% of it, certified at the first N test points:
- random forest (50 trees, depth 5), gradient boosting (50 trees, depth 3), HistGradientBoosting
  (50 iterations, depth 4): hyperrectangle over 4 sensitive features (the most important ones of
  the forest), the others fixed; linf radius over all 30 features.

Writes benchmarks/results/ldp_trees.csv (one row per model, point and question: seconds, MILP
seconds, proof seconds and nodes, status, radius interval, box volume share, sides maximal) and
ldp_trees_summary.json (medians).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, HistGradientBoostingClassifier,  # noqa: E402
                              RandomForestClassifier)
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import MinMaxScaler  # noqa: E402

from certify.robustness.classifiers import tree_hyperrectangle, tree_radius  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="5 points instead of 20, no radius over all features")
    ap.add_argument("--time-limit", type=float, default=120.0)
    args = ap.parse_args()
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    models = {
        "random_forest_50x5": RandomForestClassifier(50, max_depth=5, random_state=0),
        "gradient_boosting_50x3": GradientBoostingClassifier(n_estimators=50, max_depth=3, random_state=0),
        "hist_gradient_boosting_50x4": HistGradientBoostingClassifier(max_iter=50, max_depth=4, random_state=0),
    }
    for m in models.values():
        m.fit(Xtr, ytr)
    feats = [int(i) for i in np.argsort(-models["random_forest_50x5"].feature_importances_)[:4]]
    n_points = 5 if args.quick else 20
    rows = []
    for name, est in models.items():
        for i in range(n_points):
            x0 = Xte[i]
            h = tree_hyperrectangle(est, x0, features=feats, time_limit=args.time_limit)
            vol = float(np.prod(h.box.hi[feats] - h.box.lo[feats]))
            rows.append({"model": name, "point": i, "question": "hyperrectangle_4", "seconds": h.seconds,
                         "milp_seconds": h.milp_seconds, "proof_seconds": h.proof_seconds, "proof_nodes": h.proof_nodes,
                         "solves": h.solves, "status": h.status, "lower": h.lower, "upper": h.upper,
                         "volume": vol, "sides_maximal": sum(s["maximal"] for s in h.sides), "sides": len(h.sides)})
            print(f"{name} point {i} hyperrectangle: {h.seconds:.2f}s {h.status} volume {vol:.3g}", flush=True)
            if args.quick:
                continue
            r = tree_radius(est, x0, domain=(0, 1), time_limit=args.time_limit)
            rows.append({"model": name, "point": i, "question": "radius_all", "seconds": r.seconds,
                         "milp_seconds": r.milp_seconds, "proof_seconds": r.proof_seconds, "proof_nodes": r.proof_nodes,
                         "solves": r.solves, "status": r.status, "lower": r.lower, "upper": r.upper,
                         "volume": None, "sides_maximal": None, "sides": None})
            print(f"{name} point {i} radius: {r.seconds:.2f}s {r.status} [{r.lower:.6g}, {r.upper}]", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "ldp_trees.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = {"features": feats, "points": n_points}
    for name in models:
        for q in ("hyperrectangle_4", "radius_all"):
            sel = [r for r in rows if r["model"] == name and r["question"] == q]
            if not sel:
                continue
            summary[f"{name}/{q}"] = {
                "median_seconds": statistics.median(r["seconds"] for r in sel),
                "max_seconds": max(r["seconds"] for r in sel),
                "median_proof_seconds": statistics.median(r["proof_seconds"] for r in sel),
                "statuses": {s: sum(r["status"] == s for r in sel) for s in {r["status"] for r in sel}},
            }
    (RESULTS / "ldp_trees_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
