"""Whole-CLI-call cost of small Lipschitz questions (issue 30): wall and CPU seconds, import time.

    python -m benchmarks.startup [--roots branch=.,main=/work/main] [--repeat 5] [--importtime]

Runs LipMIP's question (c = [1, -1], box [0, 1]^2, linf input, default method) on the suite's two
small nets as `python -m certify.cli lipschitz ...`, one subprocess per call, checkouts
interleaved so both see the same load; prints the medians of wall seconds and of CPU seconds
(user + sys of the child), and the certificate's own seconds (from the human output, as a user runs it). With `--importtime`, the medians of
`python -X importtime` self times summed per group (numpy, scipy, onnx, ...). Bytecode is cached
under a temporary prefix (a real install has its .pyc files; PYTHONDONTWRITEBYTECODE would add
compile time to every run).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NETS = ("lipmip_2-16-16-2", "lipmip_2-20-20-20-2")
GROUPS = (("certify/solvers/models", r"(certify|solvers|models)\b"), ("numpy", r"numpy\b"), ("scipy", r"scipy\b"),
          ("onnxruntime", r"onnxruntime\b"), ("onnx/protobuf", r"(onnx|google|ml_dtypes)\b"), ("highspy", r"highspy\b"),
          ("rich", r"rich\b"), ("stdlib/other", r"."))


def _command(root: Path, net: str, importtime: bool) -> list[str]:
    model = root / "models" / "zoo" / "data" / "lipmip_suite" / f"{net}.onnx"  # (models.zoo.lipmip_suite_path)
    return [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "certify.cli", "lipschitz", str(model), "--center", "0.5,0.5", "--radius", "0.5", "--margin", "0,1"]


def _run(cmd: list[str], root: Path, cache: str) -> tuple[float, float, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=cache)
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr[-500:]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p.stdout, p.stderr


def _groups(stderr: str) -> dict[str, float]:
    sums: collections.Counter = collections.Counter()
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s+(\S+)", line)
        if m:
            group = next(g for g, pat in GROUPS if re.match(pat, m.group(2)))
            sums[group] += int(m.group(1)) / 1e6
    sums["total"] = sum(sums.values())
    return dict(sums)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", default=f"branch={ROOT}", help="name=path,... checkouts to compare")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--importtime", action="store_true", help="also the import time per group")
    args = ap.parse_args(argv)
    roots = {k: Path(v).resolve() for k, v in (r.split("=", 1) for r in args.roots.split(","))}
    cache = tempfile.mkdtemp(prefix="certify-startup-pyc-")
    calls: dict = collections.defaultdict(list)
    imports: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for name, root in roots.items():  # warm the bytecode cache of each checkout
        _run(_command(root, NETS[0], False), root, cache)
    for _ in range(args.repeat):
        for net in NETS:
            for name, root in roots.items():
                wall, cpu, out, _err = _run(_command(root, net, False), root, cache)
                # the human output (what a user runs): "... nodes ..., 0.44s" holds the certificate's seconds
                cert = float(re.search(r"nodes.*?, ([0-9.]+)s\b", out).group(1))
                calls[(net, name)].append((wall, cpu, cert))
        if args.importtime:
            for name, root in roots.items():
                for group, secs in _groups(_run(_command(root, NETS[0], True), root, cache)[3]).items():
                    imports[group][name].append(secs)
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeat} (seconds)")
    for (net, name), rows in calls.items():
        wall, cpu, cert = (statistics.median(r[k] for r in rows) for k in range(3))
        print(f"{net:24s} {name:8s} wall {wall:6.3f}  cpu {cpu:6.3f}  certificate {cert:6.3f}")
    if imports:
        print(f"import time per group (self times, {NETS[0]})")
        for group in ["total"] + [g for g, _ in GROUPS]:
            print(f"  {group:24s} " + "  ".join(f"{n} {statistics.median(imports[group][n] or [0.0]):.3f}" for n in roots))


if __name__ == "__main__":
    main()
