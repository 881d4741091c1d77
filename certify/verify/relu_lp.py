"""The LP finisher of the ReLU-split search: a clause's margin over a node by one safe LP.

On a node whose every ReLU phase is fixed or stable the network is affine on the node's set, so
the clause's maximum margin  max_x min_r (d_r - G_r x - H_r f(x))  is an LP: the one ReLU
encoding (`solvers.lp.encode_relu_network`, triangle rows for neurons still unstable) over the
node's bounds, the split constraints as rows (z >= 0 active, z <= 0 inactive), and
t <= d_r - G_r x - H_r y. `SafeLp` returns a weak-duality bound recomputed in float64 (sound
whatever HiGHS's tolerances) and the solver's point, a counterexample candidate to replay.

With `cut_rounds` the LP is the big-M encoding's relaxation (the same triangle) tightened by rounds
of each unstable neuron's ideal cuts (`solvers.lp.relu_cuts`) separated at the LP's point: the
cut finisher of nodes that still have unstable neurons (`ReluSplitSearch`).
"""

from __future__ import annotations

import numpy as np

from models.ir import Affine
from solvers.bounds.sparse import csr_t
from solvers.lp import Expr, MilpBuilder, SafeLp, encode_relu_network
from solvers.lp.relu import constrain_phases
from solvers.lp.relu_cuts import solve_with_cuts

from .spec import LinearRows

# |t| is bounded by this in the LP (a margin below -T everywhere is reported as -T: still < 0)
T_BOUND = 1e6


def clause_lp_bound(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
                    pre_hi: list[np.ndarray], split: list[np.ndarray], rows: LinearRows, *, cut_rounds: int = 0,
                    deadline: float | None = None) -> tuple[float, np.ndarray | None]:
    """A sound upper bound on the clause's margin over the box restricted to the split phases
    (bounds `pre_lo`/`pre_hi` valid there, split neurons clamped), and the LP's x (or None).
    `cut_rounds`: up to that many rounds of ideal cuts, stopping once the bound is negative, no cut
    is violated, the rounds left would not bring it to 0 at the last round's pace (from the third
    round), or `deadline` passed; each LP is stopped at `deadline` too (every bound on the way is
    sound: the smallest is returned)."""
    if any(np.any(l > u) for l, u in zip(pre_lo, pre_hi)):
        return -np.inf, None
    b = MilpBuilder()
    # (mostly-zero weights, unrolled convolutions, as the CSR copies the bound engine caches: converting
    # them at every node took two thirds of a CIFAR node's LP)
    weights = [w if (t := csr_t(w.T)) is None else t for w in (blk.weight for blk in blocks)]
    enc = encode_relu_network(b, blocks, lo, hi, pre_lo, pre_hi, relaxation="bigm" if cut_rounds else "triangle",
                              weights=weights)
    constrain_phases(b, enc, split)
    tv = b.add_vars(1, -T_BOUND, T_BOUND)
    k = rows.count
    lhs = b.var_expr(enc.x).affine(rows.G) + enc.output.affine(rows.H) + Expr.variables(np.repeat(tv, k), b.num_vars)
    b.constrain(lhs, hi=rows.d)
    b.set_objective(b.var_expr(tv))
    model = b.build()
    lp = SafeLp(model)  # (integrality relaxed: the big-M encoding's LP is the triangle's)
    vmax = np.maximum(np.abs(model.col_lo), np.abs(model.col_hi))
    best, x = np.inf, None
    for r, out in solve_with_cuts(lp, enc, blocks, lo, hi, pre_lo, pre_hi, vmax, model.obj, model.obj_offset,
                                  cut_rounds, deadline):
        if out.infeasible:
            return -T_BOUND, None
        last, best = best, min(best, float(np.nextafter(out.bound + model.obj_err, np.inf)))
        if out.x is not None:
            x = np.clip(out.x[enc.x], lo, hi)
        if best < 0 or (r >= 2 and best > (last - best) * (cut_rounds - r)):
            break  # (below 0; or at the last round's pace the rounds left would not reach 0: stalled)
    return best, x


__all__ = ["clause_lp_bound"]
