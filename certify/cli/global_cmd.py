"""`certify global`: certified global Lipschitz upper bounds."""

from __future__ import annotations

import argparse

from ..errors import BadInput
from .common import add_json_flag, add_model_argument, console, domain_arg, emit, fmt, line, load_model

SDP_SOLVERS = ("SCS", "CLARABEL", "MOSEK")  # solvers.sdp.lipsdp.SOLVERS (not imported here: cvxpy is slow to load)

METHOD_CHOICES = ("naive", "lipsdp-neuron", "lipsdp-layer", "eclipse-fast", "mip", "all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "global",
        help="certified global Lipschitz upper bound",
        description=(
            "Certified upper bound on the global Lipschitz constant of a ReLU network: product of "
            "layer norms (naive), LipSDP-Neuron / LipSDP-Layer and ECLipsE-Fast (l2 bounds validated "
            "by a float64 Cholesky proof, converted to other norms by norm equivalence), or the exact "
            "MILP constant over a --domain box (mip). 'all' runs every applicable method."
        ),
    )
    add_model_argument(p)
    p.add_argument("--method", default="naive", help=f"one of {', '.join(METHOD_CHOICES)} (default naive)")
    p.add_argument("--input-norm", default="l2", help="l1, l2 or linf (default l2)")
    p.add_argument("--output-norm", default="l2", help="l1, l2 or linf (default l2)")
    p.add_argument("--domain", metavar="LO,HI", help="input box [LO, HI]^n (needed by mip)")
    p.add_argument("--solver", default="SCS", help="SDP solver: SCS (default), CLARABEL or MOSEK")
    p.add_argument("--accuracy", type=float, default=None,
                   help="SDP solver tolerance (default 1e-5 for lipsdp-neuron, 1e-3 for lipsdp-layer)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="wall-clock seconds for the whole command, model loading included (a cut-short SDP "
                        "leaves the proven norm product)")
    add_json_flag(p)
    p.set_defaults(handler=_global)


def _global(args: argparse.Namespace) -> int:
    from ..lipschitz.global_bounds import global_lipschitz

    method = args.method.strip().lower()
    if method not in METHOD_CHOICES:
        raise BadInput(f"unknown method {args.method!r}; choose one of {', '.join(METHOD_CHOICES)}")
    if args.solver.strip().upper() not in SDP_SOLVERS:  # checked even when the method needs no SDP: a typo
        raise BadInput(f"unknown SDP solver {args.solver!r}; choose one of {', '.join(SDP_SOLVERS)}")
    domain = domain_arg(args.domain)
    net = load_model(args.model)
    result = global_lipschitz(
        net,
        method,
        input_norm=args.input_norm,
        output_norm=args.output_norm,
        domain=domain,
        solver=args.solver.strip().upper(),
        accuracy=args.accuracy,
        time_limit=args.time_limit,
    )
    out = result.to_dict()

    def row(r: dict) -> str:
        extra = f", lower {fmt(r['lower'])}" if r.get("lower") is not None else ""
        flag = {"certified": "certified", "fallback": "FALLBACK: plain norm product, the SDP certificate failed"}.get(
            r["status"], r["status"]) if r["certified"] else f"NOT certified, {r['status']}"
        where = "" if r["scope"] == "global" else ", on the domain only"
        return (f"{r['method']:>14}: Lip_{r['input_norm']}->{r['output_norm']} <= {fmt(r['upper'])}{extra} "
                f"({flag}{where}, {r['seconds']:.2f}s)")

    def human(r: dict) -> None:
        c = console()
        if r.get("method") == "all":
            for item in r["results"]:
                c.print(row(item))
            for name, why in r["skipped"].items():
                c.print(f"{name:>14}: skipped ({why})")
            c.print(line(("best", "bold"), f" (all inputs): {r['best']['method']} {fmt(r['best']['upper'])}"))
            if "best_on_domain" in r:
                d = r["best_on_domain"]
                c.print(line(("best on the domain", "bold"), f": {d['method']} {fmt(d['upper'])}"))
            if domain is not None:
                c.print("  note: only mip uses --domain; the other bounds hold for every input")
        else:
            c.print(row(r))
            conv = r.get("details", {}).get("conversion")
            if conv and r["input_norm"] + r["output_norm"] != "l2l2":
                c.print(f"  from the l2 bound by norm equivalence: {conv}")
            for note in r.get("notes", []):
                c.print(f"  note: {note}")

    return emit(args, out, human)
