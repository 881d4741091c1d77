"""Certified robustness radii and hyperrectangles of tree ensembles (exact, by MILP with a proof).

The model is scikit-learn's own decision on float64 inputs (`tree_model`): splits `x_f <= cutoff`,
class scores summed over trees, margins within the rounding guard counted as flips (ties too).

Radius (`tree_radius`, linf over the chosen features, the others fixed, inside an
optional domain): the Kantchelian MILP (`tree_milp`) minimises the distance from x0 to a cell of
the split grid where the class may change. Its optimum is attained at a *candidate*: 0, or
x0_f - cutoff (cutoffs below x0), or first_float_above(cutoff) - x0_f (cutoffs above): the nearest
float64 point of a cell (lo, hi] lies on its boundary. The solve goes through `sound_solve`, whose
bound is re-proven by branch-and-bound with safe LP bounds; the proven bound L is then rounded *up*
to the smallest candidate >= L, still a proof since the true radius is a candidate. `lower` is that
candidate (every float64 point strictly closer keeps the class in scikit-learn's predict); `upper`
is the exact distance (rounded up) of a witness point, built from the MILP's cell and replayed
through scikit-learn's `predict`. status "optimal" when the two meet: the radius is then a
minimum, attained by the witness (open balls of radius `lower` are safe, the closed one is not).

Hyperrectangle (`tree_hyperrectangle`): from the box of points strictly inside the
radius, each side of each chosen feature is pushed, in turn (lower then upper, feature order), to
the domain edge or to just past the nearest cell where the class may change along that side: a
MILP maximises how far along the side such a cell lies (number of cutoffs passed), its proven
bound fixes the new side, and its witness, replayed through scikit-learn, shows the side is
maximal (moving it out by any amount reaches a point of another class). Every step is proven, so
the final box is: the class is constant on all its float64 points.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from models.box import Box

from ...certificate import Status
from ...boundary.indices import feature_mask
from ...errors import BadInput
from ..certificate import ClassifierRobustness
from .tree_milp import FlipModel, build_flip_model, first_above
from .tree_milp import fraction_down as _down
from .tree_milp import fraction_up as _up
from .tree_model import TreeEnsemble, tree_ensemble_from_sklearn
from .tree_verify import BoxVerifier, Verdict

GAP = 1e-9


@dataclass
class TreeRobustness(ClassifierRobustness):
    """A certified linf robustness radius or hyperrectangle of a tree ensemble at `point`
    (`ClassifierRobustness`; witnesses replayed in scikit-learn). `sides`: per pushed side of the
    hyperrectangle, its feature, side, whether it is proven maximal, and the replayed witness just
    beyond it.
    """

    KIND: ClassVar[str] = "tree_robustness"

    sides: list[dict] = field(default_factory=list)
    backend: str = ""
    solves: int = 0
    milp_seconds: float = 0.0
    proof_seconds: float = 0.0
    proof_nodes: int = 0


# ---------------------------------------------------------------------------------- preparation
@dataclass
class _Ctx:
    ens: TreeEnsemble
    est: Any
    x0: np.ndarray
    lo: np.ndarray          # domain (or -inf) per feature
    hi: np.ndarray
    movable: np.ndarray
    c: int
    domain: tuple[np.ndarray, np.ndarray] | None
    backend: str
    deadline: float | None
    max_nodes: int = 2_000_000
    solves: int = 0
    milp_seconds: float = 0.0
    proof_seconds: float = 0.0
    proof_nodes: int = 0
    used_backend: str = ""
    verifier: BoxVerifier | None = None
    notes: list[str] = field(default_factory=list)
    status: str = Status.OPTIMAL

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class indices as the estimator itself predicts them (the replay)."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        if self.est is None:
            out = []
            for x in X:
                s = self.ens.base + sum(t.value[leaf] for t, leaf in zip(self.ens.trees, self.ens.leaves(x)))
                out.append(int(np.argmax(s)))
            return np.array(out)
        labels = np.asarray(self.est.predict(X))
        classes = list(self.ens.classes)
        return np.array([classes.index(v) for v in labels.tolist()])

    def hint(self, fm: FlipModel, parts_left: int = 1) -> tuple[str, np.ndarray | None]:
        """The MILP solver's answer ("infeasible", "solution" with its point, or "none"): a hint only,
        every claim built on it is proven by `tree_verify`."""
        if fm.model is None:
            return "infeasible", None
        from solvers.milp.backends import choose_backend
        from solvers.milp.result import SolveOptions

        limit = None
        if self.deadline is not None:
            limit = max(self.deadline - time.perf_counter(), 0.05) / max(parts_left, 1) / 2
        choice = choose_backend(self.backend, fm.model)
        res = choice.backend.solve(fm.model, SolveOptions(time_limit=limit))
        self.solves += 1
        self.milp_seconds += res.seconds
        self.used_backend = res.backend
        if res.status == "infeasible":
            return "infeasible", None
        return ("solution", res.x) if res.x is not None else ("none", None)

    def verify(self, lo: np.ndarray, hi: np.ndarray, parts_left: int = 1) -> Verdict:
        """The proof (exact box search) under this question's time budget."""
        if self.verifier is None:
            self.verifier = BoxVerifier(self.ens, self.c, self.x0, self.movable)
        deadline = None
        if self.deadline is not None:
            deadline = time.perf_counter() + max(self.deadline - time.perf_counter(), 0.05) / max(parts_left, 1)
        t = time.perf_counter()
        v = self.verifier.check(lo, hi, deadline=deadline, max_nodes=self.max_nodes)
        self.proof_seconds += time.perf_counter() - t
        self.proof_nodes += v.nodes
        if v.status == "unknown" and self.status == Status.OPTIMAL:
            self.status = Status.TIME_LIMIT
        return v


