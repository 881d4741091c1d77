"""`certify ptr`: one Propose-Test-Release query (extended PTR with certified local constants)."""

from __future__ import annotations

import argparse

from solvers.choices import BACKEND_CHOICES

from .common import (add_json_flag, add_model_argument, console, domain_arg, emit, fmt, line, load_model, magnitude_arg,
                     seed_arg, threads_arg, vector_arg)


def add_search_options(p: argparse.ArgumentParser) -> None:
    """The options of the R* search, shared by `certify ptr` and `certify report`."""
    from ..ptr.defaults import DEFAULT_STEP_TIME_LIMIT

    p.add_argument("--input-norm", default="linf", metavar="N", help="neighbourhood metric: linf (default), l1, l2")
    p.add_argument("--domain", metavar="LO,HI", help="valid inputs [LO,HI]^n (boxes are intersected with it)")
    p.add_argument("--tolerance", type=float, default=None, metavar="T",
                   help="bisection step (rounded down to R/m for an integer m; default R/8)")
    p.add_argument("--max-radius", type=float, default=None, metavar="M",
                   help="largest radius searched (default R + 2 R ln(1/delta)/eps, where release is near-certain)")
    p.add_argument("--step-time-limit", type=float, default=DEFAULT_STEP_TIME_LIMIT, metavar="S",
                   help=f"time limit of one bisection step (default {DEFAULT_STEP_TIME_LIMIT:g}); an undecided step "
                        "counts as a violation")
    p.add_argument("--backend", default="auto", choices=BACKEND_CHOICES, help="MILP solver")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ptr",
        help="release f(x) with Propose-Test-Release (certified local sensitivity)",
        description=(
            "Extended Propose-Test-Release for one point: find R*, the largest radius whose box around the point "
            "has a certified local Lipschitz constant <= the proposal D_p (bisection on certificates), "
            "phi = max(0, R* - R), a noisy test of phi, and on success f(x) + Laplace(D_p R / eps) per output. "
            "Guarantee (2 eps, delta/2) for inputs within R in the input norm (docs/ptr.md). Noise comes from "
            "the secure sampler unless --seed is given."
        ),
    )
    add_model_argument(p)
    p.add_argument("--point", required=True, metavar="V", help="the query x: comma-separated numbers or @file")
    p.add_argument("--radius", required=True, type=float, metavar="R", help="neighbourhood radius R > 0 (privacy radius)")
    p.add_argument("--epsilon", required=True, type=float, metavar="E", help="epsilon > 0 of the test and of the release")
    p.add_argument("--delta", required=True, type=float, metavar="D", help="0 < delta < 1 (the guarantee has delta/2)")
    p.add_argument("--proposal", required=True, type=float, metavar="P",
                   help="proposed bound D_p > 0 of the local Lipschitz constant (input norm -> l1), chosen without "
                        "looking at the point (e.g. from `certify report` on public data)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="reproducible numpy noise (NOT secure, for experiments); default: the secure sampler")
    add_search_options(p)
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="wall-clock seconds for the whole command, model loading included")
    p.add_argument("--global-bound", type=float, default=None, metavar="G",
                   help="a global Lipschitz bound (input norm -> l1), e.g. from `certify global`: used when certify "
                        "proves it, an error when a replayed witness exceeds it, else refused unless "
                        "--trust-global-bound")
    p.add_argument("--trust-global-bound", action="store_true",
                   help="use --global-bound on your word when certify can neither prove nor refute it: the guarantee "
                        "is then conditional on it (said in the JSON's guarantee.conditional_on and the text)")
    p.add_argument("--threads", type=int, default=1, metavar="K", help="solver threads (default 1)")
    add_json_flag(p)
    p.set_defaults(handler=_ptr)


def _ptr(args: argparse.Namespace) -> int:
    from ..ptr import ptr
    from ..boundary.vectors import parse_positive

    net = load_model(args.model)
    point = vector_arg(args.point, "--point", net.input_dim)
    for name in ("time_limit", "step_time_limit", "global_bound"):
        value = getattr(args, name)
        if value is not None:
            parse_positive(value, "--" + name.replace("_", "-"))
    threads_arg(args.threads)
    seed_arg(args.seed)
    for name in ("radius", "max_radius", "tolerance", "proposal", "global_bound"):
        magnitude_arg(getattr(args, name), "--" + name.replace("_", "-"))
    result = ptr(net, point, args.radius, epsilon=args.epsilon, delta=args.delta, proposal=args.proposal,
                 input_norm=args.input_norm, domain=domain_arg(args.domain), tolerance=args.tolerance,
                 max_radius=args.max_radius, sampler=args.seed, time_limit=args.time_limit,
                 step_time_limit=args.step_time_limit, global_bound=args.global_bound,
                 trust_global_bound=args.trust_global_bound, backend=args.backend, threads=args.threads)

    def human(r: dict) -> None:
        c = console()
        g = r["guarantee"]
        verdict = (("refused: the search was not decided (no test, no guarantee)", "bold red")
                   if r["refusal"] else ("released", "bold green") if r["released"]
                   else ("not released (bottom)", "bold"))
        c.print(line(("propose-test-release", "bold"), ": ", verdict))
        if r["released"]:
            out = r["output"]
            c.print(f"  output      [{', '.join(fmt(v, 6) for v in out[:10])}{', ...' if len(out) > 10 else ''}]")
        c.print(f"  R*          {fmt(r['r_star']) if r['r_star'] is not None else 'none >= R (the proposal fails at the point)'}"
                f"  (status {r['status']})")
        if g is None:
            c.print(f"  phi         {fmt(r['phi'])} (lower than exact: a step was undecided)")
            c.print("  guarantee   none: the query was refused before any noise was drawn")
        else:
            c.print(f"  phi         {fmt(r['phi'])}   noisy {fmt(r['phi_noisy'])}   threshold {fmt(r['threshold'])}")
            c.print(f"  noise scale {fmt(r['noise_scale'])} (Laplace per output, D_p R / eps)   sampler {r['sampler']}")
            c.print(f"  guarantee   (epsilon = {fmt(g['epsilon'])}, delta = {fmt(g['delta'])}) for inputs within "
                    f"{fmt(g['radius'])} in {g['metric']}")
            for claim in g.get("conditional_on", []):
                c.print(line("  ", ("conditional on", "bold yellow"), f" {claim}"))
        c.print(f"  steps       {len(r['steps'])}: " + ", ".join(f"{s['decision']}@{fmt(s['radius'], 4)} ({s['method']})"
                                                            for s in r["steps"]))
        for note in r["notes"]:
            c.print(f"  note        {note}")

    return emit(args, result.to_dict(), human)
