"""Proposing D_p from certified local constants on (public or training) data, as the paper does.

Rules, applied to the certified *upper* bounds u_1..u_n of the local constants at radius R:

- `mean+Nstd`: mean(u) + N std(u) (sample std, ddof = 1; N = 3 by default, the paper's choice);
- `qP`: the P-quantile of u (the smallest u_i with at least a fraction P of the points at or
  below it: numpy's "higher" method, so the proposal is one of the certified bounds).

Both are raised by a relative 1e-6 (`TIE_MARGIN`): a proposal exactly equal to a point's constant
cannot be proven either way, and such ties are what quantiles produce.

Each proposal comes with its noise scale D_p R / eps and, once the per-point searches have run,
its expected release rate on the data: the mean over points of Pr[test passes | k(x)], where
k(x) is the grid index the PTR search finds at x for that proposal (`TestGrid.release_probability`).
D_p must not be derived from the private query itself; derive it from data the adversary may
know (the paper assumes the training set).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Sequence

import numpy as np

from ..errors import BadInput
from ..privacy.params import div_up, mul_up, up_fraction

DEFAULT_RULES = ("mean+3std", "q0.95", "q0.99")
#: proposals are raised by this relative margin: a D_p equal to a certified constant is a tie that no
#: finite proof settles (every proven upper bound of that constant lies above it), so PTR's steps at
#: that point would stay undecided
TIE_MARGIN = 1e-6
_MEAN_STD = re.compile(r"^mean\+(\d+(?:\.\d*)?|\.\d+)std$")
_QUANTILE = re.compile(r"^q(0?\.\d+|1(?:\.0*)?)$")


@dataclass(frozen=True)
class Proposal:
    """A proposed D_p, the rule that produced it and what it costs (noise) and buys (release rate)."""

    rule: str
    value: float
    noise_scale: float
    release_rate: float | None = None
    holds_at_radius: float | None = None  # fraction of points whose certified constant at R is <= D_p

    def to_dict(self) -> dict:
        return {"rule": self.rule, "value": self.value, "noise_scale": self.noise_scale,
                "release_rate": self.release_rate, "holds_at_radius": self.holds_at_radius}


def parse_rules(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """"mean+3std,q0.95" (or a list) -> validated rule names; None -> the defaults."""
    if spec is None:
        return DEFAULT_RULES
    items = [r.strip().lower() for r in (spec.split(",") if isinstance(spec, str) else spec)]
    if not items or any(not r for r in items):
        raise BadInput(f"rules: expected a comma-separated list like mean+3std,q0.95, got {spec!r}")
    for r in items:
        if not (_MEAN_STD.match(r) or (_QUANTILE.match(r) and 0 < float(r[1:]) <= 1)):
            raise BadInput(f"unknown proposal rule {r!r}; use mean+Nstd (e.g. mean+3std) or qP with 0 < P <= 1 "
                           "(e.g. q0.95)")
    return tuple(dict.fromkeys(items))


def rule_value(rule: str, uppers: Sequence[float]) -> float:
    """D_p under one rule (rounded up: a proposal is never smaller than its formula)."""
    u = np.asarray(uppers, dtype=np.float64)
    if u.size == 0:
        raise BadInput("no certified constants to propose D_p from (the data has no points)")
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise BadInput("the certified upper bounds must be finite and non-negative to propose D_p")
    m = _MEAN_STD.match(rule)
    if m:
        n = Fraction(m.group(1))
        exact = [Fraction(v) for v in u]
        mean = sum(exact, Fraction(0)) / len(exact)
        var = sum(((v - mean) ** 2 for v in exact), Fraction(0)) / max(len(exact) - 1, 1)
        std = up_fraction(Fraction(math.sqrt(float(var)))) * (1 + 2**-50)  # sqrt of the exact variance, rounded up
        value = up_fraction(mean + n * Fraction(std))
    else:
        value = float(np.quantile(u, float(rule[1:]), method="higher"))
    value = up_fraction(Fraction(value) * (1 + Fraction(TIE_MARGIN)))
    if not value > 0:
        raise BadInput(f"rule {rule} gives D_p = {value:g}: every certified constant is 0 (a constant model); "
                       "PTR needs a positive proposal")
    return value


def noise_scale(value: float, radius: float, epsilon: float, secure: bool = True) -> float:
    """Laplace scale of the release, D_p R / eps (times the secure sampler's grid headroom)."""
    from ..privacy.sampling import SLACK

    sensitivity = mul_up(value, radius)
    return div_up(mul_up(sensitivity, 1 + SLACK) if secure else sensitivity, epsilon)


def release_rate(probabilities: Sequence[float]) -> float:
    """Expected release rate: the mean of the per-point release probabilities."""
    p = np.asarray(probabilities, dtype=np.float64)
    return float(np.mean(p)) if p.size else math.nan


def propose(uppers: Sequence[float], radius: float, epsilon: float, rules: Iterable[str] | str | None = None) -> list[Proposal]:
    """One `Proposal` per rule (release rates filled in later by the report's searches)."""
    u = np.asarray(uppers, dtype=np.float64)
    out = []
    for rule in parse_rules(rules):
        value = rule_value(rule, u)
        out.append(Proposal(rule, value, noise_scale(value, radius, epsilon),
                            holds_at_radius=float(np.mean(u <= value))))
    return out


__all__ = ["DEFAULT_RULES", "TIE_MARGIN", "Proposal", "noise_scale", "parse_rules", "propose", "release_rate", "rule_value"]
