"""`certify utility MECHANISM`: rho(eps, box) of an LDP mechanism, or the smallest eps for a target rho;
`certify utility MODEL --mechanism M`: the same on the certified robustness box certify computes for
the model at the point (ONNX ReLU nets, scikit-learn linear models and tree ensembles saved with skops)."""

from __future__ import annotations

import argparse

import numpy as np

from models.file_kinds import PICKLE_EXTENSIONS

from ..boundary.indices import features_arg
from ..boundary.model_files import CLASSIFIER_SUFFIXES, load_classifier
from ..errors import BadInput
from ..schema import UTILITY
from .common import add_json_flag, console, domain_arg, emit, fmt, vector_arg

_MECHANISMS = ("laplace", "gaussian", "pm", "sw", "exponential", "krr", "all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "utility", help="probability that an LDP mechanism keeps a classifier's class (rho)",
        description="rho(eps, box) = prod_i P(a_i <= M(x_i) <= b_i) over the perturbed features (Zheng & Hu): the "
                    "probability that the LDP-perturbed record stays in a box where the class is constant. With "
                    "--target-rho, the smallest per-feature epsilon reaching it. MECHANISM 'all' compares them. "
                    "Given a MODEL file (.onnx, or .skops for scikit-learn) instead, certify first computes the "
                    "certified robustness hyperrectangle at --point (the --features move) and uses it as the box.",
    )
    p.add_argument("mechanism", metavar="MECHANISM|MODEL",
                   help="laplace | gaussian | pm | sw | exponential | krr | all, or a model file (.onnx, .skops)")
    p.add_argument("--mechanism", dest="model_mechanism", default=None, metavar="M",
                   help="with a MODEL: the mechanism (as MECHANISM above)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="with a MODEL: wall-clock seconds for the whole command, model loading included")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--epsilon", type=float, help="per-feature privacy budget epsilon > 0")
    group.add_argument("--target-rho", type=float, metavar="P", help="find the smallest epsilon with rho >= P")
    p.add_argument("--point", required=True, metavar="V", help="the record x: comma-separated values or @file")
    p.add_argument("--box", default=None, metavar="LO:HI[,LO:HI...]",
                   help="one interval per feature of the point, containing it (a robustness box); with a MODEL, "
                        "certify computes it")
    p.add_argument("--domain", default=None, metavar="LO,HI", help="feature domain (default 0,1)")
    p.add_argument("--features", default=None, metavar="I,J", help="perturbed features (0-based; default all)")
    p.add_argument("--delta", type=float, default=None,
                   help="gaussian: its delta; other mechanisms: the privacy indicator I_delta on the record "
                        "(rho -> delta + (1 - delta) rho, record (d eps, delta)-PAC)")
    p.add_argument("--calibration", choices=("analytic", "pac"), default=None,
                   help="Gaussian sigma: analytic (default, exact (eps, delta)-DP) or pac (Zheng & Hu Thm 4)")
    p.add_argument("--clip", action=argparse.BooleanOptionalAction, default=True,
                   help="laplace/gaussian: clip outputs to the domain (post-processing; default on)")
    p.add_argument("--k", type=int, default=None, metavar="K", help="grid points of exponential/krr (default 101)")
    p.add_argument("--omega", type=float, default=None,
                   help="box found by sampling: with confidence 1 - omega at most a fraction tau of it changes the "
                        "class; rho is then a lower bound holding with that confidence (omega is reported, not "
                        "multiplied in)")
    p.add_argument("--tau", type=float, default=None,
                   help="box found by sampling: the uniform fraction of it that may change the class; rho becomes "
                        "max(0, mass - tau * volume * prod max density) + P(M(x) = x)")
    add_json_flag(p)
    p.set_defaults(handler=_utility)


