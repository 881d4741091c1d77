"""The linf radius of image-sized classifiers: a bisection whose every probe is a verification.

The radius MILP needs one binary per unstable ReLU of its box: on MNIST-sized nets (784 inputs,
hundreds of unstable ReLUs around the attack's counterexample) it is far beyond the size-limited
Gurobi licence, and HiGHS's proof does not leave the root in a minute, so the lower bound stayed
the fast bound's. There the exact stage bisects the radius between the proven lower bound and the
best replayed counterexample instead. A probe at radius r asks the verification engine
(`certify.verify`: its attack, then beta-CROWN ReLU splitting on both cores) whether some input of
the box x0 +/- r (moving features only, within the domain) flips the class:

- unsat: no flip within r, so r is a proven lower bound (the box's ends are rounded outward, so
  the box contains the ball of radius r);
- sat: its counterexample, replayed again by the radius's own replay (the float64 network and
  onnxruntime, ties counting as flips), is an upper bound;
- timeout or unknown: undecided.

The proven bound comes first: probes bisect between it and the smallest undecided probe until
they are within LOWER_FIRST of each other; then turns alternate with probes between the undecided
radii and the best counterexample, whose attacks may find closer ones (`_next_probe`).

Each probe gets PROBE_SHARE of the time left (at least PROBE_MIN seconds: a probe shorter than that
barely gets past the verification's attack and root bound; all of it when less would be left for
another probe; PROBE_UNLIMITED without a time limit). The bisection stops at a relative gap of
BISECT_GAP, at the time limit or on Ctrl-C. The interval is sound at every step; it is not exact
(status `open_gap` or `time_limit`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from solvers.runtime import Budget, interrupted

from ..verify.spec import Disjunct, LinearRows, Spec
from .question import FlipQuestion
from .replay import Flip, FlipReplay

# more unstable ReLUs than this in the box of the search radius (symbolic bounds): bisect by
# verification rather than solve the MILP. The digits MLPs of the robustness benchmark have at most
# 64 ReLUs (their MILPs close in seconds); mnist_fc's 256x4 net has 575 unstable ones in the box of
# its attack's radius around prop_0's image, where the MILP's proof did not leave the root in 60 s
SPLIT_UNSTABLE = 100
# ... and only with more moving inputs than this (verification's input-splitting limit: below it,
# e.g. ACAS Xu's 5 inputs, the MILP stays, exact where it closes)
SPLIT_INPUTS = 16
PROBE_SHARE = 0.25
PROBE_MIN = 5.0
PROBE_UNLIMITED = 60.0
BISECT_GAP = 1e-4
LOWER_FIRST = 0.02


@dataclass(frozen=True)
class Probe:
    radius: float
    result: str   # sat / unsat / timeout / unknown
    seconds: float
    nodes: int


@dataclass
class Bisection:
    """The proven lower bound the probes reached, and the probes (in order)."""

    lower: float
    probes: list[Probe] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stop: str = "gap"  # gap (both fronts closed), time (too little left for a probe), interrupted, robust

    def describe(self) -> dict:
        return {"probes": [p.__dict__ for p in self.probes],
                "seconds": sum(p.seconds for p in self.probes), "nodes": sum(p.nodes for p in self.probes)}


def flip_spec(q: FlipQuestion, radius: float) -> Spec:
    """The unsafe set "a flip within linf distance `radius`" as a verification property: the box
    x0 +/- radius (rounded outward) on the moving features, within the domain; one clause per
    competing class (untargeted: f_c - f_j <= 0) or one clause with every row (targeted)."""
    lim_lo, lim_hi = q.limits()
    r = np.where(q.movable, float(radius), 0.0)
    lo = np.maximum(np.nextafter(q.point - r, -np.inf), lim_lo)
    hi = np.minimum(np.nextafter(q.point + r, np.inf), lim_hi)
    C = q.flip.C
    n = q.dim

    def rows(idx: np.ndarray) -> LinearRows:
        k = idx.size
        return LinearRows(np.zeros((k, n)), C[idx].astype(np.float64), np.zeros(k), np.zeros(k, dtype=bool))

    groups = [np.array([j]) for j in range(C.shape[0])] if q.flip.mode == "any" else [np.arange(C.shape[0])]
    clauses = tuple(Disjunct(lo.copy(), hi.copy(), rows(g)) for g in groups)
    return Spec(n, C.shape[1], clauses, source=f"<a flip within linf radius {radius:.9g}>")


def bisect_radius(q: FlipQuestion, replay: FlipReplay, lower: float, search: float, budget: Budget, *,
                  upper: Callable[[], float], on_flip: Callable[[Flip], None],
                  on_lower: Callable[[float], None], seed: int = 0) -> Bisection:
    """Bisect the linf radius between the proven `lower` and min(`upper()`, `search`) (see the
    module doc). `upper()`: the best replayed counterexample's distance so far; `on_flip`
    receives every counterexample the probes find (replayed here), `on_lower` every new proven
    lower bound. The search radius itself is probed first when no counterexample is known (unsat
    there: nothing flips within it)."""
    from ..verify import verify

    out = Bisection(lower)
    undecided: list[float] = []  # radii whose probe was left undecided
    turn = 0
    while True:
        if interrupted():
            out.stop = "interrupted"
            break
        best = min(upper(), search)
        undecided = [u for u in undecided if out.lower < u < best]
        rem = budget.remaining()
        if rem is not None and rem < 0.5:
            out.stop = "time"
            break
        if not math.isfinite(best):
            break
        probe = _next_probe(out.lower, undecided, best, first=not math.isfinite(upper()) and not undecided, turn=turn)
        if probe is None:
            break
        r, front = probe
        turn += 1
        seconds = PROBE_UNLIMITED if rem is None else min(rem, max(PROBE_MIN, PROBE_SHARE * rem))
        if rem is not None and rem - seconds < PROBE_MIN:  # (too little would be left for another probe)
            seconds = rem
        t = time.perf_counter()
        # the upper front's probes look for counterexamples: the root's LPs, up to half the probe,
        # would only delay their search
        res = verify(q.net, flip_spec(q, r), timeout=seconds, reference=q.classifier.reference, seed=seed,
                     root_lp=front != "upper")
        out.probes.append(Probe(float(r), res.result, time.perf_counter() - t, int(res.nodes or 0)))
        if res.result == "unsat":
            out.lower = float(r)
            on_lower(out.lower)
            if r >= search:
                out.stop = "robust"
                break
        elif res.result == "sat":
            flip = replay.check(np.asarray(res.counterexample["x"], dtype=np.float64))
            if flip is None:  # (replayed by `verify` already; a disagreement here leaves r undecided)
                out.notes.append(f"a probe's counterexample at radius {r:.6g} did not replay as a flip")
                undecided.append(r)
            else:
                on_flip(flip)
        else:
            undecided.append(r)
    return out


def _next_probe(lower: float, undecided: list[float], best: float, *, first: bool,
                turn: int) -> tuple[float, str] | None:
    """The next radius to probe and its front ("first", "lower" or "upper"; None: the bisection is
    done). `best`: the best counterexample's distance (or the search radius); `undecided`: the
    probes left undecided, between both.

    The lower front: the geometric midpoint of the proven bound and the smallest undecided probe
    (radii are scale-free, and the probes just above the radius, where a counterexample is hard to
    find, cost the most). Once its gap is within LOWER_FIRST, turns alternate with the upper front:
    the geometric midpoint of the widest gap (by ratio) between the undecided probes and `best`,
    where a probe's attack may find a closer counterexample."""
    if first:
        return best, "first"
    cap = min([best] + undecided)
    lower_open = cap - lower > BISECT_GAP * cap
    points = sorted(undecided) + [best]
    gaps = [(b / a, a, b) for a, b in zip(points, points[1:])]
    widest = max(gaps, default=(1.0, best, best))
    upper_open = widest[0] > 1 + BISECT_GAP
    if lower_open and (not upper_open or cap - lower > LOWER_FIRST * cap or turn % 2 == 0):
        # (the product of the roots: lower * cap can underflow to 0 for a subnormal lower bound)
        return (math.sqrt(lower) * math.sqrt(cap) if lower > 0 else 0.5 * cap), "lower"
    if upper_open:
        return math.sqrt(widest[1]) * math.sqrt(widest[2]), "upper"
    return None


__all__ = ["BISECT_GAP", "Bisection", "Probe", "SPLIT_INPUTS", "SPLIT_UNSTABLE", "bisect_radius", "flip_spec"]
