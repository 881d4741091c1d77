"""Utility of a classifier under LDP: rho(eps, box) = prod_i (F_i(b_i) - F_i(a_i)) (Zheng & Hu).

If the class of x is constant on a box [a, b] (a robustness hyperrectangle) and each perturbed
feature i is released through an LDP mechanism M, the class is kept with probability at least

    rho = prod_{i perturbed} P(a_i <= M(x_i) <= b_i)

(the features that are not perturbed stay at x_i, inside [a_i, b_i]). Refinements:

- box found by sampling (`probabilistic_box`, or omega/tau given): with confidence 1 - omega over
  that sampling, the set B of the box where the class changes has uniform measure <= tau. Then

      P(class kept) >= max(0, C - tau * prod_i (b_i - a_i) * prod_i pmax_i) + prod_i P(M(x_i) = x_i)

  where C = prod_i (mass of the atomless part of M(x_i) on [a_i, b_i]) and pmax_i the sup of its
  density on [a_i, b_i] (rounded up): the atomless product law gives B at most its largest density
  ratio to the uniform law, times tau. Atoms (clipping edges, grid points, a privacy indicator's
  raw value) get no credit (B may be exactly them: uniform measure 0) except at x itself, which
  keeps its class. If the box is wider than a point on a feature that is *not* perturbed, the
  perturbed record lies on a slice of uniform measure 0 and only the x term is left. The bound
  holds with confidence 1 - omega (reported beside it, not multiplied in: it is a probability over
  certify's sampling, not over the mechanism). Zheng & Hu's rho (1 - omega)(1 - tau) (Sec. 4.3)
  is not a lower bound (docs/ldp.md);
- privacy indicator I_delta on the whole record (Sec. 5.2.1): delta + (1 - delta) rho, with the
  record guarantee (d eps, delta)-PAC (the raw record, which is classified as itself, is released
  with probability delta);
- per-feature guarantees compose to the record guarantee: PAC mechanisms (pure, Gaussian `pac`,
  per-feature indicators) by (sum eps, 1 - prod(1 - delta_i)) (Thm 2), the analytic Gaussian by
  basic composition (sum eps, sum delta).

The box may be a `models.Box`, any certificate with a `box` (a robustness radius or
hyperrectangle; probabilistic ones bring `omega` and `tau`), a pair (lo, hi) of vectors or a
dict with "lo"/"hi". `rho_batch` evaluates many points, boxes and epsilons at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..boundary.indices import parse_features
from ..errors import BadInput
from ..privacy.accounting import compose, compose_pac
from ..privacy.guarantee import Guarantee
from .mechanisms import DENSITY_UP, LDPMechanism, PrivacyIndicator, _eps_array


@dataclass(frozen=True)
class BoxInput:
    """A box read from any of the accepted forms, with where it came from."""

    lo: np.ndarray
    hi: np.ndarray
    point: np.ndarray | None
    omega: float = 0.0
    tau: float = 0.0
    basis: str = "box given by the user (not verified by certify)"
    certified: bool | None = None
    probabilistic: bool = False


def _unit(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a number in [0, 1), got {value!r}") from None
    if not 0 <= v < 1:
        raise BadInput(f"{name} must be in [0, 1), got {value}")
    return v


def read_box(box: Any, point: Any = None, *, omega: Any = None, tau: Any = None) -> BoxInput:
    """Normalise the accepted box forms (see the module docstring)."""
    from models.box import Box

    basis = "box given by the user (not verified by certify)"
    certified = None
    src_omega = src_tau = None
    obj = box
    if point is None and not isinstance(obj, Box) and getattr(obj, "point", None) is not None:
        point = obj.point  # a certificate of a box around a point (e.g. a hyperrectangle)
    if not isinstance(obj, Box) and hasattr(obj, "box") and hasattr(obj, "status"):  # a certificate
        cert = obj
        if cert.box is None:
            raise BadInput("this certificate holds globally and has no box; give a robustness box")
        certified = bool(getattr(cert, "certified", False))
        status = getattr(cert, "status", "")
        src_omega, src_tau = getattr(cert, "omega", None), getattr(cert, "tau", None)
        if status == "probabilistic":
            basis = "probabilistic box"
        elif certified:
            basis = f"certified box ({getattr(cert, 'KIND', 'certificate')}, {status})"
        else:
            basis = f"box of an uncertified result ({status}): rho is not a guarantee"
        obj = cert.box
    if isinstance(obj, Box):
        lo, hi = obj.lo, obj.hi
        center = obj.center
    elif isinstance(obj, dict):
        if "lo" not in obj or "hi" not in obj:
            raise BadInput("a box dict needs 'lo' and 'hi'")
        lo, hi, center = obj["lo"], obj["hi"], obj.get("center")
    else:
        try:
            lo, hi = obj
        except (TypeError, ValueError):
            raise BadInput("box must be a models.Box, a certificate with a box, a pair (lo, hi) or a dict "
                           "with 'lo' and 'hi'") from None
        center = None
    lo = np.atleast_1d(np.asarray(lo, dtype=np.float64)).reshape(-1)
    hi = np.atleast_1d(np.asarray(hi, dtype=np.float64)).reshape(-1)
    if lo.size != hi.size:
        raise BadInput(f"box bounds have different lengths ({lo.size} and {hi.size})")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise BadInput("box bounds must be finite")
    bad = np.flatnonzero(lo > hi)
    if bad.size:
        raise BadInput(f"box has lo > hi in feature {int(bad[0])} ({lo[bad[0]]:g} > {hi[bad[0]]:g})")
    p = point if point is not None else center
    if p is None:
        raise BadInput("give the point x (the box has no center)")
    p = np.atleast_1d(np.asarray(p, dtype=np.float64)).reshape(-1)
    if p.size != lo.size:
        raise BadInput(f"the point has {p.size} values but the box has {lo.size}")
    if not np.all(np.isfinite(p)):
        raise BadInput("the point contains NaN or inf")
    out = np.flatnonzero((p < lo) | (p > hi))
    if out.size:
        j = int(out[0])
        raise BadInput(f"the box must contain the point: feature {j} has x = {p[j]:g} outside [{lo[j]:g}, {hi[j]:g}]")
    om = _unit(omega if omega is not None else (src_omega if src_omega is not None else 0.0), "omega")
    ta = _unit(tau if tau is not None else (src_tau if src_tau is not None else 0.0), "tau")
    probabilistic = basis == "probabilistic box" or bool(om or ta)
    if basis == "probabilistic box":
        if omega is None and src_omega is None or tau is None and src_tau is None:
            raise BadInput("a probabilistic box needs its omega and tau (confidence and tolerance)")
    if probabilistic:
        basis = (f"probabilistic box (omega = {om:g}, tau = {ta:g}): with confidence {1 - om:g} over its sampling, "
                 f"at most a fraction {ta:g} of it (uniform measure) changes the class")
    return BoxInput(lo, hi, p, om, ta, basis, certified, probabilistic)


def _mechanisms_for(mechanism: Any, features: np.ndarray) -> list[LDPMechanism]:
    if isinstance(mechanism, LDPMechanism):
        return [mechanism] * len(features)
    try:
        mechs = list(mechanism)
    except TypeError:
        raise BadInput("mechanism must be an LDP mechanism (certify.ldp.make_mechanism) or one per perturbed feature") from None
    if len(mechs) != len(features) or not all(isinstance(m, LDPMechanism) for m in mechs):
        raise BadInput(f"give one LDP mechanism per perturbed feature ({len(features)}), or a single one for all")
    return mechs


def _check_in_domain(mech: LDPMechanism, a: np.ndarray, b: np.ndarray, feature: Any) -> None:
    if np.any(a < mech.lo) or np.any(b > mech.hi):
        raise BadInput(f"the box of feature {feature} leaves the mechanism's domain [{mech.lo:g}, {mech.hi:g}]; "
                       "give the feature's domain (--domain LO,HI) or a box inside it")


def record_guarantee(mechs: Sequence[LDPMechanism], indicator: float | None = None) -> Guarantee:
    """The guarantee of releasing every perturbed feature (independent mechanisms) of one record."""
    if indicator is not None:
        eps = sum(m.epsilon for m in mechs)
        return Guarantee(eps, indicator, math.inf, "linf", pac=True,
                         mechanism=f"indicator(delta={indicator:g}) of {len(mechs)} x {mechs[0].label}")
    parts = [m.guarantee for m in mechs]
    if len(parts) == 1:
        return parts[0]
    return compose_pac(parts) if all(g.pac for g in parts) else compose(parts)


@dataclass
class UtilityResult:
    """rho, what it is (`statement`) and what it was computed from (`to_dict()` for JSON).

    For a box found by sampling, `rho` is the lower bound of P(class kept) that holds with
    confidence 1 - omega over that sampling; `sampled_box` holds its parts (see the module docstring).
    """

    rho: float
    masses: list[float]
    features: list[int]
    mechanisms: list[str]
    epsilon: float
    guarantee: Guarantee
    indicator: float | None
    basis: str
    lo: np.ndarray
    hi: np.ndarray
    point: np.ndarray
    statement: str = ""
    omega: float | None = None
    tau: float | None = None
    sampled_box: dict | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def rho_mechanism(self) -> float:
        """P(perturbed record in the box) = prod of the masses (before any sampled-box correction)."""
        return float(np.prod(self.masses))

    @property
    def subtracted(self) -> float | None:
        """tau * volume * prod pmax, the most a sampled box's bad set can take (None for other boxes)."""
        return None if self.sampled_box is None else self.sampled_box["subtracted"]

    @property
    def confidence(self) -> float | None:
        return None if self.omega is None else 1 - self.omega

    def to_dict(self) -> dict:
        return {
            "rho": self.rho, "statement": self.statement, "confidence": self.confidence, "omega": self.omega,
            "tau": self.tau, "subtracted": self.subtracted, "rho_mechanism": self.rho_mechanism,
            "masses": self.masses, "features": self.features,
            "mechanism": self.mechanisms[0] if len(set(self.mechanisms)) == 1 else self.mechanisms,
            "epsilon": self.epsilon, "record_epsilon": self.guarantee.epsilon, "record_delta": self.guarantee.delta,
            "guarantee": self.guarantee.to_dict(), "sampled_box": self.sampled_box,
            "indicator_delta": self.indicator, "basis": self.basis,
            "box": {"lo": self.lo.tolist(), "hi": self.hi.tolist()}, "point": self.point.tolist(), "notes": self.notes,
        }


