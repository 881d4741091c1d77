"""Cutting planes for the big-M ReLU encoding: each neuron's ideal inequalities (Anderson et al.,
"Strong mixed-integer programming formulations for trained neural networks", Math. Prog. 2020).

For a neuron a = relu(z), z = w . h + b, with inputs h in a box [Lb, Ub] and binary d (1: active),
let L_i be the end of [Lb_i, Ub_i] minimising w_i h_i and U_i the one maximising it. For every
subset I of the inputs

    a <= sum_{i in I} w_i (h_i - L_i (1 - d)) + (b + sum_{i not in I} w_i U_i) d

holds on the encoding's feasible points: with d = 0 the encoding forces a = 0 and every term
w_i (h_i - L_i) is >= 0; with d = 1 it forces a = z, and w_i h_i <= w_i U_i for i not in I. These
inequalities (with the big-M rows) describe the convex hull of one neuron over its input box; the
big-M rows are the cases I = all and I = empty with interval bounds. On a ReLU-split node of a
CIFAR net (cifar_wide_kw, oval21) they lower the triangle LP's margin bound by 0.01-0.02, which
closes nodes that branching alone leaves open.

Separation (`neuron_cuts`): at an LP point (h*, a*, d*) the most violated subset takes input i
exactly when w_i (h*_i - L_i (1 - d*)) < w_i U_i d*; the most violated neurons of each layer are
returned. Soundness: the box of layer j's inputs is the input box (j = 0) or [max(l, 0),
max(u, 0)] of layer j - 1's sound pre-activation bounds, valid for every feasible point; the
computed coefficient of d and the right side are each widened by twice the rounding allowance of
their sums, and the composed row's own rounding by `Expr.error`, so every row returned is valid
in exact arithmetic for the encoding's feasible set (the rows are cuts, never the relaxation's
only description: a weak cut costs tightness, not soundness).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import scipy.sparse as sp

from models.ir import Affine

from ..rounding import gamma
from ..runtime import past, time_left
from .expr import Expr
from .relu import ForwardEncoding

# most violated cuts per ReLU layer and separation round, and the violation that counts
CUTS_PER_LAYER = 200
VIOLATION = 1e-6


def neuron_cuts(enc: ForwardEncoding, blocks: list[Affine], lo: np.ndarray, hi: np.ndarray,
                pre_lo: list[np.ndarray], pre_hi: list[np.ndarray], v: np.ndarray, vmax: np.ndarray,
                per_layer: int = CUTS_PER_LAYER, tol: float = VIOLATION) -> tuple[sp.csr_matrix, np.ndarray] | None:
    """Rows R, right sides r (R v <= r) of the ideal cuts most violated at the point v (the LP's
    solution, every variable of the model), for the unstable neurons of a big-M encoding `enc`
    (built with `pre_lo`, `pre_hi` over the box [lo, hi]); None when none is violated by `tol`.
    `vmax[k]` bounds |v_k| over the model (its column bounds), for the rows' rounding allowance."""
    nvars = vmax.size
    rows, rhs = [], []
    for j, delta in enumerate(enc.delta):
        k = np.flatnonzero(delta >= 0)
        if not k.size:
            continue
        if j == 0:
            h, box_lo, box_hi = Expr.variables(enc.x, nvars), lo, hi
        else:
            h, box_lo, box_hi = enc.post[j - 1], np.maximum(pre_lo[j - 1], 0.0), np.maximum(pre_hi[j - 1], 0.0)
        W, bias = blocks[j].weight[k], blocks[j].bias[k]
        hv, dv, av = h.value(v), v[delta[k]], enc.post[j].value(v)[k]
        Lw = np.where(W >= 0, box_lo, box_hi)  # the input minimising w_i h_i
        Uw = np.where(W >= 0, box_hi, box_lo)  # and maximising it
        inside = W * (hv[None, :] - Lw * (1.0 - dv[:, None]))
        outside = W * Uw * dv[:, None]
        take = inside < outside
        violation = av - (np.where(take, inside, outside).sum(axis=1) + bias * dv)
        sel = np.argsort(-violation, kind="stable")[:per_layer]
        sel = sel[violation[sel] > tol]
        if not sel.size:
            continue
        WI = np.where(take[sel], W[sel], 0.0)
        low = WI * Lw[sel]
        coef_d = bias[sel] + low.sum(axis=1) + np.where(take[sel], 0.0, W[sel] * Uw[sel]).sum(axis=1)
        right = -low.sum(axis=1)
        n = W.shape[1] + 2
        # |computed - exact| of coef_d and of right (sums of n products); d in [0, 1] carries the
        # former into the right side
        err_d = 2.0 * gamma(n) * (np.abs(bias[sel]) + (np.abs(W[sel]) * np.maximum(np.abs(Lw[sel]), np.abs(Uw[sel]))).sum(axis=1))
        err_r = 2.0 * gamma(n) * np.abs(low).sum(axis=1)
        # a - coef_d d - WI h: the d terms as one exact expression (a variable per row), so the
        # composed row costs two sums of expressions (the sparse algebra is most of a small LP's time)
        d_terms = Expr(sp.csr_matrix((-coef_d, delta[k[sel]], np.arange(sel.size + 1)), shape=(sel.size, nvars)),
                       np.zeros(sel.size))
        row = (enc.post[j][k[sel]] + d_terms) + h.affine(-WI)
        err = row.error(vmax)
        total = right - row.const + err + err_d + err_r
        # the four additions above, rounded up
        total = total + 2.0 * gamma(6) * (np.abs(right) + np.abs(row.const) + err + err_d + err_r) + 1e-300
        rows.append(row.widened(nvars))
        rhs.append(np.nextafter(total, np.inf))
    if not rows:
        return None
    return sp.vstack(rows, format="csr"), np.concatenate(rhs)


def solve_with_cuts(lp, enc: ForwardEncoding, blocks: list[Affine], lo: np.ndarray, hi: np.ndarray,
                    pre_lo: list[np.ndarray], pre_hi: list[np.ndarray], vmax: np.ndarray, c: np.ndarray,
                    const: float, rounds: int, deadline: float | None = None,
                    added: list | None = None) -> Iterator[tuple[int, object]]:
    """max c v + const over the `SafeLp` lp (the relaxation of the big-M encoding `enc`) solved up to
    rounds + 1 times, the ideal cuts violated at each optimum (`neuron_cuts`) added before the
    next: yields (round, the solve's outcome) after each solve; the caller stops the rounds by
    leaving the loop. They also end at the last round, when a solve has no point, when no cut is
    violated, or at `deadline` (each solve is stopped there: its bound is still sound). The cut
    rows stay in the LP; their indices are appended to `added` (to delete them afterwards)."""
    for r in range(rounds + 1):
        lp.set_time_limit(time_left(deadline))
        out = lp.maximize(c, const)
        yield r, out
        if r == rounds or out.x is None or past(deadline):
            return
        cuts = neuron_cuts(enc, blocks, lo, hi, pre_lo, pre_hi, out.x, vmax)
        if cuts is None:
            return
        rows = lp.add_rows(cuts[0], np.full(cuts[1].size, -np.inf), cuts[1])
        if added is not None:
            added.append(rows)


__all__ = ["CUTS_PER_LAYER", "neuron_cuts", "solve_with_cuts"]