def _intervals(spec: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    parts = [s for s in spec.replace(" ", "").split(",")]
    lo, hi = [], []
    for part in parts:
        bits = part.split(":")
        if len(bits) != 2:
            raise BadInput(f"--box takes LO:HI intervals separated by commas, got {part!r}")
        try:
            a, b = float(bits[0]), float(bits[1])
        except ValueError:
            raise BadInput(f"--box interval {part!r} is not two numbers LO:HI") from None
        if not (np.isfinite(a) and np.isfinite(b)):
            raise BadInput(f"--box interval {part!r} must be finite")
        if a > b:
            raise BadInput(f"--box interval {part!r} has LO > HI")
        lo.append(a)
        hi.append(b)
    if len(lo) != n:
        raise BadInput(f"--box has {len(lo)} intervals but --point has {n} values")
    return np.array(lo), np.array(hi)


def _model_box(args: argparse.Namespace, point: np.ndarray, features, domain):
    """The certified robustness box of MODEL at the point (certify.ldp.robustness_box)."""
    from ..ldp import robustness_box

    if args.box is not None:
        raise BadInput("with a MODEL certify computes the box itself: drop --box (or give a MECHANISM instead)")
    if args.model_mechanism is None:
        raise BadInput(f"with a MODEL, name the mechanism with --mechanism ({', '.join(_MECHANISMS[:-1])})")
    model = load_classifier(args.mechanism, f", or a mechanism: {', '.join(_MECHANISMS)}")
    kw = {} if args.time_limit is None else {"time_limit": args.time_limit}
    from models.ir import Network

    if not isinstance(model, Network):
        kw = {}
    cert = robustness_box(model, point, features=features, domain=domain, **kw)
    if getattr(cert, "status", "") == "probabilistic":
        raise BadInput(f"{args.mechanism}: certify cannot certify a box for this model type; use the Python API "
                       "(certify.ldp.robustness_box) for a probabilistic box")
    return cert


def _utility(args: argparse.Namespace) -> int:
    from ..ldp import compare_mechanisms, make_mechanism, smallest_epsilon, utility
    from ..ldp.mechanisms import check_ldp_epsilon

    point = vector_arg(args.point, "--point")
    domain = domain_arg(args.domain) or (0.0, 1.0)
    features = features_arg(args.features)
    given = args.mechanism.strip()
    box_cert = None
    if given.lower() not in _MECHANISMS and given.lower().endswith(CLASSIFIER_SUFFIXES + PICKLE_EXTENSIONS):
        box_cert = _model_box(args, point, features, domain)
        given = args.model_mechanism
    elif args.model_mechanism is not None:
        raise BadInput("--mechanism goes with a MODEL file; with a MECHANISM give --box")
    name = given.strip().lower()
    if name not in _MECHANISMS:
        raise BadInput(f"unknown mechanism {given!r}; choose one of {', '.join(_MECHANISMS)} (or give a model file "
                       f"{'/'.join(CLASSIFIER_SUFFIXES)})")
    if box_cert is None:
        if args.box is None:
            raise BadInput("give the robustness box with --box LO:HI,... (or a MODEL file to certify it)")
        lo, hi = _intervals(args.box, point.size)
        box = (lo, hi)
    else:
        box = box_cert
        lo, hi = np.asarray(box_cert.box.lo), np.asarray(box_cert.box.hi)
    common = {"point": point, "features": features, "omega": args.omega, "tau": args.tau}
    if name == "all":
        if args.epsilon is None:
            raise BadInput("MECHANISM all compares at one --epsilon (add --target-rho via the Python API)")
        cmp = compare_mechanisms(box, check_ldp_epsilon(args.epsilon), domain=domain, delta=args.delta, k=args.k,
                                 clip=args.clip, calibration=args.calibration, **common)
        result = {**cmp.to_dict(), "domain": list(domain), **_box_fields(box_cert)}
        return emit(args, result, lambda r: console().print(str(cmp), markup=False), UTILITY)
    eps0 = 1.0 if args.epsilon is None else check_ldp_epsilon(args.epsilon)
    kw: dict = {"domain": domain}
    if name in ("laplace", "gaussian"):
        kw["clip"] = args.clip
    if args.k is not None:
        kw["k"] = args.k
    indicator = None
    if name == "gaussian":
        mech = make_mechanism(name, eps0, delta=args.delta, calibration=args.calibration, **kw)
    else:
        mech = make_mechanism(name, eps0, calibration=args.calibration, **kw)
        indicator = args.delta if args.delta else None
    if args.target_rho is not None:
        s = smallest_epsilon(mech, box, args.target_rho, indicator=indicator, **common)
        if not s.reachable:
            raise BadInput(f"target rho {args.target_rho:g} is not reached by {mech.label} for any epsilon <= "
                           f"{s.eps_max:g} (rho there is {s.rho_at_max:.6g})")
        result = {**s.to_dict(), "delta": mech.delta if name == "gaussian" else args.delta, "domain": list(domain),
                  "box": {"lo": lo.tolist(), "hi": hi.tolist()}, "point": point.tolist(), **_box_fields(box_cert)}
        if args.omega is not None or args.tau is not None:  # rho is the sampled-box bound (see the notes)
            result.update({"omega": args.omega or 0.0, "tau": args.tau or 0.0,
                           "confidence": 1 - (args.omega or 0.0)})

        def human(r: dict) -> None:
            console().print(f"epsilon = {fmt(r['epsilon'], 10)} per feature gives rho = {fmt(r['rho'], 8)} >= "
                            f"{fmt(r['target_rho'])} ({r['mechanism']}; record epsilon {fmt(r['record_epsilon'])}, "
                            f"delta {fmt(r['record_delta'])})", markup=False)
            for note in r.get("notes", []):
                console().print(note, markup=False)

        return emit(args, result, human, UTILITY)
    u = utility(mech, box, indicator=indicator, **common)
    result = {**u.to_dict(), "delta": mech.delta if name == "gaussian" else args.delta, "domain": list(domain),
              **_box_fields(box_cert)}
    if name == "gaussian":
        result["sigma"] = mech.sigma
        result["calibration"] = mech.calibration

    def human(r: dict) -> None:
        c = console()
        c.print(f"rho = {fmt(r['rho'], 8)}  ({r['mechanism']}, epsilon {fmt(r['epsilon'])} per feature; record "
                f"({fmt(r['record_epsilon'])}, {fmt(r['record_delta'])}))", markup=False)
        c.print(f"per-feature masses {', '.join(fmt(m, 6) for m in r['masses'])}; {r['basis']}", markup=False)
        sb = r.get("sampled_box")
        if sb is not None:
            c.print(f"rho is a lower bound of P(class kept) holding with confidence {fmt(sb['confidence'])} "
                    f"(omega {fmt(sb['omega'])}) over the box's sampling: max(0, {fmt(sb['continuous_mass'], 6)} - "
                    f"tau {fmt(sb['tau'])} x volume {fmt(sb['volume'], 6)} x prod max density "
                    f"{fmt(float(np.prod(sb['max_density'])), 6)} = {fmt(sb['subtracted'], 6)}) + P(M(x) = x) "
                    f"{fmt(sb['atom_at_point'], 6)}", markup=False)
        if "robustness_box" in r:
            b = r["robustness_box"]
            moving = ", ".join(f"x{i} in [{fmt(a, 6)}, {fmt(z, 6)}]" for i, (a, z) in enumerate(zip(b["lo"], b["hi"]))
                               if a != z)
            c.print(f"box       {b['kind']} ({b['status']}, {fmt(b['seconds'], 3)}s): {moving or 'the point only'}",
                    markup=False)

    return emit(args, result, human, UTILITY)


def _box_fields(cert) -> dict:
    """The certified box MODEL gave (absent for a user box)."""
    if cert is None:
        return {}
    d = cert.to_dict()
    return {"robustness_box": {"kind": d.get("kind"), "status": d.get("status"), "certified": d.get("certified"),
                               "seconds": d.get("seconds"), "lo": list(map(float, cert.box.lo)),
                               "hi": list(map(float, cert.box.hi)), "predicted_class": d.get("predicted_class")}}