def _with_indicator(rho: np.ndarray, indicator: float | None) -> np.ndarray:
    """The record-level privacy indicator releases the raw record (class kept) with probability delta."""
    return indicator + (1 - indicator) * rho if indicator is not None else rho


def _combine(masses: np.ndarray, indicator: float | None) -> np.ndarray:
    return _with_indicator(np.prod(masses, axis=-1), indicator)


def _sampled_bound(masses, cmass, dens, atoms, widths, tau: float, spread: Any = False) -> dict:
    """Lower bound of P(class kept) for a box found by sampling (arrays (..., n_features); see the module docstring).

    The subtracted term tau * prod (width * density) is rounded up. `spread`: the box is wider than
    a point on a feature that is not perturbed (no atomless credit).
    """
    rho_box = np.prod(masses, axis=-1)
    cont = np.prod(cmass, axis=-1)
    if tau > 0:
        wd = np.where(widths == 0, 0.0, widths * dens)  # a degenerate side carries no atomless mass
        with np.errstate(over="ignore", invalid="ignore"):
            sub = tau * np.prod(wd, axis=-1)
        sub = np.where(np.isnan(sub), np.inf, sub) * DENSITY_UP
    else:
        sub = np.zeros_like(cont)
    with np.errstate(invalid="ignore"):
        credit = np.where(spread, 0.0, np.maximum(cont - sub, 0.0))
    atom = np.prod(atoms, axis=-1)
    return {"bound": np.minimum(credit + atom, rho_box), "rho_box": rho_box, "continuous_mass": cont,
            "subtracted": sub, "atom_at_point": atom}


