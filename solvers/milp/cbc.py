"""CBC back-end through PuLP (its bundled CBC binary).

PuLP returns the incumbent but not CBC's dual bound, so we keep CBC's log and read the bound
from its summary ("Upper bound:" for maximisation, "Lower bound:" for minimisation). When CBC
reports an optimal solution without a bound line, the bound is the objective plus the allowed gap.
CBC's log omits the objective's constant term (PuLP adds it back only to its own value), so we add
`obj_offset` to every number read from the log.

Time: `time_limit` covers the whole call (model building and writing included: CBC gets what is
left). CBC checks its own limit only between phases (on a 670-column Lipschitz MILP its root LP took
0.9 s and the run 2 s under `-sec 0.2`), so the process is killed `KILL_GRACE` seconds after the
deadline; a killed run returns status time_limit with no bound and no incumbent. Ctrl-C
(`solvers.runtime.interrupted`) kills it at once (status interrupted, no bound, no incumbent).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time

import numpy as np

from ..lp.model import MilpModel
from ..runtime import (command_deadline, earliest, interrupted, past, register_child, stop_requested,
                       unregister_child)
from .result import MilpResult, SolveOptions

_RESULT = re.compile(r"^Result - (.+)$", re.M)
_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)"
_OBJ = re.compile(r"^Objective value:\s+" + _NUM, re.M)
_UPPER = re.compile(r"^Upper bound:\s+" + _NUM, re.M)
_LOWER = re.compile(r"^Lower bound:\s+" + _NUM, re.M)
_NODES = re.compile(r"^Enumerated nodes:\s+(\d+)", re.M)
#: seconds after the deadline at which a CBC process still running is killed
KILL_GRACE = 0.2
#: seconds between two checks of Ctrl-C while CBC runs
POLL_SECONDS = 0.05


def cbc_executable() -> str | None:
    """A cbc binary: on PATH, else the one bundled with PuLP (PuLP < 4)."""
    found = shutil.which("cbc")
    if found:
        return found
    try:
        from pulp.apis import coin_api
    except ImportError:
        return None
    path = getattr(coin_api, "pulp_cbc_path", None)
    return os.path.realpath(path) if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


class CbcBackend:
    name = "cbc"

    def available(self) -> bool:
        try:
            import pulp  # noqa: F401
        except ImportError:
            return False
        return cbc_executable() is not None

    def unavailable_reason(self) -> str:
        return "PuLP or a cbc binary is missing (pip install 'pulp[cbc]')"

    def unsupported_reason(self, model: MilpModel) -> str | None:
        if model.is_quadratic:
            return "CBC does not solve quadratic programs"
        return None

    def solve(self, model: MilpModel, options: SolveOptions) -> MilpResult:
        import pulp

        t0 = time.perf_counter()
        deadline = None if options.time_limit is None else t0 + max(float(options.time_limit), 0.01)
        prob = pulp.LpProblem("certify", pulp.LpMaximize if model.sense == "max" else pulp.LpMinimize)
        xs = []
        for k in range(model.num_vars):
            lo = float(model.col_lo[k]) if np.isfinite(model.col_lo[k]) else None
            hi = float(model.col_hi[k]) if np.isfinite(model.col_hi[k]) else None
            cat = pulp.LpInteger if model.integer[k] else pulp.LpContinuous
            xs.append(prob.add_variable(f"v{k}", lowBound=lo, upBound=hi, cat=cat))
        nz = np.flatnonzero(model.obj)
        scale = _objective_scale(model)
        prob += pulp.LpAffineExpression([(xs[k], float(np.ldexp(model.obj[k], scale))) for k in nz])
        A = model.A.tocsr()
        for i in range(model.num_rows):
            if i % 256 == 0 and past(deadline):  # building a large model in Python takes a while
                return self._stopped(t0, "before CBC started")
            cols = A.indices[A.indptr[i]:A.indptr[i + 1]]
            vals = A.data[A.indptr[i]:A.indptr[i + 1]]
            expr = pulp.LpAffineExpression([(xs[k], float(v)) for k, v in zip(cols, vals)])
            lo, hi = model.row_lo[i], model.row_hi[i]
            if np.isfinite(lo) and np.isfinite(hi) and lo == hi:
                prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, rhs=float(lo), name=f"r{i}")
                continue
            if np.isfinite(hi):
                prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=float(hi), name=f"r{i}u")
            if np.isfinite(lo):
                prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, rhs=float(lo), name=f"r{i}l")
        with tempfile.TemporaryDirectory(prefix="certify-cbc-") as tmp:
            log = os.path.join(tmp, "cbc.log")
            solver = pulp.COIN_CMD(
                path=cbc_executable(),
                msg=False,
                timeLimit=None if options.time_limit is None else max(float(options.time_limit), 0.01),
                gapRel=float(options.mip_gap),
                gapAbs=float(np.ldexp(options.abs_gap, scale)),
                threads=int(options.threads),
                logPath=log,
                # no MIP start: CBC 2.10 can return a start as optimal below its own root bound
                # (coin-or/Cbc#449, #670) or call a feasible model infeasible after it
                warmStart=False,
                options=[f"primalTolerance {max(options.feasibility_tol, 1e-10):g}",
                         f"integerTolerance {max(options.integrality_tol, 1e-10):g}"],
            )
            try:
                killed = _run_cbc(prob, solver, tmp, log, deadline)
            except pulp.PulpSolverError as exc:
                return MilpResult("error", None, None, None, 0, time.perf_counter() - t0, self.name, None, f"CBC failed: {exc}")
            if killed:
                return self._stopped(t0, f"still running {KILL_GRACE:g} s after its time limit")
            text = _read(log)
        return self.invert(prob, xs, model, text, options, time.perf_counter() - t0, scale)

    def _stopped(self, t0: float, when: str) -> MilpResult:
        """No result: Ctrl-C, or the deadline passed (`when`)."""
        if interrupted():
            return MilpResult("interrupted", None, None, None, 0, time.perf_counter() - t0, self.name, None,
                              "CBC: stopped by Ctrl-C (no result)")
        return MilpResult("time_limit", None, None, None, 0, time.perf_counter() - t0, self.name, None,
                          f"CBC: {when}; stopped (no result)")

    def invert(self, prob, xs, model: MilpModel, log: str, options: SolveOptions, seconds: float, scale: int = 0) -> MilpResult:
        """Read CBC's result; its log prints the objective scaled by 2^scale (see `_objective_scale`)."""
        import pulp

        result = _RESULT.search(log)
        line = result.group(1).strip() if result else ""
        if line.startswith("Optimal"):
            status = "optimal"
        elif "time limit" in line.lower() or "stopped on time" in line.lower():
            status = "time_limit"
        elif "infeasible" in line.lower():
            status = "infeasible"
        elif "unbounded" in line.lower():
            status = "unbounded"
        elif line:
            status = "interrupted"
        else:
            status = {1: "optimal", -1: "infeasible", -2: "unbounded"}.get(prob.status, "error")
        values = [v.varValue for v in xs]
        has_sol = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and all(v is not None for v in values)
        x = np.asarray(values, dtype=np.float64) if has_sol else None
        objective = model.objective_value(x) if has_sol else None
        sign = 1.0 if model.sense == "max" else -1.0
        unscale = lambda v: float(np.ldexp(v, -scale)) + model.obj_offset  # noqa: E731
        b = (_UPPER if model.sense == "max" else _LOWER).search(log)
        # the log prints the bound with 3 decimals (rounded to nearest): half a unit more is safe
        bound: float | None = unscale(float(b.group(1)) + sign * 5e-4) if b else None
        if bound is None and status == "optimal" and objective is not None:
            # CBC stopped within the gap of *its* incumbent value, printed with 8 decimals; the
            # solution file is rounded too, so start from the less favourable of the two
            logged = _OBJ.search(log)
            base = objective if not logged else unscale(float(logged.group(1)) + sign * 5e-9)
            base = max(base, objective) if model.sense == "max" else min(base, objective)
            slack = max(options.abs_gap, options.mip_gap * abs(base)) + float(np.ldexp(1e-8, -scale))
            bound = base + sign * slack
        if bound is not None and not np.isfinite(bound):
            bound = None
        n = _NODES.search(log)
        nodes = int(n.group(1)) if n else 0
        gap = None
        if bound is not None and objective is not None:
            gap = abs(bound - objective) / max(abs(objective), 1e-10)
        return MilpResult(status, objective, bound, x, nodes, seconds, self.name, gap, f"CBC: {line or 'no result line'}")


