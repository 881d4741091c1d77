"""Exact local Lipschitz benchmark: a thin wrapper over `certify bench lipschitz` (docs/bench.md).

    python -m benchmarks.lipschitz_milp [certify bench options, e.g. --repeat 3 --time-limit 300]

Writes benchmarks/results/bench_lipschitz/ (runs.csv, machine.json, summary.md, plots): LipMIP's
suite per back-end beside LipMIP's times, width and depth sweeps, digits MLPs, ACAS Xu, and the
bound-tightening ablation.
"""

import sys
from pathlib import Path

from certify.cli import main

OUT = Path(__file__).resolve().parent / "results" / "bench_lipschitz"

if __name__ == "__main__":
    sys.exit(main(["bench", "lipschitz", "--out", str(OUT), *sys.argv[1:]]))
