"""`verify`: VNN-COMP 2022 ACAS Xu instances (shipped with the package) against their ground truth:
attack plus input-splitting branch-and-bound with batched symbolic bounds (no MILP back-end).
A result that contradicts the ground truth is status `WRONG`."""

from __future__ import annotations

import csv
import functools

from ..cases import NO_BACKEND, Case, Outcome, SuiteConfig, suite

QUICK = (("2_1", "prop_2"), ("1_4", "prop_3"), ("3_4", "prop_3"))
ACAS_SIZE = {"inputs": 5, "outputs": 5, "hidden_layers": 6, "relus": 300}


def _instances():
    from certify.verify.instances import read_instances
    from models.zoo import DATA

    truth = {}
    with open(DATA / "acasxu" / "ground_truth.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            truth[(r["onnx"], r["vnnlib"])] = r["expected"]
    return [(inst, truth.get((inst.onnx_path.name, inst.vnnlib_path.name), "")) for inst in
            read_instances(DATA / "acasxu" / "acasxu_instances.csv")]


def _run(inst, expected: str, time_limit: float) -> Outcome:
    from certify.verify.instances import run_instance

    r, cert = run_instance(inst, "acasxu", timeout=time_limit)
    status = r.result
    if status in ("sat", "unsat") and expected and status != expected:
        status = "WRONG"
    return Outcome(status=status, solved=status in ("sat", "unsat"), nodes=getattr(cert, "nodes", None),
                   note=r.message, seconds=r.run_time)  # loading the ONNX and VNNLIB files is not timed


@suite("verify", "VNN-COMP 2022 ACAS Xu instances against the ground truth (attack + input-splitting BaB)",
       default_time_limit=116.0, quick_time_limit=20.0)
def verify_suite(cfg: SuiteConfig) -> list[Case]:
    cases = []
    for inst, expected in _instances():
        net_id = inst.onnx_path.name.split("_")[2:4]
        short = ("_".join(net_id), inst.vnnlib_path.stem)
        if cfg.quick and short not in QUICK:
            continue
        cases.append(Case(f"acasxu_{short[0]}_{short[1]}", short[1], "verify", NO_BACKEND, "bab",
                          functools.partial(_run, inst, expected), size=dict(ACAS_SIZE), reference_value=expected,
                          reference_source="VNN-COMP 2022 ground truth"))
    return cases
