"""`certify report`: the PTR-ready sensitivity report of a model on data (report.json + report.html)."""

from __future__ import annotations

import argparse
import os

from ..schema import REPORT_SUMMARY
from .common import (add_json_flag, add_model_argument, console, count_arg, domain_arg, emit, fmt, line, load_model,
                     magnitude_arg, out_arg, scheduler_arg)
from .progress import add_progress_flags
from .ptr_cmd import add_search_options


def register(sub: argparse._SubParsersAction) -> None:
    from ..ptr.proposal import DEFAULT_RULES
    from ..ptr.defaults import DEFAULT_CURVE, DEFAULT_DELTA, DEFAULT_EPSILON, DEFAULT_POINT_TIME_LIMIT

    p = sub.add_parser(
        "report",
        help="PTR-ready sensitivity report: certified local constants on data, D_p proposals, release rates",
        description=(
            "Certify the local Lipschitz constant (input norm -> l1) over box(x, R) at every point of --data, "
            "propose D_p from the certified upper bounds (mean + n std, quantiles), and run certify's PTR search "
            "at every point to give each proposal its expected release rate. Writes DIR/report.json (schema "
            "certify.report/1) and DIR/report.html (self-contained). Resumable: rerun the same command to continue "
            "an interrupted run (DIR/run.json identifies the run; a directory holding another run is refused "
            "unless --overwrite). Runs in process, on --workers local processes, or on a Dask cluster (--scheduler)."
        ),
    )
    add_model_argument(p)
    p.add_argument("--data", required=True, metavar="FILE", help="points, one per row: .npy, .csv or .json (n x inputs)")
    p.add_argument("--radius", required=True, type=float, metavar="R", help="neighbourhood radius R > 0")
    p.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON, metavar="E",
                   help=f"epsilon of the PTR test and release (default {DEFAULT_EPSILON:g})")
    p.add_argument("--delta", type=float, default=DEFAULT_DELTA, metavar="D", help=f"0 < delta < 1 (default {DEFAULT_DELTA:g})")
    p.add_argument("--out", default="certify-report", metavar="DIR", help="output directory (default ./certify-report)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh when --out holds another run (its report files are deleted)")
    p.add_argument("--workers", type=int, default=1, metavar="K", help="local worker processes (default 1: in process)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="run on this Dask scheduler instead")
    p.add_argument("--rules", default=",".join(DEFAULT_RULES), metavar="R1,R2",
                   help=f"proposal rules: mean+Nstd and qP (default {','.join(DEFAULT_RULES)})")
    add_search_options(p)
    p.add_argument("--time-limit", type=float, default=DEFAULT_POINT_TIME_LIMIT, metavar="S",
                   help=f"time limit of each point's certificate (default {DEFAULT_POINT_TIME_LIMIT:g} s)")
    p.add_argument("--curve", type=int, default=DEFAULT_CURVE, metavar="N",
                   help=f"extra proposal values for the release-rate curve (default {DEFAULT_CURVE}; 0: none)")
    p.add_argument("--no-html", action="store_true", help="write report.json only")
    add_progress_flags(p, "progress bar")
    add_json_flag(p)
    p.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from ..boundary.points import read_points
    from ..report import sensitivity_report
    from ..ptr.defaults import MAX_CURVE
    from ..runs import file_sha256
    from ..boundary.vectors import parse_positive

    net = load_model(args.model)
    data = read_points(args.data, net.input_dim)
    for name in ("time_limit", "step_time_limit"):
        parse_positive(getattr(args, name), "--" + name.replace("_", "-"))
    count_arg(args.workers, "--workers")
    count_arg(args.curve, "--curve", 0, MAX_CURVE)
    scheduler_arg(args.scheduler)
    out_arg(args.out, "directory")
    for name in ("radius", "max_radius", "tolerance"):
        magnitude_arg(getattr(args, name), "--" + name.replace("_", "-"))
    report = sensitivity_report(
        net, data, args.radius, epsilon=args.epsilon, delta=args.delta, input_norm=args.input_norm,
        domain=domain_arg(args.domain), rules=args.rules, tolerance=args.tolerance, max_radius=args.max_radius,
        out=args.out, workers=args.workers, scheduler=args.scheduler, time_limit=args.time_limit,
        step_time_limit=args.step_time_limit, curve=args.curve, backend=args.backend, progress=args.progress,
        html=not args.no_html, overwrite=args.overwrite,
        model_source={"path": os.path.abspath(args.model), "file_sha256": file_sha256(args.model)},
        data_source=os.path.abspath(args.data))
    summary = {
        "report": os.path.join(args.out, "report.json"),
        "html": None if args.no_html else os.path.join(args.out, "report.html"),
        "points": report["data"]["points"], "radius": report["radius"], "statistics": report["statistics"],
        "proposals": report["proposals"], "global_bounds": report["global_bounds"], "notes": report["notes"],
    }

    def human(r: dict) -> None:
        c = console()
        st = r["statistics"]["upper"]
        c.print(line(("sensitivity report", "bold"), f": {r['points']} points, R = {fmt(r['radius'])}"))
        c.print(f"  certified constants  mean {fmt(st['mean'])}, std {fmt(st['std'])}, min {fmt(st['min'])}, "
                f"max {fmt(st['max'])}  ({r['statistics']['exact_fraction']:.0%} exact)")
        for pr in r["proposals"]:
            c.print(f"  {pr['rule']:<12} D_p = {fmt(pr['value'])}  noise scale {fmt(pr['noise_scale'])}  "
                    f"expected release rate {pr['release_rate']:.3f}")
        c.print(f"  wrote {r['report']}" + (f" and {r['html']}" if r["html"] else ""))
        for note in r["notes"][1:]:
            c.print(f"  note  {note}")

    return emit(args, summary, human, REPORT_SUMMARY)
