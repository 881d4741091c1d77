"""Global Lipschitz bounds benchmark: a thin wrapper over `certify bench global` (docs/bench.md).

    python -m benchmarks.global_lipschitz [certify bench options, e.g. --repeat 3]

Writes benchmarks/results/bench_global/: bound and time per method (norm product, ECLipsE-Fast,
LipSDP-Layer, LipSDP-Neuron) on 20-100-100-10, 50-200-200-10, 784-100-100-10 and 10-(50x8)-10, and
the same methods beside the exact MILP constant over [0, 1]^2 on LipMIP's 2-16-16-2.
"""

import sys
from pathlib import Path

from certify.cli import main

OUT = Path(__file__).resolve().parent / "results" / "bench_global"

if __name__ == "__main__":
    sys.exit(main(["bench", "global", "--out", str(OUT), *sys.argv[1:]]))
