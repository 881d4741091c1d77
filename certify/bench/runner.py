"""Run the cases of one or more suites: every case `repeat` times, one tidy row per run.

Runs go one after another in this process (timings of concurrent runs on a small machine would
measure the contention), with a progress bar over runs. Finished rows are appended to
`runs.jsonl` in the output directory as they arrive (`certify.batch.run_batch`), and `run.json`
holds the run identity (`certify.runs`: settings, models, one hash per planned run). Started
again with `resume=True`, the same benchmark continues where it stopped; without it, the same
benchmark is measured afresh. A directory holding another benchmark is refused either way unless
`overwrite` (its files are deleted).
A back-end that cannot run here, or a model beyond its licence, gives a `skipped` row with the
reason instead of failing the run; an unexpected error gives an `error` row with its message.
Ctrl-C stops the benchmark (exit 130) without recording the interrupted run.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from solvers.runtime import interrupted

from ..batch import read_done, run_batch
from ..errors import BadInput
from ..runs import RunIdentity, claim_directory, item_sha256
from .cases import NO_BACKEND, Case, SuiteConfig, get_suite, load_suites
from .machine import backend_status, solver_versions

#: the columns of `runs.csv`, in order (documented in docs/bench.md)
COLUMNS = ("suite", "instance", "family", "question", "backend", "method", "variant", "repeat", "seed", "inputs",
           "outputs", "hidden_layers", "relus", "unstable", "binaries", "lower", "upper", "bound", "status", "solved",
           "seconds", "proof_share", "nodes", "time_limit", "solver_version", "reference_value", "reference_seconds",
           "reference_source", "note")
SKIPPED, ERROR = "skipped", "error"
JOURNAL = "runs.jsonl"
#: files of a benchmark deleted when a directory starts afresh (plan.json: the journal stamp of older versions)
PRODUCTS = ("runs.csv", "machine.json", "summary.md", "plan.json")


@dataclass
class Planned:
    """A case with its suite name and repeat index (one row of the CSV)."""

    suite: str
    case: Case
    repeat: int


def plan(names: Sequence[str], config: SuiteConfig, *, backends: Sequence[str] | None = None,
         methods: Sequence[str] | None = None, repeat: int = 1) -> list[Planned]:
    """The runs of the suites `names` ("all": every registered suite but `models`)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise BadInput(f"--repeat must be a positive integer, got {repeat!r}")
    if "all" in names:
        names = [n for n in load_suites() if n != "models"]
    out: list[Planned] = []
    for name in names:
        for case in get_suite(name).build(config):
            if backends is not None and case.backend != NO_BACKEND and case.backend not in backends:
                continue
            if methods is not None and case.method not in methods:
                continue
            out.extend(Planned(name, case, r) for r in range(repeat))
    if not out:
        raise BadInput("no benchmark runs match the chosen suites, back-ends and methods")
    return out


def _num(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def run_one(index: int, p: Planned, *, time_limit: float, seed: int) -> dict:
    """Run one planned case and return its CSV row."""
    c = p.case
    row: dict[str, Any] = {k: None for k in COLUMNS}
    row.update(suite=p.suite, instance=c.instance, family=c.family, question=c.question, backend=c.backend,
               method=c.method, variant=c.variant, repeat=p.repeat, seed=seed, time_limit=time_limit,
               reference_value=c.reference_value, reference_seconds=c.reference_seconds,
               reference_source=c.reference_source, note="")
    row.update({k: c.size.get(k) for k in ("inputs", "outputs", "hidden_layers", "relus")})
    if c.backend != NO_BACKEND:
        usable, note = backend_status(c.backend)
        row["solver_version"] = solver_versions().get(c.backend)
        if not usable:
            row.update(status=SKIPPED, solved=False, note=f"{c.backend} unavailable: {note}")
            return row
    try:
        if c.prepare is not None:
            c.prepare()
        t0 = time.perf_counter()
        out = c.run(time_limit)
    except BadInput as exc:  # beyond the licence, unsupported model, ...: a reason, not a failure
        row.update(status=SKIPPED, solved=False, note=" ".join(str(exc).split()))
        return row
    except Exception as exc:  # noqa: BLE001 - one broken instance must not end a long benchmark
        row.update(status=ERROR, solved=False,
                   note=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        return row
    if interrupted():  # Ctrl-C inside a solve: stop the benchmark; --resume reruns this run
        raise KeyboardInterrupt
    row["seconds"] = out.seconds if out.seconds is not None else time.perf_counter() - t0
    row.update(status=out.status, solved=bool(out.solved), lower=_num(out.lower), upper=_num(out.upper),
               bound=_num(out.bound), proof_share=_num(out.proof_share), nodes=out.nodes, unstable=out.unstable, binaries=out.binaries, note=out.note)
    if out.backend_used and out.backend_used != c.backend:
        row["note"] = (row["note"] + "; " if row["note"] else "") + f"ran on {out.backend_used}"
    return row


def execute(runs: list[Planned], out_dir: Path, *, time_limit: float, seed: int, resume: bool = False,
            overwrite: bool = False, settings: dict | None = None, model: str | None = None,
            plots: Sequence[str] = (), progress: bool | None = None) -> list[dict]:
    """Run `runs` (see the module doc); returns one row per run, in plan order.

    `settings` and `model` (a hash of the user's model files) join the identity of the run;
    `plots`: the file names of the plots a benchmark writes (deleted with its other files)."""
    keys = [item_sha256(f"{p.suite}|{p.case.key}|{p.repeat}") for p in runs]
    identity = RunIdentity.of("bench", {**(settings or {}), "time_limit": time_limit, "seed": seed}, model, keys,
                              "benchmark plan")
    products = (*PRODUCTS, *plots)
    resuming = claim_directory(out_dir, identity, journals=(JOURNAL,), products=products, overwrite=overwrite,
                               check=read_done)
    journal = out_dir / JOURNAL
    if resuming and not resume:  # the same benchmark, measured again
        os.remove(journal)
    rows = run_batch(run_one, runs, out=journal, context=dict(time_limit=time_limit, seed=seed), progress=progress,
                     description="bench runs", keys=keys)
    for r in rows:
        r.pop("index", None)
    return rows
