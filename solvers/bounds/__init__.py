"""Sound pre-activation and gradient bounds of ReLU networks over input boxes: the one bound engine.

- `bound_boxes(blocks, lo, hi, options, parents=, fixed=)`: bounds of a batch of boxes (B, n), each
  box's parent bounds intersected and fixed ReLU phases imposed; `network_bounds(net, lo, hi,
  method)` is it for one box. `BoundOptions` chooses the steps (`pipeline`): interval
  (`interval.affine_interval`), symbolic (`symbolic.backsubstitute_upper`, lower slopes CROWN's,
  best of three or optimised: `alpha`), LP (`lp.lp_tighten_layer`). One `Bounds` type
  holds the result (one box or a batch).
- `rows.output_row_bounds`: bounds of linear functions of the output (class margins).
- `jacobian_interval.interval_jacobian`: entrywise bounds of the Clarke Jacobians over slope boxes;
  `slope_patterns`: their 2^k vertex patterns.
- `jacobian.switched_pass_bounds`: bounds of Jacobian-vector products (J u or J^T c) given the phases;
  `jacobian.clarke_norm_bound`: bounds of ||J||_{p->q} over a slope box, tightened by
  `jacobian_linear.linear_pass_upper` (CROWN-style chords of the switched passes).

All results are float64 and widened for rounding (`rounding`) in one place per operation, so they
hold for every point of the box; they size big-M constants of MILPs.
"""

from .options import BoundOptions
from .pipeline import METHODS, bound_boxes, network_bounds, unstable_after_each_step
from .types import ACTIVE, INACTIVE, UNSTABLE, Bounds, StepStats, phases, relu_blocks

__all__ = [
    "ACTIVE",
    "BoundOptions",
    "INACTIVE",
    "METHODS",
    "Bounds",
    "StepStats",
    "UNSTABLE",
    "bound_boxes",
    "network_bounds",
    "phases",
    "relu_blocks",
    "unstable_after_each_step",
]
