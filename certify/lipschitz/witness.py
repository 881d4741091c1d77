"""Lower bounds of one Lipschitz question: sampled points and replayed solver solutions.

Every value kept here is the norm of an exact Jacobian at a point of the box where the network is
certified differentiable (`replay`), so it is a sound lower bound whatever produced the point.
The same object supplies warm starts to the MILP and the `refine` hook of the sound-solve policy:
when the solver's optimum has no replayable witness and its activation pattern provably has no
interior in the box (a tie pattern), the pattern is cut and the MILP re-solved (the constant is a
supremum over full-dimensional regions, so this keeps every bound sound).
"""

from __future__ import annotations


import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bounds.types import relu_blocks
from solvers.lp import MilpModel
from solvers.milp.lipschitz import LipschitzMilp
from solvers.milp.result import MilpResult
from solvers.regions import has_no_interior, interior_point
from solvers.runtime import Budget

from .options import NormQuestion
from .replay import DifferentiablePoint, differentiable_point, direction_pair, norm_lower, sample_lower

MAX_CUTS = 20  # no-good cuts of degenerate (tie) activation patterns per question


class WitnessSearch:
    """The best replayed lower bound of one question (and its point and direction)."""

    def __init__(self, net: Network, box: Box, question: NormQuestion, budget: Budget) -> None:
        self.net, self.box, self.question, self.budget = net, box, question, budget
        self.blocks = relu_blocks(net)
        self.lower = 0.0
        self.point: DifferentiablePoint | None = None
        self.direction: np.ndarray | None = None
        self.cuts = 0

    def sample(self, samples: int = 32) -> None:
        q = self.question
        lo, hi = np.array(self.box.lo), np.array(self.box.hi)
        self.lower, self.point = sample_lower(self.net, lo, hi, q.p, q.q, q.target, samples=samples, blocks=self.blocks,
                                              deadline=self.budget.stage(0.05))

    def value(self, pt: DifferentiablePoint, pair: tuple[str, str | None], hint=None, side: str = "input") -> float:
        return norm_lower(pt, pair[0], pair[1], self.question.target, hint=hint, hint_side=side)

    def replay(self, milp: LipschitzMilp, pair: tuple[str, str | None], v: np.ndarray) -> float:
        """Replay a solver solution; returns the best value for `pair` (which may be a norm pair
        of an l2 interpolation, not the question's own) and updates the question's lower bound."""
        q = self.question
        own = pair == (q.p, q.q)
        hint = milp.direction(v) if own else None
        side = "input" if milp.formulation == "forward" else "output"
        best = 0.0
        for pt in self._points(milp, v):
            val = self.value(pt, (q.p, q.q), hint, side)
            if val > self.lower or self.point is None:
                self.lower, self.point, self.direction = val, pt, hint
            best = max(best, val if own else self.value(pt, pair))
        return best

    def _points(self, milp: LipschitzMilp, v: np.ndarray) -> list[DifferentiablePoint]:
        """Certified-differentiable points replaying the solution's activation pattern: the
        Chebyshev centre of the pattern's region, else (a tie pattern) the solver's point and
        small random perturbations of it."""
        lo, hi = np.array(self.box.lo), np.array(self.box.hi)
        x0 = interior_point(self.net, milp.pattern(v), lo, hi)
        if x0 is not None:
            pt = differentiable_point(self.net, x0, self.blocks)
            if pt is not None:
                return [pt]
        xs = np.clip(milp.point(v), lo, hi)
        rng = np.random.default_rng(0)
        candidates = [xs] + [np.clip(xs + s * (hi - lo) * rng.uniform(-1, 1, xs.size), lo, hi)
                             for s in (1e-7, 1e-5, 1e-3) for _ in range(4)]
        out = []
        for x in candidates:
            if self.budget.expired():
                break
            pt = differentiable_point(self.net, x, self.blocks)
            if pt is not None:
                out.append(pt)
        return out

    def start(self, milp: LipschitzMilp, pair: tuple[str, str | None]) -> np.ndarray | None:
        """A warm start for `milp`: the best point so far with its pattern and best direction."""
        rem = self.budget.remaining()
        if self.point is None or self.budget.expired() or (rem is not None and rem < 1.0):
            return None
        w, c = direction_pair(self.point.jacobian, pair[0], pair[1], self.question.target)
        limit = 5.0 if rem is None else min(5.0, 0.1 * rem)
        return milp.start(self.point.x, self.point.pattern, w if milp.formulation == "forward" else c, limit)

    def check_point(self, net_bounds, milp: LipschitzMilp):
        """The policy's `check_point` hook: a solver point must respect the sound bounds."""
        def check(v: np.ndarray) -> str | None:
            x = np.clip(milp.point(v), net_bounds.lo, net_bounds.hi)
            for j, z in enumerate(self.net.preactivations(x)):
                tol = 1e-9 * (1.0 + np.abs(net_bounds.pre_lo[j]) + np.abs(net_bounds.pre_hi[j]))
                if np.any(z < net_bounds.pre_lo[j] - tol) or np.any(z > net_bounds.pre_hi[j] + tol):
                    return f"ReLU layer {j}"
            return None
        return check

    def refine(self, holder: list[LipschitzMilp], pair: tuple[str, str | None], mip_gap: float):
        """The policy's `refine` hook for the MILP in holder[0] (replaced when a pattern is cut)."""
        def hook(model: MilpModel, res: MilpResult) -> MilpModel | None:
            milp = holder[0]
            sub_lower = self.replay(milp, pair, res.x)
            if (res.bound is None or closed(sub_lower, milp.to_lipschitz(res.bound), mip_gap)
                    or self.cuts >= MAX_CUTS or milp.num_binaries == 0 or self.budget.expired()):
                return None
            # the optimum has no replayable witness: cut its pattern if its region has no interior
            lo, hi = np.array(self.box.lo), np.array(self.box.hi)
            pattern = milp.pattern(res.x)
            if interior_point(self.net, pattern, lo, hi) is not None or not has_no_interior(self.net, pattern, lo, hi):
                return None
            holder[0] = milp.without_pattern(res.x)
            self.cuts += 1
            return holder[0].model
        return hook

    def seconds_left(self) -> float | None:
        rem = self.budget.remaining()
        return None if rem is None else max(rem, 0.0)


