"""LP tightening of unstable neurons (triangle relaxation of the earlier layers) with safe bounds.

For each unstable neuron of layer j we maximise and minimise z_j over the LP relaxation of layers
< j (MIPVerify's "LP" step). The LP optimum returned by the solver is not used as the bound: the
bound is recomputed from the solver's row duals y by weak duality,

    max c @ v  <=  sum_i max(y_i row_lo_i, y_i row_hi_i) + sum_k max(r_k col_lo_k, r_k col_hi_k),
    r = c - A^T y,

which holds for *any* y (Neumaier & Shcherbina 2004), evaluated in float64 and rounded up. So the
tightened bounds are sound whatever the LP solver's tolerances were.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from models.ir import Affine

from .rounding import gamma, round_up
from .types import UNSTABLE, phases


def dual_bound(
    A: sp.csr_matrix,
    row_lo: np.ndarray,
    row_hi: np.ndarray,
    col_lo: np.ndarray,
    col_hi: np.ndarray,
    c: np.ndarray,
    y: np.ndarray,
) -> float:
    """Sound upper bound on max c @ v over {row_lo <= A v <= row_hi, col_lo <= v <= col_hi}."""
    y = np.array(y, dtype=np.float64)
    y[(y > 0) & ~np.isfinite(row_hi)] = 0.0
    y[(y < 0) & ~np.isfinite(row_lo)] = 0.0
    r = c - A.T @ y
    row_b = np.where(y > 0, row_hi, np.where(y < 0, row_lo, 0.0))
    col_b = np.where(r > 0, col_hi, np.where(r < 0, col_lo, 0.0))
    if not (np.all(np.isfinite(row_b)) and np.all(np.isfinite(col_b))):
        return float("inf")
    value = float(y @ row_b + r @ col_b)
    col_mag = np.maximum(np.abs(np.where(np.isfinite(col_lo), col_lo, 0.0)), np.abs(np.where(np.isfinite(col_hi), col_hi, 0.0)))
    mag = float(np.abs(y) @ np.abs(row_b) + (np.abs(c) + abs(A).T @ np.abs(y)) @ col_mag)
    return round_up(value, mag, A.shape[0] + A.shape[1] + 2)


class SafeLp:
    """The LP relaxation of a neutral model (integrality dropped) for repeated maximisations with
    sound results: `upper(coef, const)` is a weak-duality bound on max coef @ v + const."""

    def __init__(self, model) -> None:
        from dataclasses import replace

        from ..milp.highs import HighsBackend, HighsRejected

        self.model = replace(model, integer=np.zeros(model.num_vars, dtype=bool), q_obj=None, q_constraints=(), obj_offset=0.0)
        try:
            self.highs = HighsBackend().highs_instance(self.model)
        except HighsRejected:
            self.highs = None  # every bound is then +inf: nothing is tightened
        self.cols = np.arange(self.model.num_vars, dtype=np.int32)
        self.solves = 0

    def upper(self, coef: np.ndarray, const: float = 0.0) -> float:
        m = self.model
        if self.highs is None:
            return float("inf")
        self.highs.changeColsCost(m.num_vars, self.cols, np.asarray(coef, dtype=np.float64))
        self.highs.changeObjectiveSense(self._max_sense())
        self.highs.run()
        self.solves += 1
        if self.highs.getModelStatus().name != "kOptimal":
            return float("inf")
        y = np.asarray(self.highs.getSolution().row_dual, dtype=np.float64)
        best = min(dual_bound(m.A, m.row_lo, m.row_hi, m.col_lo, m.col_hi, coef, s * y) for s in (1.0, -1.0))
        return round_up(best + const, abs(best) + abs(const), 2)

    def lower(self, coef: np.ndarray, const: float = 0.0) -> float:
        return -self.upper(-np.asarray(coef, dtype=np.float64), -const)

    @staticmethod
    def _max_sense():
        import highspy

        return highspy.ObjSense.kMaximize


def lp_tighten_layer(
    blocks: list[Affine],
    pre_lo: list[np.ndarray],
    pre_hi: list[np.ndarray],
    j: int,
    lo: np.ndarray,
    hi: np.ndarray,
    deadline: float | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Tightened bounds of z_j (layers < j must already have their final bounds).

    Only neurons unstable under the current bounds are optimised (stable ones cannot change
    phase). Returns (lo_j, hi_j, number of LPs solved); stops early at `deadline` (perf_counter).
    """
    from ..milp.model import MilpBuilder
    from ..milp.relu import encode_relu_network

    l_j, u_j = pre_lo[j].copy(), pre_hi[j].copy()
    unstable = np.flatnonzero(phases(l_j, u_j) == UNSTABLE)
    if unstable.size == 0 or j == 0:
        return l_j, u_j, 0
    builder = MilpBuilder()
    enc = encode_relu_network(builder, blocks, lo, hi, pre_lo, pre_hi, relaxation="triangle", layers=j)
    lp = SafeLp(builder.build())
    rows = enc.post[j - 1].affine(blocks[j].weight, blocks[j].bias)
    coef = rows.widened(lp.model.num_vars).toarray()
    # the LP's rows and objective compose weights through stable neurons in float64: its optimum
    # is sound for those rounded expressions, so widen by their rounding (as the symbolic step)
    mag, length = np.maximum(np.abs(lo), np.abs(hi)), 0
    for blk in blocks[: j + 1]:
        mag = np.abs(blk.weight) @ mag + np.abs(blk.bias)
        length += blk.in_dim + 2
    slack = 4.0 * 2.0**j * gamma(length) * mag + 1e-300
    for i in unstable:
        if deadline is not None and time.perf_counter() > deadline:
            break
        u_j[i] = min(u_j[i], lp.upper(coef[i], rows.const[i]) + slack[i])
        if u_j[i] <= 0:
            continue  # proven inactive
        if deadline is not None and time.perf_counter() > deadline:
            break
        l_j[i] = max(l_j[i], lp.lower(coef[i], rows.const[i]) - slack[i])
    return l_j, u_j, lp.solves
