"""Peak memory of importing convolutional ONNX models (issue 11, item 8).

Each model is imported in a fresh subprocess whose address space is capped (RLIMIT_AS, default
4 GB, so a regression cannot take the machine down). The child reports its peak RSS (VmHWM: this
process image's peak; ru_maxrss would include the parent's RSS at fork), the outcome (ok, or the
error and the exit code the CLI would give) and the size of the dense IR. The models are stand-ins
for the VNN-COMP families named in the issue, built with `tests.onnx_builders.conv_net`.

    .venv/bin/python -m benchmarks.onnx_import_memory                 # this checkout
    .venv/bin/python -m benchmarks.onnx_import_memory --code /tmp/old  # another checkout (before/after)

Writes `benchmarks/results/onnx_import_memory.csv` (or `--out`) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

from tests.onnx_builders import conv_net

ROOT = Path(__file__).resolve().parents[1]

# (name, conv_net keyword arguments): small enough that the old importer finishes under 4 GB,
# then the full-size stand-ins
CASES: list[tuple[str, dict]] = [
    ("baseline: conv 1x4x4, 2 (interpreter + libraries)", dict(in_shape=(1, 1, 4, 4), channels=(2,))),
    ("conv 3x16x16, 16-16", dict(in_shape=(1, 3, 16, 16), channels=(16, 16))),
    ("conv+bn 3x16x16, 32-32", dict(in_shape=(1, 3, 16, 16), channels=(32, 32), batchnorm=True)),
    ("conv 3x16x16, 16-32", dict(in_shape=(1, 3, 16, 16), channels=(16, 32))),
    ("avgpool 1x28x28, 8-16", dict(in_shape=(1, 1, 28, 28), channels=(8, 16), pool="AveragePool")),
    ("avgpool 1x28x28, 32-64 (verivital-like)", dict(in_shape=(1, 1, 28, 28), channels=(32, 64), pool="AveragePool")),
    ("conv+bn 3x32x32, 16-32-32 (cifar-like)", dict(in_shape=(1, 3, 32, 32), channels=(16, 32, 32), batchnorm=True)),
    ("maxpool 3x32x32, 32-64", dict(in_shape=(1, 3, 32, 32), channels=(32, 64), pool="MaxPool")),
    ("softmax+argmax 3x64x64, 32-32 (carvana-like tail)", dict(in_shape=(1, 3, 64, 64), channels=(32, 32), tail=("Softmax", "ArgMax"))),
]

CHILD = r"""
import json, resource, sys, time
code, path, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
sys.path.insert(0, code)
from models import BadInput, load_onnx
t0 = time.perf_counter()
out = {}
try:
    net = load_onnx(path)
    out.update(code=0, outcome="ok", ir_mb=sum(l.weight.nbytes for l in net.layers if l.kind == "affine") / 1e6)
except BadInput as exc:
    out.update(code=2, outcome=" ".join(str(exc).split())[:160])
except Exception as exc:
    out.update(code=1, outcome=f"{type(exc).__name__}: {' '.join(str(exc).split())[:140]}")
out["seconds"] = round(time.perf_counter() - t0, 2)
# VmHWM is this process image's peak (ru_maxrss would include the parent's RSS at fork)
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
out["peak_rss_mb"] = int(hwm.split()[1]) / 1024
print(json.dumps(out))
"""


def run_case(code: Path, model_path: str, cap: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(code), model_path, str(cap)],
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:  # killed, or the interpreter itself failed under the cap
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"code": proc.returncode, "outcome": f"child died: {tail[:140]}", "seconds": None, "peak_rss_mb": None}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose `models` package is measured")
    ap.add_argument("--cap-gb", type=float, default=4.0, help="address-space cap of each child (GB)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "onnx_import_memory.csv")
    args = ap.parse_args(argv)
    cap = int(args.cap_gb * 1e9)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in CASES:
            path = os.path.join(tmp, "m.onnx")
            onnx.save(conv_net(**kwargs), path)
            res = run_case(args.code.resolve(), path, cap)
            rows.append({"model": name, **res})
            print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    keys = ["model", "code", "outcome", "seconds", "peak_rss_mb", "ir_mb"]
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"\n| model | exit | peak RSS (MB) | dense IR (MB) | outcome |\n|---|---|---|---|---|")
    for r in rows:
        rss = "-" if r.get("peak_rss_mb") is None else f"{r['peak_rss_mb']:.0f}"
        ir = f"{r['ir_mb']:.0f}" if r.get("ir_mb") is not None else "-"
        print(f"| {r['model']} | {r['code']} | {rss} | {ir} | {r['outcome']} |")


if __name__ == "__main__":
    main()
