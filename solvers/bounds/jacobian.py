"""Bounds of Jacobian-vector products of a ReLU network over all admissible ReLU slopes.

A product with the Jacobian J = M_k D_{k-1} M_{k-1} ... D_0 M_0 is a *switched linear pass*:

    t_0 = M_0 u,   s_j = D_j t_j,   t_{j+1} = M_{j+1} s_j,   out = t_k,

with D_j diagonal: slope 1 on active, 0 on inactive and anything in [0, 1] on unstable neurons
(covering both choices of ReLU'(0) at ties). The forward (tangent) pass J u uses M_j = W_j; the
backward (adjoint) pass J^T c uses the transposed maps in reverse order. Interval arithmetic with
u in a box gives sound bounds on every t_j and s_j (the big-M constants of the switches).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .interval import affine_interval
from .types import ACTIVE, UNSTABLE


@dataclass
class SwitchedPassBounds:
    """`t_lo[j]`, `t_hi[j]`: signal entering switch layer j; `s_lo[j]`, `s_hi[j]`: after it;
    `out_lo`, `out_hi`: the result of the last map."""

    t_lo: list[np.ndarray]
    t_hi: list[np.ndarray]
    s_lo: list[np.ndarray]
    s_hi: list[np.ndarray]
    out_lo: np.ndarray
    out_hi: np.ndarray


def slope_interval(t_lo: np.ndarray, t_hi: np.ndarray, phase: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of s * t for s = 1 (active), 0 (inactive), s in [0, 1] (unstable)."""
    s_lo = np.where(phase == ACTIVE, t_lo, np.where(phase == UNSTABLE, np.minimum(t_lo, 0.0), 0.0))
    s_hi = np.where(phase == ACTIVE, t_hi, np.where(phase == UNSTABLE, np.maximum(t_hi, 0.0), 0.0))
    return s_lo, s_hi


def switched_pass_bounds(maps: list[np.ndarray], phases: list[np.ndarray], u_lo: np.ndarray, u_hi: np.ndarray) -> SwitchedPassBounds:
    """Interval bounds of the pass maps[k] D_{k-1} ... D_0 maps[0] u for u in [u_lo, u_hi]."""
    if len(maps) != len(phases) + 1:
        raise ValueError("a switched pass needs one more map than switch layers")
    t_lo, t_hi, s_lo, s_hi = [], [], [], []
    lo, hi = affine_interval(maps[0], 0.0, np.asarray(u_lo, dtype=np.float64), np.asarray(u_hi, dtype=np.float64))
    for j, ph in enumerate(phases):
        t_lo.append(lo)
        t_hi.append(hi)
        sl, sh = slope_interval(lo, hi, ph)
        s_lo.append(sl)
        s_hi.append(sh)
        lo, hi = affine_interval(maps[j + 1], 0.0, sl, sh)
    return SwitchedPassBounds(t_lo, t_hi, s_lo, s_hi, lo, hi)


def jacobian_maps(weights: list[np.ndarray], phases: list[np.ndarray], mode: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(maps, phases) of the forward pass J u ("forward") or the adjoint pass J^T c ("backward")."""
    if mode == "forward":
        return list(weights), list(phases)
    if mode == "backward":
        return [w.T for w in reversed(weights)], list(reversed(phases))
    raise ValueError(f"unknown pass direction {mode!r}")
