"""`certify lipschitz`: exact local Lipschitz constant over a box by MILP."""

from __future__ import annotations

import argparse

from ..lipschitz import options as O
from .common import (add_json_flag, add_model_argument, console, domain_arg, emit, fmt, line, load_model, threads_arg,
                     vector_arg)
from .progress import LiveResult, add_progress_flags, partial_certificate

INTERRUPTED_EXIT = 130


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lipschitz",
        help="certified local Lipschitz constant over a box (MILP)",
        description=(
            "Certify the local Lipschitz constant of a ReLU network over the box CENTER +/- RADIUS "
            "(intersected with [LO,HI]^n when --domain is given) by mixed-integer programming. Prints an "
            "interval [lower, upper]: upper is proven (the solver's dual bound re-proven by a branch-and-bound "
            "with safe LP bounds), lower the norm of the exact Jacobian at a replayed witness point. Ctrl-C "
            "stops the solve and prints the sound interval reached (exit code 130)."
        ),
    )
    add_model_argument(p)
    p.add_argument("--center", required=True, metavar="V", help="box center: comma-separated numbers or @file")
    p.add_argument("--radius", required=True, metavar="R", help="box half-width: a number or one per input (comma list or @file)")
    p.add_argument("--domain", metavar="LO,HI", help="intersect the box with [LO,HI]^n (e.g. 0,1 for pixels)")
    p.add_argument("--input-norm", default=O.DEFAULT_INPUT_NORM, metavar="N",
                   help=f"input norm: {', '.join(O.NORMS)} (default {O.DEFAULT_INPUT_NORM})")
    p.add_argument("--output-norm", default=O.DEFAULT_OUTPUT_NORM, metavar="N",
                   help=f"output norm: {', '.join(O.NORMS)} (default {O.DEFAULT_OUTPUT_NORM})")
    p.add_argument("--margin", metavar="I,J", help="certify the scalar f_I - f_J instead of the vector output")
    p.add_argument("--target", metavar="C", help="certify the scalar c^T f for this output weight vector")
    p.add_argument("--backend", default="auto", choices=O.BACKEND_CHOICES,
                   help="MILP solver (auto: Gurobi when licensed and the model fits, else HiGHS)")
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="wall-clock seconds for the whole command, model loading included (the result stays a sound "
                        "interval)")
    p.add_argument("--mip-gap", type=float, default=O.DEFAULT_MIP_GAP, metavar="G",
                   help=f"relative MIP gap (default {O.DEFAULT_MIP_GAP:g}); status optimal needs 1e-6 whatever it is")
    p.add_argument("--bounds", default=O.DEFAULT_BOUNDS, choices=O.BOUND_METHODS,
                   help=f"pre-activation bounds (default {O.DEFAULT_BOUNDS})")
    p.add_argument("--pass-bounds", choices=O.PASS_BOUNDS,
                   help="big-M bounds of the Jacobian product: interval, or lp (default with --bounds lp)")
    p.add_argument("--formulation", default=O.DEFAULT_FORMULATION, choices=O.FORMULATIONS,
                   help="Jacobian product encoded: forward J w (default) or backward J^T c (LipMIP)")
    p.add_argument("--l2-method", default="auto", choices=O.L2_METHODS,
                   help="l2 norms: exact Gurobi MIQP when possible (auto), only MIQP, or the norm-interpolation bound")
    p.add_argument("--method", default="auto", choices=O.METHODS,
                   help=f"auto (bab up to {O.AUTO_BAB_INPUTS} free inputs, else MILP up to {O.AUTO_MILP_UNSTABLE} unstable ReLUs and {O.AUTO_MILP_INPUTS} free inputs, else bab), milp, bab (Jacobian branch-and-bound), bounds (fast bound only)")
    p.add_argument("--race", default="auto", choices=O.RACE_CHOICES,
                   help="method auto: race the MILP (a second process) against the region search and the "
                        "branch-and-bound, first to close wins (auto: with fork and 2+ cores; on; off: the rule alone)")
    p.add_argument("--threads", type=int, default=O.DEFAULT_THREADS, metavar="K",
                   help=f"solver threads (default {O.DEFAULT_THREADS})")
    add_progress_flags(p)
    add_json_flag(p)
    p.set_defaults(handler=_lipschitz)


