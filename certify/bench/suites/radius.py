"""`radius`: certified robustness radii (linf) of digits MLPs: the exact MILP per back-end, and the
fast certified bound with the attack (`exact=False`, no MILP)."""

from __future__ import annotations

import functools

from ..cases import MILP_BACKENDS, NO_BACKEND, Case, Outcome, SuiteConfig, suite
from .lipschitz import digits_setup


def radius_outcome(cert) -> Outcome:
    solver = cert.solver or {}
    return Outcome(status=cert.status, solved=cert.status == "optimal", lower=cert.lower, upper=cert.upper,
                   bound=cert.lower, nodes=solver.get("nodes"), unstable=solver.get("unstable"),
                   binaries=solver.get("binaries"), backend_used=cert.backend if cert.backend in MILP_BACKENDS else None)


def _runner(hidden, seed, point, backend: str | None):
    def run(time_limit: float) -> Outcome:
        import certify

        net, x0 = digits_setup(hidden, seed, point)
        kw = dict(backend=backend) if backend else dict(exact=False)
        return radius_outcome(certify.robustness_radius(net, x0, norm="linf", domain=(0.0, 1.0), time_limit=time_limit,
                                                        **kw))

    return run


@suite("radius", "certified linf robustness radii of digits MLPs: exact MILP per back-end vs the fast certified bound",
       default_time_limit=120.0, quick_time_limit=20.0)
def radius_suite(cfg: SuiteConfig) -> list[Case]:
    nets = ((16,),) if cfg.quick else ((16,), (32,), (32, 32))
    points = 2 if cfg.quick else 5
    cases: list[Case] = []
    for hidden in nets:
        size = {"inputs": 64, "outputs": 10, "hidden_layers": len(hidden), "relus": sum(hidden)}
        for p in range(points):
            name = f"digits_{'-'.join(map(str, hidden))}_x{p}"
            for backend in MILP_BACKENDS:
                cases.append(Case(name, "digits", "radius", backend, "milp", _runner(hidden, cfg.seed, p, backend),
                                  size=size, prepare=functools.partial(digits_setup, hidden, cfg.seed, p)))
            cases.append(Case(name, "digits", "radius", NO_BACKEND, "fast", _runner(hidden, cfg.seed, p, None), size=size,
                              prepare=functools.partial(digits_setup, hidden, cfg.seed, p)))
    return cases
