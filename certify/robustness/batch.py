"""Robustness radii of many points: a points file in, one JSON line per point out (resumable).

Points files are read by `certify.boundary.points.read_points` (the one reader of every command). The run goes through `certify.batch.run_batch`: a progress bar, results
appended to the output as they finish, rows already in it skipped, local processes or Dask.
The output is claimed with a run identity (`certify.runs`: the model, the options and every
point, in `OUT.run.json`): a rerun of the same run resumes, another run is refused unless
`overwrite`.
Each row is the point's certificate (`RobustnessRadius.to_dict()`) plus its `index`; a point
that is bad input gets a row with `status` "error" and the message, the others still run.
`write_csv` writes the summary table (index, predicted class, lower, upper, radius, status,
seconds).
"""

from __future__ import annotations

import csv
import math
import os
from typing import Any

import numpy as np

from ..batch import read_done, run_batch
from ..errors import BadInput

CSV_COLUMNS = ("index", "predicted_class", "lower", "upper", "radius", "status", "seconds")
_MODELS: dict[str, Any] = {}  # a worker loads each model file once


def read_points(path: str | os.PathLike, dim: int | None = None) -> np.ndarray:
    """The points of a points file as a (k, n) float64 array (`certify.boundary.points.read_points`); a row
    with NaN or inf is kept: `radius_batch` gives it status "error" and the other rows still run."""
    from ..boundary.points import read_points as read

    return read(path, dim, "points file", finite=False)


def _classifier(model: Any) -> Any:
    """The model of a batch; a file is loaded once per process."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    key = os.fspath(model)
    if key not in _MODELS:
        from .question import Classifier

        _MODELS[key] = Classifier.of(key)
    return _MODELS[key]


def _radius_task(index: int, point: list[float], *, model: Any, options: dict) -> dict:
    """One point of the batch (runs in a worker: the model file is loaded once per process)."""
    from .radius import robustness_radius

    from ..boundary.vectors import check_magnitude

    model = _classifier(model)
    try:
        check_magnitude(point, "a coordinate of the point")  # NaN and inf: refused by robustness_radius
        return robustness_radius(model, np.asarray(point), **options).to_dict()
    except BadInput as exc:
        return {"status": "error", "error": " ".join(str(exc).split())}


def radius_batch(model: Any, points: Any, *, out: str | os.PathLike | None = None, workers: int = 1,
                 scheduler: str | None = None, progress: bool | None = None, overwrite: bool = False,
                 **options: Any) -> list[dict]:
    """`robustness_radius` for every point (a (k, n) array or a points file); rows in point order.

    `out`: the JSON-lines file results are appended to; rerunning the same run (model, options,
    points) skips the points already there, another run is refused (BadInput) unless `overwrite`
    (its rows are deleted). `workers`, `scheduler`: local processes or a Dask cluster
    (`certify.batch`); options as `robustness_radius` (a `time_limit` applies per point)."""
    if isinstance(points, (str, os.PathLike)):
        points = read_points(points)
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2:
        raise BadInput("points must be a 2-D array (one point per row) or a points file")
    items = [p.tolist() for p in points]
    keys = None
    if out is not None:
        from ..runs import RunIdentity, claim_file, item_sha256, model_sha256

        net = getattr(_classifier(model), "net", model)
        keys = [item_sha256(p) for p in points]
        identity = RunIdentity.of("radius", options, model_sha256(net), keys, "points file")
        claim_file(out, identity, overwrite=overwrite, check=read_done)
    return run_batch(_radius_task, items, out=out, context={"model": model, "options": options}, workers=workers,
                     scheduler=scheduler, progress=progress, description="radius", keys=keys)


def write_csv(rows: list[dict], path: str | os.PathLike) -> None:
    """The summary table of a batch (one line per point)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for row in rows:
            w.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in CSV_COLUMNS])


def _cell(v: Any) -> Any:
    return repr(v) if isinstance(v, float) and math.isfinite(v) else v


__all__ = ["CSV_COLUMNS", "radius_batch", "read_points", "write_csv"]
