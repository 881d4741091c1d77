"""`certify radius` (exact robustness radius, one point or a points file) and `certify hyperrectangle`."""

from __future__ import annotations

import argparse
import os
import sys

from solvers.choices import BACKEND_CHOICES, BOUND_METHODS

from ..errors import BadInput
from ..robustness import options as O
from ..schema import RADIUS_BATCH
from .common import (add_json_flag, add_model_argument, console, count_arg, domain_arg, fmt, line, load_model,
                     magnitude_arg, out_arg, print_json, scheduler_arg, seed_arg, short_vector, threads_arg, vector_arg)
from .progress import LiveResult, add_progress_flags, partial_certificate

INTERRUPTED_EXIT = 130
RADIUS_DESCRIPTION = (
    "The smallest perturbation of POINT (in --norm) that changes the class predicted by the model (ties count as "
    "changes), as a proven interval [lower, upper]: lower from a MILP's dual bound re-proven by a safe "
    "branch-and-bound (or the fast certified bound), upper the distance of a counterexample replayed in float64 and "
    "in onnxruntime. --points FILE runs many points (resumable with --out). Ctrl-C stops the solve and prints the "
    "sound interval reached (exit code 130).")
BOX_DESCRIPTION = (
    "Grow a robustness hyperrectangle (Zheng & Hu, Definition 9): from the linf radius box of the chosen features, "
    "push each side as far as a proof keeps the class (the other features stay at the point), within --domain. "
    "Prints the proven box and the outer box where counterexamples are known.")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("radius", help="certified robustness radius of a classifier at a point (MILP)",
                       description=RADIUS_DESCRIPTION)
    add_model_argument(p)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--point", metavar="V", help="the input: comma-separated numbers or @file")
    where.add_argument("--points", metavar="FILE", help="many inputs: .npy, .csv, .json or .jsonl, one point per row")
    _common(p)
    p.add_argument("--norm", default="linf", metavar="N", help=f"perturbation norm: {', '.join(O.NORMS)} (default linf)")
    p.add_argument("--max-radius", metavar="R", type=float,
                   help="stop at this radius: status robust_within when no flip exists within it")
    p.add_argument("--l2-method", default="auto", choices=O.L2_METHODS,
                   help="l2: Gurobi's MIQP when possible (auto), only the MIQP, or the interval from the linf/l1 radii")
    p.add_argument("--out", metavar="FILE",
                   help="with --points: results as JSON lines (.jsonl; rerunning the same run skips the rows already "
                        "there, another run is refused) or a .csv summary (its JSON-lines journal FILE.jsonl makes "
                        "the run resumable)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --out: start afresh when --out holds another run (its rows are deleted)")
    p.add_argument("--workers", type=int, default=1, metavar="K", help="with --points: local worker processes")
    p.add_argument("--scheduler", metavar="ADDR", help="with --points: a Dask scheduler (tcp://host:port)")
    add_progress_flags(p)
    add_json_flag(p)
    p.add_argument("--jsonl", action="store_true",
                   help="with --points: one JSON line per point on stdout (JSON Lines) instead of one JSON object")
    p.set_defaults(handler=_radius)

    h = sub.add_parser("hyperrectangle", help="a box around a point on which the class is proven constant",
                       description=BOX_DESCRIPTION)
    add_model_argument(h)
    h.add_argument("--point", required=True, metavar="V", help="the input: comma-separated numbers or @file")
    _common(h, domain_default="0,1")
    add_progress_flags(h)
    add_json_flag(h)
    h.set_defaults(handler=_hyperrectangle)


def _common(p: argparse.ArgumentParser, domain_default: str | None = None) -> None:
    p.add_argument("--domain", default=domain_default, metavar="LO,HI",
                   help="inputs stay in [LO,HI]" + (f" (default {domain_default})" if domain_default else ""))
    p.add_argument("--features", metavar="I,J,...", help="only these inputs move (default all; the others stay fixed)")
    p.add_argument("--target-class", metavar="K", help="the class to reach (default: any other class)")
    p.add_argument("--exact", action=argparse.BooleanOptionalAction, default=True,
                   help="run the MILP (default); --no-exact: the fast certified bound and the attack only")
    p.add_argument("--backend", default="auto", choices=BACKEND_CHOICES,
                   help="MILP solver (auto: Gurobi when licensed and the model fits, else HiGHS)")
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="wall-clock seconds for the whole command, model loading included (with --points: per point)")
    p.add_argument("--mip-gap", type=float, default=O.DEFAULT_MIP_GAP, metavar="G", help="relative MIP gap")
    p.add_argument("--bounds", default=O.DEFAULT_BOUNDS, choices=BOUND_METHODS,
                   help=f"pre-activation bounds of the MILP (default {O.DEFAULT_BOUNDS})")
    p.add_argument("--threads", type=int, default=O.DEFAULT_THREADS, metavar="K", help="solver threads")
    p.add_argument("--seed", type=int, default=0, help="seed of the attack (default 0)")


