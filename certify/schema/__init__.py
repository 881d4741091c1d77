"""The versioned JSON schemas of certify's JSON outputs.

Every JSON object certify prints (`--json`) or writes (report.json) has a `schema` field naming its
schema, `certify.NAME/VERSION`, described by the JSON Schema (draft 2020-12) file
`certify/schema/NAME.schema.json`. A change that breaks a reader gets a new version.
"""

from __future__ import annotations

import json
import os

FOLDER = os.path.dirname(os.path.abspath(__file__))

CERTIFICATE = "certify.certificate/1"  # every certificate (lipschitz, global, radius, hyperrectangle, verify, ptr)
REPORT = "certify.report/1"  # report.json of `certify report`
INSPECT = "certify.inspect/1"
EVAL = "certify.eval/1"
CALIBRATION = "certify.calibration/1"
CHAIN = "certify.chain/1"
UTILITY = "certify.utility/1"
INSTANCES = "certify.instances/1"  # the summary of `certify verify --instances`
REPORT_SUMMARY = "certify.report_summary/1"  # what `certify report --json` prints
BENCH = "certify.bench/1"
BENCH_SUITES = "certify.bench_suites/1"
RADIUS_BATCH = "certify.radius_batch/1"  # `certify radius --points --json`: {"schema", "rows"}

ALL = (CERTIFICATE, REPORT, INSPECT, EVAL, CALIBRATION, CHAIN, UTILITY, INSTANCES, REPORT_SUMMARY, BENCH,
       BENCH_SUITES, RADIUS_BATCH)


def schema_path(name: str) -> str:
    """The file of schema `name` ("certify.inspect/1" -> certify/schema/inspect.schema.json)."""
    if not (isinstance(name, str) and name.startswith("certify.") and "/" in name):
        raise ValueError(f"not a certify schema name: {name!r}")
    return os.path.join(FOLDER, name[len("certify."):].split("/", 1)[0] + ".schema.json")


def load(name: str) -> dict:
    """The JSON schema `name` as a dict (its `schema` property is the constant `name`)."""
    with open(schema_path(name), encoding="utf-8") as fh:
        return json.load(fh)


__all__ = ["ALL", "FOLDER", "load", "schema_path"]
