"""The value returned by `certify.local_lipschitz`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..certificate import Certificate


@dataclass
class LipschitzCertificate(Certificate):
    """A certified interval [lower, upper] for the local Lipschitz constant over `box`.

    `upper` is a proven bound: the MILP's dual bound re-proven by a branch-and-bound with safe
    (directed-rounding) LP bounds outside the MILP solver, or a cheaper sound bound when that is
    smaller. `lower` is the norm of the exact Jacobian at `witness`, a point of the box where the
    network is certified differentiable, recomputed in float64. Statuses (`certify.Status`):
    "optimal" (the proven interval closed), "time_limit", "interrupted", "open_gap" (the search
    finished but no replayed witness reaches the proven bound).
    """

    KIND: ClassVar[str] = "local_lipschitz"

    backend: str = "none"
    witness: np.ndarray | None = None
    target: np.ndarray | None = None
    margin: tuple[int, int] | None = None
    method: str = "milp"
    nodes: int = 0
    mip_gap: float | None = None
    time_limit: float | None = None
    bounds: str = "lp"
    pass_bounds: str = "lp"
    formulation: str = "forward"
    unstable: int = 0
    binaries: int = 0
    bound_seconds: float = 0.0
    solver_seconds: float = 0.0
    proof: dict = field(default_factory=dict)
    witness_direction: np.ndarray | None = None
    # auto's race (`certify.lipschitz.race`): {"winner", "parent", "child", "milp_upper", ...}; empty
    # when no race ran
    race: dict = field(default_factory=dict)

    def _extra_dict(self) -> dict:
        return {"gap": self.gap}

    def __str__(self) -> str:
        pair = f"{self.input_norm}->{self.output_norm}" if self.target is None else f"{self.input_norm} (target)"
        return (f"Lipschitz {pair} in [{self.lower:.6g}, {self.upper:.6g}] ({self.status}, {self.backend}, "
                f"{self.seconds:.2f}s)")