def _options(args: argparse.Namespace, net) -> dict:
    from ..boundary.indices import class_index, features_arg

    out = dict(domain=domain_arg(args.domain), features=features_arg(args.features),
               target_class=None if args.target_class is None else class_index(_number(args.target_class),
                                                                               net.output_dim),
               exact=args.exact, backend=args.backend, time_limit=args.time_limit, mip_gap=args.mip_gap,
               bounds=args.bounds, threads=threads_arg(args.threads), seed=seed_arg(args.seed))
    return out


def _number(text: str):
    """A class index as typed: an int ("3"), a float ("3.0", "1e19", "nan"), else the text (refused by
    `class_index` with its message)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _run(args: argparse.Namespace, engine, net, opts: dict):
    """`engine` at --point with a live status line (replays in the model file's onnxruntime)."""
    from ..robustness.question import Classifier

    point = vector_arg(args.point, "--point", net.input_dim)
    kind = "robustness_hyperrectangle" if args.command == "hyperrectangle" else "robustness_radius"
    norm = opts.get("norm", "linf")  # (the hyperrectangle starts from the linf radius)
    live = LiveResult(args, lambda ev: partial_certificate(
        kind, ev, scope="box", box=None, input_norm=norm, output_norm=None, model_hash=net.fingerprint(),
        point=point.tolist(), counterexample=None))
    try:
        return engine(Classifier.of(net, args.model), point, progress=live, **opts)
    finally:
        live.close()


def _radius(args: argparse.Namespace) -> int:
    from solvers.norms import parse_norm
    from solvers.runtime import interrupted

    net = load_model(args.model)
    norm = parse_norm(args.norm)
    opts = _options(args, net)
    opts.update(norm=norm, max_radius=args.max_radius, l2_method=args.l2_method)
    if args.max_radius is not None:
        from ..robustness.options import parse_max_radius

        parse_max_radius(args.max_radius)
        magnitude_arg(args.max_radius, "--max-radius")
    if args.points is not None:
        return _radius_batch(args, net, opts)
    if args.out is not None or args.workers != 1 or args.scheduler is not None or args.overwrite or args.jsonl:
        raise BadInput("--out, --overwrite, --workers, --scheduler and --jsonl apply to --points only")
    from ..robustness.radius import robustness_radius

    cert = _run(args, robustness_radius, net, opts)
    if args.json:
        print_json(cert.to_dict())
    else:
        _print_radius(cert.to_dict())
    return INTERRUPTED_EXIT if cert.status == "interrupted" and interrupted() else 0


def _print_radius(r: dict) -> None:
    c = console()
    target = "any other class" if r["target_class"] is None else f"class {r['target_class']}"
    c.print(line(("robustness radius", "bold"), f" ({r['input_norm']}, class {r['predicted_class']} -> {target})"))
    up = "-" if r["upper"] is None else fmt(r["upper"], 9)
    c.print(f"  interval        [{fmt(r['lower'], 9)}, {up}]  status {r['status']}"
            + (f"  radius {fmt(r['radius'], 9)}" if r["radius"] is not None else "")
            + (f"  radius >= {fmt(r['lower'], 9)}" if r["status"] == "robust_within" else ""))
    c.print(f"  fast bound      {fmt(r['fast_lower'], 6)} ({r['fast_method']})")
    s = r["solver"]
    if "bisection" in s:
        b = s["bisection"]
        c.print(f"  bisection       {len(b['probes'])} verification probe(s), {b['nodes']} nodes, {r['seconds']:.2f}s")
    elif s:
        c.print(f"  solver          {r['backend']}, {s['nodes']} nodes, {s['binaries']} binaries, {r['seconds']:.2f}s")
    if r["counterexample"] is not None:
        c.print(f"  counterexample  {short_vector(r['counterexample'])} -> class {r['counterexample_class']} "
                "(replayed in onnxruntime)")
    for note in r["notes"]:
        c.print(f"  note            {note}")


def _radius_batch(args: argparse.Namespace, net, opts: dict) -> int:
    from ..robustness.batch import read_points, radius_batch, write_csv

    count_arg(args.workers, "--workers")
    scheduler_arg(args.scheduler)
    out_arg(args.out)
    if args.json and args.jsonl:
        raise BadInput("give --json (one JSON object) or --jsonl (one JSON line per point), not both")
    points = read_points(args.points, net.input_dim)
    if args.overwrite and not args.out:
        raise BadInput("--overwrite applies to --out only")
    journal = args.out
    as_csv = bool(args.out) and args.out.lower().endswith(".csv")
    if as_csv:
        _check_csv_out(args.out)
        journal = args.out + ".jsonl"
    rows = radius_batch(os.path.abspath(args.model), points, out=journal, workers=args.workers,
                        scheduler=args.scheduler, progress=None, overwrite=args.overwrite, **opts)
    if as_csv:
        write_csv(rows, args.out)
    if args.jsonl:
        for row in rows:
            print_json(row)
    elif args.json:
        print_json({"rows": rows}, RADIUS_BATCH)
    else:
        c = console()
        c.print(f"{'index':>6} {'class':>5} {'lower':>14} {'upper':>14} {'status':>14} {'seconds':>8}")
        for row in rows:
            up = "-" if row.get("upper") is None else fmt(row["upper"], 9)
            lo = "-" if row.get("lower") is None else fmt(row["lower"], 9)
            c.print(f"{row['index']:>6} {str(row.get('predicted_class', '-')):>5} {lo:>14} {up:>14} "
                    f"{row['status']:>14} {row.get('seconds', 0.0):>8.2f}")
        errors = [row for row in rows if row.get("status") == "error"]
        for row in errors:
            print(f"certify radius: point {row['index']}: {row.get('error', 'error')}", file=sys.stderr)
        if args.out:
            print(f"results in {args.out}", file=sys.stderr)
    return 0


def _check_csv_out(path: str) -> None:
    """A .csv --out is rewritten at the end: refuse a directory or a file that is not our table
    (e.g. the points file itself), whatever --overwrite says."""
    from ..robustness.batch import CSV_COLUMNS

    if os.path.isdir(path):
        raise BadInput(f"--out {path} is a directory; --out takes a file name")
    if os.path.isfile(path) and os.path.getsize(path) > 0:
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = fh.readline().strip()
        if first != ",".join(CSV_COLUMNS):
            raise BadInput(f"--out {path} exists and is not a radius results table; choose another --out")


def _hyperrectangle(args: argparse.Namespace) -> int:
    from solvers.runtime import interrupted

    from ..robustness.hyperrectangle import robustness_hyperrectangle

    net = load_model(args.model)
    opts = _options(args, net)
    if opts["domain"] is None:
        raise BadInput("hyperrectangle needs --domain LO,HI (the sides never cross it)")
    cert = _run(args, robustness_hyperrectangle, net, opts)
    d = cert.to_dict()
    if args.json:  # the certificate itself (schema certify.certificate/1): box and outer_box as {lo, hi}
        print_json(d)
    else:
        box, outer = cert.pairs("box"), cert.pairs("outer")
        c = console()
        c.print(line(("robustness hyperrectangle", "bold"), f" (class {cert.predicted_class}, status {cert.status}, "
                     f"{cert.seconds:.2f}s)"))
        c.print(f"  start: linf radius [{fmt(d['lower'], 9)}, {'-' if d['upper'] is None else fmt(d['upper'], 9)}]")
        for i in d["features"]:
            (a, b), (oa, ob) = box[i], outer[i]
            c.print(f"  x{i:<4} [{fmt(a, 9)}, {fmt(b, 9)}]   outer [{fmt(oa, 9)}, {fmt(ob, 9)}]")
        for note in d["notes"]:
            c.print(f"  note  {note}")
    return INTERRUPTED_EXIT if cert.status == "interrupted" and interrupted() else 0
