"""Exact robustness radii of ReLU classifiers (MIPVerify's "closest" adversarial example).

    r* = min ||x - x0||  over x in the domain (movable inputs only) that flip the class

(untargeted: another logit reaches the predicted one; targeted: the target logit is among the
largest; ties count as flips, so the minimum is attained). `robustness_radius` answers in stages
that share one time budget:

1. the question (`question.FlipQuestion`): point, predicted class, flips, domain, features;
2. a point on the boundary already (a tie at x0): radius 0;
3. the fast certified lower bound (`fast`): box proofs and margin-over-Lipschitz radii, no MILP;
4. the attack (`attack`): PGD and a bisection on the radius; its replayed counterexample is the
   first upper bound and bounds the search box;
5. the exact stage (`exact`): the flip MILP over the l_inf box of the search radius, with t
   between the fast bound and the attack's radius, solved by the sound-solve policy; its solver
   points replayed. l1 and linf are MILPs; l2 is Gurobi's convex MIQP when it is licensed and the
   model fits, otherwise a sound interval: r2 >= max(r_inf, r_1 / sqrt(n)) over the exact linf and
   l1 radii (n movable inputs), and the l2 length of the counterexamples.

`lower` is always proven (fast bound or sound-solve bound); `upper` is a replayed counterexample's
distance; the status says whether they met (`certify.robustness.certificate.RobustnessRadius`).
A solver's optimum lies on the decision boundary, where rounding decides (a tie, or no flip, in
one evaluation): the finishing step pushes it strictly beyond the boundary in both evaluations by
the smallest move found (`replay.FlipReplay.push`: radially by ulps, or along the boundary's normal
in its activation region), so that the interval closes as far as floats allow: within
`gap_tolerance` (1e-6 of the radius, or 4 ulps of the runtime's input type at the
counterexample's largest moving coordinate, whichever is larger).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from solvers.blas import single_threaded_blas
from solvers.milp.backends import ModelTooLarge
from solvers.milp.gurobi import GurobiBackend
from solvers.milp.robustness import build_radius_milp
from solvers.norms import parse_norm
from solvers.rounding import down, sqrt_up, up
from solvers.runtime import Budget, ProgressCallback, interrupted, interruptible

from ..certificate import issue
from ..errors import BadInput
from .attack import FlipAttack
from .certificate import RobustnessRadius
from .exact import BoxBounds, ExactStage, objective_units, per_class, radius_units, run_exact
from .fast import FastBounds, FastRadius
from .geometry import cover_radius, distance_up, inner_box
from .live import RadiusProgress
from .options import SearchOptions, parse_max_radius
from .question import Classifier, FlipQuestion
from .replay import Flip, FlipReplay
from .split_radius import BISECT_GAP, SPLIT_INPUTS, SPLIT_UNSTABLE, Bisection, bisect_radius

# lower and upper count as met (status "optimal") when upper - lower <= max(CLOSED_GAP * upper,
# GRID_ULPS spacings of the runtime's input dtype at the counterexample's largest moving coordinate):
# a float32 runtime sees inputs on its grid, so no counterexample can be placed closer than that
CLOSED_GAP = 1e-6
GRID_ULPS = 4
# solver optima (closest first) that the finishing step pushes beyond the boundary at most, and
# the seconds after which it starts no more local LPs
PUSH_POINTS = 4
PUSH_SECONDS = 3.0
# without a domain or a maximum radius the attack grows its radius from this (times max(1, |x0|))
# up to GROW_LIMIT times it; the MILP then proves what it can within the last radius tried
GROW_START, GROW_LIMIT = 1e-2, 1e3
# the fast bound's share of the time limit when exact stages follow
FAST_SHARE = 0.1


def robustness_radius(
    model: Any,
    point: Any,
    *,
    norm: str = "linf",
    target_class: int | None = None,
    domain: Any = None,
    features: Any = None,
    max_radius: float | None = None,
    exact: bool = True,
    reference: Any = None,
    progress: ProgressCallback | None = None,
    **options: Any,
) -> RobustnessRadius:
    """Certified robustness radius of a ReLU classifier at `point` (see the module doc).

    - `model`: a `certify.Network` or an ONNX path (its file is then also the onnxruntime
      reference that counterexamples are replayed in); `reference`: another ONNX path;
    - `norm`: linf, l1 or l2; `target_class`: the class to reach (default: any other class);
    - `domain`: (lo, hi) numbers or vectors the inputs stay in; `features`: the only inputs that
      move (default all); `max_radius`: stop at this radius (status "robust_within" when nothing
      flips within it);
    - `exact=False`: only the fast certified bound and the attack (milliseconds);
    - `progress`: receives `solvers.runtime.Progress` events (the certified interval so far);
    - options (`options.SearchOptions`): `backend` (auto, gurobi, highs, cbc), `time_limit`
      (seconds, the whole call), `mip_gap`, `bounds` (interval, symbolic, lp), `l2_method`
      (auto, miqp, equivalence), `threads`, `seed` (the attack), `attack_seconds`.

    Returns a `RobustnessRadius` with lower <= r* <= upper. Raises `BadInput` on invalid
    arguments. Ctrl-C stops the solve and returns the sound interval reached ("interrupted").
    """
    t0 = time.perf_counter()
    classifier = Classifier.of(model, reference)
    norm = parse_norm(norm)
    question = FlipQuestion.of(classifier, point, target_class=target_class, domain=domain, features=features)
    opts = SearchOptions.of(exact=exact, **options)
    limit = parse_max_radius(max_radius)
    budget = Budget(opts.time_limit, start=t0)
    with interruptible(), single_threaded_blas():
        return issue(_RadiusSearch(question, norm, opts, limit, budget, progress).run(), classifier)


class _RadiusSearch:
    def __init__(self, q: FlipQuestion, norm: str, opts: SearchOptions, max_radius: float, budget: Budget,
                 progress: ProgressCallback | None) -> None:
        self.q, self.norm, self.opts, self.max_radius, self.budget = q, norm, opts, max_radius, budget
        self.replay = FlipReplay(q, norm)
        self.live = RadiusProgress(progress, budget)
        self.notes = list(q.notes)
        self.flips: list[Flip] = []
        self.candidates: list[np.ndarray] = []  # the solvers' optima (in the question's norm), unreplayed
        self.fast = FastRadius(0.0, "none", 0, 0.0)
        self.attack_info: dict = {}
        self.stages: list[ExactStage] = []
        self.method = "fast" if not opts.exact else "milp"
        self.bounds = BoxBounds(q, opts)
        self.grow_cut = False
        self.bisection: Bisection | None = None

    # ------------------------------------------------------------------ the stages
    def run(self) -> RobustnessRadius:
        q = self.q
        if q.flips(q.net.forward(q.point)):
            flip = self.replay.check(q.point)
            if flip is not None:
                self.notes.append("the point itself is on the decision boundary (another class ties with it)")
                return self._certificate(0.0, flip, "optimal", search=0.0)
        lo, hi = q.limits()
        cover = cover_radius(q.point, lo, hi, self.norm)
        search = min(self.max_radius, cover)
        attack = FlipAttack(q, self.replay, self.opts.seed)
        deadline = time.perf_counter() + self.opts.attack_budget()
        if self.budget.deadline is not None:
            deadline = min(deadline, self.budget.deadline)
        t_attack = time.perf_counter()
        scale = max(1.0, float(np.max(np.abs(q.point), initial=0.0)))
        fast_range = search if math.isfinite(search) else GROW_LIMIT * scale
        # (milliseconds on small nets; ~0.4 s per box on MNIST-sized ones, where 40 boxes took 17 s of a
        # 60 s limit: with exact stages to follow it gets FAST_SHARE of the time)
        fast_deadline = self.budget.stage(FAST_SHARE) if self.opts.exact else self.budget.deadline
        self.fast = FastBounds(q, self.opts.bounds).radius(self.norm, fast_range, fast_deadline)
        self.live.update("fast bound", lower=self.fast.lower)
        if not math.isfinite(search):
            search = self._grow(attack, deadline, max(self.fast.lower, GROW_START * scale), GROW_LIMIT * scale)
        flip = attack.smallest(self.norm, min(search, self._upper()), deadline, lower=self.fast.lower)
        self._add(flip)
        self.attack_info = {"seconds": time.perf_counter() - t_attack - self.fast.seconds, "points": attack.points,
                            "upper": None if flip is None else flip.distance, "replays": self.replay.replays}
        self.live.update("attack")
        lower = self.fast.lower
        if self.opts.exact and not self._closed(lower) and lower < search and not self.budget.expired():
            lower = self._exact(search, lower)
        if self.opts.exact and self.method != "relu-split":
            # (the push's local LPs are for solver optima on the boundary; a bisection has none, and one
            # LP over 784 inputs started just before the deadline took 20 s)
            self._push(lower)
        return self._finish(lower, search, cover)

    def _grow(self, attack: FlipAttack, deadline: float, start: float, limit: float) -> float:
        """No domain nor maximum radius: grow the attack's radius until a flip is found."""
        r = start
        while r < limit and time.perf_counter() < deadline:
            flip = attack.in_ball(r, self.norm, deadline)
            if flip is not None:
                self._add(flip)
                return flip.distance
            r *= 4.0
        r = max(r, self.fast.lower)
        if r < limit:  # the attack's time ran out first: the search radius is not a chosen limit
            self.grow_cut = True
        self.notes.append(f"no domain nor maximum radius, and no counterexample within {r:g}: the search is "
                          f"limited to that radius")
        return r

    def _exact(self, search: float, lower: float) -> float:
        """The MILP stage; returns the proven lower bound (search radius when nothing flips)."""
        outer = min(search, self._upper())
        if self.norm == "l2":
            return self._exact_l2(outer, lower)
        if self.norm == "linf" and self._image_sized(outer):
            return self._bisect(search, lower)
        return max(lower, self._solve(self.norm, outer, lower, outer))

    def _image_sized(self, radius: float) -> bool:
        """More than SPLIT_INPUTS moving inputs and more than SPLIT_UNSTABLE unstable ReLUs in the
        box of `radius` (symbolic bounds): the MILP would not get far, the bisection by
        verification does (low-dimensional nets keep the exact MILP)."""
        from solvers.bounds import network_bounds, relu_blocks

        net = self.q.net
        relus = sum(b.weight.shape[0] for b in relu_blocks(net)[:-1])
        if int(np.sum(self.q.movable)) <= SPLIT_INPUTS or relus <= SPLIT_UNSTABLE:
            return False
        box = self.q.box(radius)
        return network_bounds(net, np.array(box.lo), np.array(box.hi), "symbolic").num_unstable > SPLIT_UNSTABLE

    def _bisect(self, search: float, lower: float) -> float:
        """The linf radius by a bisection whose probes are verifications (`split_radius`)."""
        self.method = "relu-split"
        self.bisection = bisect_radius(self.q, self.replay, lower, search, self.budget, upper=self._upper,
                                       on_flip=self._add, on_lower=lambda v: self.live.update("relu split", lower=v),
                                       seed=self.opts.seed)
        self.notes.extend(self.bisection.notes)
        probes = self.bisection.probes
        self.notes.append(f"linf radius bisected by verification (attack and ReLU-splitting branch-and-bound, no "
                          f"MILP: more than {SPLIT_UNSTABLE} unstable ReLUs): {len(probes)} probe(s), "
                          f"{sum(p.result == 'unsat' for p in probes)} proven robust, "
                          f"{sum(p.result == 'sat' for p in probes)} with a counterexample, "
                          f"{sum(p.result not in ('sat', 'unsat') for p in probes)} undecided")
        return max(lower, self.bisection.lower)

    def _solve(self, norm: str, box_radius: float, t_lo: float, t_hi: float) -> float:
        """A proven lower bound of the `norm` radius over the box of `box_radius`, searching
        t_lo <= t <= t_hi: one MILP per competing class (`exact.per_class`), the most promising
        first; each later one searches only below the best counterexample found so far (a class
        without flips below it cannot hold the radius)."""
        q = self.q
        objective = "l2sq" if norm == "l2" else norm
        to_radius = radius_units(objective)
        parts = per_class(q.flip, self._class_order())
        found: list[float] = []
        solved = 0
        for k, rows in enumerate(parts):
            hi = min(t_hi, self._upper(norm))
            if hi < t_lo or self.budget.expired():
                break
            rem = self.budget.remaining()
            share = Budget(None if rem is None else max(rem, 0.0) / (len(parts) - k))
            nb = self.bounds(q.box(min(box_radius, hi)), share)
            stage = run_exact(
                q, nb, lambda net, nb: build_radius_milp(net, nb, q.point, norm, rows, t_lo, hi), "min", self.opts,
                share, settle=lambda x: self._settle(x, norm), to_units=to_radius,
                fallback=objective_units(objective, t_lo), on_progress=self.live.solver_hook(to_radius))
            self.stages.append(stage)
            solved += 1
            for flip in stage.flips:
                self._add(flip)
            if math.isfinite(stage.bound):  # (+inf: no flip to this class within hi)
                found.append(stage.bound)
                self.notes.extend(stage.notes)
            else:  # (the solver's "infeasible" is discarded by the policy and re-proven: expected here)
                self.notes.extend(n for n in stage.notes if "reported the model infeasible" not in n)
        # a class never solved may hold a flip anywhere above t_lo: only t_lo is proven then
        skipped = self.budget.expired() and solved < len(parts)
        proven = min(found + [min(t_hi, self._upper(norm))]) if not skipped else min(found + [t_lo])
        if skipped:
            note = f"the time limit ended the per-class MILPs early ({solved} of {len(parts)} solved)"
            self.stages.append(ExactStage(t_lo, timed_out=True, notes=[note]))
            self.notes.append(note)
        self.live.update("milp", lower=proven if norm == self.norm else None)
        return proven

    def _class_order(self) -> list[int]:
        """Rows of the question's flip: the best counterexample's class first, then by the sound
        margin at the point (smallest first)."""
        q = self.q
        margins = FastBounds.margins_at_point(q)
        order = [int(k) for k in np.argsort(margins, kind="stable")]
        if self.flips and q.flip.mode == "any":
            best = min(self.flips, key=lambda f: f.distance)
            first = int(np.argmin(q.flip.C @ q.net.forward(best.x)))
            order.remove(first)
            order.insert(0, first)
        return order

    def _exact_l2(self, outer: float, lower: float) -> float:
        """l2: Gurobi's MIQP when possible, else the sound interval from the linf and l1 radii."""
        q, opts = self.q, self.opts
        reason = None
        if opts.l2_method == "equivalence":
            reason = "l2_method equivalence"
        elif opts.backend not in ("auto", "gurobi"):
            if opts.l2_method == "miqp":
                raise BadInput(f"the exact l2 radius (MIQP) needs backend gurobi or auto, not {opts.backend}")
            reason = f"backend {opts.backend}"
        else:
            gurobi = GurobiBackend()
            reason = None if gurobi.available() else gurobi.unavailable_reason()
            if reason is None:
                nb = self.bounds(q.box(outer), self.budget)
                milp = build_radius_milp(q.net, nb, q.point, "l2", per_class(q.flip)[0], lower, outer)
                reason = None if milp is None else gurobi.unsupported_reason(milp.model)
            if reason is not None and opts.l2_method == "miqp":
                raise ModelTooLarge(f"the exact l2 radius needs Gurobi's MIQP: {reason}; use l2_method equivalence")
        if reason is None:
            self.method = "miqp"
            return max(lower, self._solve("l2", outer, lower, outer))
        self.method = "equivalence"
        self.notes.append(f"l2 radius bounded through the exact linf and l1 radii ({reason}): r2 >= max(r_inf, "
                          "r1 / sqrt(n)); sound, not exact")
        n = max(int(np.sum(q.movable)), 1)
        # every flip within l2 distance `outer` has linf distance <= outer and l1 distance <= sqrt(n) outer
        r_inf = self._solve("linf", outer, 0.0, outer)
        r_1 = self._solve("l1", outer, 0.0, up(sqrt_up(n) * outer)) if not self.budget.expired() else 0.0
        return max(lower, min(r_inf, outer), min(down(r_1 / sqrt_up(n)), outer))

    def _settle(self, x: np.ndarray, norm: str) -> Flip | None:
        """A solver point: kept for the finishing push (when in the question's norm) and settled."""
        if norm == self.norm:
            self.candidates.append(np.array(x, dtype=np.float64))
        return self.replay.settle(x)

    def _push(self, lower: float) -> None:
        """The finishing step: the solvers' optima (the PUSH_POINTS closest) pushed strictly beyond
        the decision boundary in both evaluations (`FlipReplay.push`: each stops at a point that
        closes the interval), then the best counterexample if it still does not close it or is a
        tie. No local LP starts after the time limit or PUSH_SECONDS (the radial ulp steps are
        always tried)."""
        q = self.q
        closes = lambda f: f.distance - lower <= self._tolerance(f)  # noqa: E731
        deadline = time.perf_counter() + PUSH_SECONDS
        if self.budget.deadline is not None:
            deadline = min(deadline, self.budget.deadline)
        lo, hi = q.limits()
        points = sorted(self.candidates, key=lambda x: distance_up(np.clip(x, lo, hi), q.point, self.norm))
        for x in points[:PUSH_POINTS]:
            self._add(self.replay.push(x, closes=closes, deadline=deadline))
        best = self._best(lower)
        if best is not None and not (best.strict and closes(best)):
            self._add(self.replay.push(best.x, closes=closes, deadline=deadline))

    # ------------------------------------------------------------------ bookkeeping
    def _tolerance(self, flip: Flip) -> float:
        """How far above `lower` the counterexample may lie for the interval to count as closed:
        CLOSED_GAP of its distance, or GRID_ULPS spacings of the runtime's input dtype at its
        largest moving coordinate (the runtime rounds inputs to that grid), whichever is larger."""
        moving = np.abs(flip.x[self.q.movable])
        big = float(np.max(moving)) if moving.size else 0.0
        dtype = self.q.classifier.reference.dtype
        grid = GRID_ULPS * float(np.spacing(dtype(big))) if big > 0 else 0.0
        return max(CLOSED_GAP * flip.distance, grid)

    def _best(self, lower: float) -> Flip | None:
        """The counterexample to report: among those that close the interval, a strict one (no tie
        in either evaluation) first, then the closest; else the closest."""
        if not self.flips:
            return None
        closing = [f for f in self.flips if f.distance - lower <= self._tolerance(f)]
        if closing:
            return min(closing, key=lambda f: (not f.strict, f.distance))
        return min(self.flips, key=lambda f: f.distance)

    def _add(self, flip: Flip | None) -> None:
        if flip is not None:
            self.flips.append(flip)
            self.live.update("counterexample", upper=flip.distance)

    def _upper(self, norm: str | None = None) -> float:
        """The best counterexample's distance (in `norm`, default the question's)."""
        if norm is None or norm == self.norm:
            return min((f.distance for f in self.flips), default=math.inf)
        return min((distance_up(f.x, self.q.point, norm) for f in self.flips), default=math.inf)

    def _closed(self, lower: float) -> bool:
        best = self._best(lower)
        return best is not None and best.distance - lower <= self._tolerance(best)

    def _finish(self, lower: float, search: float, cover: float) -> RobustnessRadius:
        upper = self._upper()
        statuses = {s.status for s in self.stages}
        if lower > upper:
            # both are proofs: only a bug in certify can get here; keep the counterexample (a fact)
            self.notes.append(f"internal inconsistency: the proven lower bound {lower!r} exceeds the replayed "
                              f"counterexample's distance {upper!r}; please report this model")
            lower = upper
        # (a bisection stops with less than a probe's time left, before the budget expires)
        out_of_time = self.budget.expired() or (self.bisection is not None and self.bisection.stop == "time")
        if "interrupted" in statuses or interrupted():
            status = "interrupted"
        elif "time_limit" in statuses or self.grow_cut or (self.opts.exact and not self._closed(lower)
                                                           and lower < search and out_of_time):
            # (also when every MILP closed its bound but the time ran out before a counterexample met it)
            status = "time_limit"
        elif self._closed(lower):
            status = "optimal"
        elif not math.isfinite(upper) and lower >= search:
            status = "robust_within"
            lower = search
            if search >= cover:
                self.notes.append("no point of the domain changes the class: lower is the radius that covers the domain")
        else:
            status = "open_gap"
            if not self.opts.exact:
                self.notes.append("exact=False: the fast certified bound and the attack only")
            elif self.method == "relu-split":
                self.notes.append("a bisection by verification does not close exactly: it stopped with the proven "
                                  f"bound and the best counterexample within a relative gap of about {BISECT_GAP:g}")
            elif self.method == "milp":
                best = self._best(lower)
                within = "" if best is None else f" ({self._tolerance(best):.3g})"
                self.notes.append(f"the proven bound and the best replayed counterexample did not meet within the gap "
                                  f"tolerance{within}: no point strictly beyond the decision boundary in both "
                                  "evaluations was found close enough to the solver's optimum, or the proof's bound "
                                  "stayed below it")
        return self._certificate(lower, self._best(lower), status, search)

    def _certificate(self, lower: float, flip: Flip | None, status: str, search: float) -> RobustnessRadius:
        q = self.q
        lo, hi = q.limits()
        binding = None
        if flip is not None:
            rows = q.flip.C @ q.net.forward(flip.x)
            others = [j for j in range(q.net.output_dim) if j != q.predicted]
            binding = q.target if q.target is not None else others[int(np.argmin(rows))]
        return RobustnessRadius(
            lower=float(lower), upper=None if flip is None else flip.distance, status=status, certified=True,
            box=inner_box(q.point, lower, self.norm, q.movable, lo, hi), input_norm=self.norm,
            seconds=self.budget.elapsed(), notes=list(dict.fromkeys(self.notes)),  # (repeated per class: once)
            predicted_class=q.predicted, target_class=q.target,
            point=q.point, features=[int(i) for i in np.flatnonzero(q.movable)],
            domain=None if q.domain is None else [q.domain[0].tolist(), q.domain[1].tolist()],
            model=q.classifier.name, counterexample=None if flip is None else flip.x,
            counterexample_class=None if flip is None else flip.label, binding_class=binding,
            max_radius=None if not math.isfinite(self.max_radius) else self.max_radius, search_radius=search,
            fast_lower=self.fast.lower, fast_method=self.fast.method, method=self.method,
            backend="+".join(sorted({st.describe()["backend"] for st in self.stages} - {"none"})) or "none",
            mip_gap=self.opts.mip_gap, time_limit=self.opts.time_limit,
            solver=_solver_summary(self.stages) if self.bisection is None else {"bisection": self.bisection.describe()},
            attack=self.attack_info, replay=None if flip is None else _replay_summary(flip, q),
            gap_tolerance=None if flip is None else self._tolerance(flip))


def _solver_summary(stages: list[ExactStage]) -> dict:
    """The exact stages' statistics added up (one stage, or two for the l2 interval)."""
    parts = [st.describe() for st in stages]
    out = {key: sum(p[key] for p in parts) for key in ("nodes", "bound_seconds", "solver_seconds")}
    out["unstable"] = max((p["unstable"] for p in parts), default=0)
    out["binaries"] = max((p["binaries"] for p in parts), default=0)
    proofs = [p["proof"] for p in parts if p["proof"]]
    out["proof"] = {"seconds": sum(p["seconds"] for p in proofs), "nodes": sum(p["nodes"] for p in proofs),
                    "complete": all(p["complete"] for p in proofs)} if proofs else {}
    return out


def _replay_summary(flip: Flip, q: FlipQuestion) -> dict:
    out = {k: v for k, v in flip.to_dict().items() if k not in ("x", "distance")}
    out["onnxruntime"] = q.classifier.reference.source
    return out


__all__ = ["robustness_radius"]
