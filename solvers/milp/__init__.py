"""Solver-neutral MILP models, network encodings and back-ends (HiGHS, Gurobi, CBC).

- `model`: `MilpModel` (sparse rows, bounds, integrality, objective), `MilpBuilder`,
  `MilpResult`, `SolveOptions`; `expr.Expr` vectors of affine expressions.
- `relu.encode_relu_network`: the forward pass of a ReLU network over a box (big-M or triangle);
  reusable by any network MILP (Lipschitz, robustness, VNNLIB).
- `jacobian`, `norm_objective`, `lipschitz.build_lipschitz_milp`: the local Lipschitz MILP.
- `highs`, `gurobi`, `cbc`: one small class per back-end; `backends.choose_backend` / `solve`.
"""

from .backends import BACKEND_CHOICES, BackendUnavailable, ModelTooLarge, choose_backend, get_backend, solve
from ..lp import Expr, ForwardEncoding, MilpBuilder, MilpModel, encode_relu_network
from .result import MilpResult, SolveOptions

__all__ = [
    "BACKEND_CHOICES",
    "BackendUnavailable",
    "Expr",
    "ForwardEncoding",
    "MilpBuilder",
    "MilpModel",
    "MilpResult",
    "ModelTooLarge",
    "SolveOptions",
    "choose_backend",
    "encode_relu_network",
    "get_backend",
    "solve",
]
