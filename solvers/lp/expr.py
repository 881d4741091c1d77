"""Vectors of affine expressions over a model's variables, with bounds on their rounding errors.

An `Expr` with k rows is  coef @ v + const  with `coef` a sparse (k, N) matrix over the model's
variables v. Networks are encoded by pushing expressions through layers (`affine`), so stable
ReLUs and fixed vectors need no variables at all. Composing layers multiplies weights in float64,
so the stored coefficients can differ from the exact composition; each row therefore carries a
magnitude `mag` (a sparse bound on |coef| built with |W| in place of W) and the length `rounds` of
its longest rounding chain, and `error(vmax)` bounds |computed row - exact row| over every v with
|v| <= vmax (Higham: each dot product of length k adds gamma(k) |W| |coef|, and
gamma(a) + gamma(b) + gamma(a) gamma(b) <= gamma(a + b)). Rows built without rounding have
`rounds == 0` and error 0. Model builders widen every constraint by its error, so a model built
from expressions is a relaxation of the exact network in exact arithmetic.
"""

from __future__ import annotations

import numpy as np
from models.scipy_import import sparse as sp  # scipy.sparse without numpy's lazy submodules (see there)

from models.memory import require_work

from ..rounding import U, gamma

# what a refusal of an LP/MILP encoding suggests
MILP_ALTERNATIVE = "use bounds that need no LP or MILP (--bounds symbolic or interval; for lipschitz --method bab)"


def _with_cols(m: sp.csr_matrix, ncols: int) -> sp.csr_matrix:
    if m.shape[1] == ncols:
        return m
    if m.shape[1] > ncols:
        raise ValueError("expression refers to variables beyond the requested width")
    return sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], ncols))


def _is_power_of_two_or_zero(d: np.ndarray) -> bool:
    """Multiplying by these is exact in binary floating point (barring under/overflow)."""
    a = np.abs(d[d != 0])
    return bool(np.all(np.frexp(a)[0] == 0.5)) if a.size else True


