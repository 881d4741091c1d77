"""The incremental safe-LP layer: LP relaxations held in HiGHS, bounds proven outside it.

HiGHS solves the LP relaxation of a neutral model (integrality and quadratic parts dropped) and is
kept alive between solves, so changed objectives, column bounds and added or deleted rows are
re-solved warm (dual simplex from the previous basis). Its optimum is never reported as a bound:
every bound is recomputed from the solver's row multipliers y by weak duality,

    max c @ v  <=  sum_i max(y_i row_lo_i, y_i row_hi_i) + sum_k max(r_k col_lo_k, r_k col_hi_k),
    r = c - A^T y,

which holds for *any* y (Neumaier & Shcherbina 2004), evaluated in float64 and rounded up
(`dual_bound`). An infeasible LP counts as infeasible only with a Farkas ray whose weak-duality
bound on max 0 is negative; otherwise the bound falls back to the box bound of the objective.
So every bound is sound whatever the LP solver's tolerances were.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..rounding import round_up
from ..runtime import past
from .highs import HighsRejected, highs_instance
from .model import MilpModel


POLLED_SIZE = 2000  # LPs with more columns plus rows than this poll Ctrl-C and the deadline while solving


def dual_bound(A: sp.csr_matrix, row_lo: np.ndarray, row_hi: np.ndarray, col_lo: np.ndarray, col_hi: np.ndarray,
               c: np.ndarray, y: np.ndarray, AT: sp.csr_matrix | None = None, absAT: sp.csr_matrix | None = None) -> float:
    """Sound upper bound on max c @ v over {row_lo <= A v <= row_hi, col_lo <= v <= col_hi}.

    `AT`, `absAT` (A^T and |A|^T in CSR) may be passed to avoid recomputing them."""
    y = np.array(y, dtype=np.float64)
    y[(y > 0) & ~np.isfinite(row_hi)] = 0.0
    y[(y < 0) & ~np.isfinite(row_lo)] = 0.0
    AT = A.T.tocsr() if AT is None else AT
    absAT = abs(AT) if absAT is None else absAT
    r = c - AT @ y
    row_b = np.where(y > 0, row_hi, np.where(y < 0, row_lo, 0.0))
    col_b = np.where(r > 0, col_hi, np.where(r < 0, col_lo, 0.0))
    if not (np.all(np.isfinite(row_b)) and np.all(np.isfinite(col_b))):
        return float("inf")
    value = float(y @ row_b + r @ col_b)
    col_mag = np.maximum(np.abs(np.where(np.isfinite(col_lo), col_lo, 0.0)), np.abs(np.where(np.isfinite(col_hi), col_hi, 0.0)))
    mag = float(np.abs(y) @ np.abs(row_b) + (np.abs(c) + absAT @ np.abs(y)) @ col_mag)
    return round_up(value, mag, A.shape[0] + A.shape[1] + 2)


def box_bound(c: np.ndarray, col_lo: np.ndarray, col_hi: np.ndarray) -> float:
    """Sound upper bound on c @ v over the column box alone."""
    terms = np.where(c > 0, c * col_hi, np.where(c < 0, c * col_lo, 0.0))
    if not np.all(np.isfinite(terms)):
        return float("inf")
    value = float(np.sum(terms))
    return round_up(value, float(np.sum(np.abs(terms))), c.size + 2)


@dataclass
class LpOutcome:
    """One safe LP solve (maximisation): `bound` >= the LP's optimum (-inf: proven infeasible),
    `x` the solver's primal point and `y` the multipliers the bound was computed from."""

    bound: float
    status: str  # "optimal", "infeasible" (proven by a Farkas ray), "unknown" (bound from the box)
    x: np.ndarray | None = None
    y: np.ndarray | None = None

    @property
    def infeasible(self) -> bool:
        return self.status == "infeasible"


