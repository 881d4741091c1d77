"""Helpers shared by CLI commands: model loading, vector options, JSON/human output."""

from __future__ import annotations

import argparse
import json
import os
from typing import Callable

import numpy as np

from ..certificate import to_jsonable
from ..errors import BadInput
from ..vectors import parse_vector


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="ONNX model file (.onnx)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def load_model(path: str):
    """Load an ONNX model for the CLI (never unpickles: .pt/.pth files are refused)."""
    from models import load_onnx

    ext = os.path.splitext(path)[1].lower()
    if ext in (".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".bin"):
        raise BadInput(
            f"{path}: the CLI loads ONNX only and never unpickles files; export the model with "
            "torch.onnx.export, or use certify.from_torch in Python"
        )
    _refuse_archive(path)
    return load_onnx(path)


# leading bytes of compressed files that ONNX would only call "corrupt"
_ARCHIVES = ((b"\x1f\x8b", "gzip-compressed", "gunzip -k"), (b"PK\x03\x04", "a zip archive", "unzip"),
             (b"BZh", "bzip2-compressed", "bunzip2 -k"), (b"\xfd7zXZ\x00", "xz-compressed", "unxz -k"),
             (b"\x28\xb5\x2f\xfd", "zstd-compressed", "unzstd"))


def _refuse_archive(path: str) -> None:
    """A compressed model (VNN-COMP ships .onnx.gz) gets a hint to decompress it, not a parse error."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return  # missing or unreadable: the loader's message names the problem
    for magic, what, tool in _ARCHIVES:
        if head.startswith(magic):
            raise BadInput(f"{path} is {what}, not an ONNX file; decompress it first ({tool} {path})")


# options whose vector has one entry per model output (their length is not the input dimension)
_OUTPUT_VECTORS = ("--target",)


def vector_arg(spec: str, name: str, length: int | None = None, length_of: str | None = None) -> np.ndarray:
    """`parse_vector` for option `name`; `length_of` ("inputs"/"outputs") defaults by option name."""
    of = length_of or ("outputs" if name in _OUTPUT_VECTORS else "inputs")
    return parse_vector(spec, name=name, length=length, length_of=of)


def domain_arg(spec: str | None) -> tuple[float, float] | None:
    """`--domain LO,HI` as (lo, hi) with LO < HI, or None when absent."""
    if spec is None:
        return None
    bounds = parse_vector(spec, name="--domain")
    if bounds.size != 2 or not bounds[0] < bounds[1]:
        raise BadInput(f"--domain takes two numbers LO,HI with LO < HI, got {spec!r}")
    return float(bounds[0]), float(bounds[1])


# one JSON conversion for the whole package (the certificate protocol's)
jsonable = to_jsonable


def emit(args: argparse.Namespace, result: dict, human: Callable[[dict], None]) -> int:
    """Print `result` as one JSON object (--json) or through `human`."""
    if getattr(args, "json", False):
        print(json.dumps(jsonable(result)))
    else:
        human(result)
    return 0


def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)  # long lines stay whole (copy-pasteable)


def fmt(x: float, digits: int = 6) -> str:
    return f"{x:.{digits}g}" if isinstance(x, (int, float, np.floating)) else str(x)


def short_vector(v, digits: int = 6, shown: int = 8) -> str:
    """`[a, b, ...]`: the first `shown` entries of a long vector."""
    return "[" + ", ".join(fmt(x, digits) for x in list(v)[:shown]) + (", ...]" if len(v) > shown else "]")
