"""Accounting on `Guarantee` values: composition, chaining, group privacy, post-processing.

- `compose`: independent mechanisms on the same input (Tian & Tandon Prop. 2): (sum eps, sum delta), min alpha.
- `parallel`: mechanisms on disjoint parts of the input (Prop. 3). Unlike DP's parallel
  composition (max eps), every part of the input may move, so the values are those of `compose`.
- `chain`: one mechanism at a larger radius beta (Prop. 4), h = ceil(beta / alpha):
  (h eps, delta (e^{h eps} - 1) / (e^eps - 1)). The paper's statement says h delta; its own proof
  (telescoping along h steps of length <= alpha) gives this larger, correct value.
- `group_privacy`: the same for datasets differing in k records (metric "records").
- `post_process`: a data-independent function of the output keeps the guarantee (Prop. 1).
- `compose_pac`: PAC guarantees (Zheng & Hu Thm 2): (sum eps, 1 - prod(1 - delta_i)).

Results with delta >= 1 are capped at 1 and marked vacuous.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable

from ..errors import BadInput
from .guarantee import Guarantee
from .params import NORM_METRICS, RECORDS, check_count, check_radius, mul_up, round_up, sum_up, up_fraction


def _collect(guarantees: tuple, what: str) -> list[Guarantee]:
    items: list[Guarantee] = []
    for g in guarantees:
        if isinstance(g, Guarantee):
            items.append(g)
        elif isinstance(g, Iterable):
            items.extend(_collect(tuple(g), what))
        elif hasattr(g, "guarantee") and isinstance(g.guarantee, Guarantee):
            items.append(g.guarantee)  # a mechanism
        else:
            raise BadInput(f"{what} takes Guarantee values (or mechanisms), got {type(g).__name__}")
    if not items:
        raise BadInput(f"{what} needs at least one guarantee")
    metrics = {g.metric for g in items}
    if len(metrics) > 1:
        raise BadInput(f"{what}: guarantees are in different metrics ({', '.join(sorted(metrics))}); "
                       "compose guarantees measured in the same input metric")
    return items


def _claims(items: list[Guarantee]) -> tuple[str, ...]:
    """Every user claim of the parts: a composed guarantee rests on all of them."""
    return tuple(c for g in items for c in g.claims)


def _total_epsilon(items: list[Guarantee], what: str) -> float:
    total = sum_up([g.epsilon for g in items])
    if not math.isfinite(total):
        raise BadInput(f"{what}: the epsilons sum beyond the float64 range; the composed guarantee says nothing")
    return total


def compose(*guarantees: Guarantee | Iterable[Guarantee]) -> Guarantee:
    """Basic composition: (sum epsilon, sum delta), radius min alpha."""
    items = _collect(guarantees, "compose")
    return Guarantee(
        _total_epsilon(items, "compose"), min(1.0, sum_up([g.delta for g in items])), min(g.alpha for g in items),
        items[0].metric, pac=all(g.pac for g in items), empirical=any(g.empirical for g in items),
        mechanism=f"compose({len(items)})", parts=tuple(items), claims=_claims(items),
    )


def parallel(*guarantees: Guarantee | Iterable[Guarantee]) -> Guarantee:
    """Parallel composition over disjoint input parts (IP Prop. 3): same values as `compose`.

    In IP both inputs of a pair may differ in every part (unlike DP, where neighbouring datasets
    differ in one part only), so the budgets add up.
    """
    items = _collect(guarantees, "parallel")
    if items[0].metric not in NORM_METRICS:
        raise BadInput("parallel composition over input parts needs an l1, l2 or linf metric")
    g = compose(items)
    return g.with_(mechanism=f"parallel({len(items)})")


def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0, without overflow."""
    return x + math.log(-math.expm1(-x))


def chained_delta(epsilon: float, delta: float, steps: int) -> float:
    """delta (e^{h eps} - 1) / (e^eps - 1) for h = steps (capped at 1); h delta when eps = 0."""
    if delta == 0 or steps == 1:
        return min(1.0, delta)
    if epsilon == 0:
        return min(1.0, mul_up(steps, delta))  # rounded up, like every privacy number
    log_value = math.log(delta) + _log_expm1(steps * epsilon) - _log_expm1(epsilon)
    # float64 error of the logs above is a few ulps of their magnitudes: add it before exponentiating
    log_value += 16 * 2.0**-52 * (abs(math.log(delta)) + 2 * steps * epsilon + 2 * epsilon + 2)
    return 1.0 if log_value >= 0 else min(1.0, round_up(math.exp(log_value), 2))


# chaining beyond this many steps gives epsilon values no privacy analysis can use
MAX_CHAIN_STEPS = 10**12


