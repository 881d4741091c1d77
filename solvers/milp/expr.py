"""Vectors of affine expressions over the variables of a `MilpBuilder`.

An `Expr` with k rows is  coef @ v + const  with `coef` a sparse (k, N) matrix over the builder's
variables v. Networks are encoded by pushing expressions through layers (`affine`), so stable
ReLUs and fixed vectors need no variables at all.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _with_cols(m: sp.csr_matrix, ncols: int) -> sp.csr_matrix:
    if m.shape[1] == ncols:
        return m
    if m.shape[1] > ncols:
        raise ValueError("expression refers to variables beyond the requested width")
    return sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], ncols))


class Expr:
    """k affine expressions coef @ v + const (coef sparse (k, N), const (k,))."""

    __slots__ = ("coef", "const")

    def __init__(self, coef: sp.spmatrix, const: np.ndarray) -> None:
        self.coef = sp.csr_matrix(coef)
        self.const = np.asarray(const, dtype=np.float64).reshape(-1)
        if self.coef.shape[0] != self.const.shape[0]:
            raise ValueError("coefficient rows and constants disagree")

    # ------------------------------------------------------------------ constructors
    @staticmethod
    def constant(values: np.ndarray, nvars: int = 0) -> "Expr":
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        return Expr(sp.csr_matrix((values.size, nvars)), values)

    @staticmethod
    def variables(idx: np.ndarray, nvars: int) -> "Expr":
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        k = idx.size
        coef = sp.csr_matrix((np.ones(k), idx, np.arange(k + 1)), shape=(k, nvars))
        return Expr(coef, np.zeros(k))

    @staticmethod
    def stack(parts: list["Expr"]) -> "Expr":
        n = max(p.nvars for p in parts)
        return Expr(sp.vstack([_with_cols(p.coef, n) for p in parts], format="csr"), np.concatenate([p.const for p in parts]))

    @staticmethod
    def scatter(n: int, parts: list[tuple[np.ndarray, "Expr"]]) -> "Expr":
        """n rows: row idx[k] of the result is row k of the paired expression, other rows are 0."""
        nv = max([e.nvars for _, e in parts], default=0)
        rows = np.concatenate([np.asarray(i, dtype=np.int64) for i, _ in parts]) if parts else np.zeros(0, np.int64)
        if np.unique(rows).size != rows.size:
            raise ValueError("scatter rows overlap")
        missing = np.setdiff1d(np.arange(n), rows)
        parts = list(parts) + [(missing, Expr.constant(np.zeros(missing.size), nv))]
        order = np.concatenate([np.asarray(i, dtype=np.int64) for i, _ in parts])
        stacked = Expr.stack([e for _, e in parts])
        inv = np.empty(n, dtype=np.int64)
        inv[order] = np.arange(n)
        return stacked[inv]

    # ------------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        return self.const.shape[0]

    @property
    def nvars(self) -> int:
        return self.coef.shape[1]

    @property
    def is_constant(self) -> bool:
        return self.coef.nnz == 0

    def row_is_constant(self) -> np.ndarray:
        return np.diff(self.coef.indptr) == 0

    def widened(self, nvars: int) -> sp.csr_matrix:
        return _with_cols(self.coef, nvars)

    def value(self, x: np.ndarray) -> np.ndarray:
        """Evaluate at a full variable vector x."""
        return self.coef @ np.asarray(x)[: self.nvars] + self.const

    # ------------------------------------------------------------------ algebra
    def affine(self, weight: np.ndarray, bias: np.ndarray | float = 0.0) -> "Expr":
        """weight @ self + bias (weight dense (r, k))."""
        w = np.asarray(weight, dtype=np.float64)
        coef = sp.csr_matrix(w) @ self.coef if self.coef.nnz else sp.csr_matrix((w.shape[0], self.nvars))
        return Expr(coef, w @ self.const + bias)

    def scale(self, d: np.ndarray | float) -> "Expr":
        """Row-wise scaling diag(d) @ self."""
        d = np.broadcast_to(np.asarray(d, dtype=np.float64), (self.size,))
        return Expr(sp.diags(d) @ self.coef, d * self.const)

    def __getitem__(self, rows) -> "Expr":
        rows = np.arange(self.size)[rows]
        return Expr(self.coef[rows], self.const[rows])

    def __add__(self, other: "Expr | np.ndarray | float") -> "Expr":
        if isinstance(other, Expr):
            n = max(self.nvars, other.nvars)
            return Expr(_with_cols(self.coef, n) + _with_cols(other.coef, n), self.const + other.const)
        return Expr(self.coef, self.const + other)

    def __neg__(self) -> "Expr":
        return Expr(-self.coef, -self.const)

    def __sub__(self, other: "Expr | np.ndarray | float") -> "Expr":
        return self + (-other)

    def __repr__(self) -> str:
        return f"Expr({self.size} rows over {self.nvars} variables, {self.coef.nnz} nonzeros)"