class Expr:
    """k affine expressions coef @ v + const (coef sparse (k, N), const (k,)), with error bounds."""

    __slots__ = ("coef", "const", "mag", "mag_const", "rounds")

    def __init__(self, coef: sp.spmatrix, const: np.ndarray, mag: sp.spmatrix | None = None,
                 mag_const: np.ndarray | None = None, rounds: np.ndarray | None = None) -> None:
        self.coef = sp.csr_matrix(coef)
        self.const = np.asarray(const, dtype=np.float64).reshape(-1)
        if self.coef.shape[0] != self.const.shape[0]:
            raise ValueError("coefficient rows and constants disagree")
        k = self.const.shape[0]
        self.rounds = np.zeros(k, dtype=np.int64) if rounds is None else np.asarray(rounds, dtype=np.int64)
        # mag / mag_const are None while every row is exact (then |coef|, |const| are the magnitudes)
        self.mag = None if mag is None else sp.csr_matrix(mag)
        self.mag_const = None if mag_const is None else np.asarray(mag_const, dtype=np.float64)

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
        coef = sp.vstack([_with_cols(p.coef, n) for p in parts], format="csr")
        const = np.concatenate([p.const for p in parts])
        rounds = np.concatenate([p.rounds for p in parts])
        if all(p.exact for p in parts):
            return Expr(coef, const)
        mag = sp.vstack([_with_cols(p.magnitude, n) for p in parts], format="csr")
        return Expr(coef, const, mag, np.concatenate([p.magnitude_const for p in parts]), rounds)

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

    @property
    def exact(self) -> bool:
        return self.mag is None

    @property
    def magnitude(self) -> sp.csr_matrix:
        return abs(self.coef) if self.mag is None else self.mag

    @property
    def magnitude_const(self) -> np.ndarray:
        return np.abs(self.const) if self.mag_const is None else self.mag_const

    def row_is_constant(self) -> np.ndarray:
        return np.diff(self.coef.indptr) == 0

    def widened(self, nvars: int) -> sp.csr_matrix:
        return _with_cols(self.coef, nvars)

    def value(self, x: np.ndarray) -> np.ndarray:
        """Evaluate at a full variable vector x."""
        return self.coef @ np.asarray(x)[: self.nvars] + self.const

    def error(self, vmax: np.ndarray) -> np.ndarray:
        """Per-row bound on |computed - exact| for every v with |v| <= vmax (first nvars entries)."""
        if self.exact:
            return np.zeros(self.size)
        vmax = np.asarray(vmax, dtype=np.float64)[: self.nvars]
        span = _with_cols(self.mag, vmax.size) @ vmax + self.mag_const
        nu = (self.rounds + 2) * U
        if np.any(nu >= 0.5):
            gamma(int(self.rounds.max()) + 2)  # raises: the chain is too long for an error bound
        err = 2.0 * nu / (1.0 - nu) * span
        return np.where(self.rounds > 0, err + 1e-300, 0.0)

    # ------------------------------------------------------------------ algebra
    def affine(self, weight: np.ndarray | sp.spmatrix, bias: np.ndarray | float = 0.0) -> "Expr":
        """weight @ self + bias (weight (r, k), dense or a float64 scipy sparse matrix, e.g. a
        cached CSR copy of a layer's weight: converting a dense unrolled convolution costs more
        than the product)."""
        w = weight.tocsr() if sp.issparse(weight) else np.asarray(weight, dtype=np.float64)
        b = np.broadcast_to(np.asarray(bias, dtype=np.float64), (w.shape[0],))
        what = f"the LP/MILP rows of a {w.shape[0]} x {w.shape[1]} layer"
        if sp.issparse(w):
            ws = w
        else:
            # sparse copies of W (CSR and its conversion: about 28 bytes per nonzero), checked first
            require_work(28.0 * np.count_nonzero(w), what, MILP_ALTERNATIVE)
            ws = sp.csr_matrix(w)
        if self.coef.nnz:  # the product's nonzeros are at most those of the rows W reaches
            reach = int(np.diff(self.coef.indptr)[ws.indices].sum())
            # coef, its magnitude and scipy's temporaries of the product: about 48 bytes per nonzero
            require_work(48.0 * min(reach, w.shape[0] * self.nvars), what, MILP_ALTERNATIVE)
        coef = ws @ self.coef if self.coef.nnz else sp.csr_matrix((w.shape[0], self.nvars))
        const = w @ self.const + b
        if self._composes_exactly(w):
            return Expr(coef, const)
        aw = abs(ws)
        mag = aw @ self.magnitude
        mag_const = aw @ self.magnitude_const + np.abs(b)
        # every output row is a dot product of length k (+ the bias) on top of its inputs' chains
        rounds = np.full(w.shape[0], int(self.rounds.max(initial=0)) + w.shape[1] + 1)
        return Expr(coef, const, mag, mag_const, rounds)

    def _unit_rows(self) -> bool:
        """Every row a single variable with coefficient +-1 (or empty) and no constants: products
        of these rows with any number are exact."""
        c = self.coef
        if np.any(self.const):
            return False
        return not (c.nnz and (np.any(np.diff(c.indptr) > 1) or np.any(np.abs(c.data) != 1.0)))

    def _composes_exactly(self, w: np.ndarray) -> bool:
        """weight @ self is exact: unit rows (see `_unit_rows`) with no two sharing a variable."""
        if not self.exact or not self._unit_rows():
            return False
        return np.unique(self.coef.indices).size == self.coef.indices.size

    def scale(self, d: np.ndarray | float) -> "Expr":
        """Row-wise scaling diag(d) @ self."""
        d = np.broadcast_to(np.asarray(d, dtype=np.float64), (self.size,))
        coef, const = sp.diags(d) @ self.coef, d * self.const
        if self.exact and (_is_power_of_two_or_zero(d) or self._unit_rows()):
            return Expr(coef, const)
        D = sp.diags(np.abs(d))
        return Expr(coef, const, D @ self.magnitude, np.abs(d) * self.magnitude_const, self.rounds + 1)

    def __getitem__(self, rows) -> "Expr":
        rows = np.arange(self.size)[rows]
        if self.exact:
            return Expr(self.coef[rows], self.const[rows])
        return Expr(self.coef[rows], self.const[rows], self.mag[rows], self.mag_const[rows], self.rounds[rows])

    def __add__(self, other: "Expr | np.ndarray | float") -> "Expr":
        if isinstance(other, Expr):
            n = max(self.nvars, other.nvars)
            coef = _with_cols(self.coef, n) + _with_cols(other.coef, n)
            const = self.const + other.const
            if self.exact and other.exact and _disjoint(self, other):
                return Expr(coef, const)
            mag = _with_cols(self.magnitude, n) + _with_cols(other.magnitude, n)
            rounds = np.maximum(self.rounds, other.rounds) + 1
            return Expr(coef, const, mag, self.magnitude_const + other.magnitude_const, rounds)
        other = np.broadcast_to(np.asarray(other, dtype=np.float64), (self.size,))
        if self.exact and not np.any(self.const):
            return Expr(self.coef, self.const + other)
        return Expr(self.coef, self.const + other, self.magnitude, self.magnitude_const + np.abs(other), self.rounds + 1)

    def __neg__(self) -> "Expr":
        if self.exact:
            return Expr(-self.coef, -self.const)
        return Expr(-self.coef, -self.const, self.mag, self.mag_const, self.rounds)

    def __sub__(self, other: "Expr | np.ndarray | float") -> "Expr":
        return self + (-other)

    def __repr__(self) -> str:
        return f"Expr({self.size} rows over {self.nvars} variables, {self.coef.nnz} nonzeros)"


def _disjoint(a: Expr, b: Expr) -> bool:
    """No entry (coefficient or constant) of a row is a sum of two nonzeros: the sum is exact."""
    n = max(a.nvars, b.nvars)
    overlap = _with_cols(abs(a.coef), n).multiply(_with_cols(abs(b.coef), n))
    return overlap.nnz == 0 and not np.any((a.const != 0) & (b.const != 0))


__all__ = ["Expr"]
