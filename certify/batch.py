"""Batch certification: many points, one task, on local processes or a Dask cluster, resumable.

`run_batch(task, items, out=...)` calls `task(index, item, **context)` for every item and
returns the results (dicts) in item order. Finished results are appended to `out` as JSON lines
the moment they arrive (flushed and fsynced), so an interrupted run, or a worker that dies, loses
no finished point; a rerun with the same `out` skips the indices already there. Every line also
carries `input_sha256`, the hash of its item: a line whose hash is not the current item's is
refused, never reused (callers guard whole runs with `certify.runs`; this catches the rest).
Executors:

- in process (`workers=1`, the default), with a progress bar on stderr;
- `workers=k`: a pool of k local processes (spawned, so solver libraries start clean);
- `scheduler="tcp://host:port"`: a `dask.distributed` cluster (pip install 'certify[cluster]').

Results are the same whichever executor runs them (tasks must be deterministic: seed what they
sample). Tasks and their arguments travel to the workers by pickling (an internal channel between
processes the user started, never a file read from disk).
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable, Iterable, Sequence

from .certificate import to_jsonable
from .errors import BadInput
from .runs import item_sha256

Task = Callable[..., dict]
INPUT_KEY = "input_sha256"  # the hash of a row's item, in every JSON line


def read_done(out: str | os.PathLike | None) -> dict[int, dict]:
    """Results already in a JSON-lines file. A torn row from a killed run is ignored; any other
    line means the file is not a results file (BadInput: it is never appended to)."""
    done: dict[int, dict] = {}
    if out is None or not os.path.exists(out):
        return done
    try:
        with open(out, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    if line.lstrip().startswith("{"):  # rows are JSON objects: a prefix of one is a torn row
                        continue
                    row = None
                if not (isinstance(row, dict) and type(row.get("index")) is int):
                    raise BadInput(f"{out} is not a results file (line {n} is not a result row); choose another --out")
                done[row["index"]] = row
    except (UnicodeDecodeError, IsADirectoryError):
        raise BadInput(f"{out} is not a results file; choose another --out") from None
    return done


class _Sink:
    """Appends one JSON line per result, durably."""

    def __init__(self, out: str | os.PathLike | None) -> None:
        self.fh = None
        if out is not None:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
                torn = os.path.exists(out) and os.path.getsize(out) > 0 and not _ends_with_newline(out)
                self.fh = open(out, "a")
            except OSError as exc:
                raise BadInput(f"cannot write --out {out}: {exc.strerror or exc}") from None
            if torn:  # a killed run left half a line: end it, so the next row starts clean
                self.fh.write("\n")

    def write(self, row: dict) -> None:
        if self.fh is not None:
            self.fh.write(json.dumps(to_jsonable(row)) + "\n")
            self.fh.flush()
            os.fsync(self.fh.fileno())

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def _ends_with_newline(path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _call(task: Task, index: int, item: Any, context: dict) -> dict:
    row = dict(task(index, item, **context))
    row["index"] = index
    return row


def _worker_call(task: Task, index: int, item: Any, context: dict) -> dict:
    """`_call` in a pool's or dask's worker: the workers share the machine, so none forks helpers."""
    from solvers.runtime import pool_worker

    pool_worker()
    return _call(task, index, item, context)


def run_batch(
    task: Task,
    items: Sequence[Any],
    *,
    out: str | os.PathLike | None = None,
    context: dict | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    progress: bool | None = None,
    description: str = "points",
    connect_timeout: float = 30.0,
    keys: Sequence[str] | None = None,
) -> list[dict]:
    """Run `task(index, item, **context)` over `items`; see the module doc.

    `keys`: the hash of each item as written in `input_sha256` (default `certify.runs.item_sha256`
    of the item; give them when items are not plain data, or to reuse a run identity's row hashes).
    Returned rows are the task's dict plus `index` (the hash stays in the file)."""
    context = dict(context or {})
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BadInput(f"workers must be a positive integer, got {workers!r}")
    done: dict[int, dict] = {}
    if out is not None:
        keys = [item_sha256(item) for item in items] if keys is None else list(keys)
        if len(keys) != len(items):
            raise ValueError(f"run_batch: {len(keys)} keys for {len(items)} items")
        done = _matching(read_done(out), keys, out)
    todo = [i for i in range(len(items)) if i not in done]
    results = dict(done)
    sink = _Sink(out)
    bar = _Progress(len(items), len(done), description, progress)
    try:
        for row in _execute(task, items, todo, context, workers, scheduler, connect_timeout):
            results[row["index"]] = row
            sink.write(row if keys is None else {**row, INPUT_KEY: keys[row["index"]]})
            bar.advance(row)
    finally:
        sink.close()
        bar.close()
    return [results[i] for i in range(len(items))]


def _matching(done: dict[int, dict], keys: list[str], out) -> dict[int, dict]:
    """The finished rows, each checked against the hash of the item it now stands for."""
    for i, row in done.items():
        if not 0 <= i < len(keys):
            raise BadInput(f"{out} holds row {i} but this run has {len(keys)} inputs; use --overwrite to start fresh "
                           "or another --out")
        if row.get(INPUT_KEY) != keys[i]:
            what = "has no input hash (an older certify)" if INPUT_KEY not in row else "was computed for another input"
            raise BadInput(f"row {i} of {out} {what}; use --overwrite to start fresh or another --out")
    return {i: {k: v for k, v in row.items() if k != INPUT_KEY} for i, row in done.items()}


def _execute(task, items, todo, context, workers, scheduler, connect_timeout) -> Iterable[dict]:
    if scheduler is not None:
        yield from _dask(task, items, todo, context, scheduler, connect_timeout)
    elif workers == 1:
        for i in todo:
            yield _call(task, i, items[i], context)
    else:
        import multiprocessing

        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_worker_call, task, i, items[i], context) for i in todo]
            for fut in as_completed(futures):
                yield fut.result()


def _dask(task, items, todo, context, scheduler, connect_timeout) -> Iterable[dict]:
    try:
        from distributed import Client, as_completed as dask_completed
    except ImportError:
        raise BadInput("--scheduler needs dask.distributed: pip install 'certify[cluster]'") from None
    try:
        client = Client(scheduler, timeout=connect_timeout)
    except (OSError, TimeoutError) as exc:
        raise BadInput(f"cannot reach the Dask scheduler at {scheduler} ({exc}); start one with `dask scheduler`") from None
    try:
        futures = [client.submit(_worker_call, task, i, items[i], context, pure=False, retries=2) for i in todo]
        for fut in dask_completed(futures):
            yield fut.result()
    finally:
        client.close()


class _Progress:
    """A rich progress bar over points on stderr (when it is a terminal, or when asked)."""

    def __init__(self, total: int, done: int, description: str, wanted: bool | None) -> None:
        self.bar = None
        if wanted is None:
            wanted = sys.stderr.isatty()
        if wanted and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), TextColumn("{task.fields[last]}"),
                                console=Console(file=sys.stderr), transient=False)
            self.bar.start()
            self.task = self.bar.add_task(description, total=total, completed=done, last="")

    def advance(self, row: dict) -> None:
        if self.bar is not None:
            status = row.get("status", "")
            self.bar.update(self.task, advance=1, last=f"#{row['index']} {status}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


__all__ = ["INPUT_KEY", "read_done", "run_batch"]
