"""HiGHS back-end (highspy): the default open-source MILP solver."""

from __future__ import annotations

import contextlib
import os
import sys
import time

import numpy as np

from .model import MilpModel, MilpResult, SolveOptions


@contextlib.contextmanager
def _quiet_stdout():
    """HiGHS prints a banner on stdout from C++ when the first instance is created; keep stdout
    clean (the CLI's --json prints exactly one JSON object there)."""
    try:
        sys.stdout.flush()
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # captured or replaced stdout: nothing to guard
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


_BANNER_SHOWN = False


def new_highs():
    """A silent `highspy.Highs` instance."""
    global _BANNER_SHOWN
    import highspy

    if _BANNER_SHOWN:
        h = highspy.Highs()
    else:
        with _quiet_stdout():
            h = highspy.Highs()
        _BANNER_SHOWN = True
    h.setOptionValue("output_flag", False)
    return h


class HighsRejected(RuntimeError):
    """HiGHS refused the model at passModel."""


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

    def highs_instance(self, model: MilpModel, options: SolveOptions | None = None):
        """A `highspy.Highs` holding `model` (also used for repeated LP solves with new costs)."""
        hp = self.import_solver()
        options = options or SolveOptions()
        h = new_highs()
        h.setOptionValue("output_flag", bool(options.verbose))
        lp = hp.HighsLp()
        lp.num_col_ = model.num_vars
        lp.num_row_ = model.num_rows
        inf = hp.kHighsInf
        lp.col_cost_ = model.obj
        lp.col_lower_ = np.where(np.isfinite(model.col_lo), model.col_lo, -inf)
        lp.col_upper_ = np.where(np.isfinite(model.col_hi), model.col_hi, inf)
        lp.row_lower_ = np.where(np.isfinite(model.row_lo), model.row_lo, -inf)
        lp.row_upper_ = np.where(np.isfinite(model.row_hi), model.row_hi, inf)
        lp.offset_ = model.obj_offset
        lp.sense_ = hp.ObjSense.kMaximize if model.sense == "max" else hp.ObjSense.kMinimize
        csc = model.A.tocsc()
        lp.a_matrix_.format_ = hp.MatrixFormat.kColwise
        lp.a_matrix_.start_ = csc.indptr
        lp.a_matrix_.index_ = csc.indices
        lp.a_matrix_.value_ = csc.data
        lp.a_matrix_.num_col_ = model.num_vars
        lp.a_matrix_.num_row_ = model.num_rows
        if model.num_integers:
            lp.integrality_ = [hp.HighsVarType.kInteger if i else hp.HighsVarType.kContinuous for i in model.integer]
        if h.passModel(lp) == hp.HighsStatus.kError:
            # e.g. a coefficient >= 1e15: HiGHS would otherwise solve an empty model
            raise HighsRejected("HiGHS rejected the model (a coefficient or bound out of its range)")
        return h

    def solve(self, model: MilpModel, options: SolveOptions) -> MilpResult:
        hp = self.import_solver()
        t0 = time.perf_counter()
        try:
            h = self.highs_instance(model, options)
        except HighsRejected as exc:
            return MilpResult("error", None, None, None, 0, time.perf_counter() - t0, self.name, None, str(exc))
        if options.time_limit is not None:
            h.setOptionValue("time_limit", float(max(options.time_limit, 1e-3)))
        h.setOptionValue("mip_rel_gap", float(options.mip_gap))
        h.setOptionValue("mip_abs_gap", float(options.abs_gap))
        h.setOptionValue("mip_feasibility_tolerance", float(max(options.integrality_tol, 1e-10)))
        h.setOptionValue("primal_feasibility_tolerance", float(max(options.feasibility_tol, 1e-10)))
        h.setOptionValue("dual_feasibility_tolerance", float(max(options.feasibility_tol, 1e-10)))
        h.setOptionValue("random_seed", 0)
        if options.start is not None:
            sol = hp.HighsSolution()
            sol.col_value = list(np.asarray(options.start, dtype=np.float64))
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        return self.invert(h, model, time.perf_counter() - t0)

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
