"""Branch-and-bound with sound bounds at every node.

- `engine.branch_and_bound`: the generic best-first search (any node bound, any branching);
  its upper bound is a proof whenever it stops.
- `milp.prove_bound`: re-proves a MILP solver's dual bound with safe LP bounds (no trust in the
  solver's tolerances), used by the sound-solve policy (`solvers.milp.sound`).
"""

from .engine import BabInterrupted, BabProblem, BabProgress, BabResult, NodeBound, branch_and_bound
from .milp import ProofResult, prove_bound

__all__ = ["BabInterrupted", "BabProblem", "BabProgress", "BabResult", "NodeBound", "ProofResult", "branch_and_bound",
           "prove_bound"]
