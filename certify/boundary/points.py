"""Files of numbers, one reader for every command: many points (`radius --points`, `report --data`,
bench) and single vectors (`--center @FILE`, `certify.boundary.vectors`).

Formats: `.npy` (a 2-D float array, loaded without pickle), `.csv`/`.txt` (one point per row,
comma-separated; a header line is skipped), `.json` (a list of points) or `.jsonl`/`.ndjson` (one
point per line: a list, or an object with "point"). A file holding a single flat vector of
`width` numbers (.npy, .json) is one point; for a one-input model a flat list is one point per
number. A CSV row is always one point.
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np

from ..errors import BadInput

EXTENSIONS = (".npy", ".csv", ".txt", ".json", ".jsonl", ".ndjson")


def read_array(path: str | os.PathLike, name: str = "--data") -> np.ndarray:
    """The numbers in `path` (any of the formats above) as a float64 array of the file's shape."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise BadInput(f"{name}: {path} is a directory; give a .npy, .csv, .json or .jsonl file")
    from models.file_kinds import check_input_file

    check_input_file(path, f"{name}: file")  # missing, a device, FIFO or socket, or over the memory budget
    ext = os.path.splitext(path)[1].lower()
    if ext not in EXTENSIONS:
        raise BadInput(f"{name}: {path} has unsupported type {ext or '(none)'}; use .npy, .csv, .json or .jsonl")
    try:
        if ext == ".npy":
            raw = np.load(path, allow_pickle=False)
        elif ext in (".csv", ".txt"):
            raw = _read_csv(path)
        elif ext == ".json":
            with open(path) as fh:
                raw = json.load(fh)
        else:
            with open(path) as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
            raw = [r["point"] if isinstance(r, dict) else r for r in rows]
        return np.asarray(raw, dtype=np.float64)
    except (ValueError, TypeError, KeyError, OSError, json.JSONDecodeError) as exc:
        raise BadInput(f"{name}: cannot read {path} as rows of numbers ({str(exc).splitlines()[0][:120]})") from None


def read_points(path: str | os.PathLike, width: int | None = None, name: str = "--data",
                finite: bool = True) -> np.ndarray:
    """The points in `path` as a float64 (n, width) array, n >= 1.

    With `finite` (the default) a NaN or inf anywhere is refused; without it such rows are
    returned as they are (`certify radius` turns each into an error row and runs the others).
    """
    path = os.fspath(path)
    arr = read_array(path, name)
    if arr.ndim == 1 and width == 1:
        arr = arr[:, None]  # a list of numbers for a one-input model: one point each
    elif arr.ndim == 1 and width is not None and arr.size == width:
        arr = arr[None, :]
    if arr.size == 0:
        raise BadInput(f"{name}: {path} holds no points")
    if arr.ndim != 2:
        raise BadInput(f"{name}: {path} has shape {'x'.join(map(str, arr.shape))}; expected one point per row "
                       "(a 2-D table)")
    if width is not None and arr.shape[1] != width:
        raise BadInput(f"{name}: {path}: rows have {arr.shape[1]} values but the model takes {width} "
                       f"input{'s' if width != 1 else ''} (one point per row)")
    if finite and not np.all(np.isfinite(arr)):
        raise BadInput(f"{name}: {path} contains NaN or inf")
    return arr


def _read_csv(path: str) -> list[list[float]]:
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    if rows:
        try:
            [float(c) for c in rows[0]]
        except ValueError:
            rows = rows[1:]  # a header line
    return [[float(c) for c in r] for r in rows]


__all__ = ["EXTENSIONS", "read_array", "read_points"]