class SafeLp:
    """The LP relaxation of `model` for repeated maximisations with sound results."""

    def __init__(self, model: MilpModel, *, relax_integrality: bool = True) -> None:
        self.A = sp.csr_matrix(model.A)
        self.row_lo, self.row_hi = model.row_lo.astype(np.float64), model.row_hi.astype(np.float64)
        self.col_lo, self.col_hi = model.col_lo.astype(np.float64), model.col_hi.astype(np.float64)
        self.num_vars = model.num_vars
        lp_model = replace(model, integer=np.zeros(model.num_vars, dtype=bool), q_obj=None, q_constraints=(), obj_offset=0.0)
        try:
            self.highs = highs_instance(lp_model, integer=not relax_integrality)
        except HighsRejected:
            self.highs = None  # every bound is then the box bound
        else:
            # warm re-solves: no presolve (it would discard the basis), dual simplex
            self.highs.setOptionValue("presolve", "off")
            self.highs.setOptionValue("simplex_strategy", 1)
            # Ctrl-C and the command deadline stop a long LP within an iteration (bound: the box's);
            # small LPs end within milliseconds and their callers poll between solves (the Python
            # callbacks cost ~20 calls per solve: 7% of a proof of 200-row LPs)
            if model.num_vars + model.num_rows > POLLED_SIZE:
                self.highs.cbSimplexInterrupt += _stop_poll
                self.highs.cbIpmInterrupt += _stop_poll
        self._cols = np.arange(self.num_vars, dtype=np.int32)
        self._cost: np.ndarray | None = None
        self._dual_sign = 1.0  # HiGHS's sign of the row duals, as last seen
        self._transposes()
        self.solves = 0
        self.iterations = 0

    def _transposes(self) -> None:
        self.AT = self.A.T.tocsr()
        self.absAT = abs(self.AT)

    def _bound(self, coef: np.ndarray, y: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> float:
        return dual_bound(self.A, self.row_lo, self.row_hi, self.col_lo if lo is None else lo,
                          self.col_hi if hi is None else hi, coef, y, self.AT, self.absAT)

    # ------------------------------------------------------------------ modifications
    def set_col_bounds(self, idx: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        idx = np.asarray(idx, dtype=np.int32).reshape(-1)
        if idx.size == 0:
            return
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), idx.shape)
        hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), idx.shape)
        self.col_lo[idx], self.col_hi[idx] = lo, hi
        if self.highs is not None:
            self.highs.changeColsBounds(idx.size, idx, lo.copy(), hi.copy())

    def add_rows(self, rows: sp.spmatrix, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Append lo <= rows @ v <= hi; returns the new rows' indices."""
        rows = sp.csr_matrix(rows, dtype=np.float64)
        start = self.A.shape[0]
        lo, hi = np.asarray(lo, dtype=np.float64).reshape(-1), np.asarray(hi, dtype=np.float64).reshape(-1)
        self.A = sp.vstack([self.A, rows], format="csr")
        self.row_lo, self.row_hi = np.concatenate([self.row_lo, lo]), np.concatenate([self.row_hi, hi])
        self._transposes()
        if self.highs is not None:
            import highspy

            inf = highspy.kHighsInf
            self.highs.addRows(rows.shape[0], np.where(np.isfinite(lo), lo, -inf), np.where(np.isfinite(hi), hi, inf),
                               rows.nnz, rows.indptr[:-1].astype(np.int32), rows.indices.astype(np.int32), rows.data)
        return np.arange(start, start + rows.shape[0])

    def delete_rows(self, idx: np.ndarray) -> None:
        idx = np.asarray(idx, dtype=np.int32).reshape(-1)
        if idx.size == 0:
            return
        keep = np.ones(self.A.shape[0], dtype=bool)
        keep[idx] = False
        self.A, self.row_lo, self.row_hi = self.A[keep], self.row_lo[keep], self.row_hi[keep]
        self._transposes()
        if self.highs is not None:
            self.highs.deleteRows(idx.size, np.sort(idx))

    def set_time_limit(self, seconds: float | None) -> None:
        if self.highs is not None:
            self.highs.setOptionValue("time_limit", float("inf") if seconds is None else max(float(seconds), 1e-3))

    # ------------------------------------------------------------------ solves
    def basis(self):
        """The current simplex basis (to warm-start a later, nearby solve with `maximize(basis=)`)."""
        return None if self.highs is None else self.highs.getBasis()

    def maximize(self, coef: np.ndarray, const: float = 0.0, basis=None) -> LpOutcome:
        """A sound upper bound on max coef @ v + const over the current LP, warm-started from the
        last solve or from `basis` (e.g. a branch-and-bound node's parent)."""
        import highspy

        coef = np.asarray(coef, dtype=np.float64)
        box = box_bound(coef, self.col_lo, self.col_hi)
        if self.highs is None:
            return LpOutcome(_plus(box, const), "unknown")
        if self._cost is None or not np.array_equal(self._cost, coef):
            self.highs.changeColsCost(self.num_vars, self._cols, coef)
            self.highs.changeObjectiveSense(highspy.ObjSense.kMaximize)
            self._cost = coef.copy()
        if basis is not None and len(basis.row_status) == self.A.shape[0]:
            self.highs.setBasis(basis)
        self.highs.run()
        self.solves += 1
        self.iterations += int(self.highs.getInfo().simplex_iteration_count)
        status = self.highs.getModelStatus().name
        if status == "kInfeasible" and self._farkas():
            return LpOutcome(-np.inf, "infeasible")
        if status != "kOptimal":
            return LpOutcome(_plus(box, const), "unknown")
        sol = self.highs.getSolution()
        y = np.asarray(sol.row_dual, dtype=np.float64)
        # either sign convention (any multipliers give a valid bound): the one that matched the
        # LP's optimum last time first, the other only when this bound is not close to the optimum
        best, best_y = np.inf, y
        value = float(coef @ np.asarray(sol.col_value, dtype=np.float64))
        for s in (self._dual_sign, -self._dual_sign):
            b = self._bound(coef, s * y)
            if b < best:
                best, best_y = b, s * y
            if b <= value + 1e-9 * abs(value) + 1e-12:
                self._dual_sign = s
                break
        x = np.asarray(sol.col_value, dtype=np.float64)
        return LpOutcome(_plus(min(best, box), const), "optimal", x, best_y)

    def bound_with(self, y: np.ndarray, coef: np.ndarray, const: float = 0.0, col_lo: np.ndarray | None = None,
                   col_hi: np.ndarray | None = None) -> float:
        """The weak-duality bound for given multipliers y and (optionally other) column bounds,
        without solving: children of a branch-and-bound node are often closed this way."""
        lo = self.col_lo if col_lo is None else col_lo
        hi = self.col_hi if col_hi is None else col_hi
        b = self._bound(np.asarray(coef, dtype=np.float64), y, lo, hi)
        return _plus(min(b, box_bound(np.asarray(coef, dtype=np.float64), lo, hi)), const)

    def upper(self, coef: np.ndarray, const: float = 0.0) -> float:
        return self.maximize(coef, const).bound

    def lower(self, coef: np.ndarray, const: float = 0.0) -> float:
        return -self.upper(-np.asarray(coef, dtype=np.float64), -const)

    def _farkas(self) -> bool:
        """A proof of infeasibility: a ray y whose weak-duality bound on max 0 @ v is negative."""
        try:
            _, has_ray, ray = self.highs.getDualRay()
        except Exception:  # older highspy without the ray API
            return False
        if not has_ray:
            return False
        ray = np.asarray(ray, dtype=np.float64)
        zero = np.zeros(self.num_vars)
        return any(self._bound(zero, s * ray) < 0 for s in (1.0, -1.0))


def _stop_poll(event) -> None:
    if past():
        event.interrupt()


def _plus(bound: float, const: float) -> float:
    if not np.isfinite(bound) or const == 0.0:
        return bound + const
    return round_up(bound + const, abs(bound) + abs(const), 2)


__all__ = ["LpOutcome", "SafeLp", "box_bound", "dual_bound"]
