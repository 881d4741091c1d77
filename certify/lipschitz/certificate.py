"""The value returned by `certify.local_lipschitz`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class LipschitzCertificate:
    """A certified interval [lower, upper] for the local Lipschitz constant.

    `upper` is the MILP solver's dual bound, widened for solver tolerances (or a cheaper sound
    bound when smaller); `lower` is the norm of the exact Jacobian at `witness`, a point of the
    domain where the network is certified differentiable, recomputed in float64. `exact` is true
    only when the interval closed (status "optimal") for a MILP-exact norm pair. Statuses:
    "optimal", "time_limit", "interrupted", "open_gap" (the solver finished but no replayed
    witness reaches its bound, e.g. its optimum sits on a degenerate activation pattern).
    """

    lower: float
    upper: float
    status: str
    exact: bool
    backend: str
    seconds: float
    witness: np.ndarray | None
    input_norm: str
    output_norm: str | None
    domain_lo: np.ndarray
    domain_hi: np.ndarray
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
    witness_direction: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float:
        return float(self.upper - self.lower)

    def to_dict(self) -> dict:
        out = asdict(self)
        for key, val in out.items():
            if isinstance(val, np.ndarray):
                out[key] = val.tolist()
        out["gap"] = self.gap
        return out

    def __str__(self) -> str:
        pair = f"{self.input_norm}->{self.output_norm}" if self.target is None else f"{self.input_norm} (target)"
        return (f"Lipschitz {pair} in [{self.lower:.6g}, {self.upper:.6g}] ({self.status}, {self.backend}, "
                f"{self.seconds:.2f}s)")
