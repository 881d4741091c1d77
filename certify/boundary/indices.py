"""Indices users give: the features allowed to move (`features=[0, 3]`, `--features 0,3`) and a class.

One parser for every question (robustness radius and boxes, LDP rho, linear and tree classifiers,
the command line): an index is an integer (3, 3.0, numpy integers), never a bool (True is not
feature 1), within range and not repeated. Every refusal is one line (`BadInput`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import BadInput


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _index(v: Any, what: str) -> int:
    """`v` as an int when it is an integer value (not a bool), else BadInput naming `what`."""
    if isinstance(v, (bool, np.bool_)) or not _is_number(v) or not np.isfinite(float(v)) or not float(v).is_integer():
        raise BadInput(f"{what} must be integer input indices, got {v!r}")
    return int(v)


def _values(features: Any) -> list[Any]:
    if isinstance(features, str):
        from .vectors import parse_vector  # "0,3" or @file, as typed on the command line

        return list(parse_vector(features, name="features"))
    return [features] if np.isscalar(features) else list(np.asarray(features, dtype=object).reshape(-1))


def parse_features(features: Any, dim: int) -> np.ndarray:
    """The indices (int64, in the order given) of the features allowed to move among `dim`: all of
    them for None; else integers 0 <= i < dim, each at most once."""
    if features is None:
        return np.arange(dim)
    values = _values(features)
    if not values:
        raise BadInput("features: give at least one input index")
    out: list[int] = []
    for v in values:
        i = _index(v, "features")
        if not 0 <= i < dim:
            raise BadInput(f"feature index {i} is out of range: the model has {dim} input{'s' if dim != 1 else ''} "
                           f"(0..{dim - 1})")
        if i in out:
            raise BadInput(f"feature index {i} is given twice")
        out.append(i)
    return np.asarray(out, dtype=np.int64)


def feature_mask(features: Any, dim: int) -> np.ndarray:
    """Boolean mask of the `dim` inputs allowed to move (`parse_features`)."""
    mask = np.zeros(dim, dtype=bool)
    mask[parse_features(features, dim)] = True
    return mask


def features_arg(spec: str | None, name: str = "--features") -> list[int] | None:
    """`--features 0,3` (or @FILE) as a list of integer indices, None when absent; the range is checked
    by `parse_features` once the model's input count is known."""
    if spec is None:
        return None
    from .vectors import parse_vector

    return [_index(v, name) for v in parse_vector(spec, name=name)]


def class_index(value: Any, classes: int, what: str = "target class") -> int:
    """An output index 0 <= k < classes (BadInput otherwise)."""
    if isinstance(value, (bool, np.bool_)) or not _is_number(value) or not float(value).is_integer():
        raise BadInput(f"{what} must be an integer output index, got {value!r}")
    k = int(value)
    if not 0 <= k < classes:
        raise BadInput(f"{what} {k} is out of range: the model has {classes} outputs (classes 0..{classes - 1})")
    return k


__all__ = ["class_index", "feature_mask", "features_arg", "parse_features"]
