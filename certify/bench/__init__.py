"""Solver and method benchmarks as a product feature (`certify bench`; docs/bench.md).

`run_bench(["lipschitz"], quick=True, out="bench-out")` runs a registered suite (or the user's own
ONNX models with `models=[...]`), every instance on every available MILP back-end and method,
and writes into `out`:

- `runs.csv`: one tidy row per instance x back-end x method x repeat (columns in
  `certify.bench.runner.COLUMNS`);
- `machine.json`: CPU, cores, memory, Python, package and solver versions, run settings;
- `summary.md`: medians with min-max per configuration, solved counts per back-end and method,
  LipMIP's times beside ours;
- PNG plots: runtime vs network size, cactus, bound tightness, bound-tightening ablation.

Suites are generated from the seed or shipped with the package; nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..certificate import to_jsonable
from ..errors import BadInput
from .cases import SUITES, Case, Outcome, Suite, SuiteConfig, get_suite, load_suites, suite

QUESTIONS = ("lipschitz", "global", "radius")


@dataclass
class BenchResult:
    """Where a benchmark wrote its files, and its rows (dicts with the CSV columns)."""

    out: Path
    rows: list[dict]
    files: dict[str, str] = field(default_factory=dict)
    machine: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)  # per suite, what its own report computed (Suite.report)

    @property
    def skipped(self) -> list[dict]:
        return [r for r in self.rows if r.get("status") == "skipped"]

    def to_dict(self) -> dict:
        from .tables import aggregate

        out = {"out": str(self.out), "files": self.files, "runs": len(self.rows),
               "skipped": len(self.skipped), "errors": sum(r.get("status") == "error" for r in self.rows),
               "configurations": aggregate(self.rows), "machine": self.machine}
        if self.reports:
            out["reports"] = self.reports
        return to_jsonable(out)


def list_suites() -> dict[str, str]:
    """Registered suite names and what they measure."""
    return {name: s.description for name, s in load_suites().items()}


def run_bench(
    suites: Sequence[str] = (),
    *,
    models: Sequence[str] = (),
    question: str = "lipschitz",
    quick: bool = False,
    repeat: int = 1,
    time_limit: float | None = None,
    backends: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    seed: int = 0,
    out: str | Path = "bench-results",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    options: dict | None = None,
) -> BenchResult:
    """Run suites (or `models`, asked `question`) and write the files listed in the module doc.

    `time_limit` is per run (default: the suite's, shorter with `quick`); `backends` and `methods`
    filter the cases; `options` go to the `models` suite (center, radius, domain, points, norms).
    `resume`: continue the same benchmark in `out` (else it is measured afresh); `out` holding
    another benchmark is refused unless `overwrite` (`certify.bench.runner`).
    """
    from .machine import machine_info
    from .plots import PLOTS, SUITE_PLOTS, write_plots
    from .runner import execute, plan
    from .tables import summary_markdown, write_csv

    suites = list(suites)
    if models:
        if suites:
            raise BadInput("give either suite names or --models, not both")
        if question not in QUESTIONS:
            raise BadInput(f"--question must be one of {', '.join(QUESTIONS)} for --models, got {question!r}")
        suites = ["models"]
    if not suites:
        raise BadInput(f"name a suite ({', '.join(n for n in list_suites() if n != 'models')}, all) or give --models")
    for name in suites:
        if name != "all":
            get_suite(name)
    if backends is not None:
        from .cases import MILP_BACKENDS

        bad = [b for b in backends if b not in MILP_BACKENDS]
        if bad:
            raise BadInput(f"unknown back-end(s) {', '.join(bad)}; choose from {', '.join(MILP_BACKENDS)}")
    if time_limit is None:
        picked = [s for n, s in load_suites().items() if n in suites or ("all" in suites and n != "models")]
        time_limit = max(s.quick_time_limit if quick else s.default_time_limit for s in picked)
    if not time_limit > 0:
        raise BadInput(f"--time-limit must be positive, got {time_limit}")
    cfg = SuiteConfig(quick=quick, seed=int(seed), time_limit=float(time_limit), models=tuple(str(m) for m in models),
                      question=question, options=dict(options or {}))
    runs = plan(suites, cfg, backends=backends, methods=methods, repeat=repeat)
    out = Path(out)
    settings, model = _identity_parts(suites, cfg, backends, methods, repeat)
    rows = execute(runs, out, time_limit=float(time_limit), seed=int(seed), resume=resume, overwrite=overwrite,
                   settings=settings, model=model, plots=[f"{name}.png" for name in PLOTS] + list(SUITE_PLOTS),
                   progress=progress)
    machine = machine_info(suites=suites, quick=quick, repeat=repeat, time_limit=time_limit, seed=seed,
                           models=list(cfg.models), question=question if models else None)
    files = {"csv": str(out / "runs.csv"), "machine": str(out / "machine.json"), "summary": str(out / "summary.md")}
    write_csv(rows, out / "runs.csv")
    (out / "machine.json").write_text(json.dumps(to_jsonable(machine), indent=2) + "\n")
    summary = summary_markdown(rows, machine)
    for p in write_plots(rows, out):
        files[p.stem] = str(p)
    reports = {}
    for name, s in load_suites().items():
        mine = [r for r in rows if r.get("suite") == name]
        if s.report is not None and mine:
            extra_files, markdown, reports[name] = s.report(mine, out, cfg)
            files.update(extra_files)
            summary += markdown
    (out / "summary.md").write_text(summary)
    return BenchResult(out, rows, files, machine, reports)


def _identity_parts(suites: list[str], cfg: SuiteConfig, backends, methods, repeat: int) -> tuple[dict, str | None]:
    """The settings and the model hash of a benchmark's run identity (the plan's rows are the rest):
    the user's model files and a --center @FILE are hashed by content, not by name."""
    from ..runs import file_sha256

    settings: dict = {"suites": suites, "quick": cfg.quick, "repeat": repeat, "backends": backends, "methods": methods}
    if not cfg.models:
        return settings, None
    from .suites.models import model_files

    settings.update(question=cfg.question, options=cfg.options)
    center = str(cfg.options.get("center") or "")
    if center.startswith("@") and Path(center[1:]).is_file():  # a missing file was refused by plan()
        settings["center_sha256"] = file_sha256(center[1:])
    files = [f"{p.name}:{file_sha256(p)}" for p in model_files(cfg.models)]
    return settings, hashlib.sha256("\n".join(files).encode()).hexdigest()


__all__ = ["BenchResult", "Case", "Outcome", "SUITES", "Suite", "SuiteConfig", "list_suites", "run_bench", "suite"]
