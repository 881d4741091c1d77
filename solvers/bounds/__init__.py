"""Sound pre-activation and gradient bounds of ReLU networks over input boxes.

- `network_bounds(net, lo, hi, method)`: progressive interval -> symbolic -> LP pipeline.
- `interval.affine_interval`, `symbolic.symbolic_layer_bounds`, `lp.lp_tighten_layer`: the steps.
- `jacobian.switched_pass_bounds`: bounds of Jacobian-vector products (J u or J^T c) given the phases;
  `jacobian.clarke_norm_bound`: bounds of ||J||_{p->q} over a slope box, tightened by
  `jacobian_linear.linear_pass_upper` (CROWN-style chords of the switched passes).

All results are float64 and widened for rounding (`rounding`), so they hold for every point of
the box; they size big-M constants of MILPs.
"""

from .pipeline import METHODS, network_bounds, unstable_after_each_step
from .types import ACTIVE, INACTIVE, UNSTABLE, NetworkBounds, StepStats, phases, relu_blocks

__all__ = [
    "ACTIVE",
    "INACTIVE",
    "METHODS",
    "NetworkBounds",
    "StepStats",
    "UNSTABLE",
    "network_bounds",
    "phases",
    "relu_blocks",
    "unstable_after_each_step",
]
