"""Result types of the global Lipschitz bounds and the sound norm conversion of l2 bounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from solvers.rounding import mul_up, sqrt_up

from ..certificate import Certificate, Status


@dataclass
class GlobalLipschitzResult(Certificate):
    """A certified upper bound on the Lipschitz constant ||f(x) - f(y)||_q <= upper ||x - y||_p.

    `certified` means the bound was proven in float64 outside any solver (Cholesky proof of the
    SDP multipliers, proven norms, or for "mip" the proven MILP bound of a local certificate).
    `lower` is only set by "mip" (a witness-backed lower bound over the domain). `status` is
    "certified", "fallback" (part of an SDP bound came from a norm product because its
    certificate could not be proven) or the MILP certificate's status. `box` is None for a global
    bound and the domain box for "mip" (scope "box": the bound holds only there).
    """

    KIND: ClassVar[str] = "global_lipschitz"

    method: str = "naive"
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class GlobalLipschitzComparison(Certificate):
    """method="all": one result per applicable method, the best (smallest) global upper bound,
    the best bound over the domain when one was given, and the skipped methods with the reason.
    Its own interval is the best global bound (and, on the domain, the MILP's lower bound)."""

    KIND: ClassVar[str] = "global_lipschitz_comparison"

    results: list[GlobalLipschitzResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, results: list[GlobalLipschitzResult], skipped: dict[str, str]) -> "GlobalLipschitzComparison":
        best = min((r for r in results if r.box is None), key=lambda r: r.upper)
        status = Status.FALLBACK if best.status == Status.FALLBACK else Status.CERTIFIED
        for stop in (Status.INTERRUPTED, Status.TIME_LIMIT):  # a method cut short: say so
            if any(r.status == stop for r in results):
                status = stop
                break
        return cls(None, best.upper, status, all(r.certified for r in results), None, best.input_norm,
                   best.output_norm, sum(r.seconds for r in results), [], results, skipped)

    @property
    def best(self) -> GlobalLipschitzResult:
        """The smallest bound that holds for every input (a domain-only "mip" value never counts)."""
        return min((r for r in self.results if r.box is None), key=lambda r: r.upper)

    @property
    def best_on_domain(self) -> GlobalLipschitzResult | None:
        """The smallest bound valid on the domain (global bounds hold there too), if one was given."""
        if not any(r.box is not None for r in self.results):
            return None
        return min(self.results, key=lambda r: r.upper)

    def _extra_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": "all", "best": self.best.to_dict()}
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
