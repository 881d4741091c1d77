"""The solver-neutral linear / mixed-integer model and a small builder.

    maximise / minimise  obj @ v + obj_offset (+ v @ q_obj @ v)
    subject to           row_lo <= A @ v <= row_hi
                         col_lo <= v <= col_hi,  v[integer] integral
                         v @ Q_k @ v + a_k @ v <= rhs_k   (quadratic constraints, optional)

Back-ends (`solvers.milp.highs`, `.gurobi`, `.cbc`) and the safe LP layer (`solvers.lp.safe`)
consume this data only; they never see what the variables mean. Variable and row groups name
blocks of the model for diagnostics.

Every model built by `MilpBuilder` from `Expr` rows is a relaxation, in exact arithmetic, of what
the expressions describe exactly: each row is widened by its expression's rounding-error bound
(over the variables' box) and its right-hand side rounded outward; `obj_err` bounds the rounding
error of the objective row, which callers add to any bound on the objective.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from models.scipy_import import sparse as sp  # scipy.sparse without numpy's lazy submodules (see there)

from .expr import Expr

Sense = Literal["max", "min"]
INF = float("inf")


@dataclass(frozen=True)
class QuadraticConstraint:
    """v @ Q @ v + a @ v <= rhs."""

    Q: sp.csr_matrix
    a: np.ndarray
    rhs: float


@dataclass(frozen=True)
class MilpModel:
    obj: np.ndarray
    sense: Sense
    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integer: np.ndarray
    obj_offset: float = 0.0
    q_obj: sp.csr_matrix | None = None
    q_constraints: tuple[QuadraticConstraint, ...] = ()
    var_groups: dict[str, np.ndarray] = field(default_factory=dict)
    row_groups: dict[str, np.ndarray] = field(default_factory=dict)
    obj_err: float = 0.0

    @property
    def num_vars(self) -> int:
        return self.obj.shape[0]

    @property
    def num_rows(self) -> int:
        return self.A.shape[0]

    @property
    def num_integers(self) -> int:
        return int(np.sum(self.integer))

    @property
    def is_quadratic(self) -> bool:
        return self.q_obj is not None or bool(self.q_constraints)

    @property
    def num_one_sided_rows(self) -> int:
        """Rows as single-sense constraints (a two-sided range counts twice)."""
        lo_f, hi_f = np.isfinite(self.row_lo), np.isfinite(self.row_hi)
        eq = lo_f & hi_f & (self.row_lo == self.row_hi)
        return int(np.sum(eq) + np.sum(lo_f & ~eq) + np.sum(hi_f & ~eq))

    def describe(self) -> dict:
        return {"variables": self.num_vars, "integers": self.num_integers, "rows": self.num_rows,
                "nonzeros": int(self.A.nnz), "quadratic": self.is_quadratic}

    def with_rows(self, rows: sp.spmatrix, lo: np.ndarray, hi: np.ndarray, group: str | None = None) -> "MilpModel":
        """A copy with extra linear rows lo <= rows @ v <= hi."""
        from dataclasses import replace

        rows = sp.csr_matrix(rows)
        start = self.num_rows
        groups = dict(self.row_groups)
        if group:
            new = np.arange(start, start + rows.shape[0])
            groups[group] = np.concatenate([groups[group], new]) if group in groups else new
        return replace(self, A=sp.vstack([self.A, rows], format="csr"), row_lo=np.concatenate([self.row_lo, lo]),
                       row_hi=np.concatenate([self.row_hi, hi]), row_groups=groups)

    def objective_value(self, x: np.ndarray) -> float:
        val = float(self.obj @ x + self.obj_offset)
        if self.q_obj is not None:
            val += float(x @ (self.q_obj @ x))
        return val


class MilpBuilder:
    """Accumulates variables and constraints; `build()` returns a `MilpModel`."""

    def __init__(self) -> None:
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self._rows: list[sp.csr_matrix] = []
        self._row_lo: list[np.ndarray] = []
        self._row_hi: list[np.ndarray] = []
        self._n = 0
        self._m = 0
        self.var_groups: dict[str, list[np.ndarray]] = {}
        self.row_groups: dict[str, list[np.ndarray]] = {}
        self._obj: Expr | None = None
        self._sense: Sense = "max"
        self._q_obj: sp.csr_matrix | None = None
        self._q_constraints: list[tuple[sp.csr_matrix, Expr, float]] = []

    @property
    def num_vars(self) -> int:
        return self._n

    @property
    def num_rows(self) -> int:
        return self._m

    def add_vars(self, n: int, lo: np.ndarray | float, hi: np.ndarray | float, integer: bool = False, group: str | None = None) -> np.ndarray:
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,)).copy()
        hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,)).copy()
        if np.any(lo > hi):
            raise ValueError(f"variable bounds cross in group {group!r}")
        idx = np.arange(self._n, self._n + n)
        self._lo.append(lo)
        self._hi.append(hi)
        self._int.append(np.full(n, integer))
        self._n += n
        if group:
            self.var_groups.setdefault(group, []).append(idx)
        return idx

    def add_binaries(self, n: int, group: str | None = None) -> np.ndarray:
        return self.add_vars(n, 0.0, 1.0, integer=True, group=group)

    def var_expr(self, idx: np.ndarray) -> Expr:
        return Expr.variables(idx, self._n)

    def vmax(self) -> np.ndarray:
        """max(|lo|, |hi|) of every variable created so far (sizes the rows' rounding errors)."""
        if not self._lo:
            return np.zeros(0)
        return np.maximum(np.abs(np.concatenate(self._lo)), np.abs(np.concatenate(self._hi)))

    def constrain(self, expr: Expr, lo: np.ndarray | float = -INF, hi: np.ndarray | float = INF, group: str | None = None) -> np.ndarray:
        """lo <= expr <= hi row by row, widened by the expression's rounding error and rounded
        outward (a relaxation of the exact constraint); constant rows are checked instead of added."""
        k = expr.size
        err = expr.error(self.vmax())
        lo = _outward(np.broadcast_to(np.asarray(lo, dtype=np.float64), (k,)) - expr.const, expr.const, err, -1.0)
        hi = _outward(np.broadcast_to(np.asarray(hi, dtype=np.float64), (k,)) - expr.const, expr.const, err, 1.0)
        const_rows = expr.row_is_constant()
        if np.any(const_rows & ((lo > 1e-12) | (hi < -1e-12))):
            raise ValueError(f"constant constraint violated in group {group!r}")
        keep = ~const_rows
        if not np.any(keep):
            return np.zeros(0, dtype=np.int64)
        coef = expr.coef[keep] if not np.all(keep) else expr.coef
        idx = np.arange(self._m, self._m + int(np.sum(keep)))
        self._rows.append(coef)
        self._row_lo.append(lo[keep])
        self._row_hi.append(hi[keep])
        self._m += idx.size
        if group:
            self.row_groups.setdefault(group, []).append(idx)
        return idx

    def set_objective(self, expr: Expr, sense: Sense = "max") -> None:
        if expr.size != 1:
            raise ValueError("the objective must be a single expression")
        self._obj = expr
        self._sense = sense

    def add_quadratic_objective(self, Q: sp.spmatrix) -> None:
        """Adds v @ Q @ v to the objective (Q over the variables created so far)."""
        self._q_obj = sp.csr_matrix(Q)

    def add_quadratic_constraint(self, Q: sp.spmatrix, linear: Expr, rhs: float) -> None:
        """v @ Q @ v + linear <= rhs."""
        self._q_constraints.append((sp.csr_matrix(Q), linear, float(rhs)))

    def build(self) -> MilpModel:
        n = self._n
        if self._rows:
            A = sp.vstack([sp.csr_matrix((r.data, r.indices, r.indptr), shape=(r.shape[0], n)) for r in self._rows], format="csr")
        else:
            A = sp.csr_matrix((0, n))
        obj = np.zeros(n)
        offset = obj_err = 0.0
        if self._obj is not None:
            obj = np.asarray(self._obj.widened(n).toarray()).reshape(-1)
            offset = float(self._obj.const[0])
            obj_err = float(self._obj.error(self.vmax())[0])

        def pad(Q: sp.csr_matrix) -> sp.csr_matrix:
            Q = Q.tocoo()
            return sp.csr_matrix((Q.data, (Q.row, Q.col)), shape=(n, n))

        qcons = tuple(
            QuadraticConstraint(pad(Q), np.asarray(lin.widened(n).toarray()).reshape(-1), rhs - float(lin.const[0]))
            for Q, lin, rhs in self._q_constraints
        )
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)
        return MilpModel(
            obj=obj,
            sense=self._sense,
            A=A,
            row_lo=cat(self._row_lo),
            row_hi=cat(self._row_hi),
            col_lo=cat(self._lo),
            col_hi=cat(self._hi),
            integer=cat(self._int).astype(bool),
            obj_offset=offset,
            q_obj=pad(self._q_obj) if self._q_obj is not None else None,
            q_constraints=qcons,
            var_groups={k: np.concatenate(v) for k, v in self.var_groups.items()},
            row_groups={k: np.concatenate(v) for k, v in self.row_groups.items()},
            obj_err=obj_err,
        )


def _outward(bound: np.ndarray, const: np.ndarray, err: np.ndarray, direction: float) -> np.ndarray:
    """bound (= rhs - const, rounded) moved outward past its rounding and by err."""
    out = np.asarray(bound, dtype=np.float64) + direction * err
    moved = ((const != 0) | (err != 0)) & np.isfinite(out)
    out[moved] = np.nextafter(out[moved], direction * np.inf)
    return out
