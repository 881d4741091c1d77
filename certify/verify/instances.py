"""Instance lists (VNN-COMP `instances.csv`: onnx, vnnlib, timeout) and resumable results files.

Results rows follow VNN-COMP's results CSV (no header):
`benchmark, onnx, vnnlib, prepare_time, result, run_time`, with paths as written in the instance
list and `result` one of sat / unsat / timeout / unknown / error. A results file is claimed with a run
identity (`certify.runs`, in `OUT.run.json`: the settings, and every instance row with the hashes
of its onnx and vnnlib files): rerunning the same run skips the instances already in it, another
run is refused unless `overwrite` (its rows are deleted).
"""

from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TextIO

from models import load_onnx
from models.errors import BadInput

from ..runs import RunIdentity, claim_file, file_sha256, item_sha256
from models.onnx_reference import OnnxReference
from .verifier import verify
from .vnnlib import load_vnnlib

RESULT_COLUMNS = ("benchmark", "onnx", "vnnlib", "prepare_time", "result", "run_time")


@dataclass(frozen=True)
class Instance:
    """One row of an instance list; `onnx`/`vnnlib` as written, `*_path` resolved against the CSV."""

    onnx: str
    vnnlib: str
    timeout: float
    onnx_path: Path
    vnnlib_path: Path
    line: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.onnx, self.vnnlib)


@dataclass(frozen=True)
class InstanceResult:
    benchmark: str
    instance: Instance
    prepare_time: float
    result: str
    run_time: float
    message: str = ""  # why an instance errored

    def row(self) -> list[str]:
        return [self.benchmark, self.instance.onnx, self.instance.vnnlib, f"{self.prepare_time:.6f}",
                self.result, f"{self.run_time:.6f}"]


def read_instances(path: str | os.PathLike) -> list[Instance]:
    """Parse an instance list; paths are relative to the CSV's folder. Errors name the line."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"instance list {path} does not exist" if not path.exists() else f"{path} is not a file")
    base = path.resolve().parent
    out: list[Instance] = []
    with open(path, newline="") as fh:
        for line, row in enumerate(csv.reader(fh), start=1):
            cells = [c.strip() for c in row]
            if not cells or all(not c for c in cells) or cells[0].startswith("#"):
                continue
            if len(cells) != 3:
                raise BadInput(f"{path}:{line}: expected 3 columns (onnx, vnnlib, timeout), got {len(cells)}")
            try:
                timeout = float(cells[2])
            except ValueError:
                if line == 1:  # a header row
                    continue
                raise BadInput(f"{path}:{line}: timeout {cells[2]!r} is not a number") from None
            if not math.isfinite(timeout) or timeout <= 0:
                raise BadInput(f"{path}:{line}: timeout must be a positive number of seconds, got {cells[2]}")
            out.append(Instance(cells[0], cells[1], timeout, base / cells[0], base / cells[1], line))
    if not out:
        raise BadInput(f"{path} lists no instances")
    return out


def read_results(path: str | os.PathLike) -> dict[tuple[str, str], list[str]]:
    """Rows of an existing results file keyed by (onnx, vnnlib) (empty if the file is missing)."""
    path = Path(path)
    if not path.exists():
        return {}
    done: dict[tuple[str, str], list[str]] = {}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for line, row in enumerate(csv.reader(fh), start=1):
                if not row:
                    continue
                if len(row) != len(RESULT_COLUMNS):
                    raise BadInput(f"{path}:{line}: not a results file row ({len(row)} columns, expected "
                                   f"{len(RESULT_COLUMNS)}: {', '.join(RESULT_COLUMNS)}); use another --out")
                done[(row[1], row[2])] = row
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not a results file (not text); use another --out") from None
    return done


def run_identity(instances: list[Instance], *, benchmark: str, timeout: float | None, seed: int,
                 verify_kwargs: dict | None = None) -> RunIdentity:
    """The identity of a results file: settings, and per instance its row and its files' bytes."""
    hashes: dict[Path, str | None] = {}

    def content(path: Path) -> str | None:  # a missing file gives an `error` row, hashed as such
        if path not in hashes:
            hashes[path] = file_sha256(path) if path.is_file() else None
        return hashes[path]

    rows = [item_sha256([i.onnx, i.vnnlib, i.timeout, content(i.onnx_path), content(i.vnnlib_path)])
            for i in instances]
    settings = {"benchmark": benchmark, "timeout": timeout, "seed": seed, "verify": verify_kwargs or {}}
    return RunIdentity.of("verify --instances", settings, None, rows, "instance list")


