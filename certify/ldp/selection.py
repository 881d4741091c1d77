"""Choosing a mechanism and an epsilon from rho (Zheng & Hu, Applications 1 and 2).

- `smallest_epsilon`: the smallest eps with rho(eps) >= target, to 1e-9. rho need not be
  monotone in eps (the normalised PM is not: at x = 0.2 with the box [0.1, 1], rho drops from 0.9
  at eps -> 0 to 0.846 at eps = ln 3 before rising to 1), so the search is a branch and bound over
  eps intervals, left to right: an interval is discarded when an upper bound of rho over all of it
  (each mechanism's `_mass_upper`: for PM/SW the windows are nested in eps, for the exponential
  mechanism the weights are monotone, Laplace/Gaussian are monotone for boxes containing x, k-RR
  is monotone either way) stays below the target; otherwise it is split. The first interval of
  width <= tol whose right end meets the target gives the answer: no smaller eps (beyond tol)
  meets it. For the monotone families this is plain bisection. For a box found by sampling, rho is
  the sampled-box lower bound (`certify.ldp.utility`), bounded above over an interval by the upper
  bounds of the atomless masses and of P(M(x) = x) and the lower bound of the densities (each
  family's sup density over a box containing x is monotone in eps).
- `compare_mechanisms` / `best_mechanism`: rho of every mechanism for one box and eps (pure
  mechanisms; with a delta the Gaussian and the indicator-wrapped pure mechanisms, all at the same
  per-feature (eps, delta)), optionally with the smallest eps reaching a target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import BadInput
from .mechanisms import EPS_MAX, MECHANISM_NAMES, LDPMechanism, make_mechanism
from .utility import _Problem, record_guarantee

EPS_MIN = 1e-9


@dataclass
class EpsilonSearch:
    """Smallest epsilon (per feature) with rho >= target, or None when no epsilon <= eps_max reaches it."""

    epsilon: float | None
    target: float
    rho: float | None
    mechanism: str
    tolerance: float
    eps_max: float
    rho_at_max: float
    evaluations: int
    record_epsilon: float | None = None
    record_delta: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def reachable(self) -> bool:
        return self.epsilon is not None

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "target_rho": self.target, "rho": self.rho, "mechanism": self.mechanism,
                "reachable": self.reachable, "tolerance": self.tolerance, "eps_max": self.eps_max,
                "rho_at_eps_max": self.rho_at_max, "record_epsilon": self.record_epsilon,
                "record_delta": self.record_delta, "evaluations": self.evaluations, "notes": self.notes}


def _target(value: Any) -> float:
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"target rho must be a number in (0, 1], got {value!r}") from None
    if not 0 < t <= 1:
        raise BadInput(f"target rho must be in (0, 1], got {value}")
    return t


def smallest_epsilon(mechanism: Any, box: Any, target: float, *, point: Any = None, features: Any = None,
                     omega: Any = None, tau: Any = None, indicator: Any = None, eps_min: float = EPS_MIN,
                     eps_max: float = EPS_MAX, tol: float = 1e-9) -> EpsilonSearch:
    """Smallest per-feature epsilon in [eps_min, eps_max] with rho >= target (within `tol`).

    `mechanism` gives the family and its other parameters (its own epsilon is ignored).
    """
    target = _target(target)
    if not (0 < eps_min < eps_max <= EPS_MAX):
        raise BadInput(f"need 0 < eps_min < eps_max <= {EPS_MAX:g}")
    if not tol > 0:
        raise BadInput("tol must be positive")
    prob = _Problem(mechanism, box, point=point, features=features, omega=omega, tau=tau, indicator=indicator)
    count = [0]

    def f(e: float) -> float:
        count[0] += 1
        return float(prob.rho(e))

    def upper(e1: float, e2: float) -> float:
        count[0] += 1
        return prob.rho_upper(e1, e2)

    label = prob.mechs[0].label
    rho_max = f(eps_max)
    notes: list[str] = []
    if prob.probabilistic:
        notes.append(f"box found by sampling: rho is the lower bound holding with confidence {1 - prob.omega:g} "
                     f"(omega = {prob.omega:g}, tau = {prob.tau:g}); it falls again for large epsilon, where the "
                     "mechanism's density near x outgrows what the sampling can vouch for")

    def done(eps: float | None, value: float | None) -> EpsilonSearch:
        out = EpsilonSearch(eps, target, value, label, tol, eps_max, rho_max, count[0], notes=notes)
        if eps is not None:
            g = record_guarantee([m.with_epsilon(eps) for m in prob.mechs], prob.indicator)
            out.record_epsilon, out.record_delta = g.epsilon, g.delta
        return out

    first = f(eps_min)
    if first >= target:
        notes.append(f"the target is met at the smallest epsilon searched ({eps_min:g})")
        return done(eps_min, first)
    if upper(eps_min, eps_max) < target:
        return done(None, None)
    stack = [(eps_min, eps_max)]
    while stack:
        e1, e2 = stack.pop()
        if upper(e1, e2) < target:
            continue
        v2 = f(e2)
        if e2 - e1 <= tol and v2 >= target:
            return done(e2, v2)
        mid = 0.5 * (e1 + e2)
        if not e1 < mid < e2:  # float resolution: the crossing is within one ulp
            if v2 >= target:
                return done(e2, v2)
            notes.append(f"an interval [{e1!r}, {e2!r}] could not be excluded at float64 resolution")
            continue
        stack.append((mid, e2))
        stack.append((e1, mid))
    return done(None, None)


def _candidates(names: Sequence[str] | None, epsilon: float, *, domain: Any, delta: float | None, k: int | None,
                clip: bool, calibration: str | None) -> list[LDPMechanism]:
    names = list(names) if names is not None else [n for n in MECHANISM_NAMES if n != "gaussian" or delta is not None]
    out = []
    for name in names:
        key = str(name).lower()
        kw: dict[str, Any] = {"domain": domain}
        if key in ("laplace", "gaussian"):
            kw["clip"] = clip
        if key in ("exponential", "krr") and k is not None:
            kw["k"] = k
        if key == "gaussian":
            if delta is None:
                raise BadInput("the Gaussian mechanism needs delta (0 < delta < 1)")
            out.append(make_mechanism(key, epsilon, delta=delta, calibration=calibration, **kw))
        else:
            out.append(make_mechanism(key, epsilon, indicator=delta, **kw))
    return out


@dataclass
class Comparison:
    """rho of several mechanisms for one box and epsilon, best first."""

    epsilon: float
    rows: list[dict]
    target: float | None = None
    statement: str = ""

    @property
    def best(self) -> dict:
        return self.rows[0]

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "target_rho": self.target, "best": self.best["mechanism"], "rows": self.rows,
                "statement": self.statement}

    def __str__(self) -> str:
        head = f"{'mechanism':<34} {'rho':>10}  {'record (eps, delta)':<24}"
        if self.target is not None:
            head += f" {'eps for rho >= ' + format(self.target, 'g'):>18}"
        lines = [head.rstrip()]
        for r in self.rows:
            line = f"{r['label']:<34} {r['rho']:>10.6f}  ({r['record_epsilon']:.4g}, {r['record_delta']:.3g})".ljust(70)
            if self.target is not None:
                e = r.get("epsilon_for_target")
                line += f" {('unreachable' if e is None else format(e, '.9g')):>18}"
            lines.append(line.rstrip())
        if "confidence" in self.statement:  # a box found by sampling: say what the numbers are
            lines.append(f"rho: {self.statement}")
        return "\n".join(lines)


def compare_mechanisms(box: Any, epsilon: float, *, point: Any = None, features: Any = None,
                       mechanisms: Sequence[str] | None = None, domain: Any = (0.0, 1.0), delta: float | None = None,
                       k: int | None = None, clip: bool = True, calibration: str | None = None, omega: Any = None,
                       tau: Any = None, target: float | None = None) -> Comparison:
    """rho of each mechanism at the same per-feature epsilon (and delta, if given), best first.

    Without delta: the pure mechanisms (laplace, pm, sw, exponential, krr). With delta: also the
    Gaussian, and each pure mechanism wrapped in a per-feature indicator I_delta, so every row has
    the same per-feature (eps, delta) guarantee. Laplace and Gaussian are clipped to the domain
    (post-processing, never worse) unless clip=False.
    """
    rows = []
    statement = ""
    for mech in _candidates(mechanisms, epsilon, domain=domain, delta=delta, k=k, clip=clip, calibration=calibration):
        prob = _Problem(mech, box, point=point, features=features, omega=omega, tau=tau)
        statement = prob.statement()
        g = record_guarantee(prob.mechs)
        row = {"mechanism": mech.name, "label": mech.label, "rho": float(prob.rho()), "record_epsilon": g.epsilon,
               "record_delta": g.delta, "pac": g.pac}
        if target is not None:
            s = smallest_epsilon(mech, box, target, point=point, features=features, omega=omega, tau=tau)
            row["epsilon_for_target"] = s.epsilon
        rows.append(row)
    rows.sort(key=lambda r: -r["rho"])
    return Comparison(float(epsilon), rows, None if target is None else _target(target), statement)


def best_mechanism(box: Any, epsilon: float, **kwargs: Any) -> dict:
    """The row of `compare_mechanisms` with the largest rho."""
    return compare_mechanisms(box, epsilon, **kwargs).best
