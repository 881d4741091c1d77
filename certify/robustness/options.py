"""Choices, defaults and validation of the robustness engines' options (the CLI imports this module,
so it stays light: no solver is imported here)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from models.errors import BadInput
from solvers.choices import NORMS

from ..boundary.vectors import parse_positive

L2_METHODS: tuple[str, ...] = ("auto", "miqp", "equivalence")
DEFAULT_BOUNDS = "lp"
DEFAULT_MIP_GAP = 1e-6
DEFAULT_THREADS = 2
# the attack's share of the time limit, and its cap in seconds (it also stops after its rounds)
ATTACK_SHARE = 0.1
ATTACK_SECONDS = 3.0


@dataclass(frozen=True)
class SearchOptions:
    """Validated options shared by `robustness_radius` and `robustness_hyperrectangle`."""

    exact: bool = True
    backend: str = "auto"
    time_limit: float | None = None
    mip_gap: float = DEFAULT_MIP_GAP
    bounds: str = DEFAULT_BOUNDS
    l2_method: str = "auto"
    threads: int = DEFAULT_THREADS
    seed: int = 0
    attack_seconds: float | None = None

    @classmethod
    def of(cls, exact: Any = True, backend: str = "auto", time_limit: Any = None, mip_gap: Any = None,
           bounds: str = DEFAULT_BOUNDS, l2_method: str = "auto", threads: Any = DEFAULT_THREADS, seed: Any = 0,
           attack_seconds: Any = None) -> "SearchOptions":
        from ..lipschitz.options import LocalOptions

        # the solver options mean the same as for local_lipschitz: one validation
        local = LocalOptions.of(backend=backend, time_limit=time_limit, mip_gap=mip_gap, bounds=bounds,
                                l2_method=l2_method, threads=threads)
        if not isinstance(exact, (bool, int)) or isinstance(exact, int) and exact not in (0, 1):
            raise BadInput(f"exact must be True or False, got {exact!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise BadInput(f"seed must be a non-negative integer, got {seed!r}")
        if attack_seconds is not None:
            attack_seconds = parse_positive(attack_seconds, "attack seconds", allow_zero=True)
        return cls(bool(exact), local.backend, local.time_limit, local.mip_gap, local.bounds, local.l2_method,
                   local.threads, int(seed), attack_seconds)

    def attack_budget(self) -> float:
        """Seconds the attack may use at most."""
        if self.attack_seconds is not None:
            return self.attack_seconds
        if self.time_limit is None:
            return ATTACK_SECONDS
        return min(ATTACK_SECONDS, ATTACK_SHARE * self.time_limit)


def parse_max_radius(value: Any) -> float:
    """`max_radius`: a positive finite number, or None for no limit (returned as inf)."""
    return math.inf if value is None else parse_positive(value, "max radius")


__all__ = ["ATTACK_SECONDS", "DEFAULT_BOUNDS", "DEFAULT_MIP_GAP", "DEFAULT_THREADS", "L2_METHODS", "NORMS",
           "SearchOptions", "parse_max_radius"]
