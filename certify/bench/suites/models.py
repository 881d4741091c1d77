"""`models` (`certify bench --models PATH...`): the user's own ONNX models asked one question
(`--question lipschitz|global|radius`) at seeded or given points, on every back-end and method
that applies."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ...errors import BadInput
from ..cases import MILP_BACKENDS, NO_BACKEND, Case, SuiteConfig, net_size, suite
from .global_ import SDP_METHODS, _runner as global_runner
from .lipschitz import lipschitz_cases
from .radius import radius_outcome


def model_files(paths) -> list[Path]:
    """ONNX files named, or found (sorted) in the directories named."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.onnx"))
            if not found:
                raise BadInput(f"--models: {p} holds no .onnx files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise BadInput(f"--models: {p} does not exist")
    return out


def points_for(net, opts: dict, seed: int) -> np.ndarray:
    """--center (a vector, or @FILE of points: .npy/.csv/.json), else --points seeded points:
    uniform in --domain, or standard normal without one."""
    from ...boundary.domains import domain_arg
    from ...boundary.points import read_points
    from ...boundary.vectors import parse_vector

    n = net.input_dim
    center = opts.get("center")
    if center:
        if str(center).startswith("@"):  # a file of one or more points
            return read_points(str(center)[1:], n, "--center")
        return parse_vector(center, name="--center", length=n)[None, :]
    k = opts.get("points", 1)
    rng = np.random.default_rng(seed)
    domain = domain_arg(opts.get("domain"))
    if domain is not None:
        return rng.uniform(domain[0], domain[1], (k, n))
    return rng.standard_normal((k, n))


@suite("models", "your own ONNX models (certify bench --models PATH... --question lipschitz|global|radius)",
       default_time_limit=120.0, quick_time_limit=20.0)
def models_suite(cfg: SuiteConfig) -> list[Case]:
    from ...boundary.domains import domain_arg
    from ...boundary.model_files import load_model

    opts = cfg.options
    radius = float(opts.get("radius") or 0.05)
    domain = domain_arg(opts.get("domain"))
    cases: list[Case] = []
    for path in model_files(cfg.models):
        net = load_model(str(path))
        size = net_size(net)
        name = path.stem
        if cfg.question == "global":
            load = functools.partial(lambda n: n, net)
            norms = dict(input_norm=opts.get("input_norm", "linf"), output_norm=opts.get("output_norm", "l1"))
            for method in SDP_METHODS:
                cases.append(Case(name, "global", "global", NO_BACKEND, method, global_runner(load, method, NO_BACKEND, **norms),
                                  size=size))
            if domain is not None and norms["input_norm"] != "l2" and norms["output_norm"] != "l2":
                for backend in MILP_BACKENDS:
                    cases.append(Case(name, "global", "global", backend, "mip",
                                      global_runner(load, "mip", backend, domain=domain, **norms), size=size))
            continue
        for k, x in enumerate(points_for(net, opts, cfg.seed)):
            inst = f"{name}_x{k}"
            if cfg.question == "lipschitz":
                load = functools.partial(lambda n, c: (n, c, radius), net, x)
                cases += lipschitz_cases(inst, "user", load, size=size, domain=domain,
                                         input_norm=opts.get("input_norm", "linf"),
                                         output_norm=opts.get("output_norm", "l1"))
            else:
                for backend in MILP_BACKENDS + (None,):
                    cases.append(Case(inst, "user", "radius", backend or NO_BACKEND, "milp" if backend else "fast",
                                      _radius_runner(net, x, domain, opts.get("input_norm", "linf"), backend), size=size))
    return cases


def _radius_runner(net, x, domain, norm: str, backend: str | None):
    def run(time_limit: float):
        import certify

        kw = dict(backend=backend) if backend else dict(exact=False)
        return radius_outcome(certify.robustness_radius(net, x, norm=norm, domain=domain, time_limit=time_limit, **kw))

    return run
