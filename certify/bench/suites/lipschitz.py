"""`lipschitz`: exact local Lipschitz constants (MILP per back-end, Jacobian branch-and-bound, the
Jacobian bound alone) on LipMIP's nets, seeded width and depth sweeps, digits-trained MLPs and an
ACAS Xu net, plus the bound-tightening ablation (interval / symbolic / LP pre-activation bounds);
with the VNN-COMP data folder, MNIST- and CIFAR-sized nets (`lipschitz_images`, not in --quick).

LipMIP's question on its suite: c = [1, -1] (margin 0-1), box [0, 1]^n, linf input. The reference
values and times are those of LipMIP's own code (Jordan & Dimakis, NeurIPS 2020) with Gurobi on 2
threads, as recorded in docs/lipschitz.md: 0.15-0.18 s, 2.1-2.3 s and 211-421 s.
"""

from __future__ import annotations

import functools

import numpy as np

from solvers.choices import BOUND_METHODS

from ..cases import MILP_BACKENDS, NO_BACKEND, Case, Outcome, SuiteConfig, net_size, suite

LIPMIP_REFERENCE = {  # value, seconds "min-max" of LipMIP's code, Gurobi 2 threads
    "lipmip_2-16-16-2": (0.335242, "0.15-0.18"),
    "lipmip_2-20-20-20-2": (0.0969398, "2.1-2.3"),
    "lipmip_10-10-10-10-10-2": (0.0746016, "211-421"),
}
BOUNDS_ABLATION = BOUND_METHODS


def lipschitz_outcome(cert) -> Outcome:
    return Outcome(status=cert.status, solved=cert.status == "optimal", lower=cert.lower, upper=cert.upper,
                   bound=cert.upper, nodes=cert.nodes, unstable=cert.unstable, binaries=cert.binaries,
                   backend_used=cert.backend if cert.backend in MILP_BACKENDS else None,
                   proof_share=(cert.proof or {}).get("share"), note=_race_note(cert))


def _race_note(cert) -> str:
    """auto's race, when one ran: which side closed (runs.csv's `note`)."""
    race = getattr(cert, "race", None) or {}
    if not race:
        return ""
    return f"race: {race.get('winner') or 'neither'} closed ({race.get('parent')} vs {race.get('child')})"


@functools.lru_cache(maxsize=None)
def lipmip_net(name: str):
    import certify
    from models.zoo import lipmip_suite_path

    return certify.load_onnx(lipmip_suite_path(name))


@functools.lru_cache(maxsize=None)
def random_net(shape: tuple[int, ...], seed: int):
    from models.zoo import random_relu_net

    return random_relu_net(shape, seed=seed)


@functools.lru_cache(maxsize=None)
def acas_net(i: int, j: int):
    import certify
    from models.zoo import acasxu_path

    return certify.load_onnx(acasxu_path(i, j))


def digits_setup(hidden: tuple[int, ...], seed: int, point: int):
    from models.zoo import digits_data, digits_net

    return digits_net(hidden, seed), digits_data(seed).x_test[point]


@functools.lru_cache(maxsize=None)
def warm_up() -> None:
    """One tiny question by every method before the first timed run: the solvers' one-time lazy
    imports (HiGHS, the bound engine's modules; a second or more on a loaded machine) are
    start-up, measured apart (`python -X importtime -m certify.cli ...`), not charged to whichever
    method runs first."""
    import certify
    from models.ir import sequential

    net = sequential([(np.array([[1.0, -1.0], [0.5, 1.0], [-1.0, 0.25]]), np.array([0.1, -0.2, 0.05])),
                      (np.array([[1.0, -0.5, 0.75], [-1.0, 1.0, 0.5]]), np.zeros(2))])
    for method in ("auto", "bab", "milp"):
        certify.local_lipschitz(net, np.zeros(2), 1.0, method=method, time_limit=10)


def _prepared(load):
    def prepare():
        warm_up()
        return load()

    return prepare