def as_tree_ensemble(model: Any) -> tuple[TreeEnsemble, Any]:
    """(TreeEnsemble, the scikit-learn estimator or None) for a TreeEnsemble or a fitted estimator."""
    if isinstance(model, TreeEnsemble):
        return model, None
    return tree_ensemble_from_sklearn(model), model


def _prepare(model: Any, point: Any, domain: Any, features: Any, backend: str, time_limit: float | None) -> _Ctx:
    ens, est = as_tree_ensemble(model)
    try:
        x0 = np.asarray(point, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise BadInput("the point must be a vector of numbers") from None
    if x0.size != ens.n_features:
        raise BadInput(f"the point has {x0.size} values but the model takes {ens.n_features} features")
    if not np.all(np.isfinite(x0)):
        raise BadInput("the point contains NaN or inf")
    dom = None
    if domain is not None:
        from models.box import parse_domain

        dom = parse_domain(domain, ens.n_features)
        if np.any(x0 < dom[0]) or np.any(x0 > dom[1]):
            raise BadInput("the point lies outside the domain")
    lo = np.full(ens.n_features, -np.inf) if dom is None else dom[0]
    hi = np.full(ens.n_features, np.inf) if dom is None else dom[1]
    movable = feature_mask(features, ens.n_features)
    if time_limit is not None and not (time_limit > 0):
        raise BadInput("time_limit must be > 0 seconds")
    ctx = _Ctx(ens, est, x0, lo, hi, movable, 0, dom, backend,
               None if time_limit is None else time.perf_counter() + float(time_limit))
    ctx.c = int(ctx.predict(x0)[0])
    return ctx


def _near(x0: float, a: float, b: float, lo: float, hi: float) -> tuple[float, float, float] | None:
    """The float64 interval (a, b] within [lo, hi] as [l, h], and the point of it nearest x0."""
    left = max(first_above(a) if np.isfinite(a) else -np.inf, lo)
    right = min(b, hi)
    if left > right:
        return None
    return left, right, float(min(max(x0, left), right))


def _witness(ctx: _Ctx, fm: FlipModel, sol: np.ndarray | None, blo: np.ndarray, bhi: np.ndarray,
             feature: int | None = None, side: str | None = None) -> np.ndarray | None:
    """A float64 point in the cell the solution selects (nearest x0; along `feature`, the far end)."""
    if sol is None:
        return None
    w = ctx.x0.copy()
    cells = fm.cells(np.asarray(sol))
    for f in range(w.size):
        if blo[f] == bhi[f]:
            w[f] = blo[f]
            continue
        a, b = cells.get(f, (-np.inf, np.inf))
        got = _near(float(ctx.x0[f]), a, b, float(blo[f]), float(bhi[f]))
        if got is None:
            return None
        w[f] = got[2]
        if f == feature:
            w[f] = got[1] if side == "lower" else got[0]
    return w


def _dist_exact(w: np.ndarray, x0: np.ndarray) -> Fraction:
    return max((abs(Fraction(float(a)) - Fraction(float(b))) for a, b in zip(w, x0)), default=Fraction(0))


def _candidates(ctx: _Ctx) -> list[Fraction]:
    """Every value the exact radius can take: 0 and the distances to the cells' near ends."""
    out = {Fraction(0)}
    for f, cs in enumerate(ctx.ens.cutoffs()):
        if not ctx.movable[f]:
            continue
        xf = Fraction(float(ctx.x0[f]))
        for cut in cs:
            if cut >= ctx.x0[f]:
                p = first_above(float(cut))
                if p <= ctx.hi[f]:
                    out.add(Fraction(p) - xf)
            elif cut >= ctx.lo[f]:
                out.add(xf - Fraction(float(cut)))
    return sorted(out)


def _search_box(ctx: _Ctx) -> tuple[np.ndarray, np.ndarray]:
    return np.where(ctx.movable, ctx.lo, ctx.x0), np.where(ctx.movable, ctx.hi, ctx.x0)


def _cell_point(ctx: _Ctx, v: Verdict, feature: int | None = None, side: str | None = None) -> np.ndarray:
    """The point of a flip cell nearest x0 (along `feature`: its far end, toward the box)."""
    q = np.minimum(np.maximum(ctx.x0, v.cell_lo), v.cell_hi)
    if feature is not None:
        q[feature] = v.cell_hi[feature] if side == "lower" else v.cell_lo[feature]
    return q


def _exact_radius(ctx: _Ctx) -> tuple[Fraction | None, np.ndarray | None, Fraction | None]:
    """(proven radius R, or None if no point of the search box may flip; the nearest replayed
    flip found; its exact distance). R is proven by `tree_verify` on the box of points strictly
    closer than R; the MILP's nearest flip only proposes it, and every flip the proof finds
    instead lowers it (finitely often: the distances are candidates)."""
    ens = ctx.ens
    blo, bhi = _search_box(ctx)
    flips: list[np.ndarray] = []

    def consider(w: np.ndarray | None) -> None:
        if w is not None and ctx.predict(w)[0] != ctx.c:
            flips.append(w)

    R: Fraction | None
    if min(ens.margins_exact(ens.leaves(ctx.x0), ctx.c)) <= Fraction(ens.guard):
        ctx.notes.append("the point is within float64 rounding of a tie: no radius can be proven")
        R = Fraction(0)
    else:
        fm = build_flip_model(ens, ctx.c, blo, bhi, 2 * ens.guard, objective="radius", x0=ctx.x0)
        st, sol = ctx.hint(fm, 3)
        p = _witness(ctx, fm, sol, blo, bhi) if st == "solution" else None
        consider(p)
        R = None if p is None else _dist_exact(p, ctx.x0)
        while True:
            v = ctx.verify(*(_inner_box(ctx, R) if R is not None else (blo, bhi)), 2)
            if v.status == "safe":
                if R is None:
                    return None, None, None
                break
            if v.status == "flip":
                q = _cell_point(ctx, v)
                consider(q)
                R = _dist_exact(q, ctx.x0)
                continue
            R = _bisect_radius(ctx, R)
            ctx.notes.append("the proof ran out of budget: lower is the largest candidate radius it proved")
            break
    if not flips or min(_dist_exact(w, ctx.x0) for w in flips) > R:
        # the nearest possible flip is a tie (or within rounding) sklearn resolves to c: find a certain one
        # margin clearly negative: solvers accept rows violated by their tolerance (~1e-9)
        fm2 = build_flip_model(ens, ctx.c, blo, bhi, -(2 * ens.guard + 1e-6), objective="radius", x0=ctx.x0)
        st, sol2 = ctx.hint(fm2, 1)
        consider(_witness(ctx, fm2, sol2, blo, bhi) if st == "solution" else None)
    if not flips:
        return R, None, None
    w = min(flips, key=lambda z: _dist_exact(z, ctx.x0))
    return R, w, _dist_exact(w, ctx.x0)


def _bisect_radius(ctx: _Ctx, R: Fraction | None) -> Fraction:
    """The largest candidate radius below R whose open box the proof closes in the time left."""
    cands = [d for d in _candidates(ctx) if R is None or d < R]
    lo_k, hi_k = 0, len(cands)  # cands[0] = 0 is proven (the point itself keeps its class)
    while hi_k - lo_k > 1:
        mid = (lo_k + hi_k) // 2
        v = ctx.verify(*_inner_box(ctx, cands[mid]), 2)
        if v.status == "safe":
            lo_k = mid
        else:
            hi_k = mid
    return cands[lo_k]


def _inner_box(ctx: _Ctx, R: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds of the points strictly closer than R on the movable features (in the domain)."""
    blo, bhi = ctx.x0.copy(), ctx.x0.copy()
    for f in np.flatnonzero(ctx.movable):
        xf = Fraction(float(ctx.x0[f]))
        a = _up(xf - R)
        if Fraction(a) <= xf - R:
            a = float(np.nextafter(a, np.inf))
        b = _down(xf + R)
        if Fraction(b) >= xf + R:
            b = float(np.nextafter(b, -np.inf))
        blo[f], bhi[f] = max(min(a, ctx.x0[f]), ctx.lo[f]), min(max(b, ctx.x0[f]), ctx.hi[f])
    return blo, bhi


def _label(ctx: _Ctx, idx: int) -> Any:
    return ctx.ens.classes[idx]


def _cert(ctx: _Ctx, t0: float, **kw) -> TreeRobustness:
    return TreeRobustness(
        certified=True, input_norm="linf", seconds=time.perf_counter() - t0, model=ctx.ens.source,
        predicted_class=_label(ctx, ctx.c), point=ctx.x0, features=[int(i) for i in np.flatnonzero(ctx.movable)],
        domain=None if ctx.domain is None else [ctx.domain[0].tolist(), ctx.domain[1].tolist()],
        backend=ctx.used_backend, solves=ctx.solves, milp_seconds=ctx.milp_seconds, proof_seconds=ctx.proof_seconds,
        proof_nodes=ctx.proof_nodes, notes=ctx.notes, **kw)


def tree_radius(model: Any, point: Any, *, domain: Any = None, features: Any = None,
                           backend: str = "auto", time_limit: float | None = None) -> TreeRobustness:
    """Exact linf robustness radius of a tree ensemble at `point` (see the module docstring).

    `model`: a fitted scikit-learn tree classifier (`tree_model.SUPPORTED`) or a `TreeEnsemble`.
    `domain`: (lo, hi) numbers or vectors bounding the inputs (None: all of R^d). `features`: the
    only coordinates allowed to move (default all). `backend`: MILP solver (auto, highs, gurobi,
    cbc); `time_limit` in seconds (a timeout keeps the bounds sound and says so in `status`).
    """
    t0 = time.perf_counter()
    ctx = _prepare(model, point, domain, features, backend, time_limit)
    R, w, dw = _exact_radius(ctx)
    return _radius_cert(ctx, t0, R, w, dw)


def _radius_cert(ctx: _Ctx, t0: float, R: Fraction | None, w, dw) -> TreeRobustness:
    if R is None:
        blo, bhi = _search_box(ctx)
        cover = float(np.max(np.where(ctx.movable, np.maximum(ctx.x0 - ctx.lo, ctx.hi - ctx.x0), 0.0)))
        ctx.notes.append("no point of the domain changes the class: lower is the radius that covers the domain")
        return _cert(ctx, t0, lower=cover, upper=None, status=Status.ROBUST_WITHIN if ctx.status == Status.OPTIMAL
                     else ctx.status, box=Box.from_bounds(blo, bhi) if np.isfinite(blo).all() and np.isfinite(bhi).all() else None,
                     result="radius")
    upper = None if dw is None else _up(dw)
    status = ctx.status
    if status == Status.OPTIMAL and (dw is None or dw != R):
        status = Status.OPEN_GAP
        ctx.notes.append("the nearest cell where the class may change is a tie (or within rounding) that "
                         "scikit-learn resolves to the same class; upper comes from a certain flip")
    blo, bhi = _inner_box(ctx, R)
    return _cert(ctx, t0, lower=_down(R), upper=upper, status=status, box=Box.from_bounds(blo, bhi),
                 result="radius", witness=w, witness_class=None if w is None else _label(ctx, int(ctx.predict(w)[0])))


def tree_hyperrectangle(model: Any, point: Any, *, features: Any = None, domain: Any = (0.0, 1.0),
                                   backend: str = "auto", time_limit: float | None = None) -> TreeRobustness:
    """A maximal box around `point` on which the ensemble's class is proven constant.

    Only `features` (default all) vary; the others stay at x0. `domain` bounds every side (default
    [0, 1]). Mirrors `linear.linear_hyperrectangle`; see the module docstring for the proof.
    """
    t0 = time.perf_counter()
    if domain is None:
        raise BadInput("the hyperrectangle needs the input domain (lo, hi) its sides may not cross")
    ctx = _prepare(model, point, domain, features, backend, time_limit)
    R, w, dw = _exact_radius(ctx)
    radius = _radius_cert(ctx, t0, R, w, dw)
    if R is None:
        radius.result = "hyperrectangle"
        return radius
    if R == 0:
        raise BadInput("the point is within float64 rounding of the decision boundary: no box can be certified")
    blo, bhi = _inner_box(ctx, R)
    sides: list[dict] = []
    todo = [(int(f), s) for f in np.flatnonzero(ctx.movable) for s in ("lower", "upper")]
    for k, (f, side) in enumerate(todo):
        sides.append(_push_side(ctx, blo, bhi, f, side, len(todo) - k))
    box = Box.from_bounds(blo, bhi)
    ctx.notes.append("lower/upper: the linf robustness radius over the chosen features (the starting box)")
    if all(s["maximal"] for s in sides):
        ctx.notes.append("each side is maximal: at the domain edge or with a replayed point of another class "
                         "just beyond it")
    status = ctx.status if ctx.status != Status.OPTIMAL else Status.CERTIFIED
    return _cert(ctx, t0, lower=radius.lower, upper=radius.upper, status=status, box=box, result="hyperrectangle",
                 witness=radius.witness, witness_class=radius.witness_class, sides=sides)


def _push_side(ctx: _Ctx, blo: np.ndarray, bhi: np.ndarray, f: int, side: str, parts_left: int) -> dict:
    """Move one side (in place) as far as proven safe; report whether it is shown maximal.

    The MILP proposes the nearest flip beyond the side; the proof checks the strip between the
    side and that flip; a flip the proof finds in the strip moves the proposal closer."""
    lower = side == "lower"
    out: dict = {"feature": f, "side": side, "maximal": False, "at_domain_edge": False, "witness": None}
    edge = float(ctx.lo[f] if lower else ctx.hi[f])
    old = float(blo[f] if lower else bhi[f])
    if old == edge:
        out.update(maximal=True, at_domain_edge=True)
        return out
    slo, shi = blo.copy(), bhi.copy()
    (slo if lower else shi)[f] = edge
    fm = build_flip_model(ctx.ens, ctx.c, slo, shi, 2 * ctx.ens.guard, objective=side, feature=f)
    st, sol = ctx.hint(fm, parts_left)
    target, blocker = edge, None
    if st == "solution":
        w = _witness(ctx, fm, sol, slo, shi, feature=f, side=side)
        if w is not None and (w[f] < old if lower else w[f] > old):
            blocker = w
            target = first_above(float(w[f])) if lower else float(np.nextafter(w[f], -np.inf))
    while True:
        tlo, thi = blo.copy(), bhi.copy()  # the strip between the side and the proposed target
        if lower:
            tlo[f], thi[f] = target, old
        else:
            tlo[f], thi[f] = old, target
        v = ctx.verify(tlo, thi, parts_left)
        if v.status == "safe":
            (blo if lower else bhi)[f] = target
            break
        if v.status == "unknown":
            ctx.notes.append(f"feature {f} {side} side: the proof ran out of budget; the side was not moved")
            return out
        blocker = _cell_point(ctx, v, f, side)
        target = first_above(float(blocker[f])) if lower else float(np.nextafter(blocker[f], -np.inf))
    if target == edge:
        out.update(maximal=True, at_domain_edge=True)
        return out
    # maximal: a replayed point of another class on the very next float64 beyond the side
    k = int(ctx.predict(blocker)[0])
    adjacent = first_above(float(blocker[f])) == blo[f] if lower else first_above(float(bhi[f])) == blocker[f]
    if k != ctx.c and adjacent:
        out.update(maximal=True, witness=blocker.tolist(), witness_class=_label(ctx, k))
    else:
        ctx.notes.append(f"feature {f} {side} side: proven safe, not shown maximal (the nearest blocking cell is a "
                         "tie or within rounding that scikit-learn resolves to the same class)")
    return out


__all__ = ["TreeRobustness", "as_tree_ensemble", "tree_hyperrectangle", "tree_radius"]
