"""The linear-model layer below `solvers.bounds` and `solvers.milp`.

- `expr.Expr`: vectors of affine expressions with rounding-error bounds;
- `model`: `MilpModel` (sparse rows, bounds, integrality, objective) and `MilpBuilder`, whose
  rows are widened so that a built model is an exact-arithmetic relaxation of its expressions;
- `relu.encode_relu_network`: the forward pass of a ReLU network over a box (big-M or triangle),
  reused by every network model (bound tightening, Lipschitz, robustness, verification);
- `safe.SafeLp`: incremental, warm-started LP relaxations in HiGHS with weak-duality bounds
  recomputed in float64 (sound whatever the solver's tolerances);
- `highs`: the HiGHS plumbing shared with the HiGHS MILP back-end.
"""

from .expr import Expr
from .model import INF, MilpBuilder, MilpModel, QuadraticConstraint, Sense
from .relu import ForwardEncoding, encode_relu_network
from .safe import LpOutcome, SafeLp, box_bound, dual_bound

__all__ = ["Expr", "ForwardEncoding", "INF", "LpOutcome", "MilpBuilder", "MilpModel", "QuadraticConstraint", "SafeLp",
           "Sense", "box_bound", "dual_bound", "encode_relu_network"]