class _Problem:
    """A validated (mechanisms, box, point, features) triple; evaluates rho at any epsilon."""

    def __init__(self, mechanism: Any, box: Any, *, point: Any = None, features: Any = None, omega: Any = None,
                 tau: Any = None, indicator: Any = None):
        self.box = read_box(box, point, omega=omega, tau=tau)
        if features is None and getattr(box, "features", None):
            features = box.features  # a certificate's own features (e.g. those its hyperrectangle moves)
        self.features = parse_features(features, self.box.lo.size)
        self.mechs = _mechanisms_for(mechanism, self.features)
        self.indicator = None
        if indicator is not None and float(indicator) != 0:
            if any(m.delta != 0 for m in self.mechs):
                raise BadInput("the record-level privacy indicator needs pure mechanisms (not the Gaussian, "
                               "not mechanisms already wrapped in an indicator)")
            self.indicator = _unit(indicator, "indicator delta")
        for m, f in zip(self.mechs, self.features):
            _check_in_domain(m, self.box.lo[f], self.box.hi[f], int(f))
        self.probabilistic = self.box.probabilistic
        self.omega, self.tau = self.box.omega, self.box.tau
        others = np.setdiff1d(np.arange(self.box.lo.size), self.features)
        #: features not perturbed on which the box is wider than a point (see the module docstring)
        self.spread = [int(i) for i in others if self.box.lo[i] < self.box.hi[i]]
        self.x = self.box.point[self.features]
        self.a = self.box.lo[self.features]
        self.b = self.box.hi[self.features]
        self.widths = self.b - self.a

    def _eps(self, m: LDPMechanism, eps: Any) -> np.ndarray:
        return np.asarray(m.epsilon if eps is None else eps, dtype=np.float64)

    def _columns(self, fn) -> np.ndarray:
        cols = [fn(j, m) for j, m in enumerate(self.mechs)]
        return np.stack(np.broadcast_arrays(*cols), axis=-1)

    def masses(self, eps: Any = None) -> np.ndarray:
        """(..., n_features) masses at epsilon (array: one row per value; None: each mechanism's own)."""
        x, a, b = self.x, self.a, self.b
        return self._columns(lambda j, m: np.clip(m._mass(self._eps(m, eps), x[j], a[j], b[j]), 0.0, 1.0))

    def sampled_parts(self, eps: Any = None) -> dict:
        """The parts of the sampled-box bound at epsilon (see `_sampled_bound`), plus the per-feature pmax."""
        x, a, b = self.x, self.a, self.b
        cm = self._columns(lambda j, m: np.clip(m._cmass(self._eps(m, eps), x[j], a[j], b[j]), 0.0, 1.0))
        dens = self._columns(lambda j, m: m._cdens(self._eps(m, eps), x[j], a[j], b[j]))
        atoms = self._columns(lambda j, m: np.clip(m._mass(self._eps(m, eps), x[j], x[j], x[j]), 0.0, 1.0))
        parts = _sampled_bound(self.masses(eps), cm, dens, atoms, self.widths, self.tau, bool(self.spread))
        parts["max_density"] = dens
        return parts

    def rho(self, eps: Any = None) -> np.ndarray:
        if not self.probabilistic:
            return _combine(self.masses(eps), self.indicator)
        return _with_indicator(self.sampled_parts(eps)["bound"], self.indicator)

    def rho_upper(self, e1: float, e2: float) -> float:
        """An upper bound of rho over every epsilon in [e1, e2] (same epsilon on every feature)."""
        x, a, b = self.x, self.a, self.b
        ups = np.asarray([float(np.clip(m._mass_upper(e1, e2, x[j], a[j], b[j]), 0.0, 1.0))
                          for j, m in enumerate(self.mechs)])
        if not self.probabilistic:
            return float(_combine(ups, self.indicator))
        # the bound grows with the atomless mass and the atom at x, and falls with the densities
        cm = np.asarray([float(np.clip(m._cmass_upper(e1, e2, x[j], a[j], b[j]), 0.0, 1.0))
                         for j, m in enumerate(self.mechs)])
        dens = np.asarray([float(m._cdens_lower(e1, e2, x[j], a[j], b[j])) for j, m in enumerate(self.mechs)])
        atoms = np.asarray([float(np.clip(m._mass_upper(e1, e2, x[j], x[j], x[j]), 0.0, 1.0))
                            for j, m in enumerate(self.mechs)])
        # same rounding as `rho`, so that the bound of a shrinking interval tends to rho at its point
        parts = _sampled_bound(ups, cm, dens, atoms, self.widths, self.tau, bool(self.spread))
        return float(_with_indicator(parts["bound"], self.indicator))

    def statement(self) -> str:
        """What rho is, in words."""
        ind = (f"; with the record-level privacy indicator: delta + (1 - delta) x that, delta = {self.indicator:g}"
               if self.indicator is not None else "")
        if self.probabilistic:
            return (f"lower bound of P(class of x kept), holding with confidence 1 - omega = {1 - self.omega:g} over "
                    f"the sampling that built the box (omega = {self.omega:g}, tau = {self.tau:g}): "
                    f"max(0, atomless mass in the box - tau * volume * prod max density) + P(M(x) = x){ind}")
        if self.box.certified:
            return f"lower bound of P(class of x kept): P(perturbed record in the certified box){ind}"
        if self.box.certified is False:
            return f"P(perturbed record in the box) of an uncertified result: an estimate, not a guarantee{ind}"
        return (f"P(perturbed record in the box): a lower bound of P(class of x kept) if the class is constant on "
                f"the box (given by the user, not verified by certify){ind}")


