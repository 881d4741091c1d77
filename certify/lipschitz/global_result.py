"""Result types of the global Lipschitz bounds and the sound norm conversion of l2 bounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solvers.psd import mul_up, sqrt_up


@dataclass
class GlobalLipschitzResult:
    """A certified upper bound on the Lipschitz constant ||f(x) - f(y)||_q <= upper ||x - y||_p.

    `validated` means the bound was proven in float64 outside any solver (Cholesky proof of the
    SDP multipliers, proven norms), or, for "mip", is the MILP solver's dual bound widened for its
    tolerances (the local-Lipschitz certificate's upper bound). `lower` is only set by "mip" (a
    witness-backed lower bound over the domain). `status` is "certified", "fallback" (part of an
    SDP bound came from a norm product because its certificate could not be proven) or the MILP
    status. `scope` is "global" (holds for all inputs) or "domain" ("mip": only on its box).
    """

    upper: float
    method: str
    seconds: float
    input_norm: str
    output_norm: str
    validated: bool
    lower: float | None = None
    status: str = "certified"
    details: dict[str, Any] = field(default_factory=dict)
    scope: str = "global"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "upper": self.upper,
            "method": self.method,
            "seconds": self.seconds,
            "input_norm": self.input_norm,
            "output_norm": self.output_norm,
            "validated": self.validated,
            "status": self.status,
            "scope": self.scope,
        }
        if self.lower is not None:
            out["lower"] = self.lower
        out["details"] = self.details
        return out


@dataclass
class GlobalLipschitzComparison:
    """method="all": one result per applicable method, the best (smallest) global upper bound,
    the best bound over the domain when one was given, and the skipped methods with the reason."""

    results: list[GlobalLipschitzResult]
    skipped: dict[str, str]

    @property
    def best(self) -> GlobalLipschitzResult:
        """The smallest bound that holds for every input (a domain-only "mip" value never counts)."""
        return min((r for r in self.results if r.scope == "global"), key=lambda r: r.upper)

    @property
    def best_on_domain(self) -> GlobalLipschitzResult | None:
        """The smallest bound valid on the domain (global bounds hold there too), if one was given."""
        if not any(r.scope == "domain" for r in self.results):
            return None
        return min(self.results, key=lambda r: r.upper)

    @property
    def upper(self) -> float:
        return self.best.upper

    def to_dict(self) -> dict[str, Any]:
        out = {
            "method": "all",
            "results": [r.to_dict() for r in self.results],
            "best": self.best.to_dict(),
            "skipped": self.skipped,
        }
        on_domain = self.best_on_domain
        if on_domain is not None:
            out["best_on_domain"] = on_domain.to_dict()
        return out


def norm_conversion(p: str, q: str, n_in: int, n_out: int) -> tuple[float, str]:
    """(c, explanation) with Lip_{p->q} <= c * Lip_{2->2} (c rounded up)."""
    c, why = 1.0, []
    if p == "linf":
        c = mul_up(c, sqrt_up(n_in))
        why.append(f"||x||_2 <= sqrt({n_in}) ||x||_inf")
    elif p == "l1":
        why.append("||x||_2 <= ||x||_1")
    if q == "l1":
        c = mul_up(c, sqrt_up(n_out))
        why.append(f"||y||_1 <= sqrt({n_out}) ||y||_2")
    elif q == "linf":
        why.append("||y||_inf <= ||y||_2")
    return c, "; ".join(why) if why else "l2->l2 (no conversion)"
