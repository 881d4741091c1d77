"""A privacy guarantee as a value: what a mechanism promises, composable by `accounting`.

Inference Privacy (Tian & Tandon, Def. 2): M is {(eps, delta), alpha} IP in metric d when
Pr[M(a) in S] <= e^eps Pr[M(b) in S] + delta for all S and all inputs with d(a, b) <= alpha.
With alpha = inf this is (eps, delta)-LDP; with metric "records" and alpha = 1 it is ordinary
(eps, delta)-DP of a training algorithm under replace-one adjacency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import BadInput
from .params import METRICS, as_number
from .provenance import LipschitzSource


@dataclass(frozen=True)
class Guarantee:
    """{(epsilon, delta), alpha} privacy in `metric`, with its provenance.

    - `pac`: the privacy loss is <= epsilon with probability >= 1 - delta (PAC privacy, Zheng &
      Hu Def. 10); it implies (epsilon, delta) and is what `compose_pac` needs. Pure guarantees
      (delta = 0) are PAC.
    - `empirical`: some sensitivity behind it was estimated by sampling (e.g. the sensitivity
      sampler), so this is NOT a worst-case guarantee.
    - `mechanism`: what produced it (mechanism and calibration, or the accounting step).
    - `lipschitz`: the Lipschitz bound the noise was calibrated from, when there was one.
    - `parts`: the guarantees an accounting step combined.
    - `claims`: what the user asserted and certify did not prove (a typed Lipschitz constant or
      sensitivity, a trusted global bound): the guarantee holds only if they are true.

    `basis` says in one word what it rests on: "worst-case" (proven by certify: certified
    constants, closed-form sensitivities), "user" (conditional on `claims`), "empirical".
    """

    epsilon: float
    delta: float = 0.0
    alpha: float = math.inf
    metric: str = "l2"
    pac: bool = False
    empirical: bool = False
    mechanism: str = ""
    lipschitz: LipschitzSource | None = None
    parts: tuple["Guarantee", ...] = field(default=(), repr=False)
    claims: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        eps = as_number(self.epsilon, "guarantee epsilon")
        delta = as_number(self.delta, "guarantee delta")
        alpha = as_number(self.alpha, "guarantee radius alpha")
        if not (eps >= 0 and math.isfinite(eps)):
            raise BadInput(f"guarantee epsilon must be a non-negative finite number, got {self.epsilon}")
        if not 0 <= delta <= 1:
            raise BadInput(f"guarantee delta must be in [0, 1], got {self.delta}")
        if not alpha > 0:
            raise BadInput(f"guarantee radius alpha must be positive, got {self.alpha}")
        if self.metric not in METRICS:
            raise BadInput(f"unknown guarantee metric {self.metric!r}; choose one of {', '.join(METRICS)}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "claims", tuple(dict.fromkeys(str(c) for c in self.claims)))
        if delta == 0:
            object.__setattr__(self, "pac", True)

    @property
    def basis(self) -> str:
        """"empirical" (a sampled sensitivity), "user" (conditional on `claims`) or "worst-case"."""
        return "empirical" if self.empirical else "user" if self.claims else "worst-case"

    @property
    def pure(self) -> bool:
        return self.delta == 0

    @property
    def vacuous(self) -> bool:
        """delta = 1 promises nothing."""
        return self.delta >= 1

    def with_(self, **changes: Any) -> "Guarantee":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "alpha": self.alpha,
            "metric": self.metric,
            "pac": self.pac,
            "basis": self.basis,
            "mechanism": self.mechanism,
        }
        if self.claims:
            out["conditional_on"] = list(self.claims)
        if self.vacuous:
            out["vacuous"] = True
        if self.lipschitz is not None:
            out["lipschitz"] = self.lipschitz.to_dict()
        if self.parts:
            out["parts"] = [p.to_dict() for p in self.parts]
        return out

    def describe(self) -> str:
        radius = "any two inputs (LDP)" if math.isinf(self.alpha) else f"alpha = {self.alpha:.6g} in {self.metric}"
        text = f"(epsilon = {self.epsilon:.6g}, delta = {self.delta:.3g}) for {radius}"
        if self.metric == "records":
            text = f"(epsilon = {self.epsilon:.6g}, delta = {self.delta:.3g})-DP for datasets differing in {self.alpha:g} record(s)"
        if self.empirical:
            text += " [EMPIRICAL sensitivity: not a worst-case guarantee]"
        if self.claims:
            text += " [CONDITIONAL on claims certify did not verify: " + "; ".join(self.claims) + "]"
        if self.vacuous:
            text += " [vacuous: delta = 1]"
        return text
