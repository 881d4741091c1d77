"""Falsification for robustness questions: seeded PGD toward flips in a norm ball or a box.

The search is the project's one falsifier core (`solvers.pgd.Search`, also verification's): the
flip set is a DNF of class-margin rows (untargeted: one target per other class, f_c - f_j <= 0;
targeted: one target with every row f_j - f_k <= 0), each restart descends toward the target
closest to a flip (float32, half of the restarts on the leaky-ReLU gradient). Steps: signed
gradients (linf, boxes), normalised gradients (l2), the largest coordinates of the gradient (l1);
projection on the ball, then on the domain box (which keeps the ball: clipping toward a box that
contains x0 shortens every coordinate). Candidates are re-evaluated in float64.
A point found is pulled back toward x0 along its segment while it still flips, then replayed
(`replay.FlipReplay`): only replayed points are returned. `smallest` searches the smallest radius
with a flip by bisection over PGD runs: an upper bound of the exact radius, never a proof.
"""

from __future__ import annotations

import math
import time

import numpy as np

from models.box import Box
from solvers.batch_net import BatchNet
from solvers.pgd import Search, Targets

from .question import FlipQuestion
from .replay import Flip, FlipReplay

STEPS = 40
RESTARTS = 8
# bisection rounds of `smallest` and the relative precision at which it stops
ROUNDS = 12
PRECISION = 1e-4


