"""Gurobi back-end (gurobipy, optional).

The pip wheel ships a size-limited licence (2000 variables and 2000 linear constraints, 200
variables when the model has quadratic terms); solving a larger model fails with error 10010.
We detect the limit once per process (a probe model of 2001 variables) and check models against
it *before* solving, so callers can fall back to HiGHS or refuse with a clear message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..lp.model import MilpModel
from ..runtime import interrupted, past, restore_handler, user_interrupt
from .result import MilpResult, SolveOptions

RESTRICTED_LINEAR_LIMIT = 2000
RESTRICTED_QUADRATIC_LIMIT = 200
SIZE_LIMIT_ERROR = 10010


@dataclass(frozen=True)
class GurobiLicence:
    usable: bool
    restricted: bool
    reason: str = ""


_LICENCE: GurobiLicence | None = None
_ENV = None


def _env():
    """A silent shared environment (no licence banner on stdout)."""
    global _ENV
    if _ENV is None:
        import gurobipy as gp

        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
        _ENV = env
    return _ENV


def licence() -> GurobiLicence:
    """Whether gurobipy is importable and licensed, and whether the licence is size-limited."""
    global _LICENCE
    if _LICENCE is not None:
        return _LICENCE
    try:
        import gurobipy as gp
    except ImportError:
        _LICENCE = GurobiLicence(False, False, "gurobipy is not installed (pip install gurobipy)")
        return _LICENCE
    try:
        env = _env()
        probe = gp.Model(env=env)
        probe.addMVar(RESTRICTED_LINEAR_LIMIT + 1, ub=1.0)
        probe.optimize()
        _LICENCE = GurobiLicence(True, False)
    except gp.GurobiError as exc:
        if exc.errno == SIZE_LIMIT_ERROR:
            _LICENCE = GurobiLicence(True, True)
        else:
            _LICENCE = GurobiLicence(False, False, f"Gurobi is not licensed on this machine ({exc})")
    return _LICENCE


class GurobiBackend:
    name = "gurobi"

    STATUS_MAP = {2: "optimal", 3: "infeasible", 4: "infeasible", 5: "unbounded", 7: "interrupted", 8: "interrupted",
                  9: "time_limit", 10: "interrupted", 11: "interrupted", 12: "error", 13: "interrupted", 15: "interrupted",
                  16: "interrupted", 17: "interrupted"}

    def available(self) -> bool:
        return licence().usable

    def unavailable_reason(self) -> str:
        return licence().reason

    def unsupported_reason(self, model: MilpModel) -> str | None:
        """Why this model cannot be solved here (size-limited licence), or None."""
        lic = licence()
        if not lic.restricted:
            return None
        rows = model.num_one_sided_rows + len(model.q_constraints)
        if model.is_quadratic and model.num_vars > RESTRICTED_QUADRATIC_LIMIT:
            return (f"the model has {model.num_vars} variables with quadratic terms, beyond the size-limited Gurobi "
                    f"licence ({RESTRICTED_QUADRATIC_LIMIT} variables for quadratic models)")
        if model.num_vars > RESTRICTED_LINEAR_LIMIT or rows > RESTRICTED_LINEAR_LIMIT:
            return (f"the model has {model.num_vars} variables and {rows} constraints, beyond the size-limited Gurobi "
                    f"licence ({RESTRICTED_LINEAR_LIMIT} of each)")
        return None

    def solve(self, model: MilpModel, options: SolveOptions) -> MilpResult:
        import gurobipy as gp
        from gurobipy import GRB

        t0 = time.perf_counter()
        m = gp.Model(env=_env())
        p = m.Params
        p.OutputFlag = 1 if options.verbose else 0
        p.Threads = int(options.threads)
        p.MIPGap = float(options.mip_gap)
        p.MIPGapAbs = float(options.abs_gap)
        p.FeasibilityTol = float(max(options.feasibility_tol, 1e-9))
        p.IntFeasTol = float(max(options.integrality_tol, 1e-9))
        p.OptimalityTol = float(max(options.feasibility_tol, 1e-9))
        p.Seed = 0
        if model.q_obj is not None:
            p.NonConvex = 2
        vtype = np.where(model.integer, GRB.INTEGER, GRB.CONTINUOUS)
        binary = model.integer & (model.col_lo == 0) & (model.col_hi == 1)
        vtype = np.where(binary, GRB.BINARY, vtype)
        lb = np.where(np.isfinite(model.col_lo), model.col_lo, -GRB.INFINITY)
        ub = np.where(np.isfinite(model.col_hi), model.col_hi, GRB.INFINITY)
        x = m.addMVar(model.num_vars, lb=lb, ub=ub, vtype=vtype)
        A, lo, hi = model.A, model.row_lo, model.row_hi
        eq = np.isfinite(lo) & np.isfinite(hi) & (lo == hi)
        for mask, sense, rhs in ((eq, "=", lo), (np.isfinite(hi) & ~eq, "<", hi), (np.isfinite(lo) & ~eq, ">", lo)):
            if np.any(mask):
                m.addMConstr(A[mask], x, sense, rhs[mask])
        for qc in model.q_constraints:
            m.addMQConstr(qc.Q, qc.a, "<", qc.rhs, x, x, x)
        obj = model.obj @ x + model.obj_offset
        if model.q_obj is not None:
            obj = obj + x @ model.q_obj @ x
        m.setObjective(obj, GRB.MAXIMIZE if model.sense == "max" else GRB.MINIMIZE)
        if options.start is not None:
            x.Start = np.asarray(options.start, dtype=np.float64)
        deadline = None if options.time_limit is None else t0 + options.time_limit

        def poll(model, where) -> None:
            if past(deadline):  # Ctrl-C or the command deadline, at every callback (root LP included)
                model.terminate()
            elif where == GRB.Callback.MIP and options.on_progress is not None:
                bst, bnd = model.cbGet(GRB.Callback.MIP_OBJBST), model.cbGet(GRB.Callback.MIP_OBJBND)
                options.on_progress(bst if abs(bst) < GRB.INFINITY else None, bnd if abs(bnd) < GRB.INFINITY else None,
                                    int(model.cbGet(GRB.Callback.MIP_NODCNT)))

        if options.time_limit is not None:  # the whole call: building the model counts
            p.TimeLimit = float(max(t0 + options.time_limit - time.perf_counter(), 1e-3))
        try:
            m.optimize(poll)
        except gp.GurobiError as exc:
            return MilpResult("error", None, None, None, 0, time.perf_counter() - t0, self.name, None, f"Gurobi error {exc.errno}: {exc}")
        finally:
            restore_handler()
        stopped = int(m.Status) == GRB.INTERRUPTED
        if stopped and not past(deadline):
            # Gurobi caught the Ctrl-C itself (its own SIGINT handler during optimize): certify's stop
            user_interrupt()
        result = self.invert(m, x, model, time.perf_counter() - t0)
        if stopped and not interrupted():  # terminated by us at the deadline
            result.status = "time_limit"
        return result

    def invert(self, m, x, model: MilpModel, seconds: float) -> MilpResult:
        status = self.STATUS_MAP.get(int(m.Status), "error")
        has_sol = m.SolCount > 0
        xv = np.asarray(x.X, dtype=np.float64) if has_sol else None
        objective = float(m.ObjVal) if has_sol else None
        if m.IsMIP or m.IsQCP or model.q_obj is not None:
            try:
                bound = float(m.ObjBound)
            except Exception:  # no bound attribute (e.g. an error before the root)
                bound = None
        else:
            bound = objective if status == "optimal" else None
        if bound is not None and not np.isfinite(bound):
            bound = None
        nodes = int(m.NodeCount) if m.IsMIP else 0
        gap = float(m.MIPGap) if m.IsMIP and has_sol else None
        return MilpResult(status, objective, bound, xv, nodes, seconds, self.name, gap, f"Gurobi status {int(m.Status)}")
