"""HiGHS back-end (highspy): the default open-source MILP solver."""

from __future__ import annotations

import time

import numpy as np

from ..lp.highs import HighsRejected, highs_instance
from ..lp.model import MilpModel
from ..runtime import interrupted, past
from .result import MilpResult, SolveOptions


class HighsBackend:
    name = "highs"

    @staticmethod
    def import_solver():
        import highspy

        return highspy

    def available(self) -> bool:
        try:
            self.import_solver()
            return True
        except ImportError:
            return False

    def unavailable_reason(self) -> str:
        return "highspy is not installed (pip install highspy)"

    def unsupported_reason(self, model: MilpModel) -> str | None:
        if model.is_quadratic:
            return "HiGHS does not solve mixed-integer quadratic programs"
        return None

    STATUS_MAP = {
        "kOptimal": "optimal",
        "kTimeLimit": "time_limit",
        "kInterrupt": "interrupted",
        "kHighsInterrupt": "interrupted",
        "kIterationLimit": "interrupted",
        "kSolutionLimit": "interrupted",
        "kObjectiveBound": "interrupted",
        "kObjectiveTarget": "interrupted",
        "kMemoryLimit": "interrupted",
        "kInfeasible": "infeasible",
        "kUnbounded": "unbounded",
        "kUnboundedOrInfeasible": "infeasible",
    }

    def solve(self, model: MilpModel, options: SolveOptions) -> MilpResult:
        hp = self.import_solver()
        t0 = time.perf_counter()
        try:
            h = highs_instance(model, verbose=options.verbose)
        except HighsRejected as exc:
            return MilpResult("error", None, None, None, 0, time.perf_counter() - t0, self.name, None, str(exc))
        if options.time_limit is not None:  # the whole call: building the instance counts
            rest = t0 + options.time_limit - time.perf_counter()
            h.setOptionValue("time_limit", float(max(rest, 1e-3)))
        h.setOptionValue("mip_rel_gap", float(options.mip_gap))
        h.setOptionValue("mip_abs_gap", float(options.abs_gap))
        h.setOptionValue("mip_feasibility_tolerance", float(max(options.integrality_tol, 1e-10)))
        h.setOptionValue("primal_feasibility_tolerance", float(max(options.feasibility_tol, 1e-10)))
        h.setOptionValue("dual_feasibility_tolerance", float(max(options.feasibility_tol, 1e-10)))
        h.setOptionValue("random_seed", 0)
        h.HandleUserInterrupt = False  # we stop it ourselves (runtime.interrupted)

        deadline = None if options.time_limit is None else t0 + options.time_limit

        def stop(e) -> None:  # LP phases (root, dives): Ctrl-C and the command deadline
            if past(deadline):
                e.interrupt()

        def poll(e) -> None:
            if past(deadline):
                e.interrupt()
            elif options.on_progress is not None and e.data_out is not None:
                d = e.data_out
                primal = float(d.mip_primal_bound) if abs(d.mip_primal_bound) < hp.kHighsInf else None
                dual = float(d.mip_dual_bound) if abs(d.mip_dual_bound) < hp.kHighsInf else None
                options.on_progress(primal, dual, int(d.mip_node_count))

        if model.num_integers:
            h.cbMipInterrupt += poll
        h.cbSimplexInterrupt += stop
        h.cbIpmInterrupt += stop
        if options.start is not None:
            sol = hp.HighsSolution()
            sol.col_value = list(np.asarray(options.start, dtype=np.float64))
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        result = self.invert(h, model, time.perf_counter() - t0)
        if result.message in ("HiGHS kInterrupt", "HiGHS kHighsInterrupt") and not interrupted():  # our deadline stop
            result.status = "time_limit"
        return result

    def invert(self, h, model: MilpModel, seconds: float) -> MilpResult:
        hp = self.import_solver()
        status_name = h.getModelStatus().name
        status = self.STATUS_MAP.get(status_name, "error")
        info = h.getInfo()
        has_sol = info.primal_solution_status == hp.kSolutionStatusFeasible
        x = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_sol else None
        objective = float(info.objective_function_value) if has_sol else None
        if status not in ("optimal", "time_limit", "interrupted"):
            bound = None  # no solve took place (or it failed): HiGHS's info fields mean nothing
            nodes = 0
        elif model.num_integers:
            bound = float(info.mip_dual_bound)
            nodes = int(info.mip_node_count)
        else:  # an LP: at optimality the dual bound is the objective (up to tolerance)
            bound = objective if status == "optimal" else None
            nodes = 0
        inf = hp.kHighsInf
        if bound is not None and (not np.isfinite(bound) or abs(bound) >= inf):
            bound = None
        gap = float(info.mip_gap) if model.num_integers and np.isfinite(info.mip_gap) else None
        return MilpResult(status, objective, bound, x, nodes, seconds, self.name, gap, f"HiGHS {status_name}")
