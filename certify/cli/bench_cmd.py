"""`certify bench`: run a benchmark suite (or the user's ONNX models) on every available back-end
and method; write a tidy CSV, machine info, a markdown summary and plots (docs/bench.md)."""

from __future__ import annotations

import argparse
import math
import sys

from ..errors import BadInput
from ..schema import BENCH, BENCH_SUITES
from .common import magnitude_arg, out_arg, print_json, seed_arg
from .progress import add_progress_flags


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark solvers and methods on a suite or on your own models",
        description=(
            "Run a benchmark suite (lipschitz, global, privacy, radius, verify, ptr, utility, all; `certify bench` "
            "alone lists them) or your own ONNX models (--models) on every available MILP back-end (gurobi when "
            "licensed and within its limits, highs, cbc) and method, with a per-run time limit. Writes into --out: "
            "runs.csv (one row per instance x back-end x method x repeat), machine.json, summary.md and PNG plots "
            "(runtime vs size, cactus, tightness, bound-tightening ablation). A back-end that cannot run gives a "
            "skipped row with the reason."
        ),
    )
    p.add_argument("suites", nargs="*", metavar="SUITE", help="suite name(s), or all")
    p.add_argument("--list", action="store_true", help="list the suites and exit")
    p.add_argument("--quick", action="store_true", help="small instances and short limits (about a minute per suite)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per configuration (medians are reported)")
    p.add_argument("--time-limit", type=float, metavar="S", help="seconds per run (default: the suite's)")
    p.add_argument("--backends", metavar="LIST", help="comma list of MILP back-ends to try (default gurobi,highs,cbc)")
    p.add_argument("--methods", metavar="LIST", help="comma list of methods to keep (e.g. milp,bab)")
    p.add_argument("--seed", type=int, default=0, help="seed of generated nets and points (default 0)")
    p.add_argument("--out", default="bench-results", metavar="DIR", help="output directory (default bench-results)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run of the same benchmark in --out (else it is measured afresh)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh when --out holds another benchmark (its files are deleted; else refused)")
    v = p.add_argument_group("the verify suite")
    v.add_argument("--vnncomp-data", metavar="DIR",
                   help="folder of the VNN-COMP 2022 families mnist_fc/ and oval21/ (truth.csv, tools.csv, onnx/, "
                        "vnnlib/; default $CERTIFY_VNNCOMP_DATA): verify then runs them too, each instance with its "
                        "competition timeout capped by --time-limit, and writes vnncomp_cactus.png; lipschitz adds "
                        "its MNIST and CIFAR nets")
    v.add_argument("--families", metavar="LIST",
                   help="comma list of verify families to run: acasxu, mnist_fc, oval21 (default: acasxu plus the "
                        "families found in the data folder)")
    g = p.add_argument_group("your own models")
    g.add_argument("--models", nargs="+", metavar="PATH", help="ONNX files or directories of them")
    g.add_argument("--question", default="lipschitz", choices=("lipschitz", "global", "radius"),
                   help="what to ask of --models (default lipschitz)")
    g.add_argument("--center", metavar="X", help="a point (comma list) or @FILE of points (.npy/.csv/.json) (default: --points seeded points)")
    g.add_argument("--radius", type=float, default=0.05, help="box radius around each point (default 0.05)")
    g.add_argument("--domain", metavar="LO,HI", help="input domain, e.g. 0,1 (default: none; points from N(0, 1))")
    g.add_argument("--points", type=int, default=1, metavar="N", help="seeded points per model (default 1)")
    g.add_argument("--input-norm", default="linf", choices=("l1", "l2", "linf"))
    g.add_argument("--output-norm", default="l1", choices=("l1", "l2", "linf"))
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_progress_flags(p, "progress bar over runs")
    p.set_defaults(handler=_bench)


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not items:
        raise BadInput("an empty list was given; name at least one item")
    return items


def _bench(args: argparse.Namespace) -> int:
    from ..bench import list_suites, run_bench

    if args.list or (not args.suites and not args.models):
        suites = {k: v for k, v in list_suites().items() if k != "models"}
        if args.json:
            print_json({"suites": suites}, BENCH_SUITES)
        else:
            width = max(map(len, suites))
            print("suites (certify bench SUITE [--quick]; all = every suite; --models PATH... for your own):")
            for name, text in suites.items():
                print(f"  {name:<{width}}  {text}")
        return 0
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and args.time_limit > 0):
        raise BadInput(f"--time-limit must be a positive number of seconds, got {args.time_limit:g}")
    if args.radius is not None and not (math.isfinite(args.radius) and args.radius > 0):
        raise BadInput(f"--radius must be a positive number, got {args.radius:g}")
    magnitude_arg(args.radius, "--radius")
    if args.center is not None and not args.center.strip():
        raise BadInput("--center is empty; give a point (comma-separated numbers) or @FILE of points")
    if args.points < 1:
        raise BadInput(f"--points must be a positive integer, got {args.points}")
    seed_arg(args.seed)
    out_arg(args.out, "directory")
    options = dict(center=args.center, radius=args.radius, domain=args.domain, points=args.points,
                   input_norm=args.input_norm, output_norm=args.output_norm)
    if args.families is not None and "verify" not in args.suites and "all" not in args.suites:
        raise BadInput("--families applies to the verify suite (certify bench verify ...)")
    if args.vnncomp_data is not None and not {"verify", "lipschitz", "all"} & set(args.suites):
        raise BadInput("--vnncomp-data applies to the verify suite and the lipschitz suite (certify bench verify ...)")
    if args.vnncomp_data is not None or args.families is not None:
        options.update(vnncomp_data=args.vnncomp_data, families=_split(args.families))
    result = run_bench(args.suites, models=args.models or (), question=args.question, quick=args.quick,
                       repeat=args.repeat, time_limit=args.time_limit, backends=_split(args.backends),
                       methods=_split(args.methods), seed=args.seed, out=args.out, resume=args.resume,
                       overwrite=args.overwrite, progress=args.progress, options=options)
    if args.json:
        print_json(result.to_dict(), BENCH)
        return 0
    with open(result.files["summary"], encoding="utf-8") as fh:
        print(fh.read(), end="")
    print(f"wrote {', '.join(result.files.values())}", file=sys.stderr)
    return 0
