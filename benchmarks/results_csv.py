"""Rows appended to a CSV under benchmarks/results (its header written when the file is new)."""

from __future__ import annotations

import csv
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def append_rows(name: str, fields: list[str], rows: list[dict]) -> Path:
    """Append `rows` to benchmarks/results/<name>; the file's path."""
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / name
    new = not out.exists()
    with open(out, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerows(rows)
    return out
