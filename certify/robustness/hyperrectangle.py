"""Robustness hyperrectangles (Zheng & Hu, Definition 9 and sec. 5.1): a box around x on which the
class is proven constant, with a different extent per feature.

Start from the l_inf radius box of the chosen features (the other features stay at x), then, for
each chosen feature in index order, push its lower side and then its upper side as far as a proof
keeps the class, the other sides fixed at their current extents:

1. fast: bisection on the side's position with sound symbolic box proofs (`fast.FastBounds`);
2. outer: PGD in the slab beyond the proven part (`attack`), bisected toward the box: a replayed
   counterexample bounds how far the side can go (the *outer* box);
3. exact: one MILP per side over the slab between the proven position and the counterexample,
   maximising (lower side) or minimising (upper side) that coordinate over the flips
   (`solvers.milp.robustness.build_side_milp`, solved by the sound-solve policy): the proven bound
   is the first coordinate where a flip can exist, and the side stops one float before it.

Every step proves a slab next to a proven box, so the union (the new box) is proven. A side is
*closed* when its counterexample lies within 1e-6 of the domain width beyond it, or it reached
the domain edge. Counterexamples found for a side keep the other coordinates within the final box
(the other sides only grow), so `outer_box` says: each side alone moved to its outer value
reaches a known counterexample. The result depends on the order of the sides (Definition 9 does
not make the box unique); every side is maximal given the sides before it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.box import Box
from solvers.blas import single_threaded_blas
from solvers.milp.robustness import build_side_milp
from solvers.runtime import Budget, Progress, ProgressCallback, interrupted, interruptible

from ..certificate import issue
from ..errors import BadInput
from .attack import FlipAttack
from .certificate import RobustnessHyperrectangle
from .exact import BoxBounds, run_exact
from .fast import FastBounds
from .geometry import inner_box
from .options import SearchOptions
from .question import Classifier, FlipQuestion
from .radius import _RadiusSearch
from .replay import Flip, FlipReplay

# the radius box may use this share of the time limit; bisection steps of the fast push
RADIUS_SHARE = 0.3
FAST_STEPS = 24
ATTACK_ROUNDS = 6
CLOSED = 1e-6  # a side is closed when its counterexample is this close (times the domain width)


def robustness_hyperrectangle(
    model: Any,
    point: Any,
    *,
    features: Any = None,
    domain: Any = (0.0, 1.0),
    target_class: int | None = None,
    exact: bool = True,
    reference: Any = None,
    progress: ProgressCallback | None = None,
    **options: Any,
) -> RobustnessHyperrectangle:
    """A maximal box around `point` on which the class is proven constant (see the module doc).

    - `features`: the inputs whose sides move (default all); the others stay at the point;
    - `domain`: (lo, hi) the sides never cross (default [0, 1], the normalised feature range of
      the LDP utility);
    - `target_class`: prove only that this class is never reached (default: the class is kept);
    - `exact=False`: fast proofs and the attack only (no MILP);
    - options as `robustness_radius` (`backend`, `time_limit` for the whole call, `mip_gap`,
      `bounds`, `threads`, `seed`, `attack_seconds`).
    """
    t0 = time.perf_counter()
    if domain is None:
        raise BadInput("the hyperrectangle needs the input domain (lo, hi) its sides may not cross, e.g. (0, 1)")
    classifier = Classifier.of(model, reference)
    question = FlipQuestion.of(classifier, point, target_class=target_class, domain=domain, features=features)
    opts = SearchOptions.of(exact=exact, **options)
    budget = Budget(opts.time_limit, start=t0)
    with interruptible(), single_threaded_blas():
        return issue(_Grow(question, opts, budget, progress).run(), classifier)


@dataclass
class _Side:
    feature: int
    side: str  # "lower" or "upper"
    inner: float
    outer: float
    state: str  # "edge", "closed", "open", "time_limit", "interrupted"
    proof: str  # "fast", "milp", "edge"
    counterexample: Flip | None = None

    def to_dict(self) -> dict:
        return {"feature": self.feature, "side": self.side, "inner": self.inner, "outer": self.outer,
                "state": self.state, "proof": self.proof,
                "counterexample": None if self.counterexample is None else self.counterexample.x.tolist()}


class _Grow:
    def __init__(self, q: FlipQuestion, opts: SearchOptions, budget: Budget, progress: ProgressCallback | None) -> None:
        self.q, self.opts, self.budget, self.progress = q, opts, budget, progress
        self.replay = FlipReplay(q, "linf")
        self.fast = FastBounds(q, opts.bounds)
        self.attack = FlipAttack(q, self.replay, opts.seed)
        self.lo_dom, self.hi_dom = q.limits()
        self.notes = list(q.notes)
        self.backends: set[str] = set()
        self.bounds = BoxBounds(q, opts)

    def run(self) -> RobustnessHyperrectangle:
        q = self.q
        rem = self.budget.remaining()
        share = Budget(None if rem is None else RADIUS_SHARE * rem)
        radius = _RadiusSearch(q, "linf", self.opts, math.inf, share, None).run()
        box = inner_box(q.point, radius.lower, "linf", q.movable, self.lo_dom, self.hi_dom)
        if radius.lower == 0 and not self._point_kept():  # (else the radius proves the start box)
            raise BadInput("the point is on the decision boundary (another class ties with it at the point): "
                               "no box around it keeps the class")
        lo, hi = box.lo.copy(), box.hi.copy()
        sides = []
        order = [(int(i), s) for i in np.flatnonzero(q.movable) for s in ("lower", "upper")]
        for k, (i, side) in enumerate(order):
            rec = self._push(lo, hi, i, side, len(order) - k)
            (lo if side == "lower" else hi)[i] = rec.inner
            sides.append(rec)
            self._report(radius, k + 1, len(order))
        return self._certificate(radius, lo, hi, sides)

    def _point_kept(self) -> bool:
        x0 = self.q.point
        return self.fast.kept(Box.from_bounds(x0, x0))

    # ------------------------------------------------------------------ one side
    def _push(self, lo: np.ndarray, hi: np.ndarray, i: int, side: str, left: int) -> _Side:
        lower = side == "lower"
        edge = float(self.lo_dom[i] if lower else self.hi_dom[i])
        start = float(lo[i] if lower else hi[i])
        if start == edge:
            return _Side(i, side, edge, edge, "edge", "edge")
        if self.budget.expired():  # Ctrl-C or the time limit: the side stays where the radius put it
            return _Side(i, side, start, edge, "interrupted" if interrupted() else "time_limit", "fast")
        proven = self._fast_push(lo, hi, i, lower, start, edge)
        if proven == edge:
            return _Side(i, side, edge, edge, "edge", "fast")
        flip = self._outer(lo, hi, i, lower, proven, edge)
        state, how = "open", "fast"
        if self.opts.exact and not self.budget.expired():
            proven, flip, state, how = self._exact_push(lo, hi, i, lower, proven, edge, flip, left)
        if proven == edge and state == "open":
            state = "edge"  # (the MILP proved the whole slab up to the domain edge)
        outer = edge if flip is None else float(flip.x[i])
        width = float(self.hi_dom[i] - self.lo_dom[i])
        if flip is not None and state == "open" and abs(outer - proven) <= CLOSED * width:
            state = "closed"
        return _Side(i, side, proven, outer, state, how, flip)

    def _slab(self, lo: np.ndarray, hi: np.ndarray, i: int, a: float, b: float) -> Box:
        """The current box with coordinate i ranging over [a, b] instead."""
        slo, shi = lo.copy(), hi.copy()
        slo[i], shi[i] = min(a, b), max(a, b)
        return Box.from_bounds(slo, shi)

    def _fast_push(self, lo, hi, i, lower: bool, start: float, edge: float) -> float:
        """The farthest position toward `edge` whose box is proven by the fast bounds (bisection)."""
        if self.fast.kept(self._slab(lo, hi, i, start, edge)):
            return edge
        good, bad = start, edge
        for _ in range(FAST_STEPS):
            mid = 0.5 * (good + bad)
            if mid in (good, bad) or self.budget.expired():
                break
            if self.fast.kept(self._slab(lo, hi, i, start, mid)):  # (the box up to `start` is proven)
                good = mid
            else:
                bad = mid
        return good

    def _outer(self, lo, hi, i, lower: bool, proven: float, edge: float) -> Flip | None:
        """A replayed flip beyond the proven position, as close to it as PGD finds (bisection)."""
        deadline = time.perf_counter() + self.opts.attack_budget() / 4
        if self.budget.deadline is not None:
            deadline = min(deadline, self.budget.deadline)
        closest = (lambda x: -x[i]) if lower else (lambda x: x[i])
        best = self.attack.in_box(self._slab(lo, hi, i, proven, edge), deadline, key=closest)
        for _ in range(ATTACK_ROUNDS):
            if best is None or time.perf_counter() > deadline:
                break
            mid = 0.5 * (proven + float(best.x[i]))
            flip = self.attack.in_box(self._slab(lo, hi, i, proven, mid), deadline, key=closest)
            if flip is None:
                break
            best = flip
        return best

    def _exact_push(self, lo, hi, i, lower: bool, proven: float, edge: float, flip: Flip | None, left: int):
        """The side MILP over the slab between the proven position and the known flip (or the edge)."""
        far = edge if flip is None else float(flip.x[i])
        slab = self._slab(lo, hi, i, proven, far)
        rem = self.budget.remaining()
        budget = Budget(None if rem is None else max(rem, 0.0) / max(left, 1))
        outward = np.zeros(self.q.dim)
        outward[i] = (-1.0 if lower else 1.0) * abs(far - proven)
        stage = run_exact(
            self.q, self.bounds(slab, budget), lambda net, nb: build_side_milp(net, nb, i, "max" if lower else "min", self.q.flip),
            "max" if lower else "min", self.opts, budget,
            settle=lambda x: self.replay.settle(x, within=slab, direction=outward), to_units=float)
        self.notes.extend(stage.notes)
        if stage.sound is not None:
            self.backends.add(stage.sound.backend)
        for f in stage.flips:  # the replayed flip closest to the box
            if flip is None or (f.x[i] > flip.x[i] if lower else f.x[i] < flip.x[i]):
                flip = f
        bound = stage.bound
        if lower:  # no flip has x_i > bound: the side may stop at the first float above it
            side = proven if bound >= proven else max(float(np.nextafter(bound, math.inf)), edge)
        else:
            side = proven if bound <= proven else min(float(np.nextafter(bound, -math.inf)), edge)
        state = stage.status if stage.status in ("time_limit", "interrupted") else "open"
        return side, flip, state, "milp"

    # ------------------------------------------------------------------ result
    def _report(self, radius, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(Progress(self.budget.elapsed(), radius.lower, math.inf if radius.upper is None else radius.upper,
                                   f"side {done}/{total}"))

    def _certificate(self, radius, lo: np.ndarray, hi: np.ndarray, sides: list[_Side]) -> RobustnessHyperrectangle:
        q = self.q
        out_lo, out_hi = lo.copy(), hi.copy()
        for s in sides:
            (out_lo if s.side == "lower" else out_hi)[s.feature] = s.outer
        states = {s.state for s in sides}
        if "interrupted" in states or interrupted():
            status = "interrupted"
        elif "time_limit" in states:
            status = "time_limit"
        elif states <= {"edge", "closed"}:
            status = "certified"
        else:
            status = "open_gap"
            self.notes.append("some sides stopped before their counterexample: "
                              + ("exact=False (fast proofs and the attack only)" if not self.opts.exact
                                 else "the proof and the counterexample did not meet"))
        final = Box.from_bounds(lo, hi)
        return RobustnessHyperrectangle(
            lower=radius.lower, upper=radius.upper, status=status, certified=True, box=final, input_norm="linf",
            seconds=self.budget.elapsed(), notes=self.notes, predicted_class=q.predicted, target_class=q.target,
            point=q.point, features=[int(i) for i in np.flatnonzero(q.movable)],
            domain=[q.domain[0].tolist(), q.domain[1].tolist()], model=q.classifier.name,
            outer_box=Box.from_bounds(out_lo, out_hi), sides=[s.to_dict() for s in sides],
            radius={"lower": radius.lower, "upper": radius.upper, "status": radius.status},
            backend="+".join(sorted(self.backends | ({radius.backend} - {"none"}))) or "none",
            time_limit=self.opts.time_limit)


__all__ = ["robustness_hyperrectangle"]
