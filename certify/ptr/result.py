"""`PtrResult`: one Propose-Test-Release query as a certificate of the stability radius R*.

The certified quantity is R* = sup{r >= R : L(f, box(x, r)) <= D_p} on the grid: `lower` is the
largest accepted radius (None when even box(x, R) is not accepted), `upper` the smallest radius
proven to violate (None when not proven: the search stopped at the cap, or a step was
undecided). Status: "optimal" when R* is bracketed by two adjacent grid radii, both proven;
"certified" when the answer is final but one-sided (R* >= the largest radius searched, or
R* < R proven); otherwise the status of the undecided step (time_limit, interrupted, open_gap),
in which case `decided` is False and the privacy argument does not cover the query: such a
query is refused before any noise is drawn (`refusal` says why; `guarantee`, `output` and
`phi_noisy` are None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..certificate import Certificate, Status, to_jsonable
from ..privacy.guarantee import Guarantee
from .decide import ACCEPT, REJECT, UNDECIDED
from .grid import TestGrid
from .search import SearchResult, Step


@dataclass
class PtrResult(Certificate):
    """What `certify.ptr` returns (see the module doc; `to_dict()` is the CLI's --json)."""

    KIND: ClassVar[str] = "ptr"

    released: bool = False
    output: np.ndarray | None = None
    phi: float = 0.0
    phi_noisy: float | None = 0.0
    threshold: float = 0.0
    noise_scale: float = 0.0
    r_star: float | None = None
    guarantee: Guarantee | None = None
    steps: list[Step] = field(default_factory=list)
    proposal: float = 0.0
    radius: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0
    decided: bool = True
    sampler: str = "secure"
    test: dict = field(default_factory=dict)
    point: np.ndarray | None = None
    refusal: str | None = None

    def _extra_dict(self) -> dict[str, Any]:
        g = None if self.guarantee is None else {**self.guarantee.to_dict(), "radius": self.guarantee.alpha}
        return {"guarantee": to_jsonable(g), "grid_index": self.test.get("index")}

    def __str__(self) -> str:
        if self.refusal is not None:
            return f"PTR refused, no guarantee: {self.refusal}"
        what = "released" if self.released else "not released (bottom)"
        return (f"PTR {what}: phi = {self.phi:.6g}, noisy {self.phi_noisy:.6g} vs threshold {self.threshold:.6g}; "
                f"noise scale {self.noise_scale:.6g}; {self.guarantee.describe() if self.guarantee else ''}")


def radius_interval(grid: TestGrid, found: SearchResult) -> tuple[float | None, float | None, str]:
    """(lower, upper, status) of R* from the bisection (see the module doc)."""
    k = found.index
    lower = grid.radius_at(k) if k >= 0 else None
    above: Step | None = found.step_at(k + 1) if k < grid.max_index else None
    if not found.decided:
        bad = next(s for s in found.steps if s.decision == UNDECIDED)
        upper = above.radius if above is not None and above.decision == REJECT else None
        return lower, upper, bad.status
    if k == grid.max_index:
        return lower, None, Status.CERTIFIED
    upper = above.radius if above is not None and above.decision == REJECT else None
    if lower is None:
        return None, upper, Status.CERTIFIED
    return lower, upper, Status.OPTIMAL if upper is not None else Status.CERTIFIED


__all__ = ["ACCEPT", "PtrResult", "radius_interval"]
