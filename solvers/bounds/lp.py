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

from .rounding import round_up
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
    from ..milp.highs import HighsBackend
    from ..milp.model import MilpBuilder
    from ..milp.relu import encode_relu_network

    l_j, u_j = pre_lo[j].copy(), pre_hi[j].copy()
    unstable = np.flatnonzero(phases(l_j, u_j) == UNSTABLE)
    if unstable.size == 0 or j == 0:
        return l_j, u_j, 0
    builder = MilpBuilder()
    enc = encode_relu_network(builder, blocks, lo, hi, pre_lo, pre_hi, relaxation="triangle", layers=j)
    model = builder.build()
    rows = enc.post[j - 1].affine(blocks[j].weight, blocks[j].bias)
    coef = rows.widened(model.num_vars).toarray()
    h = HighsBackend().highs_instance(model)
    ncol = model.num_vars
    cols = np.arange(ncol, dtype=np.int32)
    lps = 0
    for i in unstable:
        for sign in (1.0, -1.0):
            if sign < 0 and u_j[i] <= 0:
                break  # already proven inactive
            if deadline is not None and time.perf_counter() > deadline:
                return l_j, u_j, lps
            c = sign * coef[i]
            h.changeColsCost(ncol, cols, c)
            h.run()
            lps += 1
            if h.getModelStatus().name != "kOptimal":
                continue
            y = np.asarray(h.getSolution().row_dual, dtype=np.float64)
            best = min(
                dual_bound(model.A, model.row_lo, model.row_hi, model.col_lo, model.col_hi, c, s * y) for s in (1.0, -1.0)
            )
            best = round_up(best + sign * rows.const[i], abs(rows.const[i]) + abs(best), 2)
            if sign > 0:
                u_j[i] = min(u_j[i], best)
            else:
                l_j[i] = max(l_j[i], -best)
    return l_j, u_j, lps