class FlipAttack:
    """PGD on one question; `seed` makes every run reproducible."""

    def __init__(self, question: FlipQuestion, replay: FlipReplay, seed: int = 0) -> None:
        self.q, self.replay = question, replay
        self.batch = BatchNet(question.net)  # float64: the flip margins of candidates
        self.search = Search(question.net)  # float32: the gradient search
        self.rng = np.random.default_rng(seed)
        self.C = question.flip.C
        self.any = question.flip.mode == "any"
        m = question.net.output_dim
        zero = np.zeros((1, question.dim))
        rows = ([(zero, c[None], np.zeros(1)) for c in self.C] if self.any
                else [(np.zeros((len(self.C), question.dim)), self.C, np.zeros(len(self.C)))])
        self.targets = Targets.of(rows, question.dim, m)
        self.evaluated = 0

    @property
    def points(self) -> int:
        """Points pushed through the network (float64 evaluations and gradient-search steps)."""
        return self.evaluated + self.search.points

    # ------------------------------------------------------------------ loss
    def margins(self, X: np.ndarray) -> np.ndarray:
        rows = self.batch.rows(len(X))  # in chunks within the memory budget (all at once when they fit)
        if rows < len(X):
            return np.concatenate([self.margins(X[s:s + rows]) for s in range(0, len(X), rows)])
        Y, _ = self.batch.forward(X)
        self.evaluated += len(X)
        V = Y @ self.C.T
        return V.min(axis=1) if self.any else V.max(axis=1)

    # ------------------------------------------------------------------ PGD
    def _descend(self, X: np.ndarray, project, step_size, steps: int, deadline: float) -> np.ndarray:
        """PGD from the rows of X toward the closest flip; returns the points that flip (float64)."""
        found = []
        free = self.q.movable.astype(np.float64)

        def hit(P: np.ndarray, _m: np.ndarray) -> bool:
            found.append(P)
            return False

        best_x, best_m = self.search.descend(X, self.targets, np.full(len(X), -1), steps=steps, deadline=deadline,
                                             project=project, step=lambda g, frac: step_size(g * free, frac),
                                             found=hit, first=0.27, last=0.02, saturate=False)
        found.append(best_x[best_m >= 0])
        P = np.vstack(found)
        return P[self.margins(P) <= 0] if len(P) else P

    def _pull_back(self, X: np.ndarray) -> np.ndarray:
        """Each flipping point moved toward x0 along its segment while it still flips (bisection)."""
        x0 = self.q.point
        lo, hi = np.zeros(len(X)), np.ones(len(X))
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            m = self.margins(x0 + mid[:, None] * (X - x0))
            hi = np.where(m <= 0, mid, hi)
            lo = np.where(m <= 0, lo, mid)
        return x0 + hi[:, None] * (X - x0)

    def _best_replayed(self, X: np.ndarray, within: Box | None, key) -> Flip | None:
        """The best (by `key`) candidate that replays, trying the most promising few."""
        if not len(X):
            return None
        order = np.argsort([key(x) for x in X])[:8]
        for i in order:
            flip = self.replay.settle(X[i], within=within)
            if flip is not None:
                return flip
        return None

    # ------------------------------------------------------------------ regions
    def in_ball(self, radius: float, norm: str, deadline: float, restarts: int = RESTARTS) -> Flip | None:
        """A replayed flip with ||x - x0|| <= radius (norm), or None."""
        restarts = self.batch.rows(restarts)  # within the memory budget
        x0, free = self.q.point, self.q.movable
        lo, hi = self.q.limits()
        box_lo, box_hi = np.maximum(x0 - radius, lo), np.minimum(x0 + radius, hi)

        def project(X):
            D = X - x0
            if norm == "l2":
                n = np.linalg.norm(D, axis=1, keepdims=True)
                D = D * np.minimum(1.0, radius / np.maximum(n, 1e-300))
            elif norm == "l1":
                D = _project_l1(D, radius)
            return np.clip(x0 + D, box_lo, box_hi)

        def step(g, frac):
            if norm == "linf":
                return frac * radius * np.sign(g)
            if norm == "l2":
                return frac * radius * g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300)
            k = max(1, int(math.ceil(0.05 * np.sum(free))))
            top = np.argsort(-np.abs(g), axis=1)[:, :k]
            out = np.zeros_like(g)
            np.put_along_axis(out, top, np.sign(np.take_along_axis(g, top, axis=1)), axis=1)
            return frac * radius / k * 4.0 * out

        starts = np.vstack([x0[None], project(x0 + self.rng.uniform(-radius, radius, (restarts - 1, x0.size)) * free)])
        X = self._descend(starts, project, step, STEPS, deadline)
        if len(X):
            X = self._pull_back(X)
        return self._best_replayed(X, None, lambda x: np.linalg.norm(x - x0, ord={"linf": np.inf, "l1": 1, "l2": 2}[norm]))

    def in_box(self, box: Box, deadline: float, key=None, restarts: int = RESTARTS) -> Flip | None:
        """A replayed flip inside `box` (the best by `key`, default the flip margin), or None."""
        restarts = self.batch.rows(restarts)  # within the memory budget
        width = box.hi - box.lo

        def project(X):
            return np.clip(X, box.lo, box.hi)

        starts = np.vstack([box.mid[None], box.lo + self.rng.random((restarts - 1, box.dim)) * width])
        X = self._descend(starts, project, lambda g, frac: frac * width * np.sign(g), STEPS, deadline)
        return self._best_replayed(X, box, key or (lambda x: float(self.margins(x[None])[0])))

    def smallest(self, norm: str, radius: float, deadline: float, lower: float = 0.0) -> Flip | None:
        """The smallest-radius flip found: PGD at `radius`, then bisection on the radius between
        `lower` and the best flip so far (an upper bound of the exact radius)."""
        best = self.in_ball(radius, norm, deadline)
        if best is None:
            return None
        lo = float(lower)
        for _ in range(ROUNDS):
            if time.perf_counter() > deadline or best.distance - lo <= PRECISION * best.distance:
                break
            mid = 0.5 * (lo + best.distance)
            flip = self.in_ball(mid, norm, deadline)
            if flip is not None and flip.distance < best.distance:
                best = flip
            else:
                lo = mid
        return best


def _project_l1(D: np.ndarray, radius: float) -> np.ndarray:
    """Rows of D projected on the l1 ball of the radius (Duchi et al. 2008, by sorting)."""
    a = np.abs(D)
    inside = a.sum(axis=1) <= radius
    if np.all(inside):
        return D
    s = -np.sort(-a, axis=1)
    cums = np.cumsum(s, axis=1) - radius
    k = np.arange(1, D.shape[1] + 1)
    rho = np.sum(s * k > cums, axis=1)
    theta = np.maximum(cums[np.arange(len(D)), rho - 1] / rho, 0.0)
    out = np.sign(D) * np.maximum(a - theta[:, None], 0.0)
    return np.where(inside[:, None], D, out)


__all__ = ["FlipAttack"]
