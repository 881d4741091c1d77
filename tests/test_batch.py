"""The batch runner: same results on every executor, resumable, durable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from certify.batch import read_done, run_batch
from certify.errors import BadInput
from certify.runs import item_sha256


def square_norm(index, item, scale=1.0):
    """A deterministic task (module level: workers import it)."""
    x = np.asarray(item, dtype=float)
    return {"value": float(scale * x @ x), "status": "optimal"}


ITEMS = [[float(i), float(i) / 3] for i in range(12)]
EXPECTED = [{"value": 2.0 * (i * i + (i / 3) ** 2), "status": "optimal", "index": i} for i in range(12)]


def test_in_process_results_in_order_and_written(tmp_path):
    out = tmp_path / "r.jsonl"
    rows = run_batch(square_norm, ITEMS, out=out, context={"scale": 2.0}, progress=False)
    assert rows == EXPECTED
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [{k: v for k, v in line.items() if k != "input_sha256"} for line in lines] == EXPECTED
    assert [line["input_sha256"] for line in lines] == [item_sha256(item) for item in ITEMS]  # each row names its input


def test_local_processes_give_identical_results(tmp_path):
    rows = run_batch(square_norm, ITEMS, out=tmp_path / "p.jsonl", context={"scale": 2.0}, workers=2, progress=False)
    assert rows == EXPECTED


def test_dask_local_cluster_gives_identical_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        rows = run_batch(square_norm, ITEMS, out=tmp_path / "d.jsonl", context={"scale": 2.0},
                         scheduler=cluster.scheduler_address, progress=False)
    assert rows == EXPECTED


def test_resume_skips_finished_points_and_ignores_a_torn_line(tmp_path):
    out = tmp_path / "r.jsonl"
    lines = [json.dumps({**r, "input_sha256": item_sha256(ITEMS[i])}) for i, r in enumerate(EXPECTED[:5])]
    lines.append('{"index": 5, "val')  # killed mid-write
    out.write_text("\n".join(lines))
    calls = []

    def counting(index, item, scale=1.0):
        calls.append(index)
        return square_norm(index, item, scale)

    rows = run_batch(counting, ITEMS, out=out, context={"scale": 2.0}, progress=False)
    assert rows == EXPECTED and calls == list(range(5, 12))
    assert sorted(read_done(out)) == list(range(12))


def test_bad_workers_and_unreachable_scheduler(tmp_path):
    with pytest.raises(BadInput, match="workers"):
        run_batch(square_norm, ITEMS, workers=0)
    pytest.importorskip("distributed")
    with pytest.raises(BadInput, match="scheduler"):
        run_batch(square_norm, ITEMS, scheduler="tcp://127.0.0.1:9", progress=False, connect_timeout=2)