def _pair(spec: str, name: str) -> tuple[int, int]:
    from ..errors import BadInput

    parts = spec.replace(" ", "").split(",")
    try:
        a, b = (int(v) for v in parts)
    except ValueError:
        raise BadInput(f"{name} must be two integers I,J, got {spec!r}") from None
    return a, b


def _partial(net, args: argparse.Namespace, center, radius, margin, target):
    """The command's partial result from a progress event (printed if a solver ignores Ctrl-C)."""
    from models.box import Box

    scalar = margin is not None or target is not None

    def describe(ev):
        box = Box.around(center, radius if radius.size > 1 else float(radius[0]), domain=domain_arg(args.domain),
                         dim=net.input_dim)
        return partial_certificate(
            "local_lipschitz", ev, scope="box", box=box.to_dict(), input_norm=args.input_norm,
            output_norm=None if scalar else args.output_norm, model_hash=net.fingerprint(), witness=None,
            margin=None if margin is None else list(margin), target=None if target is None else list(target))
    return describe


def _lipschitz(args: argparse.Namespace) -> int:
    from solvers.runtime import interrupted

    from ..lipschitz import local_lipschitz

    net = load_model(args.model)
    center = vector_arg(args.center, "--center", net.input_dim)
    radius = vector_arg(args.radius, "--radius")
    margin = _pair(args.margin, "--margin") if args.margin else None
    target = vector_arg(args.target, "--target", net.output_dim) if args.target is not None else None
    threads_arg(args.threads)
    live = LiveResult(args, _partial(net, args, center, radius, margin, target))
    try:
        cert = local_lipschitz(
            net, center, radius if radius.size > 1 else float(radius[0]), domain=domain_arg(args.domain),
            input_norm=args.input_norm, output_norm=args.output_norm, margin=margin, target=target, progress=live,
            backend=args.backend, time_limit=args.time_limit, mip_gap=args.mip_gap, bounds=args.bounds,
            formulation=args.formulation, l2_method=args.l2_method, pass_bounds=args.pass_bounds, threads=args.threads,
            method=args.method, race=args.race,
        )
    finally:
        live.close()

    def human(r: dict) -> None:
        c = console()
        what = (f"f_{r['margin'][0]} - f_{r['margin'][1]}" if r["margin"] else
                "c^T f" if r["target"] is not None else f"{r['input_norm']} -> {r['output_norm']}")
        c.print(line(("local Lipschitz constant", "bold"), f" ({what}, input norm {r['input_norm']})"))
        c.print(f"  interval  [{fmt(r['lower'], 9)}, {fmt(r['upper'], 9)}]  status {r['status']}"
                f"{' (exact)' if r['exact'] else ''}")
        if r["method"] in ("bab", "bounds"):
            tree = f"branch-and-bound, {r['nodes']} nodes" if r["method"] == "bab" else "Jacobian bound"
            c.print(f"  method    {tree} ({r['unstable']} unstable ReLUs, {r['bounds']} bounds), {r['seconds']:.2f}s")
        else:
            c.print(f"  solver    {r['backend']}, {r['nodes']} nodes, {r['binaries']} binaries "
                    f"({r['unstable']} unstable ReLUs, {r['bounds']} bounds), {r['seconds']:.2f}s "
                    f"(proof of the bound {r['proof'].get('seconds', 0.0):.2f}s)")
        if r["witness"] is not None:
            w = r["witness"]
            shown = ", ".join(fmt(v, 4) for v in w[:8]) + (", ..." if len(w) > 8 else "")
            c.print(f"  witness   [{shown}]")
        for note in r["notes"]:
            c.print(f"  note      {note}")

    code = emit(args, cert.to_dict(), human)
    return INTERRUPTED_EXIT if cert.status == "interrupted" and interrupted() else code
