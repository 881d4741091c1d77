"""Certified robustness radii and hyperrectangles of linear classifiers (exact, safely rounded).

A linear classifier scores s(x) = W x + b and predicts argmax_j s_j(x) (binary: class 1 iff the
single score is > 0). At x0 with predicted class c, the class is provably kept on a set S when
every margin m_j(x) = d_j . x + e_j stays > 0 on S, with d_j = W_c - W_j, e_j = b_c - b_j
(binary: d = +/- w). certify requires strict margins (a tie could flip the argmax), which only
shrinks the certified sets by a boundary of measure zero.

Radius (`linear_radius`): the set where class c is kept is an intersection of half-spaces,
so the distance to its complement is the minimum over j of the distance to {m_j <= 0}. With an
optional input domain box that distance is a one-dimensional problem per j, solved exactly
(no LP solver needed): linf by the breakpoints of sum_i |d_i| min(t, room_i); l1 by the greedy
fractional knapsack; l2 by the breakpoints of the KKT multiplier (delta_i = min(lam |d_i|, room_i)).
Without a domain these are the closed forms m_j / ||d_j||_dual.

Safe rounding: the returned `lower` is re-proven in exact rational arithmetic (fractions) on the
float64 weights: linf and l1 by the exact maximal decrease of each margin over the ball (within
the domain), l2 by a weak-duality bound sum_i g_i(lam) + r^2 / (2 lam). `upper` is the exact
distance (rounded up) of a witness point whose margin is exactly negative, i.e. a point of another
class. status "optimal" when they meet (relative gap <= 1e-9), "robust_within" when no point of
the domain changes the class.

Hyperrectangle (`linear_hyperrectangle`): from the linf radius box over the chosen features
(the other features fixed at x0), each side of each chosen feature is pushed, in turn, as far as
the minimum of every margin over the box stays above a guard (a closed form per side: the slack
over the coefficient), to the first float64 that keeps it so, checked in exact arithmetic, and
never beyond the domain. The guard bounds the float64 error of evaluating the scores (about
1e-15 relative): the class is then kept by scikit-learn's own float `predict` too, not only by
the exact real-valued model. Pushing a side later only uses up slack, so at the end every side
is maximal: it is at the domain edge, or moving it out by any amount creates a point of another
class.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Sequence

import numpy as np

from models.box import Box
from solvers.choices import NORMS

from ...certificate import Status
from ...boundary.indices import feature_mask
from ...errors import BadInput
from ..certificate import ClassifierRobustness
from .linear_model import LinearModel, as_linear_model

GAP = 1e-9


@dataclass
class LinearRobustness(ClassifierRobustness):
    """A certified robustness radius or hyperrectangle of a linear classifier at `point`
    (`ClassifierRobustness`): for a radius, `box` is the linf ball, or for l1/l2 the largest linf
    box inside the ball. `binding_class`: the class whose score meets the predicted one first.
    """

    KIND: ClassVar[str] = "linear_robustness"

    binding_class: Any = None


# ---------------------------------------------------------------------------------- per-margin problems
def _rooms(d: np.ndarray, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, movable: np.ndarray) -> np.ndarray:
    """How far each coordinate can move in the direction that decreases d . x."""
    room = np.where(d > 0, x0 - lo, np.where(d < 0, hi - x0, 0.0))
    return np.where(movable & (d != 0), room, 0.0)


def _radius_1d(norm: str, m: float, r: np.ndarray, room: np.ndarray) -> float:
    """Smallest ||delta||_norm with sum r_i delta_i >= m, 0 <= delta_i <= room_i (inf if impossible)."""
    keep = (r > 0) & (room > 0)
    r, room = r[keep], room[keep]
    if r.size == 0 or float(np.sum(r * np.minimum(room, 1e300))) < m:
        return math.inf
    if norm == "linf":
        order = np.argsort(room)
        slope, acc, prev = float(np.sum(r)), 0.0, 0.0
        for i in order:
            value = acc + slope * (room[i] - prev)
            if value >= m:
                return prev + (m - acc) / slope
            acc, prev, slope = value, room[i], slope - r[i]
        return math.inf
    if norm == "l1":
        t, rest = 0.0, m
        for i in np.argsort(-r):
            cap = r[i] * room[i]
            if cap >= rest:
                return t + rest / r[i]
            t, rest = t + room[i], rest - cap
        return math.inf
    lam = _l2_multiplier(m, r, room)
    return float(np.sqrt(np.sum(np.minimum(lam * r, room) ** 2))) if math.isfinite(lam) else math.inf


def _l2_multiplier(m: float, r: np.ndarray, room: np.ndarray) -> float:
    """lam with sum r_i min(lam r_i, room_i) = m (the KKT point of the l2 problem)."""
    br = room / r
    order = np.argsort(br)
    slope, acc, prev = float(np.sum(r * r)), 0.0, 0.0
    for i in order:
        value = acc + slope * (br[i] - prev)
        if value >= m:
            return prev + (m - acc) / slope
        acc, prev, slope = value, br[i], slope - r[i] * r[i]
    return math.inf


# ---------------------------------------------------------------------------------- exact checks
def _F(v: float) -> Fraction:
    return Fraction(float(v))


def _max_decrease_exact(norm: str, t: Fraction, r: list[Fraction], room: list[Fraction | None], lam: float) -> Fraction:
    """An exact upper bound of max {sum r_i delta_i : ||delta|| <= t, 0 <= delta_i <= room_i} (room None = inf)."""
    if norm == "linf":
        return sum((ri * (t if rm is None else min(t, rm)) for ri, rm in zip(r, room)), Fraction(0))
    if norm == "l1":
        rest, total = t, Fraction(0)
        for ri, rm in sorted(zip(r, room), key=lambda p: -p[0]):
            step = rest if rm is None else min(rest, rm)
            total += ri * step
            rest -= step
            if rest <= 0:
                break
        return total
    # l2, weak duality: r_i delta_i <= g_i(L) + delta_i^2 / (2 L) for every L > 0
    L = _F(lam) if lam > 0 and math.isfinite(lam) else Fraction(1)
    total = t * t / (2 * L)
    for ri, rm in zip(r, room):
        if rm is None or L * ri <= rm:
            total += L * ri * ri / 2
        else:
            total += ri * rm - rm * rm / (2 * L)
    return total


def _exact_rooms(d: Sequence[Fraction], x0: Sequence[Fraction], lo, hi, movable) -> tuple[list[Fraction], list]:
    r, room = [], []
    for i, di in enumerate(d):
        if di == 0 or not movable[i]:
            continue
        r.append(abs(di))
        if di > 0:
            room.append(None if lo is None else x0[i] - _F(lo[i]))
        else:
            room.append(None if hi is None else _F(hi[i]) - x0[i])
    keep = [k for k, rm in enumerate(room) if rm is None or rm > 0]
    return [r[k] for k in keep], [room[k] for k in keep]


# ---------------------------------------------------------------------------------- model adapters
def _domain_vectors(domain: Any, dim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    if domain is None:
        return None, None
    from models.box import parse_domain

    lo, hi = parse_domain(domain, dim)
    return lo, hi


def _prepare(model: Any, point: Any, domain: Any, features: Any):
    lin = as_linear_model(model)
    x0 = np.asarray(point, dtype=np.float64).reshape(-1)
    if x0.size != lin.dim:
        raise BadInput(f"the point has {x0.size} values but the model takes {lin.dim} features")
    if not np.all(np.isfinite(x0)):
        raise BadInput("the point contains NaN or inf")
    lo, hi = _domain_vectors(domain, lin.dim)
    if lo is not None and (np.any(x0 < lo) or np.any(x0 > hi)):
        raise BadInput("the point lies outside the domain")
    movable = feature_mask(features, lin.dim)
    c = lin.predict_index(x0)
    return lin, x0, lo, hi, movable, c


def _label(lin: LinearModel, idx: int):
    return lin.classes[idx]


def linear_radius(model: Any, point: Any, *, norm: str = "linf", domain: Any = None,
                      features: Any = None) -> LinearRobustness:
    """Exact robustness radius of a linear classifier at `point` in `norm` (see the module docstring).

    `domain`: (lo, hi) numbers or vectors bounding the inputs (None: all of R^d). `features`: the
    only coordinates allowed to move (default all).
    """
    t0 = time.perf_counter()
    norm = str(norm).lower()
    if norm not in NORMS:
        raise BadInput(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")
    lin, x0, lo, hi, movable, c = _prepare(model, point, domain, features)
    D, E, J = lin.margins(c)
    Df = np.array([[float(v) for v in d] for d in D])
    x0F = [_F(v) for v in x0]
    inf_lo = np.full(lin.dim, -np.inf) if lo is None else lo
    inf_hi = np.full(lin.dim, np.inf) if hi is None else hi
    radii, margins = [], []
    for d, dF, e in zip(Df, D, E):
        m_exact = sum((di * xi for di, xi in zip(dF, x0F)), e)
        margins.append(m_exact)
        room = _rooms(d, x0, inf_lo, inf_hi, movable)
        radii.append(0.0 if m_exact <= 0 else _radius_1d(norm, float(m_exact), np.abs(d), room))
    k = int(np.argmin(radii))
    r_star = radii[k]
    notes: list[str] = []
    witness = witness_class = None
    if r_star == 0.0:
        lower, upper, status = 0.0, 0.0, Status.OPTIMAL
        witness, witness_class = x0.copy(), None
        notes.append("the point lies on the decision boundary (a margin is <= 0 in exact arithmetic)")
    elif math.isinf(r_star):
        lower = _cover_radius(norm, x0, lo, hi, movable)
        upper, status = None, Status.ROBUST_WITHIN
        notes.append("no point of the domain changes the class: lower is the radius that covers the domain")
    else:
        lower = _certify_lower(norm, r_star, D, E, x0F, lo, hi, movable)
        witness, upper = _witness(norm, r_star, Df[k], D[k], E[k], x0, lo, hi, movable)
        witness_class = _label(lin, lin.predict_index(witness))
        status = Status.OPTIMAL if upper - lower <= GAP * max(upper, 1e-300) else Status.OPEN_GAP
    box = _inscribed_box(norm, x0, lower, lo, hi, movable)
    if norm != "linf":
        notes.append(f"box: the largest linf box inside the {norm} ball of radius `lower` (class proven constant on it)")
    return LinearRobustness(
        lower=float(lower), upper=upper, status=status, certified=True, box=box, input_norm=norm,
        seconds=time.perf_counter() - t0, notes=notes, result="radius", model=lin.source,
        predicted_class=_label(lin, c), point=x0, features=[int(i) for i in np.flatnonzero(movable)],
        domain=None if lo is None else [lo.tolist(), hi.tolist()], witness=witness, witness_class=witness_class,
        binding_class=None if not np.isfinite(r_star) else _label(lin, J[k]),
    )


def _cover_radius(norm, x0, lo, hi, movable) -> float:
    span = np.where(movable, np.maximum(x0 - lo, hi - x0), 0.0)
    return float({"linf": np.max(span), "l1": np.sum(span), "l2": np.sqrt(np.sum(span**2))}[norm])


def _robust_exact(norm, t: Fraction, D, E, x0F, lo, hi, movable, lams=None) -> bool:
    for j, (d, e) in enumerate(zip(D, E)):
        m = sum((di * xi for di, xi in zip(d, x0F)), e)
        r, room = _exact_rooms(d, x0F, lo, hi, movable)
        lam = lams[j] if lams is not None else 0.0
        if _max_decrease_exact(norm, t, r, room, lam) >= m:
            return False
    return True


def _certify_lower(norm, r_star, D, E, x0F, lo, hi, movable) -> float:
    """The largest float <= r_star (within a relative 1e-12 .. 1e-6) proven robust in exact arithmetic."""
    Df = [np.array([float(v) for v in d]) for d in D]
    x0 = np.array([float(v) for v in x0F])
    inf_lo = np.full(x0.size, -np.inf) if lo is None else lo
    inf_hi = np.full(x0.size, np.inf) if hi is None else hi
    for shrink in (1e-13, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4):
        t = r_star * (1 - shrink)
        lams = None
        if norm == "l2":  # the multiplier of each margin's problem at radius t (for the duality bound)
            lams = []
            for d in Df:
                rr, room = np.abs(d), _rooms(d, x0, inf_lo, inf_hi, movable)
                keep = (rr > 0) & (room > 0)
                lams.append(_l2_multiplier_for_radius(t, rr[keep], room[keep]))
        if _robust_exact(norm, _F(t), D, E, x0F, lo, hi, movable, lams):
            return t
    return 0.0


def _l2_multiplier_for_radius(t: float, r: np.ndarray, room: np.ndarray) -> float:
    """lam with ||min(lam r, room)||_2 = t (inf when even the full rooms have norm < t)."""
    if r.size == 0:
        return 1.0
    if np.sum(np.minimum(room, 1e150) ** 2) <= t * t:
        return 1e300
    lo_l, hi_l = 0.0, 1.0
    while np.sum(np.minimum(hi_l * r, room) ** 2) < t * t:
        hi_l *= 2
    for _ in range(200):
        mid = 0.5 * (lo_l + hi_l)
        if np.sum(np.minimum(mid * r, room) ** 2) < t * t:
            lo_l = mid
        else:
            hi_l = mid
    return hi_l


def _witness(norm, r_star, d, dF, e, x0, lo, hi, movable):
    """A point of another class near distance r_star and its exact distance (rounded up)."""
    inf_lo = np.full(x0.size, -np.inf) if lo is None else lo
    inf_hi = np.full(x0.size, np.inf) if hi is None else hi
    r, room = np.abs(d), _rooms(d, x0, inf_lo, inf_hi, movable)
    for push in (1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2):
        m = float(sum((di * _F(xi) for di, xi in zip(dF, x0)), e)) * (1 + push)
        delta = _allocation(norm, m, r, room)
        if delta is None:
            continue
        w = x0 - np.sign(d) * delta
        w = np.clip(w, inf_lo, inf_hi)
        margin = sum((di * _F(wi) for di, wi in zip(dF, w)), e)
        if margin < 0:
            diff = [abs(_F(a) - _F(b)) for a, b in zip(w, x0)]
            return w, _norm_up(norm, diff)
    raise ArithmeticError("could not build a witness point across the decision boundary")  # pragma: no cover


def _allocation(norm, m, r, room):
    """delta >= 0 (per coordinate) reaching sum r_i delta_i >= m at (near) minimal norm."""
    delta = np.zeros_like(r)
    keep = np.flatnonzero((r > 0) & (room > 0))
    if norm == "linf":
        t = _radius_1d("linf", m, r, room)
        if not math.isfinite(t):
            return None
        delta[keep] = np.minimum(t, room[keep])
    elif norm == "l1":
        rest = m
        for i in keep[np.argsort(-r[keep])]:
            step = min(room[i], rest / r[i])
            delta[i] = step
            rest -= step * r[i]
            if rest <= 0:
                break
        if rest > 0:
            return None
    else:
        lam = _l2_multiplier(m, r[keep], room[keep])
        if not math.isfinite(lam):
            return None
        delta[keep] = np.minimum(lam * r[keep], room[keep])
    return delta


def _norm_up(norm: str, diff: list[Fraction]) -> float:
    if norm == "linf":
        v = max(diff) if diff else Fraction(0)
    elif norm == "l1":
        v = sum(diff, Fraction(0))
    else:
        sq = sum((x * x for x in diff), Fraction(0))
        f = math.sqrt(float(sq))
        while Fraction(f) ** 2 < sq:
            f = math.nextafter(f, math.inf)
        return f
    f = float(v)
    return f if Fraction(f) >= v else math.nextafter(f, math.inf)


def _inscribed_box(norm, x0, r, lo, hi, movable) -> Box:
    n = max(int(np.sum(movable)), 1)
    side = {"linf": r, "l1": r / n, "l2": r / math.sqrt(n)}[norm]
    if norm != "linf":  # the linf box of half-width side lies inside the ball: round the side down
        side = math.nextafter(side, 0.0) if side > 0 else 0.0
        while side > 0 and not _box_in_ball(norm, side, n, r):
            side = math.nextafter(side, 0.0)
    rad = np.where(movable, side, 0.0)
    blo, bhi = x0 - rad, x0 + rad
    # float rounding of x0 -/+ rad could step outside the certified ball: keep every side within it
    blo, bhi = _toward(blo, x0, rad), _toward(bhi, x0, rad)
    if lo is not None:
        blo, bhi = np.maximum(blo, lo), np.minimum(bhi, hi)
    return Box.from_bounds(blo, bhi)


def _toward(v: np.ndarray, x0: np.ndarray, rad: np.ndarray) -> np.ndarray:
    """Move v toward x0 until |v - x0| <= rad exactly."""
    out = v.copy()
    for i in range(out.size):
        while abs(_F(out[i]) - _F(x0[i])) > _F(rad[i]):
            out[i] = math.nextafter(out[i], x0[i])
    return out


def _box_in_ball(norm: str, side: float, n: int, r: float) -> bool:
    s, R = _F(side), _F(r)
    return n * s <= R if norm == "l1" else n * s * s <= R * R


# ---------------------------------------------------------------------------------- hyperrectangle
def _min_margins(D, E, blo, bhi) -> list[Fraction]:
    """Exact minimum of each margin d . x + e over the box [blo, bhi] (fractions)."""
    out = []
    for d, e in zip(D, E):
        out.append(sum((di * (blo[i] if di > 0 else bhi[i]) for i, di in enumerate(d) if di != 0), e))
    return out


def _float_guards(lin: LinearModel, c: int, J: list[int], lo: np.ndarray, hi: np.ndarray) -> list[Fraction]:
    """Per margin, a bound on the float64 error of evaluating the two scores it compares on the domain.

    A dot product of n terms carries a forward error <= 1.01 n u sum |w_i x_i| (u = 2^-53); the
    factor 8 (n + 4) also covers the intercept, the comparison and a folded scaler's rounding.
    Hyperrectangle sides keep every margin above it, so scikit-learn's float predict agrees on the box.
    """
    amax = [max(abs(_F(a)), abs(_F(b))) for a, b in zip(lo, hi)]
    unit = Fraction(8 * (lin.dim + 4), 2**53)

    def size(row: int) -> Fraction:
        return sum((abs(w) * a for w, a in zip(lin.W[row], amax)), abs(lin.b[row]))

    if lin.binary:
        return [unit * size(0)]
    return [unit * (size(c) + size(j)) for j in J]


def _first_float_above(bound: Fraction) -> float:
    f = float(bound)
    while Fraction(f) <= bound:
        f = math.nextafter(f, math.inf)
    return f


def _last_float_below(bound: Fraction) -> float:
    f = float(bound)
    while Fraction(f) >= bound:
        f = math.nextafter(f, -math.inf)
    return f


def linear_hyperrectangle(model: Any, point: Any, *, features: Any = None, domain: Any = (0.0, 1.0),
                              order: str = "feature") -> LinearRobustness:
    """A maximal box around `point` on which the class is proven constant (see the module docstring).

    Only `features` (default all) vary; the others stay at x0. `domain` bounds every side
    (default [0, 1], the normalised feature range of the utility paper).
    """
    t0 = time.perf_counter()
    if domain is None:
        raise BadInput("the hyperrectangle needs the input domain (lo, hi) its sides may not cross")
    if order != "feature":
        raise BadInput("order must be 'feature' (each chosen feature's lower then upper side, in index order)")
    radius = linear_radius(model, point, norm="linf", domain=domain, features=features)
    lin, x0, lo, hi, movable, c = _prepare(model, point, domain, features)
    D, E, J = lin.margins(c)
    guard = _float_guards(lin, c, J, lo, hi)
    r0 = radius.lower
    for _ in range(60):  # the radius box, shrunk if its margins are within the float64 guard
        blo = np.where(movable, np.maximum(lo, x0 - r0), x0)
        bhi = np.where(movable, np.minimum(hi, x0 + r0), x0)
        bloF, bhiF = [_F(v) for v in blo], [_F(v) for v in bhi]
        slack = [s - g for s, g in zip(_min_margins(D, E, bloF, bhiF), guard)]
        if min(slack, default=Fraction(1)) > 0:
            break
        r0 = r0 * 0.5 if r0 > 1e-300 else 0.0
    else:
        raise BadInput("the point is within float64 rounding of the decision boundary: no box can be certified")
    for i in np.flatnonzero(movable):
        for side in ("lower", "upper"):
            # lower side: margins with d_i > 0 lose d_i per unit; upper side: those with d_i < 0
            limits = [(s, d[i]) for s, d in zip(slack, D) if (d[i] > 0 if side == "lower" else d[i] < 0)]
            if side == "lower":
                if limits:
                    bound = bloF[i] - min(s / di for s, di in limits)
                    new = max(float(lo[i]), _first_float_above(bound))
                else:
                    new = float(lo[i])
                new = min(new, blo[i])
                delta = bloF[i] - _F(new)
                blo[i], bloF[i] = new, _F(new)
            else:
                if limits:
                    bound = bhiF[i] + min(s / -di for s, di in limits)
                    new = min(float(hi[i]), _last_float_below(bound))
                else:
                    new = float(hi[i])
                new = max(new, bhi[i])
                delta = _F(new) - bhiF[i]
                bhi[i], bhiF[i] = new, _F(new)
            slack = [s - abs(d[i]) * delta if (d[i] > 0 if side == "lower" else d[i] < 0) else s
                     for s, d in zip(slack, D)]
    final = _min_margins(D, E, bloF, bhiF)  # re-proven from scratch
    if not all(s > g for s, g in zip(final, guard)):
        raise ArithmeticError("hyperrectangle lost robustness")  # pragma: no cover
    box = Box.from_bounds(blo, bhi)
    notes = ["lower/upper: the linf robustness radius over the chosen features (the starting box)",
             "each side is maximal: at the domain edge or blocked by a margin that reaches 0 just beyond it"]
    return LinearRobustness(
        lower=radius.lower, upper=radius.upper, status=Status.CERTIFIED, certified=True, box=box, input_norm="linf",
        seconds=time.perf_counter() - t0, notes=notes, result="hyperrectangle", model=lin.source,
        predicted_class=_label(lin, c), point=x0, features=[int(i) for i in np.flatnonzero(movable)],
        domain=[lo.tolist(), hi.tolist()], witness=radius.witness, witness_class=radius.witness_class,
        binding_class=radius.binding_class,
    )


__all__ = ["LinearModel", "LinearRobustness", "as_linear_model", "linear_hyperrectangle", "linear_radius"]
