"""A parsed verification property: the *unsafe* set as a disjunction of linear clauses.

A VNNLIB file describes the inputs x (X_0..X_{n-1}, the row-major flattening of the model's
input) and outputs y = f(x) (Y_0..Y_{m-1}) that violate the property. We normalise it to a DNF:

    unsafe  =  OR_k  { x in box_k,  G_k x + H_k y <= d_k  (row-wise; `<` where `strict`) }

Each `Disjunct` holds its input box (single-variable bounds) and its linear rows. A row touching
only inputs is a polytope constraint (`input_rows`), only outputs an output constraint `A y <= b`
(`output_rows`), both a mixed one (`mixed_rows`). `sat` means some point of the unsafe set exists
(a counterexample), `unsat` that the property holds.

The *unsafe margin* of a disjunct at x is  min_rows (d - G x - H y)  (>= 0 exactly on the unsafe
set, for non-strict rows); of the spec, the maximum over its disjuncts. `verify` brackets the
maximum of this margin over the input set: sat iff it is >= 0 (strict rows: > 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.errors import BadInput


@dataclass(frozen=True, eq=False)
class LinearRows:
    """Rows  G x + H y <= d  (`<` where `strict`), with the source line of every row."""

    G: np.ndarray  # (k, n)
    H: np.ndarray  # (k, m)
    d: np.ndarray  # (k,)
    strict: np.ndarray  # (k,) bool
    lines: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("G", "H", "d", "strict"):
            getattr(self, name).setflags(write=False)

    @classmethod
    def empty(cls, n: int, m: int) -> "LinearRows":
        return cls(np.zeros((0, n)), np.zeros((0, m)), np.zeros(0), np.zeros(0, dtype=bool), ())

    @property
    def count(self) -> int:
        return int(self.d.size)

    def select(self, mask: np.ndarray) -> "LinearRows":
        idx = np.flatnonzero(mask)
        return LinearRows(self.G[idx], self.H[idx], self.d[idx], self.strict[idx],
                          tuple(self.lines[i] for i in idx) if self.lines else ())

    def concat(self, other: "LinearRows") -> "LinearRows":
        return LinearRows(np.vstack([self.G, other.G]), np.vstack([self.H, other.H]),
                          np.concatenate([self.d, other.d]), np.concatenate([self.strict, other.strict]),
                          self.lines + other.lines)

    def slack(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """d - G x - H y for a point (x (n,), y (m,)) or a batch (x (B, n), y (B, m)): (k,) or (B, k)."""
        return self.d - x @ self.G.T - y @ self.H.T

    def key(self) -> bytes:
        return b"".join(a.tobytes() for a in (self.G, self.H, self.d, self.strict))


@dataclass(frozen=True, eq=False)
class Disjunct:
    """One clause of the unsafe set: lo <= x <= hi and `rows`."""

    lo: np.ndarray
    hi: np.ndarray
    rows: LinearRows
    line: int = 0  # where the clause starts in the source (0 when unknown)

    def __post_init__(self) -> None:
        self.lo.setflags(write=False)
        self.hi.setflags(write=False)

    @property
    def input_rows(self) -> LinearRows:
        """Rows over inputs only (a polytope on top of the box)."""
        return self.rows.select(~self.rows.H.any(axis=1))

    @property
    def output_rows(self) -> LinearRows:
        """Rows over outputs only: A y <= b with A = `.H`, b = `.d`."""
        return self.rows.select(~self.rows.G.any(axis=1) & self.rows.H.any(axis=1))

    @property
    def mixed_rows(self) -> LinearRows:
        return self.rows.select(self.rows.G.any(axis=1) & self.rows.H.any(axis=1))

    @property
    def A(self) -> np.ndarray:
        return self.output_rows.H

    @property
    def b(self) -> np.ndarray:
        return self.output_rows.d

    def contains_input(self, x: np.ndarray) -> bool:
        """x in the box and satisfying the input-only rows (exact float64 comparisons, no tolerance)."""
        x = np.asarray(x, dtype=np.float64)
        if not (np.all(x >= self.lo) and np.all(x <= self.hi)):
            return False
        rows = self.input_rows
        s = rows.d - rows.G @ x
        return bool(np.all(np.where(rows.strict, s > 0, s >= 0)))

    def margin(self, x: np.ndarray, y: np.ndarray) -> np.ndarray | float:
        """min over rows of d - G x - H y (+inf without rows); batched like x and y."""
        s = self.rows.slack(x, y)
        return np.min(s, axis=-1, initial=np.inf)

    def satisfied(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Every row holds at (x, y), strict rows strictly (no tolerance)."""
        s = self.rows.slack(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        return bool(np.all(np.where(self.rows.strict, s > 0, s >= 0)))


@dataclass(frozen=True, eq=False)
class Region:
    """Disjuncts sharing one input set (box + input rows): the search splits each region once and
    closes a piece when every clause is infeasible on it."""

    lo: np.ndarray
    hi: np.ndarray
    clauses: tuple[Disjunct, ...]

    @property
    def dim(self) -> int:
        return int(self.lo.size)


@dataclass(frozen=True, eq=False)
class Spec:
    """The unsafe set of a VNNLIB property over `num_inputs` inputs and `num_outputs` outputs."""

    num_inputs: int
    num_outputs: int
    disjuncts: tuple[Disjunct, ...]
    source: str = "<string>"
    notes: tuple[str, ...] = field(default=())

    def check_model(self, net) -> "Spec":
        """Refuse a model whose input/output sizes differ from the declared variables."""
        for what, declared, actual, var in (("inputs", self.num_inputs, net.input_dim, "X"),
                                            ("outputs", self.num_outputs, net.output_dim, "Y")):
            if declared != actual:
                raise BadInput(
                    f"{self.source} declares {declared} {what} ({var}_0..{var}_{declared - 1}) but the model has "
                    f"{actual} {what} (shape {list(net.input_shape if var == 'X' else net.output_shape)})")
        return self

    @property
    def is_empty(self) -> bool:
        """No disjunct survived normalisation: the unsafe set is empty (the property holds)."""
        return not self.disjuncts

    def regions(self) -> list[Region]:
        """Disjuncts grouped by identical input sets (ACAS Xu property 6: 2 regions x 4 clauses)."""
        groups: dict[bytes, list[Disjunct]] = {}
        for d in self.disjuncts:
            key = d.lo.tobytes() + d.hi.tobytes() + d.input_rows.key()
            groups.setdefault(key, []).append(d)
        return [Region(g[0].lo, g[0].hi, tuple(g)) for g in groups.values()]

    def hull(self) -> tuple[np.ndarray, np.ndarray]:
        """The smallest box containing every disjunct's box."""
        lo = np.min([d.lo for d in self.disjuncts], axis=0)
        hi = np.max([d.hi for d in self.disjuncts], axis=0)
        return lo, hi

    def margin(self, x: np.ndarray, y: np.ndarray) -> float:
        """Unsafe margin at one point: max over disjuncts containing x of their margin (-inf if none)."""
        vals = [float(d.margin(x, y)) for d in self.disjuncts if d.contains_input(x)]
        return max(vals, default=-np.inf)

    def describe(self) -> dict:
        return {"source": self.source, "inputs": self.num_inputs, "outputs": self.num_outputs,
                "disjuncts": len(self.disjuncts), "regions": len(self.regions()),
                "rows": int(sum(d.rows.count for d in self.disjuncts))}


__all__ = ["Disjunct", "LinearRows", "Region", "Spec"]
