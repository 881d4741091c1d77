"""Bounds shared by the PTR searches of many queries on one network (`SharedBounds`).

Both kinds of fact a search proves are about the network, not about the query, so later queries
may reuse them:

- a proven upper bound u of the constant over a box B holds for every box inside B;
- a replayed witness (a point w where the exact Jacobian norm is v) gives L(box) >= v for every box
  containing w.

With a `domain`, the widest boxes of different queries are often the same box (the whole domain
once the radius exceeds it), so a stream of queries with one proposal pays for that step once.
Reuse never changes a decided step (each decision is the exact answer either way); it only
decides steps sooner, so fewer stay undecided within their time limits. Use one instance per
(network, input norm, output norm); it is not thread-safe.
"""

from __future__ import annotations

import math

import numpy as np

from models.ir import Network

from ..errors import BadInput


class SharedBounds:
    """Proven box upper bounds and replayed witnesses of one network and norm pair."""

    def __init__(self, net: Network, input_norm: str = "linf", output_norm: str = "l1") -> None:
        self.net, self.p, self.q = net, input_norm, output_norm
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []
        self._up: list[float] = []
        self._pts: list[np.ndarray] = []
        self._vals: list[float] = []
        self._boxes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._witnesses: tuple[np.ndarray, np.ndarray] | None = None

    def check(self, net: Network, input_norm: str, output_norm: str) -> None:
        """Refuse to mix networks or norms (a bound of one question says nothing about another)."""
        if (net is not self.net and net.fingerprint() != self.net.fingerprint()) or \
                (input_norm, output_norm) != (self.p, self.q):
            raise BadInput("shared bounds belong to another network or norm pair; use one SharedBounds per "
                           "(network, input norm, output norm)")

    def add_upper(self, lo: np.ndarray, hi: np.ndarray, value: float) -> None:
        if math.isfinite(value):
            self._lo.append(np.array(lo, dtype=np.float64))
            self._hi.append(np.array(hi, dtype=np.float64))
            self._up.append(float(value))
            self._boxes = None

    def add_witness(self, x: np.ndarray, value: float) -> None:
        self._pts.append(np.asarray(x, dtype=np.float64).reshape(-1))
        self._vals.append(float(value))
        self._witnesses = None

    def upper(self, lo: np.ndarray, hi: np.ndarray) -> float:
        """The smallest stored upper bound of a box containing [lo, hi] (inf when none)."""
        if not self._up:
            return math.inf
        if self._boxes is None:
            self._boxes = (np.vstack(self._lo), np.vstack(self._hi), np.array(self._up))
        los, his, ups = self._boxes
        holds = np.all((los <= lo) & (his >= hi), axis=1)
        return float(np.min(ups[holds])) if holds.any() else math.inf

    def lower(self, lo: np.ndarray, hi: np.ndarray) -> tuple[float | None, np.ndarray | None]:
        """The best stored witness inside [lo, hi] (exact float comparisons) and its point."""
        if not self._vals:
            return None, None
        if self._witnesses is None:
            self._witnesses = (np.vstack(self._pts), np.array(self._vals))
        pts, vals = self._witnesses
        inside = np.flatnonzero(np.all((pts >= lo) & (pts <= hi), axis=1))
        if not inside.size:
            return None, None
        best = inside[np.argmax(vals[inside])]
        return float(vals[best]), pts[best]

    def __len__(self) -> int:
        return len(self._up) + len(self._vals)


__all__ = ["SharedBounds"]