def utility(mechanism: Any, box: Any, *, point: Any = None, features: Any = None, omega: Any = None, tau: Any = None,
            indicator: Any = None) -> UtilityResult:
    """rho for one point, its box and the mechanism(s) at their epsilon, with the record guarantee."""
    prob = _Problem(mechanism, box, point=point, features=features, omega=omega, tau=tau, indicator=indicator)
    masses = prob.masses()
    notes = []
    sampled = None
    if prob.probabilistic:
        parts = prob.sampled_parts()
        rho = float(_with_indicator(parts["bound"], prob.indicator))
        sampled = {"omega": prob.omega, "tau": prob.tau, "confidence": 1 - prob.omega,
                   "rho_box": float(parts["rho_box"]), "continuous_mass": float(parts["continuous_mass"]),
                   "volume": float(np.prod(prob.widths)), "max_density": [float(v) for v in parts["max_density"]],
                   "subtracted": float(parts["subtracted"]), "atom_at_point": float(parts["atom_at_point"]),
                   "spread_unperturbed": prob.spread,
                   "formula": "max(0, continuous_mass - tau * volume * prod max_density) + atom_at_point"}
        notes.append(f"box found by sampling: rho = {rho:.6g} holds with confidence {1 - prob.omega:g} (omega = "
                     f"{prob.omega:g}) over that sampling; P(record in box) = {sampled['rho_box']:.6g} minus at most "
                     f"tau * volume * prod max density = {sampled['subtracted']:.6g} for the part of the box "
                     f"(uniform fraction <= tau = {prob.tau:g}) where the class may change")
        if prob.spread:
            notes.append(f"the box is wider than a point on features {prob.spread}, which are not perturbed: the "
                         "perturbed records lie on a slice of uniform measure 0 of the sampled box, about which its "
                         "guarantee says nothing; only P(M(x) = x) is left")
        if any(m.discrete for m in prob.mechs):
            notes.append("grid mechanisms output only grid points, a set of uniform measure 0 that sampling cannot "
                         "vouch for: only P(M(x) = x) counts")
    else:
        rho = float(_combine(masses, prob.indicator))
    if prob.box.certified is False and "uncertified" in prob.box.basis:
        notes.append("the box comes from an uncertified result: rho is an estimate, not a guarantee")
    if any(isinstance(m, PrivacyIndicator) for m in prob.mechs):
        notes.append("per-feature privacy indicators: each feature's raw value is released with probability delta")
    eps = prob.mechs[0].epsilon if len({m.epsilon for m in prob.mechs}) == 1 else [m.epsilon for m in prob.mechs]
    return UtilityResult(rho, [float(v) for v in masses], [int(f) for f in prob.features], [m.label for m in prob.mechs],
                         eps, record_guarantee(prob.mechs, prob.indicator), prob.indicator, prob.box.basis,
                         prob.box.lo, prob.box.hi, prob.box.point, prob.statement(),
                         prob.omega if prob.probabilistic else None, prob.tau if prob.probabilistic else None,
                         sampled, notes)


