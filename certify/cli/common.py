"""Helpers shared by CLI commands: model loading, vector options, JSON/human output."""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
from typing import Callable

import numpy as np

from ..certificate import to_jsonable
from ..errors import BadInput
from ..boundary.domains import domain_arg  # noqa: F401 (re-exported to the commands)
from ..boundary.model_files import load_model  # noqa: F401 (re-exported to the commands)
from ..boundary.vectors import MAX_MAGNITUDE, check_magnitude, parse_vector  # noqa: F401 (MAX_MAGNITUDE: re-exported)


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="ONNX model file (.onnx)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


# options whose vector has one entry per model output (their length is not the input dimension)
_OUTPUT_VECTORS = ("--target",)

#: the most solver threads an option accepts (Gurobi's own limit)
MAX_THREADS = 1024
#: seeds seed numpy's generators: any integer from 0 to 2**63 - 1
MAX_SEED = 2**63 - 1


def vector_arg(spec: str, name: str, length: int | None = None, length_of: str | None = None) -> np.ndarray:
    """`parse_vector` for option `name` (finite entries, none beyond MAX_MAGNITUDE in magnitude);
    `length_of` ("inputs"/"outputs") defaults by option name."""
    of = length_of or ("outputs" if name in _OUTPUT_VECTORS else "inputs")
    return magnitude_arg(parse_vector(spec, name=name, length=length, length_of=of), name)


def magnitude_arg(value, name: str):
    """`value` (a number or an array; None passes) when no entry exceeds MAX_MAGNITUDE in magnitude."""
    return check_magnitude(value, name)


def count_arg(value: int | None, name: str, low: int = 1, high: int | None = None, hint: str = "") -> int | None:
    """An integer option within [low, high] (None passes), else BadInput saying the range."""
    if value is None:
        return None
    if not (low <= value and (high is None or value <= high)):
        span = f"from {low} to {high}" if high is not None else ("a positive integer" if low == 1 else f"at least {low}")
        raise BadInput(f"{name} must be {'an integer ' if high is not None else ''}{span}{hint}, got {value}")
    return int(value)


def threads_arg(value: int | None, name: str = "--threads") -> int | None:
    """Solver threads: 1 to MAX_THREADS."""
    return count_arg(value, name, 1, MAX_THREADS, f" (this machine has {os.cpu_count() or 1} CPUs)")


def seed_arg(value: int | None, name: str = "--seed") -> int | None:
    """A seed: 0 to MAX_SEED (None passes: the command's default source of randomness)."""
    return count_arg(value, name, 0, MAX_SEED)


_SCHEDULER = re.compile(r"(?:tcp|tls|ucx|ws|wss)://(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})\Z")


def scheduler_arg(spec: str | None, name: str = "--scheduler") -> str | None:
    """A Dask scheduler address tcp://HOST:PORT (also tls, ucx, ws, wss; inproc://NAME), or None."""
    if spec is None:
        return None
    m = _SCHEDULER.match(spec)
    if spec.startswith("inproc://") and len(spec) > len("inproc://") and not any(c.isspace() for c in spec):
        return spec
    if m is None or not 1 <= int(m.group(1)) <= 65535:
        raise BadInput(f"{name} takes a Dask scheduler address like tcp://HOST:PORT (port 1-65535), got {spec!r}")
    return spec


def out_arg(path: str | None, kind: str = "file", name: str = "--out") -> str | None:
    """An output path (None passes): not empty, and not something certify would clobber or block
    on: a file output must not be a directory, a directory output not a file, and neither may be a
    device, a FIFO or a socket (/dev/null included: a resumable output must be a file it can read
    back). Whether certify wrote an existing file is the run identity's check (certify.runs)."""
    if path is None:
        return None
    if not path.strip():
        raise BadInput(f"{name} is empty; give the {kind} name to write")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return path  # not there yet (created later; an unwritable place is refused then)
    if stat.S_ISDIR(mode):
        if kind == "file":
            raise BadInput(f"{name} {path} is a directory; {name} takes a file name")
        return path
    if not stat.S_ISREG(mode):
        raise BadInput(f"{name} {path} is not a regular file (a device, FIFO or socket); give a file name to write")
    if kind == "directory":
        raise BadInput(f"{name} {path} is a file, not a directory; {name} takes a directory (a new one, or one "
                       "certify wrote)")
    return path


# ----------------------------------------------------------------------------- output
# one JSON conversion for the whole package (the certificate protocol's)
jsonable = to_jsonable


def print_json(obj: dict, schema: str | None = None) -> None:
    """One JSON object on one line of stdout; `schema` (a name like "certify.inspect/1", see
    certify/schema) goes first."""
    if schema is not None:
        obj = {"schema": schema, **{k: v for k, v in obj.items() if k != "schema"}}
    print(json.dumps(jsonable(obj)))


def emit(args: argparse.Namespace, result: dict, human: Callable[[dict], None], schema: str | None = None) -> int:
    """Print `result` as one JSON object (--json, with its `schema` name) or through `human`."""
    if getattr(args, "json", False):
        print_json(result, schema)
    else:
        human(result)
    return 0


def console():
    """The console of human-readable output. Markup and emoji codes are off: data (names, paths,
    vectors, notes) prints exactly as it is (`[nan, nan]`, a model named `[red]x.onnx`); certify's
    own styled labels are built with `line`. A closed stdout raises BrokenPipeError (exit 141 in
    `certify.cli.main`) instead of rich's exit 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "stdout closed")

    return _Console(highlight=False, soft_wrap=True, markup=False, emoji=False)  # long lines stay whole


def line(*parts):
    """One line of human output for `console().print`: plain strings are data, printed exactly as
    they are; `(text, style)` pairs are certify's labels (e.g. `("robustness radius", "bold")`)."""
    from rich.text import Text

    return Text.assemble(*parts)


def fmt(x: float, digits: int = 6) -> str:
    return f"{x:.{digits}g}" if isinstance(x, (int, float, np.floating)) else str(x)


def short_vector(v, digits: int = 6, shown: int = 8) -> str:
    """`[a, b, ...]`: the first `shown` entries of a long vector."""
    return "[" + ", ".join(fmt(x, digits) for x in list(v)[:shown]) + (", ...]" if len(v) > shown else "]")
