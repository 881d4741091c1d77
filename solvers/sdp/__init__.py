"""Semidefinite-programming Lipschitz bounds (LipSDP, ECLipsE-Fast), validated in float64.

- `chain`: the normalised weight chain the SDPs work on (power-of-two scaling, input reduction).
- `lmi`: the LipSDP matrix inequality and its validation (recompute rho, prove by Cholesky).
- `lipsdp`: LipSDP-Neuron / LipSDP-Layer formulations in cvxpy (SCS default).
- `bounds`: certified l2 bounds of whole chains (splitting into sub-networks, ECLipsE-Fast).
"""

from .bounds import L2Bound, certify_chain, eclipse_fast_multipliers, eclipse_piece, lipsdp_piece
from .chain import WeightChain
from .lmi import Validation, validate

__all__ = ["L2Bound", "Validation", "WeightChain", "certify_chain", "eclipse_fast_multipliers", "eclipse_piece", "lipsdp_piece", "validate"]
