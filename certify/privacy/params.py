"""Validation of privacy parameters at the API boundary (scikit-learn style messages).

Every public entry point of `certify.privacy` runs its numbers through these checks, so a wrong
parameter is refused with a `BadInput` naming it, its allowed range and what to do, before any
noise scale is computed from it.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction

import numpy as np

from ..errors import BadInput

#: input metrics for which the chaining (geodesic) argument of Inference Privacy holds
NORM_METRICS = ("l1", "l2", "linf")
#: adjacency of training datasets (replace one record): the metric of weight perturbation
RECORDS = "records"
METRICS = NORM_METRICS + (RECORDS,)


def as_number(value: object, name: str) -> float:
    """A real number as float; bools, strings and other types are refused, not coerced
    (`epsilon=True` or `epsilon="1"` is a caller's mistake, not a budget of 1)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]  # a 0-d array holds one scalar
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, Decimal)):
        raise BadInput(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BadInput(f"{name} must be a number representable in float64, got {value!r}") from None
    if math.isnan(v):
        raise BadInput(f"{name} must be a number, got NaN")
    return v


def check_epsilon(value: object, name: str = "epsilon") -> float:
    """epsilon > 0 and finite (the privacy budget)."""
    v = as_number(value, name)
    if not (v > 0 and math.isfinite(v)):
        raise BadInput(f"{name} must be a positive finite number (the privacy budget), got {value}")
    return v


def check_delta(value: object, name: str = "delta", *, positive: bool = False, mechanism: str = "") -> float:
    """0 <= delta < 1; with `positive`, 0 < delta < 1 (the Gaussian mechanisms need delta > 0)."""
    v = as_number(value, name)
    if not 0 <= v < 1:
        raise BadInput(f"{name} must be in [0, 1) (a failure probability), got {value}")
    if positive and v == 0:
        who = mechanism or "the Gaussian mechanism"
        raise BadInput(
            f"{who} needs {name} > 0 (Gaussian noise is never pure epsilon-DP); give e.g. "
            f"--delta 1e-5, or use a Laplace or logistic mechanism for delta = 0"
        )
    return v


def check_pure(delta: object, mechanism: str) -> float:
    """A pure epsilon-DP mechanism takes no delta (0 or omitted)."""
    v = 0.0 if delta is None else as_number(delta, "delta")
    if v != 0:
        raise BadInput(
            f"{mechanism} is pure epsilon-DP and does not use delta; omit --delta (or give 0), "
            "or use a Gaussian mechanism to spend a delta"
        )
    return 0.0


def check_sensitivity(value: object, name: str = "sensitivity") -> float:
    """sensitivity >= 0 and finite."""
    v = as_number(value, name)
    if not (v >= 0 and math.isfinite(v)):
        raise BadInput(f"{name} must be a non-negative finite number, got {value}")
    return v


def check_radius(value: object, name: str = "radius") -> float:
    """alpha / radius > 0 and finite (the distance between inputs the guarantee protects)."""
    v = as_number(value, name)
    if not (v > 0 and math.isfinite(v)):
        raise BadInput(f"{name} must be a positive finite number (the privacy radius), got {value}")
    return v


def check_lipschitz(value: object, name: str = "lipschitz") -> float:
    v = as_number(value, name)
    if not (v >= 0 and math.isfinite(v)):
        raise BadInput(f"{name} must be a non-negative finite upper bound of the Lipschitz constant, got {value}")
    return v


def check_metric(value: object, name: str = "metric", allowed: tuple[str, ...] = NORM_METRICS) -> str:
    key = str(value).strip().lower()
    key = {"1": "l1", "2": "l2", "inf": "linf", "l_inf": "linf", "max": "linf"}.get(key, key)
    if key not in allowed:
        raise BadInput(f"unknown {name} {value!r}; choose one of {', '.join(allowed)}")
    return key


def check_count(value: object, name: str, minimum: int = 1) -> int:
    """An integer >= minimum (number of pairs, group size, ...)."""
    v = as_number(value, name)
    if not (math.isfinite(v) and v.is_integer()):
        raise BadInput(f"{name} must be an integer, got {value!r}")
    if v < minimum:
        raise BadInput(f"{name} must be >= {minimum}, got {value}")
    return int(v)


def round_up(x: float, ulps: int = 2) -> float:
    """x moved up by a few ulps: computed noise scales and budgets err on the safe side."""
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


def up_fraction(exact: Fraction) -> float:
    """The smallest float >= an exact rational (+inf above the float64 range: rounding up
    past the largest float is inf, as in IEEE 754; callers refuse non-finite results)."""
    try:
        f = float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -float.fromhex("0x1.fffffffffffffp+1023")
    return f if Fraction(f) >= exact else math.nextafter(f, math.inf)


def mul_up(a: float, b: float) -> float:
    """a * b rounded up (exact directed rounding: sensitivities are never rounded down)."""
    return up_fraction(Fraction(a) * Fraction(b))


def div_up(a: float, b: float) -> float:
    """a / b rounded up (noise scales are never rounded down)."""
    return up_fraction(Fraction(a) / Fraction(b))


def sum_up(values: list[float]) -> float:
    """Sum rounded up (exact directed rounding)."""
    return up_fraction(sum((Fraction(v) for v in values), Fraction(0)))


def inflate(x: float, ulps: int = 16) -> float:
    """x * (1 + ulps * 2^-52), rounded up: covers the error of a short chain of libm operations."""
    return round_up(x * (1.0 + ulps * 2.0**-52), 1)
