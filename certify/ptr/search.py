"""R* by bisection on certified decisions: the largest grid radius whose box has constant <= D_p.

Each step asks "is L(f, box(x, r_k)) <= D_p?" and tries the cheapest sound answer first:

1. `cache`: a proven upper bound <= D_p on a box containing this one (every smaller box inherits
   it), or a replayed witness above D_p inside this box (every larger box contains it); with a
   `SharedBounds`, boxes and witnesses of earlier queries on the network count too;
2. `global`: a global upper bound (layer product, or one given) <= D_p;
3. `interval`: the interval-Jacobian bound of the box (symbolic pre-activation bounds) <= D_p;
4. `samples`: exact Jacobian norms at sampled points of the box (centre, uniform points,
   vertices) above D_p;
5. `split`: input splitting with interval-Jacobian and slope-pattern bounds (`split`, inputs up to
   16 dimensions), with a slice of the step's time (`SPLIT_SHARE`);
6. `bab`: the Lipschitz branch-and-bound with D_p as its target (`decide.bab_decide`, inputs up to
   8 dimensions), with half of the rest of the step;
7. `milp`: `decide.milp_decide` (proof of D_p as a target, or a solver incumbent replayed); in a
   stream of queries (a `SharedBounds` given) the widest step first tries the proof on an aligned
   superset box (`aligned_box`), which later queries' widest boxes often fall into.

An accepted step always rests on a proven upper bound and a rejected one on a replayed witness,
so every decided step is the answer the exact constant gives. A step that stays undecided within
its time budget counts as a violation (phi can only get smaller) and is marked so: the privacy
argument (docs/ptr.md) then no longer covers the query, and `SearchResult.decided` is False.
The bisection probes the largest radius first (an ample proposal ends there), then R itself (a
proposal that fails at x ends there), then midpoints. Caches persist across proposals, so a
report searching several proposals at one point reuses every bound and witness.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.box import Box
from models.ir import Network
from solvers.runtime import Budget, interrupted

from ..certificate import Status, to_jsonable
from ..errors import BadInput
from .bounds import global_upper, jacobian_upper, sampled_lower
from .claims import refuted
from .decide import ACCEPT, REJECT, UNDECIDED, bab_decide, milp_decide
from .defaults import DEFAULT_SAMPLES, DEFAULT_STEP_TIME_LIMIT
from .grid import TestGrid
from .shared import SharedBounds
from .split import MAX_SPLIT_INPUTS, SplitDecider

#: share of a step's time given to input splitting before the MILP (all of it without the MILP)
SPLIT_SHARE = 0.1
#: share of the widest step's time for proving the proposal on an aligned superset box (streams only)
ALIGNED_SHARE = 0.5
#: nets with at most this many inputs get the Lipschitz branch-and-bound (input splits, linear
#: Jacobian bounds) after the split stage, with this share of the rest of the step, before the MILP
#: (on a 4-16-16-4 net the MILP left boxes of radius 0.9-3.2 undecided at [13.3, 27.7] against
#: D_p = 23.7 in 10 s, where the branch-and-bound reaches [14.0, 14.7] and [15.1, 15.8])
BAB_INPUTS = 8
BAB_SHARE = 0.5


@dataclass
class Step:
    """One bisection step: the grid index and radius probed, the decision and what it rests on."""

    index: int
    radius: float
    proposal: float
    decision: str
    method: str
    lower: float | None
    upper: float | None
    status: str
    seconds: float
    witness: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({
            "index": self.index, "radius": self.radius, "proposal": self.proposal, "decision": self.decision,
            "method": self.method, "lower": self.lower, "upper": self.upper, "status": self.status,
            "seconds": self.seconds, "witness": self.witness, "notes": self.notes})


@dataclass
class SearchResult:
    """k: the largest accepted grid index (-1: none); `steps` in the order they ran."""

    index: int
    steps: list[Step]
    proposal: float

    @property
    def decided(self) -> bool:
        return all(s.decision != UNDECIDED for s in self.steps)

    def step_at(self, k: int) -> Step | None:
        return next((s for s in reversed(self.steps) if s.index == k), None)


def outward_box(point: np.ndarray, radius: float, domain: Any) -> Box:
    """box(point, radius) with its float bounds rounded outward (it contains the exact box), within `domain`."""
    lo = np.nextafter(point - radius, -np.inf)
    hi = np.nextafter(point + radius, np.inf)
    return Box.from_bounds(lo, hi, domain=domain)


class StabilitySearch:
    """The bisection for one point (`search(proposal)`), with caches shared by every proposal."""

    def __init__(self, net: Network, point: np.ndarray, grid: TestGrid, *, input_norm: str = "linf",
                 output_norm: str = "l1", domain: Any = None, global_bound: float | None = None,
                 step_time_limit: float = DEFAULT_STEP_TIME_LIMIT, time_limit: float | None = None,
                 backend: str = "auto", threads: int = 1, samples: int = DEFAULT_SAMPLES, use_milp: bool = True,
                 shared: SharedBounds | None = None):
        self.net, self.grid = net, grid
        self.x = np.asarray(point, dtype=np.float64).reshape(-1)
        self.p, self.q, self.domain = input_norm, output_norm, domain
        self.step_time_limit, self.backend, self.threads = step_time_limit, backend, threads
        self.samples, self.use_milp = samples, use_milp
        self.budget = Budget(time_limit)
        self._global = global_bound
        # a global bound taken on the user's word (`claims`): every replayed witness is checked against it
        self.claimed_global: float | None = None
        self.uppers: dict[int, float] = {}               # grid index -> proven upper bound of its box
        # witnesses and box bounds, possibly shared with other queries on this network (`shared`)
        self.shared = SharedBounds(net, input_norm, output_norm) if shared is None else shared
        self.shared.check(net, input_norm, output_norm)
        self._stream = shared is not None  # other queries will come: the widest step certifies an aligned box
        self._aligned: set[int] = set()
        self._boxes: dict[int, Box] = {}
        self._sampled: set[int] = set()
        self._interval: set[int] = set()
        self._split = SplitDecider(net, input_norm, output_norm) if net.input_dim <= MAX_SPLIT_INPUTS else None
        # splitting decides low-dimensional boxes with few unstable neurons quickly, and wide ones
        # never: a small slice first keeps the MILP's proof from being starved (measured on 8-32-32-8,
        # R = 0.5: a 0.5 share left steps undecided that the MILP decides in 3 s)
        self.split_share = SPLIT_SHARE if use_milp else 1.0

    # ------------------------------------------------------------------ boxes and caches
    def box(self, k: int) -> Box:
        if k not in self._boxes:
            self._boxes[k] = outward_box(self.x, self.grid.radius_at(k), self.domain)
        return self._boxes[k]

    @property
    def global_bound(self) -> float:
        if self._global is None:
            self._global = global_upper(self.net, self.p, self.q)
        return self._global

    def add_upper(self, k: int, value: float) -> None:
        if value < self.uppers.get(k, math.inf):
            self.uppers[k] = value
            box = self.box(k)
            self.shared.add_upper(np.asarray(box.lo), np.asarray(box.hi), value)

    def add_witness(self, x: np.ndarray, value: float) -> None:
        if self.claimed_global is not None and value > self.claimed_global:
            raise refuted(self.claimed_global, x, value, self.p, self.q)
        self.shared.add_witness(x, value)

    def _cached(self, k: int, proposal: float) -> tuple[str, float | None, float | None, np.ndarray | None] | None:
        up = min((u for j, u in self.uppers.items() if j >= k), default=math.inf)
        if up > proposal:
            box = self.box(k)
            up = min(up, self.shared.upper(np.asarray(box.lo), np.asarray(box.hi)))
        if up <= proposal:
            return ACCEPT, None, up, None
        lower, w = self._lower_in(k)
        if lower is not None and lower > proposal:
            return REJECT, lower, None, w
        return None

    def _lower_in(self, k: int) -> tuple[float | None, np.ndarray | None]:
        """The best witness inside box k (exact float comparisons with the box bounds)."""
        box = self.box(k)
        return self.shared.lower(np.asarray(box.lo), np.asarray(box.hi))

    def _record(self, k: int, d) -> tuple[float | None, np.ndarray | None]:
        """Keep a decider's proven upper bound of box k and its witness; the best witness in box k."""
        self.add_upper(k, d.upper)
        if d.witness is not None and d.lower > 0:
            self.add_witness(d.witness, d.lower)
        return self._lower_in(k)

    # ------------------------------------------------------------------ one step
    def decide(self, k: int, proposal: float) -> Step:
        t0 = time.perf_counter()
        radius = self.grid.radius_at(k)
        # one budget for the whole step from its start (the step limit, or what is left of the query's):
        # the cheap bounds and the samples count too, and every stage after them gets what they left
        # (each stage ends soon after its deadline; the step ends undecided, never on an unproven
        # answer, when the budget runs out)
        rem = self.budget.remaining()
        limits = [v for v in (self.step_time_limit, None if rem is None else max(rem, 0.0)) if v is not None]
        budget = Budget(min(limits) if limits else None, start=t0)

        def share(fraction: float) -> Budget:  # a budget of a fraction of what is left of the step's
            left = budget.remaining()
            return Budget(None if left is None else max(left, 0.0) * fraction)

        def step(decision, method, lower, upper, status=Status.CERTIFIED, witness=None, notes=()) -> Step:
            return Step(k, radius, proposal, decision, method, lower, upper, status, time.perf_counter() - t0,
                        witness, list(notes))

        def out_of_time(method: str, notes: list[str]) -> Step:
            lower, w = self._lower_in(k)
            return step(UNDECIDED, method, lower, self.uppers.get(k),
                        Status.INTERRUPTED if interrupted() else Status.TIME_LIMIT, w, notes)

        hit = self._cached(k, proposal)
        if hit is not None:
            return step(hit[0], "cache", hit[1], hit[2], witness=hit[3])
        if self.global_bound <= proposal:
            self.add_upper(self.grid.max_index, self.global_bound)
            return step(ACCEPT, "global", None, self.global_bound)
        if budget.expired():
            return out_of_time("none", ["no time left for this step"])
        box = self.box(k)
        lo, hi = np.array(box.lo), np.array(box.hi)
        if k not in self._interval:
            self.add_upper(k, jacobian_upper(self.net, lo, hi, self.p, self.q, deadline=budget.deadline))
            if not budget.expired():  # (a bound cut short by the deadline is computed again next time)
                self._interval.add(k)
            if self.uppers[k] <= proposal:
                return step(ACCEPT, "interval", None, self.uppers[k])
        if k not in self._sampled:
            for w, v in sampled_lower(self.net, lo, hi, self.p, self.q, self.samples, seed=k + 1,
                                      deadline=budget.deadline):
                self.add_witness(w, v)
            if not budget.expired():
                self._sampled.add(k)
            lower, w = self._lower_in(k)
            if lower is not None and lower > proposal:
                return step(REJECT, "samples", lower, self.uppers.get(k), witness=w)
        if budget.expired():
            return out_of_time("none", ["no time left for this step"])
        if k == self.grid.max_index and self._stream and k not in self._aligned:
            self._aligned.add(k)
            upper = self._accept_aligned(k, proposal, share(ALIGNED_SHARE))
            if upper is not None:
                lower, w = self._lower_in(k)
                return step(ACCEPT, "milp-aligned", lower, upper, witness=w,
                            notes=["proven on an aligned box containing this one, reusable by later queries"])
        if self._split is not None:
            d = self._split.decide(box, proposal, budget.stage(self.split_share))
            lower, w = self._record(k, d)
            if d.decision != UNDECIDED or not self.use_milp:
                status = Status.CERTIFIED if d.decision != UNDECIDED else Status.TIME_LIMIT
                return step(d.decision, "split", lower, self.uppers.get(k), status, w,
                            [f"input splitting: {d.nodes} boxes ({d.stop})"])
            if budget.expired():
                return out_of_time("split", [f"input splitting: {d.nodes} boxes ({d.stop})",
                                             "no time left for this step"])
        if not self.use_milp:
            lower, w = self._lower_in(k)
            return step(UNDECIDED, "bounds", lower, self.uppers.get(k), Status.OPEN_GAP, w,
                        ["the MILP stage is switched off"])
        if self.net.input_dim <= BAB_INPUTS:
            d = bab_decide(self.net, box, self.p, self.q, proposal, share(BAB_SHARE))
            lower, w = self._record(k, d)
            if d.decision != UNDECIDED:
                return step(d.decision, "bab", lower, self.uppers.get(k), d.status, w, d.notes)
            if budget.expired():
                return out_of_time("bab", d.notes + ["no time left for this step"])
        d = milp_decide(self.net, box, self.p, self.q, proposal, budget, backend=self.backend, threads=self.threads)
        lower, w = self._record(k, d)
        return step(d.decision, "milp", lower, self.uppers.get(k), d.status, w, d.notes)

    def aligned_box(self, k: int) -> Box | None:
        """box k widened outward to multiples of s = 2^ceil(log2 r_k) (exact in binary floating point):
        the widest boxes of nearby queries map to the same aligned box. None when it is box k itself."""
        box = self.box(k)
        lo, hi = np.array(box.lo), np.array(box.hi)
        s = 2.0 ** math.ceil(math.log2(self.grid.radius_at(k)))
        wide = Box.from_bounds(np.floor(lo / s) * s, np.ceil(hi / s) * s, domain=self.domain)
        wlo, whi = np.array(wide.lo), np.array(wide.hi)
        if not (np.all(wlo <= lo) and np.all(whi >= hi)) or (np.array_equal(wlo, lo) and np.array_equal(whi, hi)):
            return None
        return wide

    def _accept_aligned(self, k: int, proposal: float, budget: Budget) -> float | None:
        """Try to prove L <= proposal on the aligned box around box k (a stream of queries then finds it
        in `shared`); the proven upper bound on success. Only an acceptance is used: a witness in
        the aligned box may lie outside box k."""
        wide = self.aligned_box(k)
        if wide is None:
            return None
        d = milp_decide(self.net, wide, self.p, self.q, proposal, budget, backend=self.backend, threads=self.threads)
        if d.witness is not None and d.lower > 0:
            self.add_witness(d.witness, d.lower)
        if d.decision != ACCEPT:
            return None
        self.shared.add_upper(np.array(wide.lo), np.array(wide.hi), d.upper)
        self.add_upper(k, d.upper)  # box k lies inside the aligned box
        return d.upper

    # ------------------------------------------------------------------ the bisection
    def search(self, proposal: float) -> SearchResult:
        """k = the largest grid index whose box is decided "accept" (-1 when none): see the module doc."""
        if not (proposal > 0 and math.isfinite(proposal)):
            raise BadInput(f"the proposal must be a positive finite number, got {proposal}")
        K = self.grid.max_index
        lo, hi = -1, K + 1  # invariant: index lo accepted (or -1), index hi rejected (or K + 1)
        steps: list[Step] = []
        probes = iter((K, 0) if K > 0 else (0,))
        while hi - lo > 1:
            k = next(probes, None)
            if k is None or not lo < k < hi:
                k = (lo + hi) // 2
            s = self.decide(k, proposal)
            steps.append(s)
            if s.decision == ACCEPT:
                lo = k
            else:  # reject, or undecided counted as a violation
                hi = k
        return SearchResult(lo, steps, proposal)


__all__ = ["DEFAULT_SAMPLES", "DEFAULT_STEP_TIME_LIMIT", "SearchResult", "StabilitySearch", "Step", "outward_box"]