def closed(lower: float, upper: float, mip_gap: float) -> bool:
    """Do lower and upper meet up to the MIP gap (at least 1e-7 relative, for round-off)?"""
    return upper - lower <= 1.5 * max(mip_gap, 1e-7) * abs(upper) + 1e-300



def walk_regions(search: WitnessSearch, deadline: float | None, starts: int = 16, steps: int = 30,
                 seed: int = 0, pool: int = 256, rounds: int = 8) -> None:
    """Stronger lower bounds: hill-climb across activation regions from the best points found.

    ||J|| is constant on each region, so gradients say nothing; instead, from a point x the walk
    crosses the nearest region boundaries (the hyperplanes z_i = 0 of neurons close to 0, stepping
    just past them along grad z_i) and moves to the neighbouring region whose Jacobian norm is
    largest, while that improves. Every value kept is a replayed witness (`WitnessSearch.value`)."""
    q = search.question
    rng = np.random.default_rng(seed)
    lo, hi = np.array(search.box.lo), np.array(search.box.hi)
    blocks = search.blocks
    for r in range(rounds):
        # start from the best of a fresh random pool (and the best point so far)
        pool_x = rng.uniform(lo, hi, (pool, lo.size))
        vals = np.array([_value_at(search, x, q) for x in pool_x])
        points = ([search.point.x] if search.point is not None and r == 0 else []) + list(pool_x[np.argsort(-vals)[:starts]])
        if not _climb(search, points, q, blocks, lo, hi, steps, deadline):
            return


def _climb(search, points, q, blocks, lo, hi, steps, deadline) -> bool:
    """Greedy walks from `points`; False when the deadline passed."""
    import time

    for x in points:
        current = _value_at(search, x, q)
        for _ in range(steps):
            if deadline is not None and time.perf_counter() > deadline:
                return False
            best, best_x = current, None
            for y in _neighbours(blocks, x, lo, hi):
                v = _value_at(search, y, q)
                if v > best * (1 + 1e-12):
                    best, best_x = v, y
            if best_x is None:
                break
            x, current = best_x, best
    return True


def _value_at(search: WitnessSearch, x: np.ndarray, q) -> float:
    pt = differentiable_point(search.net, x, search.blocks)
    if pt is None:
        return -np.inf
    val = search.value(pt, (q.p, q.q))
    if val > search.lower or search.point is None:
        search.lower, search.point = val, pt
    return val


def _neighbours(blocks, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, k: int = 8) -> list[np.ndarray]:
    """Points just across the k nearest ReLU boundaries from x (inside the box)."""
    h, J = x, np.eye(x.size)
    cands = []
    for blk in blocks[:-1]:
        z, G = blk.weight @ h + blk.bias, blk.weight @ J
        gn = np.sqrt((G * G).sum(axis=1))
        # A neuron whose pre-activation does not depend on x has no boundary to cross.
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.where(gn > 1e-150, np.abs(z) / gn, np.inf)
        for i in np.argsort(dist)[:k]:
            if not np.isfinite(dist[i]):
                break
            step = -(z[i] / gn[i] ** 2) * G[i] * 1.001 - np.sign(z[i]) * G[i] / gn[i] * 1e-9 * (1 + np.abs(x).max())
            cands.append((dist[i], np.clip(x + step, lo, hi)))
        s = (z > 0).astype(float)
        h, J = s * z, s[:, None] * G
    cands.sort(key=lambda t: t[0])
    return [c for _, c in cands[:k]]


__all__ = ["MAX_CUTS", "WitnessSearch", "closed", "walk_regions"]
