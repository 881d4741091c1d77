"""The LP finisher of the ReLU-split search: a clause's margin over a node by one safe LP.

On a node whose every ReLU phase is fixed or stable the network is affine on the node's set, so
the clause's maximum margin  max_x min_r (d_r - G_r x - H_r f(x))  is an LP: the one ReLU
encoding (`solvers.lp.encode_relu_network`, triangle rows for neurons still unstable) over the
node's bounds, the split constraints as rows (z >= 0 active, z <= 0 inactive), and
t <= d_r - G_r x - H_r y. `SafeLp` returns a weak-duality bound recomputed in float64 (sound
whatever HiGHS's tolerances) and the solver's point, a counterexample candidate to replay.
"""

from __future__ import annotations

import numpy as np

from models.ir import Affine
from solvers.lp import Expr, MilpBuilder, SafeLp, encode_relu_network

from .spec import LinearRows

# |t| is bounded by this in the LP (a margin below -T everywhere is reported as -T: still < 0)
T_BOUND = 1e6


def clause_lp_bound(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
                    pre_hi: list[np.ndarray], split: list[np.ndarray], rows: LinearRows
                    ) -> tuple[float, np.ndarray | None]:
    """A sound upper bound on the clause's margin over the box restricted to the split phases
    (bounds `pre_lo`/`pre_hi` valid there, split neurons clamped), and the LP's x (or None)."""
    if any(np.any(l > u) for l, u in zip(pre_lo, pre_hi)):
        return -np.inf, None
    b = MilpBuilder()
    enc = encode_relu_network(b, blocks, lo, hi, pre_lo, pre_hi, relaxation="triangle")
    for t, s in enumerate(split):
        on, off = np.flatnonzero(s > 0), np.flatnonzero(s < 0)
        if on.size:
            b.constrain(enc.pre[t][on], lo=0.0)
        if off.size:
            b.constrain(enc.pre[t][off], hi=0.0)
    tv = b.add_vars(1, -T_BOUND, T_BOUND)
    k = rows.count
    lhs = b.var_expr(enc.x).affine(rows.G) + enc.output.affine(rows.H) + Expr.variables(np.repeat(tv, k), b.num_vars)
    b.constrain(lhs, hi=rows.d)
    b.set_objective(b.var_expr(tv))
    model = b.build()
    out = SafeLp(model).maximize(model.obj, model.obj_offset)
    if out.infeasible:
        return -T_BOUND, None
    x = None if out.x is None else np.clip(out.x[enc.x], lo, hi)
    return float(np.nextafter(out.bound + model.obj_err, np.inf)), x


__all__ = ["clause_lp_bound"]
