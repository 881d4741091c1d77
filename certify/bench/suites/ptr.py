"""`ptr`: Propose-Test-Release query streams. D_p is proposed from certified constants at public
points (mean + 3 std); each run answers a stream of queries, per MILP back-end with fresh bounds
per query, and once with bounds shared across the stream (`SharedBounds`). `bound` is the release
rate of the stream; `seconds` the whole stream."""

from __future__ import annotations

import functools
import statistics
import time

import numpy as np

from ..cases import MILP_BACKENDS, Case, Outcome, SuiteConfig, suite
from .lipschitz import random_net

EPS, DELTA = 1.0, 1e-5


SETTINGS = {  # name: (shape or "digits", radius R, domain)
    "small_4-16-16-4": ((4, 16, 16, 4), 0.25, None),
    "obfuscator_8-32-32-8": ((8, 32, 32, 8), 0.5, None),
    "digits_64-32-10": ("digits", 0.1, (0.0, 1.0)),
}
CERT_TIME = 5.0


@functools.lru_cache(maxsize=None)
def setup(name: str, seed: int):
    """(net, radius, domain, queries, proposal) of a PTR setting; the proposal is mean + 3 std of
    the certified constants (upper bounds, CERT_TIME s each) at 8 public points."""
    from certify.ptr import propose
    from certify.report.tasks import certify_point

    shape, radius, domain = SETTINGS[name]
    rng = np.random.default_rng(seed + 1)
    if shape == "digits":
        from models.zoo import digits_data, digits_net

        d = digits_data(seed)
        net, public, queries = digits_net((32,), seed), d.x_train[:8], d.x_test[:50]
    else:
        net = random_net(shape, seed)
        public, queries = rng.uniform(-1, 1, (8, shape[0])), np.random.default_rng(seed + 2).uniform(-1, 1, (50, shape[0]))
    uppers = [certify_point(i, x, net=net, radius=radius, input_norm="linf", domain=domain, time_limit=CERT_TIME,
                            backend="auto", threads=1)["upper"] for i, x in enumerate(public)]
    proposal = propose(uppers, radius, EPS, ["mean+3std"])[0].value
    return net, radius, domain, queries, proposal


def _stream(name: str, seed: int, n: int, backend: str, shared: bool, time_limit: float) -> Outcome:
    from certify.ptr import SharedBounds, ptr

    net, radius, domain, queries, proposal = setup(name, seed)
    share = SharedBounds(net) if shared else None
    per_query, released, decided = [], 0, 0
    start = time.perf_counter()
    for i, x in enumerate(queries[:n]):
        left = time_limit - (time.perf_counter() - start)
        if left <= 0:
            break
        t = time.perf_counter()
        r = ptr(net, x, radius, epsilon=EPS, delta=DELTA, proposal=proposal, domain=domain, sampler=seed + i,
                backend=backend, shared=share, time_limit=left)
        per_query.append(time.perf_counter() - t)
        released += bool(r.released)
        decided += bool(r.decided)
    done = len(per_query)
    return Outcome(status="optimal" if done == n and decided == n else "time_limit", solved=done == n and decided == n,
                   bound=released / max(done, 1),
                   note=f"{done}/{n} queries, {decided} decided, median {statistics.median(per_query):.3g} s/query, "
                        f"D_p {proposal:.4g}")


@suite("ptr", "Propose-Test-Release query streams (4-16-16-4, obfuscator 8-32-32-8, digits 64-32-10): per back-end, "
       "fresh vs shared bounds", default_time_limit=600.0, quick_time_limit=30.0)
def ptr_suite(cfg: SuiteConfig) -> list[Case]:
    n = 3 if cfg.quick else 20
    cases = []
    for name, (shape, _, _) in SETTINGS.items():
        if cfg.quick and not name.startswith("small"):
            continue
        prep = functools.partial(setup, name, cfg.seed)
        shape = (64, 32, 10) if shape == "digits" else shape
        size = {"inputs": shape[0], "outputs": shape[-1], "hidden_layers": len(shape) - 2, "relus": sum(shape[1:-1])}
        for backend in MILP_BACKENDS:
            cases.append(Case(name, "stream", "ptr", backend, "fresh",
                              functools.partial(_stream, name, cfg.seed, n, backend, False), size=size, prepare=prep))
        cases.append(Case(name, "stream", "ptr", "highs", "shared",
                          functools.partial(_stream, name, cfg.seed, n, "highs", True), size=size, prepare=prep))
    return cases