def chain_steps(alpha: float, beta: float) -> int:
    """h = ceil(beta / alpha): the smallest integer with h * alpha >= beta, in exact arithmetic
    (the float64 quotient can be one step short: 0.1 * 251 >= 25.1 in floats, not exactly)."""
    if math.isinf(alpha):
        return 1
    q = Fraction(beta) / Fraction(alpha)
    if q > MAX_CHAIN_STEPS:
        raise BadInput(f"beta / alpha = {beta:g} / {alpha:g} is too many steps to chain (at most {MAX_CHAIN_STEPS:.0e}); "
                       "certify a guarantee at a larger alpha")
    return max(1, -((-q.numerator) // q.denominator))


def chain(guarantee: Guarantee, beta: float) -> Guarantee:
    """{(eps, delta), alpha} IP implies {(h eps, delta (e^{h eps}-1)/(e^eps-1)), beta} IP, h = ceil(beta/alpha)."""
    if not isinstance(guarantee, Guarantee):
        guarantee = _collect((guarantee,), "chain")[0]
    beta = check_radius(beta, "beta")
    if guarantee.metric not in NORM_METRICS:
        raise BadInput(f"chaining needs a norm metric (l1, l2, linf); for {guarantee.metric} use group_privacy")
    h = chain_steps(guarantee.alpha, beta)
    return _scaled(guarantee, h, beta, f"chain(h={h})")


def group_privacy(guarantee: Guarantee, k: int) -> Guarantee:
    """Datasets differing in k records: (k eps, delta (e^{k eps}-1)/(e^eps-1)) for radius k * alpha."""
    k = check_count(k, "group size k")
    if guarantee.metric != RECORDS:
        raise BadInput("group_privacy is for the 'records' metric (training data); use chain for input radii")
    return _scaled(guarantee, k, guarantee.alpha * k, f"group(k={k})")


def _scaled(g: Guarantee, h: int, radius: float, label: str) -> Guarantee:
    epsilon = mul_up(h, g.epsilon)
    if not math.isfinite(epsilon):
        raise BadInput(f"{label}: epsilon = {h} x {g.epsilon:g} exceeds the float64 range, so the guarantee at "
                       f"radius {radius:g} says nothing; chain a guarantee with a smaller epsilon")
    delta = chained_delta(g.epsilon, g.delta, h)
    return Guarantee(epsilon, delta, radius, g.metric, pac=(delta == 0), empirical=g.empirical,
                     mechanism=label, lipschitz=g.lipschitz, parts=(g,), claims=g.claims)


def post_process(guarantee: Guarantee, description: str = "post-processing") -> Guarantee:
    """A function of the released output that does not look at the private input: same (eps, delta).

    Approximate DP is closed under post-processing; PAC (probabilistic) DP is not (Meiser 2018), so
    a PAC guarantee comes out as the (eps, delta)-DP guarantee it implies, no longer marked PAC.
    """
    if not isinstance(guarantee, Guarantee):
        guarantee = _collect((guarantee,), "post_process")[0]
    pac = guarantee.pac and guarantee.delta == 0
    return guarantee.with_(mechanism=f"{description} of {guarantee.mechanism or 'mechanism'}", parts=(guarantee,), pac=pac)


def _pac_delta(deltas: list[float]) -> float:
    """1 - prod(1 - delta_i), rounded up: exact in rationals for up to 64 terms, else in logs with a margin."""
    if len(deltas) <= 64:
        survive = Fraction(1)
        for d in deltas:
            survive *= 1 - Fraction(d)
        return min(1.0, up_fraction(1 - survive))
    log_survive = math.fsum(math.log1p(-d) for d in deltas)
    return min(1.0, round_up(-math.expm1(log_survive) * (1 + (2 * len(deltas) + 4) * 2.0**-52), 1)) if log_survive < 0 else 0.0


def compose_pac(*guarantees: Guarantee | Iterable[Guarantee]) -> Guarantee:
    """PAC composition of independent mechanisms: (sum eps, 1 - prod(1 - delta_i)).

    Each input guarantee must be PAC (privacy loss <= eps_i except with probability delta_i):
    the losses add up, and by independence all bounds hold with probability prod(1 - delta_i).
    """
    items = _collect(guarantees, "compose_pac")
    bad = [g.mechanism or "guarantee" for g in items if not g.pac]
    if bad:
        raise BadInput(f"compose_pac needs PAC guarantees (privacy loss bounded with probability 1 - delta); "
                       f"{', '.join(bad)} is only (epsilon, delta)-DP: use compose")
    return Guarantee(
        _total_epsilon(items, "compose_pac"), _pac_delta([g.delta for g in items]), min(g.alpha for g in items), items[0].metric,
        pac=True, empirical=any(g.empirical for g in items), mechanism=f"compose_pac({len(items)})", parts=tuple(items),
        claims=_claims(items),
    )
