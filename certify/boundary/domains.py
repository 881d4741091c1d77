"""Input domains users give: `--domain LO,HI` on the command line, `domain=(lo, hi)` in Python.

- `domain_arg`: the command-line text, two numbers LO < HI (None when absent);
- `check_domain`: a scalar pair (lo, hi), finite, lo < hi (the domain of one LDP feature);
- `parse_domain` (`models.box`): a pair of numbers or vectors as (lo, hi) vectors of a model's input
  size, lo < hi in every input (every network question).
"""

from __future__ import annotations

import math
from typing import Any

from models.box import parse_domain

from ..errors import BadInput
from .vectors import check_magnitude, parse_vector


def domain_arg(spec: str | None) -> tuple[float, float] | None:
    """`--domain LO,HI` as (lo, hi) with LO < HI, or None when absent."""
    if spec is None:
        return None
    bounds = check_magnitude(parse_vector(spec, name="--domain"), "--domain")
    if bounds.size != 2 or not bounds[0] < bounds[1]:
        raise BadInput(f"--domain takes two numbers LO,HI with LO < HI, got {spec!r}")
    return float(bounds[0]), float(bounds[1])


def check_domain(domain: Any) -> tuple[float, float]:
    """A scalar domain (lo, hi): finite numbers with lo < hi and a finite width."""
    try:
        lo, hi = (float(v) for v in domain)
    except (TypeError, ValueError):
        raise BadInput(f"domain must be a pair (lo, hi) of numbers, got {domain!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise BadInput(f"domain must be finite with lo < hi, got ({lo:g}, {hi:g})")
    if not math.isfinite(hi - lo):
        raise BadInput("domain is too wide for float64")
    return lo, hi


__all__ = ["check_domain", "domain_arg", "parse_domain"]
