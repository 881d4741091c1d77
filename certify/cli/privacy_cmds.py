"""`certify calibrate` (noise scale of a privacy mechanism) and `certify chain` (guarantee at a larger radius)."""

from __future__ import annotations

import argparse

from ..errors import BadInput
from ..schema import CALIBRATION, CHAIN
from .common import add_json_flag, console, domain_arg, emit, fmt, line, load_model

_MECHANISM_HELP = (
    "laplace | gaussian | logistic (a query of known sensitivity), lap-output | gauss-output | logistic-output "
    "(model output; sensitivity = Lipschitz x radius), gauss-input (noise on the input; sensitivity = radius)"
)


#: the CLI's Gaussian sigma is for continuous noise; say so next to every such number
CONTINUOUS_NOTE = ("sigma for continuous Gaussian noise; certify's Python mechanisms (GaussOutput, GaussInput) "
                   "with their default secure sampler draw a discrete Gaussian calibrated through zCDP, a larger "
                   "sigma: --calibration zcdp prints it")


def register(sub: argparse._SubParsersAction) -> None:
    from ..privacy.names import CALIBRATIONS, MECHANISMS

    p = sub.add_parser(
        "calibrate", help="noise scale of a privacy mechanism",
        description="Noise scale (b, sigma or s) giving (epsilon, delta) for a sensitivity, or for a certified "
                    "Lipschitz upper bound L and a privacy radius A (Inference Privacy: sensitivity = L * A).",
    )
    p.add_argument("mechanism", metavar="MECHANISM", choices=list(MECHANISMS), help=_MECHANISM_HELP)
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget epsilon > 0")
    p.add_argument("--delta", type=float, default=None, help="0 < delta < 1 for Gaussian mechanisms; omit for pure ones")
    p.add_argument("--sensitivity", type=float, default=None, metavar="S",
                   help="sensitivity of the released values (l1 for laplace/logistic, l2 for gaussian)")
    p.add_argument("--lipschitz", type=float, default=None, metavar="L",
                   help="certified upper bound of the Lipschitz constant (l1 output for lap/logistic-output, l2 for gauss-output)")
    p.add_argument("--radius", type=float, default=None, metavar="A", help="privacy radius alpha (distance between inputs protected)")
    p.add_argument("--calibration", choices=CALIBRATIONS, default=None,
                   help="Gaussian calibration: analytic (default, exact), classic (epsilon < 1 only), pac, zcdp")
    p.add_argument("--metric", default="l2", choices=("l1", "l2", "linf"), help="input metric of the radius (default l2)")
    p.add_argument("--input-dim", type=int, default=None, metavar="N",
                   help="features per example, the product of the non-batch axes (gauss-input with --metric linf; "
                        "3072 for 3x32x32 images); or give --model")
    p.add_argument("--model", default=None, metavar="MODEL",
                   help="ONNX model: certify the Lipschitz constant an output mechanism needs instead of --lipschitz "
                        "(gauss-input: take the input dimension from it)")
    p.add_argument("--lipschitz-method", default="auto",
                   choices=("auto", "naive", "eclipse-fast", "lipsdp-layer", "lipsdp-neuron", "mip"),
                   help="how --model's constant is certified (auto: best of naive and eclipse-fast; mip needs --domain)")
    p.add_argument("--domain", default=None, metavar="LO,HI", help="input domain [LO,HI]^n covered (for --lipschitz-method mip)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="with --model: wall-clock seconds for the whole command, model loading included (a cut-short "
                        "certificate gives a larger, still proven, constant)")
    add_json_flag(p)
    p.set_defaults(handler=_calibrate)

    p = sub.add_parser(
        "chain", help="guarantee of a mechanism at a larger radius",
        description="Chaining (Inference Privacy Prop. 4, with the delta of its proof): an {(eps, delta), alpha} "
                    "mechanism is {(h eps, delta (e^{h eps}-1)/(e^eps-1)), beta} private, h = ceil(beta/alpha).",
    )
    p.add_argument("--epsilon", type=float, required=True, help="epsilon at radius alpha")
    p.add_argument("--delta", type=float, default=0.0, help="delta at radius alpha (default 0)")
    p.add_argument("--alpha", type=float, required=True, help="radius of the guarantee")
    p.add_argument("--beta", type=float, required=True, help="radius to extend it to")
    add_json_flag(p)
    p.set_defaults(handler=_chain)


def _calibrate(args: argparse.Namespace) -> int:
    from ..privacy.calibration import calibrate

    lipschitz, input_dim, model = args.lipschitz, args.input_dim, None
    if args.model is not None and args.mechanism == "gauss-input":
        input_dim = _model_input_dim(args)
    elif args.model is not None:
        lipschitz, model = _model_lipschitz(args)
    elif args.domain is not None or args.lipschitz_method != "auto":
        raise BadInput("--lipschitz-method and --domain apply to --model")
    cal = calibrate(args.mechanism, epsilon=args.epsilon, delta=args.delta, sensitivity=args.sensitivity,
                    lipschitz=lipschitz, radius=args.radius, calibration=args.calibration,
                    metric=args.metric, input_dim=input_dim, model=model)
    result = cal.to_dict()
    if cal.family == "gaussian" and cal.calibration != "zcdp":
        result["note"] = CONTINUOUS_NOTE

    def human(r: dict) -> None:
        c = console()
        c.print(line((r["mechanism"], "bold"), f": {r['parameter']} = {fmt(r['scale'], 10)}  ({r['calibration']} calibration)"))
        text = f"for epsilon = {fmt(r['epsilon'])}, delta = {fmt(r['delta'])}, {r['sensitivity_norm']} sensitivity {fmt(r['sensitivity'])}"
        if "lipschitz" in r:
            lip = r["lipschitz"]
            how = ("L given by the user, not verified" if lip["origin"] == "user"
                   else f"L certified by {lip.get('method', lip['origin'])}")
            text += f" = L {fmt(lip['value'])} x radius {fmt(r['radius'])} ({how})"
            if "domain" in lip:
                text += "; valid only for inputs in the certified domain box"
        elif "radius" in r:
            text += f" (radius {fmt(r['radius'])} in {r['metric']})"
        c.print(text)
        for claim in r.get("conditional_on", []):
            c.print(line(("conditional on", "bold yellow"), f" {claim}: the guarantee holds only if it is true"))
        if "note" in r:
            c.print(f"note: {r['note']}")

    return emit(args, result, human, CALIBRATION)


def _model_input_dim(args: argparse.Namespace) -> int:
    """gauss-input --model: the number of features per example is the model's (product of its
    input axes), never one axis; an --input-dim that disagrees is refused."""
    if args.domain is not None or args.lipschitz_method != "auto":
        raise BadInput("--lipschitz-method and --domain apply to output mechanisms; gauss-input adds noise to the input")
    if args.sensitivity is not None:
        raise BadInput("gauss-input with --model takes --radius (its sensitivity follows), not --sensitivity")
    net = load_model(args.model)
    if args.input_dim is not None and args.input_dim != net.input_dim:
        raise BadInput(f"--input-dim {args.input_dim} disagrees with the model, which takes {net.input_dim} features "
                       f"per example (input shape {list(net.input_shape)}); omit --input-dim")
    return net.input_dim


def _model_lipschitz(args: argparse.Namespace):
    from ..privacy.from_model import certified_lipschitz, mechanism_norms

    if args.lipschitz is not None or args.sensitivity is not None:
        raise BadInput("give --model or --lipschitz/--sensitivity, not both")
    mechanism_norms(args.mechanism, args.metric)  # refuses mechanisms that take no Lipschitz constant
    net = load_model(args.model)
    return certified_lipschitz(net, args.mechanism, args.metric, args.lipschitz_method, domain_arg(args.domain)), net


def _chain(args: argparse.Namespace) -> int:
    from ..privacy.accounting import chain, chain_steps
    from ..privacy.guarantee import Guarantee
    from ..privacy.params import check_delta, check_epsilon, check_radius

    g = Guarantee(check_epsilon(args.epsilon), check_delta(args.delta), check_radius(args.alpha, "alpha"), "l2")
    out = chain(g, args.beta)
    result = {"epsilon": out.epsilon, "delta": out.delta, "radius": out.alpha, "steps": chain_steps(g.alpha, out.alpha)}
    if out.vacuous:
        result["vacuous"] = True

    def human(r: dict) -> None:
        note = "  (vacuous: delta reached 1)" if r.get("vacuous") else ""
        console().print(f"radius {fmt(r['radius'])} ({r['steps']} steps of {fmt(args.alpha)}): "
                        f"epsilon = {fmt(r['epsilon'])}, delta = {fmt(r['delta'])}{note}")

    return emit(args, result, human, CHAIN)
