"""`verify`: VNN-COMP 2022 instances against their ground truth: ACAS Xu (shipped with the package)
and, from a data folder (`--vnncomp-data DIR` or `$CERTIFY_VNNCOMP_DATA`, `suites/vnncomp.py`), the
`mnist_fc` and `oval21` families, compared with the 2022 tools (summary table and cactus plot).
Attack plus input-splitting branch-and-bound with batched symbolic bounds (no MILP back-end). A
result that contradicts the ground truth is status `WRONG`; each instance runs with the
competition's timeout capped by the benchmark's time limit."""

from __future__ import annotations

import csv
import functools

from ...errors import BadInput
from ..cases import NO_BACKEND, Case, Outcome, SuiteConfig, suite

QUICK = (("2_1", "prop_2"), ("1_4", "prop_3"), ("3_4", "prop_3"))
ACAS_SIZE = {"inputs": 5, "outputs": 5, "hidden_layers": 6, "relus": 300}
ALL_FAMILIES = ("acasxu", "mnist_fc", "oval21")


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

    r, cert = run_instance(inst, "acasxu", timeout=min(inst.timeout, time_limit))
    status = r.result
    if status in ("sat", "unsat") and expected and status != expected:
        status = "WRONG"
    return Outcome(status=status, solved=status in ("sat", "unsat"), nodes=getattr(cert, "nodes", None),
                   note=r.message, seconds=r.run_time)  # loading the ONNX and VNNLIB files is not timed


def families(cfg: SuiteConfig) -> list[str]:
    """The families to run: `--families` (options["families"]), else ACAS Xu plus the VNN-COMP
    families present in the data folder when one is configured."""
    from .vnncomp import FAMILIES, data_folder

    asked = cfg.options.get("families")
    if asked:
        bad = [f for f in asked if f not in ALL_FAMILIES]
        if bad:
            raise BadInput(f"unknown verify famil{'ies' if len(bad) > 1 else 'y'} {', '.join(bad)}; "
                           f"choose from {', '.join(ALL_FAMILIES)}")
        return list(dict.fromkeys(asked))
    folder = data_folder(cfg.options.get("vnncomp_data"))
    return ["acasxu"] + ([f for f in FAMILIES if (folder / f).is_dir()] if folder is not None else [])


def _report(rows: list[dict], out, cfg: SuiteConfig):
    from .vnncomp import family_report, require_folder

    vnn = [f for f in families(cfg) if f != "acasxu"]
    if not vnn:
        return {}, "", {}
    files, markdown, data = family_report(rows, out, require_folder(cfg.options.get("vnncomp_data"), vnn), vnn,
                                          cfg.time_limit)
    return files, markdown, {"families": data}


@suite("verify", "VNN-COMP 2022 instances against the ground truth (attack + input-splitting BaB): ACAS Xu, "
       "and mnist_fc / oval21 with --vnncomp-data DIR", default_time_limit=60.0, quick_time_limit=20.0,
       report=_report)
def verify_suite(cfg: SuiteConfig) -> list[Case]:
    from .vnncomp import family_cases, require_folder

    chosen = families(cfg)
    cases = []
    if "acasxu" in chosen:
        for inst, expected in _instances():
            net_id = inst.onnx_path.name.split("_")[2:4]
            short = ("_".join(net_id), inst.vnnlib_path.stem)
            if cfg.quick and short not in QUICK:
                continue
            cases.append(Case(f"acasxu_{short[0]}_{short[1]}", short[1], "verify", NO_BACKEND, "bab",
                              functools.partial(_run, inst, expected), size=dict(ACAS_SIZE), reference_value=expected,
                              reference_source="VNN-COMP 2022 ground truth"))
    vnn = [f for f in chosen if f != "acasxu"]
    if vnn:
        cases += family_cases(require_folder(cfg.options.get("vnncomp_data"), vnn), vnn, cfg.quick)
    return cases