def lipschitz_cases(instance: str, family: str, load, *, backends=MILP_BACKENDS, methods=("auto", "milp", "bab", "bounds"),
                    size: dict, variant_bounds: tuple[str, ...] = (), reference=(None, None, ""), **question) -> list[Case]:
    """Cases of one Lipschitz instance: `milp` once per back-end, `auto` (the default), `bab` and
    `bounds` once (they choose their solver or call none); with `variant_bounds`, the MILP once per pre-activation bound method instead."""

    def runner(backend: str, method: str, bounds: str | None):
        def run(time_limit: float) -> Outcome:
            import certify

            net, center, radius = load()
            kw = dict(question, method=method, time_limit=time_limit)
            if method == "milp":
                kw["backend"] = backend
            if bounds:
                kw["bounds"] = bounds
            return lipschitz_outcome(certify.local_lipschitz(net, center, radius, **kw))

        return run

    ref_value, ref_seconds, ref_source = reference
    out: list[Case] = []
    for method in methods:
        for backend in (backends if method == "milp" else (NO_BACKEND,)):
            for bounds in (variant_bounds if method == "milp" and variant_bounds else (None,)):
                out.append(Case(instance, family, "lipschitz", backend, method, runner(backend, method, bounds),
                                variant=f"bounds={bounds}" if bounds else "", size=size, prepare=_prepared(load),
                                reference_value=ref_value, reference_seconds=ref_seconds, reference_source=ref_source))
    return out


@suite("lipschitz", "exact local Lipschitz constants: LipMIP's nets (vs LipMIP's times), width/depth sweeps, digits "
       "MLPs, ACAS Xu, and MNIST / CIFAR nets with --vnncomp-data DIR; MILP per back-end, Jacobian BaB, "
       "bound-tightening ablation",
       default_time_limit=300.0, quick_time_limit=20.0)
def lipschitz_suite(cfg: SuiteConfig) -> list[Case]:
    from models.zoo import LIPMIP_SUITE

    cases: list[Case] = []
    lipmip = LIPMIP_SUITE[:1] if cfg.quick else LIPMIP_SUITE
    for k, name in enumerate(lipmip):
        net = lipmip_net(name)  # small ONNX files: sizes up front
        value, secs = LIPMIP_REFERENCE[name]
        load = functools.partial(lambda n: (lipmip_net(n), np.full(lipmip_net(n).input_dim, 0.5), 0.5), name)
        cases += lipschitz_cases(name, "lipmip", load, size=net_size(net), margin=(0, 1),
                                 backends=MILP_BACKENDS if k < 2 else ("gurobi", "highs"),
                                 reference=(value, secs, "LipMIP code (Jordan & Dimakis 2020), Gurobi 2 threads"))
    widths = (8, 12) if cfg.quick else (10, 20, 40, 60)
    depths = (1, 2) if cfg.quick else (1, 2, 3, 4)
    shapes = [("width", (5, w, w, 2)) for w in widths] + [("depth", (5,) + (16,) * d + (2,)) for d in depths]
    for family, shape in dict.fromkeys(shapes):
        center = np.random.default_rng(cfg.seed).standard_normal(shape[0])
        load = functools.partial(lambda s, c: (random_net(s, cfg.seed), c, 0.1), shape, center)
        name = f"random_{'-'.join(map(str, shape))}"
        size = {"inputs": shape[0], "outputs": shape[-1], "hidden_layers": len(shape) - 2, "relus": sum(shape[1:-1])}
        cases += lipschitz_cases(name, family, load, size=size, backends=("gurobi", "highs") if not cfg.quick else MILP_BACKENDS)
    # the ablation: what each pre-activation bound method buys the MILP
    for name in lipmip[-1:] if cfg.quick else LIPMIP_SUITE[1:]:
        load = functools.partial(lambda n: (lipmip_net(n), np.full(lipmip_net(n).input_dim, 0.5), 0.5), name)
        cases += lipschitz_cases(name, "ablation", load, size=net_size(lipmip_net(name)), margin=(0, 1),
                                 backends=("highs",) if cfg.quick else ("gurobi", "highs"), methods=("milp",),
                                 variant_bounds=BOUNDS_ABLATION)
    if not cfg.quick:
        for hidden in ((32,), (64,), (32, 32)):
            for point in range(3):
                load = functools.partial(lambda h, p: (*digits_setup(h, cfg.seed, p), 0.05), hidden, point)
                size = {"inputs": 64, "outputs": 10, "hidden_layers": len(hidden), "relus": sum(hidden)}
                cases += lipschitz_cases(f"digits_{'-'.join(map(str, hidden))}_x{point}", "digits", load, size=size,
                                         backends=("gurobi", "highs"), domain=(0.0, 1.0))
        x0 = np.array([0.6, -0.3, 0.1, 0.4, 0.2])
        load = lambda: (acas_net(1, 1), x0, 0.05)  # noqa: E731
        cases += lipschitz_cases("acasxu_1_1", "acasxu", load, size=net_size(acas_net(1, 1)), backends=("highs",))
        from .lipschitz_images import image_cases
        from .vnncomp import data_folder

        cases += image_cases(data_folder(cfg.options.get("vnncomp_data")), lipschitz_cases)
    return cases
