"""`global`: certified global Lipschitz upper bounds per method (naive norm product, ECLipsE-Fast,
LipSDP-Layer, LipSDP-Neuron; SDPs through cvxpy/SCS with validated multipliers) on seeded random
nets, l2 -> l2; and on LipMIP's 2-16-16-2 net, linf -> l1, the same methods beside the exact
constant over [0, 1]^2 from the MILP ("mip", per back-end), which shows how loose each is."""

from __future__ import annotations

import functools

from ..cases import MILP_BACKENDS, NO_BACKEND, Case, Outcome, SuiteConfig, net_size, suite
from .lipschitz import lipmip_net, random_net

SDP_METHODS = ("naive", "eclipse-fast", "lipsdp-layer", "lipsdp-neuron")
NETS = {"20-100-100-10": (20, 100, 100, 10), "50-200-200-10": (50, 200, 200, 10),
        "784-100-100-10": (784, 100, 100, 10), "10-50x8-10": (10,) + (50,) * 8 + (10,)}
QUICK_NETS = {"10-32-32-10": (10, 32, 32, 10), "10-32x4-10": (10,) + (32,) * 4 + (10,)}


def global_outcome(result) -> Outcome:
    exact = result.method == "mip" and result.status == "optimal"
    return Outcome(status=result.status, solved=exact or result.status == "certified", lower=result.lower,
                   upper=result.upper, bound=result.upper, nodes=(result.details.get("certificate") or {}).get("nodes"),
                   backend_used=result.details.get("backend"))


def _runner(load, method: str, backend: str, **kw):
    def run(time_limit: float) -> Outcome:
        from certify.lipschitz.global_bounds import global_lipschitz

        extra = dict(backend=backend) if method == "mip" else {}
        return global_outcome(global_lipschitz(load(), method, time_limit=time_limit, **extra, **kw))

    return run


@suite("global", "certified global Lipschitz bounds per method (norm product, ECLipsE-Fast, LipSDP-Layer/Neuron) on "
       "random nets; beside the exact MILP constant over a domain on LipMIP's 2-16-16-2",
       default_time_limit=300.0, quick_time_limit=30.0)
def global_suite(cfg: SuiteConfig) -> list[Case]:
    cases: list[Case] = []
    nets = QUICK_NETS if cfg.quick else NETS
    for name, shape in nets.items():
        load = functools.partial(random_net, shape, cfg.seed)
        size = {"inputs": shape[0], "outputs": shape[-1], "hidden_layers": len(shape) - 2, "relus": sum(shape[1:-1])}
        for method in SDP_METHODS:
            cases.append(Case(f"random_{name}", "random l2", "global", NO_BACKEND, method, _runner(load, method, NO_BACKEND),
                              size=size, prepare=load))
    name = "lipmip_2-16-16-2"
    load = functools.partial(lipmip_net, name)
    kw = dict(input_norm="linf", output_norm="l1", domain=(0.0, 1.0))
    for method in SDP_METHODS:
        cases.append(Case(name, "domain linf->l1", "global", NO_BACKEND, method, _runner(load, method, NO_BACKEND, **kw),
                          size=net_size(lipmip_net(name))))
    for backend in MILP_BACKENDS:
        cases.append(Case(name, "domain linf->l1", "global", backend, "mip", _runner(load, "mip", backend, **kw),
                          size=net_size(lipmip_net(name))))
    return cases
