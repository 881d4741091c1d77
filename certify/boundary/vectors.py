"""Parsing of vector arguments: comma-separated numbers or `@path` to a file of numbers (.npy, .json, .csv,
.txt, .jsonl: `certify.boundary.points.read_array`, flattened)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import BadInput


#: what a required length counts, as said in the error message
LENGTH_OF = {
    "inputs": "the model takes {n} input{s}",
    "outputs": "the model has {n} output{s} (one entry per output)",
}


def parse_vector(spec: str | Sequence[float] | np.ndarray, name: str = "vector", length: int | None = None,
                 length_of: str = "inputs") -> np.ndarray:
    """Return a finite float64 vector from `spec`.

    `spec` is "0.1,-2,3e-1", "@values.npy" / "@values.json" / "@values.csv", or already a sequence.
    With `length`, the vector must have exactly that many entries; `length_of` ("inputs" or
    "outputs") says what that length counts in the error message.
    """
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("@"):
            arr = _read_file(text[1:], name)
        else:
            parts = [p for p in text.replace(" ", "").split(",")]
            if not text or any(p == "" for p in parts):
                raise BadInput(f"{name}: expected comma-separated numbers or @file, got {spec!r}")
            try:
                arr = np.asarray([float(p) for p in parts], dtype=np.float64)
            except ValueError:
                raise BadInput(f"{name}: {spec!r} is not a list of numbers (use e.g. 0.1,-2,3)") from None
    else:
        try:
            arr = np.asarray(spec, dtype=np.float64)
        except (TypeError, ValueError):
            raise BadInput(f"{name}: not a numeric vector") from None
    arr = arr.reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise BadInput(f"{name} contains NaN or inf")
    if length is not None and arr.size != length:
        counted = LENGTH_OF[length_of].format(n=length, s="" if length == 1 else "s")
        raise BadInput(f"{name} has {arr.size} values but {counted}")
    return arr


def _read_file(path: str, name: str) -> np.ndarray:
    from .points import read_array  # the one reader of number files (all its formats)

    return read_array(path, name)


def parse_positive(value: float, name: str, allow_zero: bool = False) -> float:
    """Validate a positive finite scalar (radius, epsilon, time limit, ...)."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise BadInput(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BadInput(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise BadInput(f"{name} must be a {'non-negative' if allow_zero else 'positive'} finite number, got {value}")
    return v


#: the largest magnitude of a number that places a box or scales a bound (a point, a center, a
#: radius, a domain, an output weight): models with float32 inputs cannot represent larger values
#: (onnxruntime replays would see inf), and sound float64 bounds multiply such numbers by weights
#: and by each other, so far beyond it they overflow to inf (then inf - inf is NaN)
MAX_MAGNITUDE = 1e38


def check_magnitude(value, name: str):
    """`value` (a number or an array; None passes) when no finite entry exceeds MAX_MAGNITUDE in
    magnitude, else BadInput naming `name` (NaN and inf are left to the checks that refuse them)."""
    if value is None:
        return value
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    mags = np.where(np.isfinite(flat), np.abs(flat), 0.0)
    if flat.size and mags.max() > MAX_MAGNITUDE:
        worst = float(flat[int(np.argmax(mags))])
        raise BadInput(f"{name} {worst:g} is out of range: certify takes magnitudes up to {MAX_MAGNITUDE:g} (the float32 "
                       "range of models; its float64 bound arithmetic overflows beyond); rescale the value")
    return value
