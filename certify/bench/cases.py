"""What a benchmark run is made of: a `Case` (one instance asked one question with one back-end and
method), the `Outcome` a case returns, and the suite registry.

A suite is a function `(SuiteConfig) -> list[Case]` registered under a name with `@suite(...)`.
Cases build their models lazily (inside `run`), so listing a suite or planning a run costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from solvers.choices import MILP_BACKENDS  # noqa: F401 (the suites take the back-end list from here)

from ..errors import BadInput

#: back-end label of methods that call no MILP solver (bound propagation, SDPs through cvxpy, ...)
NO_BACKEND = "none"


@dataclass
class Outcome:
    """What one run measured. `bound` is the headline number of the question (the certified upper
    bound of a Lipschitz constant, the certified radius, a noise scale, ...); `solved` says whether
    the question was closed (exact value proven, property decided) rather than left with a gap."""

    status: str
    solved: bool
    lower: float | None = None
    upper: float | None = None
    bound: float | None = None
    nodes: int | None = None
    unstable: int | None = None
    binaries: int | None = None
    backend_used: str | None = None
    note: str = ""
    seconds: float | None = None  # the measured time when the case times itself (e.g. without loading)
    proof_share: float | None = None  # share of the run spent proving a MILP solver's bound


@dataclass
class Case:
    """One instance x question x back-end x method (x variant) of a suite."""

    instance: str
    family: str
    question: str
    backend: str
    method: str
    run: Callable[[float], Outcome]  # called with the per-instance time limit (seconds)
    variant: str = ""
    size: dict[str, int] = field(default_factory=dict)  # inputs, outputs, hidden_layers, relus
    reference_value: float | str | None = None
    reference_seconds: str | None = None  # published/measured time of a peer tool, e.g. "211-421"
    reference_source: str = ""
    prepare: Callable[[], object] | None = None  # untimed set-up before `run` (load or train the model)

    @property
    def key(self) -> str:
        return "|".join((self.instance, self.backend, self.method, self.variant))


@dataclass(frozen=True)
class SuiteConfig:
    """Settings every suite receives: `quick` (about a minute for the whole suite), the seed that
    generates nets and points, the time limit per run, and user models (`certify bench --models`)."""

    quick: bool = False
    seed: int = 0
    time_limit: float = 60.0
    models: tuple[str, ...] = ()
    question: str = "lipschitz"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    build: Callable[[SuiteConfig], list[Case]]
    default_time_limit: float = 60.0
    quick_time_limit: float = 10.0
    # optional: (rows of this suite, output directory, config) -> (files written, markdown appended to
    # summary.md, data for the --json output), after the generic tables and plots
    report: Callable[[list[dict], Path, SuiteConfig], tuple[dict[str, str], str, dict]] | None = None


SUITES: dict[str, Suite] = {}
#: modules that register suites when imported (kept lazy: `certify --help` must stay fast)
SUITE_MODULES = ("certify.bench.suites.lipschitz", "certify.bench.suites.global_", "certify.bench.suites.privacy",
                 "certify.bench.suites.radius", "certify.bench.suites.verify", "certify.bench.suites.ptr",
                 "certify.bench.suites.utility", "certify.bench.suites.models")


def suite(name: str, description: str, *, default_time_limit: float = 60.0, quick_time_limit: float = 10.0,
          report: Callable | None = None):
    """Register a suite builder under `name` (`report`: see `Suite.report`)."""

    def wrap(build: Callable[[SuiteConfig], list[Case]]):
        SUITES[name] = Suite(name, description, build, default_time_limit, quick_time_limit, report)
        return build

    return wrap


def load_suites() -> dict[str, Suite]:
    import importlib

    for mod in SUITE_MODULES:
        importlib.import_module(mod)
    return SUITES


def get_suite(name: str) -> Suite:
    suites = load_suites()
    if name not in suites:
        listed = ", ".join(n for n in suites if n != "models")
        raise BadInput(f"unknown benchmark suite {name!r}; choose one of {listed}, all (or --models FILE...)")
    return suites[name]


def net_size(net) -> dict[str, int]:
    """Problem-size columns of a `models.Network`."""
    return {"inputs": int(net.input_dim), "outputs": int(net.output_dim), "hidden_layers": len(net.relu_sizes),
            "relus": int(net.relu_count)}
