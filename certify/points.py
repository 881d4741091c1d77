"""Data files of many points: an (n, d) matrix from .npy, .csv or .json, validated at the boundary."""

from __future__ import annotations

import os
import warnings

import numpy as np

from .errors import BadInput
from .vectors import _read_file


def read_points(path: str, width: int, name: str = "--data") -> np.ndarray:
    """The points in `path` as a finite float64 (n, width) array, n >= 1.

    .npy (loaded without pickle), .csv (comma-separated, one point per line) or .json (a list of
    lists). A file with a single row may also hold a flat vector of `width` numbers.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpy warns on an empty text file; we say it below
        arr = np.asarray(_read_file(path, name), dtype=np.float64)
        if arr.ndim == 1 and os.path.splitext(path)[1].lower() in (".csv", ".txt"):
            arr = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)  # one row or one column: the file says
    if arr.size == 0:
        raise BadInput(f"{name}: {path} holds no points")
    if arr.ndim == 1 and width == 1:
        arr = arr[:, None]  # a list of numbers for a one-input model: one point each
    elif arr.ndim == 1 and arr.size == width:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != width:
        shape = "x".join(map(str, arr.shape))
        raise BadInput(f"{name}: {path} has shape {shape} but the model takes {width} input{'s' if width != 1 else ''} "
                       f"(one point per row)")
    if not np.all(np.isfinite(arr)):
        raise BadInput(f"{name}: {path} contains NaN or inf")
    return arr


__all__ = ["read_points"]
