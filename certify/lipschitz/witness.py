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



__all__ = ["MAX_CUTS", "WitnessSearch", "closed"]