def rho(mechanism: Any, box: Any, *, point: Any = None, features: Any = None, epsilon: Any = None, omega: Any = None,
        tau: Any = None, indicator: Any = None) -> float | np.ndarray:
    """rho(eps, box): a float at the mechanism's epsilon, or an array over an epsilon grid."""
    prob = _Problem(mechanism, box, point=point, features=features, omega=omega, tau=tau, indicator=indicator)
    if epsilon is None:
        return float(prob.rho())
    eps = _eps_array(epsilon)
    out = prob.rho(eps)
    return float(out) if np.ndim(out) == 0 else out


def rho_batch(mechanism: LDPMechanism, epsilon: Any, points: Any, lows: Any, highs: Any, features: Any = None, *,
              tau: float | None = None, indicator: float | None = None, factor: Any = None) -> np.ndarray:
    """rho for many points and boxes over an epsilon grid: shape (len(epsilon), n_points).

    `points`, `lows`, `highs`: (n, d) arrays (boxes must contain their points and lie in the
    mechanism's domain on the perturbed features). One mechanism family for every feature.
    `tau`: the boxes were found by sampling (at most a fraction tau changes the class, with the
    confidence 1 - omega of that sampling): the sampled-box lower bound (module docstring).
    """
    if factor is not None:
        raise BadInput("rho_batch no longer takes a factor: Zheng & Hu's (1 - omega)(1 - tau) is not a lower bound; "
                       "pass tau= for boxes found by sampling (docs/ldp.md)")
    if not isinstance(mechanism, LDPMechanism):
        raise BadInput("rho_batch takes one LDP mechanism")
    eps = np.atleast_1d(_eps_array(epsilon)).reshape(-1)
    x = np.atleast_2d(np.asarray(points, dtype=np.float64))
    lo = np.atleast_2d(np.asarray(lows, dtype=np.float64))
    hi = np.atleast_2d(np.asarray(highs, dtype=np.float64))
    if not (x.shape == lo.shape == hi.shape):
        raise BadInput(f"points, lows and highs must have the same shape, got {x.shape}, {lo.shape}, {hi.shape}")
    f = parse_features(features, x.shape[1])
    xs, a, b = x[:, f], lo[:, f], hi[:, f]
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise BadInput("points and boxes must be finite")
    if np.any(a > b):
        raise BadInput("a box has lo > hi")
    if np.any((x < lo) | (x > hi)):
        raise BadInput("every box must contain its point")
    _check_in_domain(mechanism, a, b, "(batch)")
    mechanism._check_x(xs)
    e3 = eps[:, None, None]
    masses = np.clip(mechanism._mass(e3, xs[None], a[None], b[None]), 0.0, 1.0)
    if tau is None:
        return _combine(masses, indicator)
    t = _unit(tau, "tau")
    cm = np.clip(mechanism._cmass(e3, xs[None], a[None], b[None]), 0.0, 1.0)
    dens = mechanism._cdens(e3, xs[None], a[None], b[None])
    atoms = np.clip(mechanism._mass(e3, xs[None], xs[None], xs[None]), 0.0, 1.0)
    others = np.setdiff1d(np.arange(x.shape[1]), f)
    spread = np.any(lo[:, others] < hi[:, others], axis=1)[None]
    return _with_indicator(_sampled_bound(masses, cm, dens, atoms, (b - a)[None], t, spread)["bound"], indicator)
