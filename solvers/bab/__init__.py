"""Branch-and-bound with sound bounds at every node.

- `engine.branch_and_bound`: the one search loop (any node bound, any branching, batches, budgets,
  early stops); its upper bound is a proof whenever it stops.
- `frontier`: the expansion orders (`BestFirst` by bound, `DepthFirst` with a best-first share).
- `milp.prove_bound`: re-proves a MILP solver's dual bound with safe LP bounds (no trust in the
  solver's tolerances), used by the sound-solve policy (`solvers.milp.sound`).
"""

from .engine import BabInterrupted, BabProblem, BabProgress, BabResult, NodeBound, branch_and_bound
from .frontier import BestFirst, DepthFirst, Frontier
from .milp import ProofResult, prove_bound

__all__ = ["BabInterrupted", "BabProblem", "BabProgress", "BabResult", "BestFirst", "DepthFirst", "Frontier",
           "NodeBound", "ProofResult", "branch_and_bound", "prove_bound"]
