"""`certify verify`: decide a VNNLIB property (sat / unsat / timeout / unknown), or run an instance list."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter

from ..errors import BadInput
from ..schema import INSTANCES
from .common import load_model, out_arg, print_json, seed_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="verify a VNNLIB property (sat / unsat / timeout / unknown)",
        description=(
            "Decide a VNNLIB property of an ONNX model. The asserts describe the unsafe set: sat means a "
            "counterexample exists (it is replayed in float64 through the network and in onnxruntime before "
            "it is reported), unsat that the property holds (every piece of the input set closed by sound "
            "bounds). Without --json prints the VNN-COMP result word and, for sat, the witness "
            "((X_0 v) ... (Y_0 v) ...). With --instances runs a VNN-COMP instance list (onnx, vnnlib, "
            "timeout; paths relative to the CSV) and writes a VNN-COMP results CSV (resumable)."
        ),
    )
    p.add_argument("model", nargs="?", metavar="MODEL", help="ONNX model file (.onnx)")
    p.add_argument("property", nargs="?", metavar="PROPERTY", help="VNNLIB property file (.vnnlib or .vnnlib.gz)")
    p.add_argument("--timeout", "--time-limit", dest="timeout", type=float, metavar="S",
                   help="wall-clock seconds for the whole command, model loading included (default 60); with "
                        "--instances: per instance, overriding the CSV's timeouts")
    p.add_argument("--seed", type=int, default=0, help="seed of the attack (default 0)")
    p.add_argument("--instances", metavar="CSV", help="run an instance list instead of one property")
    p.add_argument("--out", metavar="RESULTS.csv",
                   help="with --instances: results CSV (rerunning the same run skips the instances already in it; "
                        "a file of another run is refused)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --instances --out: start afresh when --out holds another run (its rows are deleted)")
    p.add_argument("--benchmark", metavar="NAME", help="with --instances: benchmark name in the results (default: the CSV's folder)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(handler=_verify)


def _timeout(value: float | None) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise BadInput(f"--timeout must be a positive number of seconds, got {value:g}")
    return value


def _verify(args: argparse.Namespace) -> int:
    timeout = _timeout(args.timeout)
    seed_arg(args.seed)
    out_arg(args.out)
    if args.instances:
        if args.model or args.property:
            raise BadInput("give either MODEL PROPERTY or --instances CSV, not both")
        return _run_instances(args, timeout)
    if not (args.model and args.property):
        raise BadInput("verify needs MODEL and PROPERTY (or --instances CSV)")
    if args.out is not None or args.benchmark is not None or args.overwrite:
        raise BadInput("--out, --overwrite and --benchmark only apply to --instances")
    from models.onnx_reference import OnnxReference

    from ..verify import load_vnnlib, verify

    # the model first: an unsupported model is refused before a large property is parsed
    net = load_model(args.model)
    reference = OnnxReference.from_file(args.model, net)
    spec = load_vnnlib(args.property)
    result = verify(net, spec, timeout=60.0 if timeout is None else timeout, reference=reference, seed=args.seed)
    if args.json:
        print_json(result.to_dict())
    else:
        print(result.vnncomp_text())
    return 0


def _run_instances(args: argparse.Namespace, timeout: float | None) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..verify.instances import read_instances, run_instances

    instances = read_instances(args.instances)
    if args.overwrite and not args.out:
        raise BadInput("--overwrite applies to --out only")
    benchmark = args.benchmark or os.path.basename(os.path.dirname(os.path.abspath(args.instances))) or "benchmark"
    out = args.out if args.out else (None if args.json else sys.stdout)
    counts: Counter[str] = Counter()
    errors: list[str] = []
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[last]}"), transient=True,
                        console=_stderr_console(), disable=not sys.stderr.isatty())
    with progress:
        task = progress.add_task("verify", total=len(instances), last="")

        def start(inst) -> None:
            progress.update(task, description=f"{os.path.basename(inst.onnx)} {os.path.basename(inst.vnnlib)}")

        def done(r, _cert) -> None:
            counts[r.result] += 1
            if r.message:
                errors.append(f"{r.instance.onnx},{r.instance.vnnlib}: {r.message}")
            progress.update(task, advance=1, last=f"{r.result} {r.run_time:.1f}s")

        results, skipped = run_instances(instances, out, benchmark=benchmark, timeout=timeout, seed=args.seed,
                                          on_start=start, on_result=done, overwrite=args.overwrite)
        progress.update(task, completed=len(instances))
    for e in errors:
        print(f"certify verify: error in {e}", file=sys.stderr)
    summary = {"instances": len(instances), "skipped": skipped, "run": len(results), "results": dict(counts),
               "seconds": sum(r.prepare_time + r.run_time for r in results), "out": args.out}
    if args.json:
        summary["rows"] = [dict(zip(("benchmark", "onnx", "vnnlib", "prepare_time", "result", "run_time"),
                                    (r.benchmark, r.instance.onnx, r.instance.vnnlib, r.prepare_time, r.result, r.run_time)))
                           for r in results]
        print_json(summary, INSTANCES)
    elif args.out:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing new"
        print(f"{len(results)} run ({parts}), {skipped} already in {args.out}; results in {args.out}")
    return 0


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)