def run_instance(inst: Instance, benchmark: str, *, timeout: float | None = None, seed: int = 0,
                 verify_kwargs: dict | None = None) -> tuple[InstanceResult, object | None]:
    """Load and verify one instance; a bad model or property gives result `error` (with the message)."""
    t0 = time.perf_counter()
    try:
        # the model (and its onnxruntime session) first: an unsupported model is refused before
        # a large property is parsed
        net = load_onnx(inst.onnx_path)
        ref = OnnxReference.from_file(inst.onnx_path, net)
        spec = load_vnnlib(inst.vnnlib_path).check_model(net)
    except BadInput as exc:
        return InstanceResult(benchmark, inst, time.perf_counter() - t0, "error", 0.0, " ".join(str(exc).split())), None
    prepare = time.perf_counter() - t0
    t1 = time.perf_counter()
    try:
        res = verify(net, spec, timeout=timeout or inst.timeout, reference=ref, seed=seed, **(verify_kwargs or {}))
    except BadInput as exc:  # e.g. a bound too large for the memory budget: the refusal's own message
        return InstanceResult(benchmark, inst, prepare, "error", time.perf_counter() - t1, " ".join(str(exc).split())), None
    except Exception as exc:  # an internal error on one instance must not end the whole run
        msg = f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return InstanceResult(benchmark, inst, prepare, "error", time.perf_counter() - t1, msg), None
    return InstanceResult(benchmark, inst, prepare, res.result, time.perf_counter() - t1), res


def run_instances(
    instances: Iterable[Instance],
    out: str | os.PathLike | TextIO | None,
    *,
    benchmark: str,
    timeout: float | None = None,
    seed: int = 0,
    on_start: Callable[[Instance], None] | None = None,
    on_result: Callable[[InstanceResult, object | None], None] | None = None,
    verify_kwargs: dict | None = None,
    overwrite: bool = False,
) -> tuple[list[InstanceResult], int]:
    """Verify each instance and append its row to `out` (a path: resumable, see the module doc; a
    stream; or None).

    Returns the new results and the number of instances skipped because `out` already had them."""
    instances = list(instances)
    done: dict[tuple[str, str], list[str]] = {}
    fh: TextIO | None
    if isinstance(out, (str, os.PathLike)):
        identity = run_identity(instances, benchmark=benchmark, timeout=timeout, seed=seed,
                                verify_kwargs=verify_kwargs)
        if claim_file(out, identity, overwrite=overwrite, check=read_results):
            done = read_results(out)
        try:
            fh = open(out, "a", newline="")
        except OSError as exc:
            raise BadInput(f"cannot write --out {out}: {exc.strerror or exc}") from None
    else:
        fh = out
    todo = [i for i in instances if i.key not in done]
    results = []
    try:
        writer = csv.writer(fh) if fh is not None else None
        for inst in todo:
            if on_start:
                on_start(inst)
            r, cert = run_instance(inst, benchmark, timeout=timeout, seed=seed, verify_kwargs=verify_kwargs)
            results.append(r)
            if writer is not None:
                writer.writerow(r.row())
                fh.flush()
            if on_result:
                on_result(r, cert)
    finally:
        if isinstance(out, (str, os.PathLike)) and fh is not None:
            fh.close()
    return results, len(instances) - len(todo)


__all__ = ["Instance", "InstanceResult", "RESULT_COLUMNS", "read_instances", "read_results", "run_identity",
           "run_instance", "run_instances"]