def _run_cbc(prob, solver, tmp: str, log: str, deadline: float | None) -> bool:
    """`prob.solve(solver)` for PuLP's COIN_CMD (its MPS route: the same file, options and solution
    reading), with CBC's `-sec` set to the time left before `deadline` once the file is written and
    the process killed KILL_GRACE seconds after the deadline, or at once at Ctrl-C (module doc). True
    when it was killed (the problem then holds no solution)."""
    import pulp

    was_none, dummy = prob.fixObjective()
    try:
        mps, sol = os.path.join(tmp, "model.mps"), os.path.join(tmp, "model.sol")
        vs, var_names, con_names, _ = prob.writeMPS(mps, rename=1)
        args = [solver.path, mps] + (["-max"] if prob.sense == pulp.LpMaximize else [])
        if deadline is not None:
            args += ["-sec", f"{max(deadline - time.perf_counter(), 0.01):.6g}"]
        for option in list(solver.options) + solver.getOptions():
            if not option.startswith("sec "):
                args += ("-" + option).split()
        args += ["-solve", "-printingOptions", "all", "-solution", sol]
        if past(deadline):
            return True
        end = earliest(deadline, command_deadline())
        kill_at = None if end is None else end + KILL_GRACE
        with open(log, "w") as pipe:
            proc = subprocess.Popen(args, stdout=pipe, stderr=pipe, stdin=subprocess.DEVNULL)
            register_child(proc)  # killed by the CLI's watchdog if the process must exit
            try:
                while True:
                    wait = POLL_SECONDS if kill_at is None else min(POLL_SECONDS, max(kill_at - time.perf_counter(), 0.0))
                    try:
                        code = proc.wait(wait)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    # Ctrl-C, or still running KILL_GRACE after the deadline (its own or the command's)
                    if stop_requested() or (kill_at is not None and time.perf_counter() >= kill_at):
                        proc.kill()
                        proc.wait()
                        return True
            finally:
                unregister_child(proc)
        if code != 0 or not os.path.exists(sol):
            raise pulp.PulpSolverError(f"CBC exited with code {code}")
        status, values, _, _, _, sol_status = solver.readsol_MPS(sol, prob, vs, var_names, con_names)
        prob.assignVarsVals(values)
        prob.assignStatus(status, sol_status)
        return False
    finally:
        prob.restoreObjective(was_none, dummy)


def _objective_scale(model: MilpModel) -> int:
    """k such that 2^k times the objective's magnitude over the variable box is about 1e6.

    CBC prints bounds with 3 decimals and objectives with 8: scaling the objective by an exact
    power of two makes those digits worth ~5e-10 relative instead of an absolute 5e-4.
    """
    lo, hi = np.nan_to_num(model.col_lo, posinf=0.0, neginf=0.0), np.nan_to_num(model.col_hi, posinf=0.0, neginf=0.0)
    mag = float(np.abs(model.obj) @ np.maximum(np.abs(lo), np.abs(hi)))
    if not np.isfinite(mag) or mag <= 0:
        return 0
    return int(np.clip(np.round(np.log2(1e6 / mag)), -200, 200))


def _read(path: str) -> str:
    """The log's text ("" when CBC wrote none); the file is closed (no ResourceWarning)."""
    if not os.path.exists(path):
        return ""
    with open(path) as fh:
        return fh.read()
