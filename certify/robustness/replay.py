"""Counterexample replay: a point is a flip only when certify's float64 evaluation of the network
*and* onnxruntime (the model as users run it) both say so.

No tolerance is used: the point must lie in the domain and in the region asked about (exact
float64 comparisons), keep the fixed inputs at x0 exactly, and reach a margin <= 0 (a tie is a
flip) in both evaluations. Its distance to x0 is rounded up, so it is an upper bound of the
radius. A solver's optimum sits *on* the decision boundary, where rounding decides; `settle`
moves such a point a few ulps to a few millionths further out (away from an anchor) until both
evaluations agree.

`push` is the finishing step of the exact radius: from a solver optimum x* (margin 0 in exact
arithmetic, either sign after rounding) it looks for the closest point *strictly* beyond the
boundary in both evaluations (both runtimes' class changes, no tie):

1. radially: x* + t (x* - x0) for t = 2^-52, 2^-51, ... (a few ulps first), then bisected back
   toward the smallest t that flips;
2. along the boundary's normal: where x* sits the network is affine (the Jacobian of its
   activation pattern; every pattern of the ReLUs within rounding of 0 at x*, which is where a
   linf or l1 optimum usually sits, a vertex of the regions), so the point of that region closest
   to x0 whose margin is below -delta is one LP (linf, l1) or least-distance QP (l2)
   (`geometry.closest_point`): the norm-optimal push, whichever coordinates it moves. The segment
   to that point from the region's closest point with margin <= 0 (the exact local optimum, which
   a solver's x* misses by its tolerances), and from x*, are searched like the radial line (the
   distance grows at most linearly along them, the margin falls linearly).

Every candidate is replayed (`check`); the solvers only guide. The smallest distance wins.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from models.box import Box
from solvers.bounds.types import relu_blocks

from .geometry import closest_point, distance_up
from .question import FlipQuestion

# how far `settle` moves a boundary point beyond it, relative to its distance from the anchor
SETTLE_STEPS = (0.0, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 3e-9, 1e-8, 3e-8, 1e-7, 2e-7, 4e-7, 7e-7, 1e-6, 2e-6, 5e-6, 1e-5)

# `push`: radial steps from 2^-52 (about an ulp of the distance) doubling up to 2^-13 of it; the
# first step along a segment to a local closest point; bisection rounds back toward the boundary
PUSH_RADIAL = (2.0**-52, 2.0**-13)
PUSH_SEGMENT_FIRST = 2.0**-44
PUSH_BISECT = 8
# margin depths (times the largest |logit| at x*) asked of the local closest points, in turn
PUSH_DEPTHS = (2.0**-16, 2.0**-10, 2.0**-4)
# a ReLU input within this fraction of its terms' magnitude of 0 at x* may take either side; at
# most this many such ReLUs are enumerated (2^k patterns, the pattern at x* first)
AMBIGUOUS = 1e-6
MAX_AMBIGUOUS = 5
# no local closest point for regions with more matrix entries than this (too large a dense LP), and
# none started after this many seconds of one push
PUSH_LP_ENTRIES = 4_000_000
PUSH_LP_SECONDS = 2.0


@dataclass(frozen=True)
class Flip:
    """A replayed counterexample: `x`, its distance to x0 (rounded up), the classes and flip
    margins (<= 0) in float64 and onnxruntime."""

    x: np.ndarray
    distance: float
    label: int
    label_runtime: int
    margin: float
    margin_runtime: float

    @property
    def strict(self) -> bool:
        """Beyond the boundary in both evaluations (no tie: both classes changed)."""
        return self.margin < 0 and self.margin_runtime < 0

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.x.tolist(), "distance": self.distance, "class": self.label,
                "class_onnxruntime": self.label_runtime, "margin": self.margin,
                "margin_onnxruntime": self.margin_runtime}


class FlipReplay:
    """Replays candidate points for one question and one norm."""

    def __init__(self, question: FlipQuestion, norm: str) -> None:
        self.q = question
        self.norm = norm
        self.lo, self.hi = question.limits()
        self.replays = 0

    def check(self, x: np.ndarray, within: Box | None = None, strict: bool = False) -> Flip | None:
        """The replayed flip at x, or None (outside the region, or not a flip in both evaluations;
        `strict`: a tie in either is not enough)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if x.size != self.q.dim or not np.all(np.isfinite(x)):
            return None
        if not (np.all(x >= self.lo) and np.all(x <= self.hi)):
            return None
        if within is not None and not within.contains(x):
            return None
        self.replays += 1
        y = self.q.net.forward(x)
        margin = float(self.q.flip.margin(y))
        if margin > 0 or strict and margin == 0:
            return None
        y_rt = self.q.classifier.reference(x)
        margin_rt = float(self.q.flip.margin(y_rt))
        if not (margin_rt < 0 if strict else margin_rt <= 0):  # (NaN from the runtime is not a flip either)
            return None
        return Flip(x.copy(), distance_up(x, self.q.point, self.norm), int(np.argmax(y)), int(np.argmax(y_rt)),
                    margin, margin_rt)

    def settle(self, x: np.ndarray, anchor: np.ndarray | None = None, within: Box | None = None,
               direction: np.ndarray | None = None) -> Flip | None:
        """x, or a point slightly beyond it, that replays: moved along `direction` (default away
        from `anchor`, default x0) by SETTLE_STEPS of its distance, clipped to the region."""
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if direction is None:
            direction = x - (self.q.point if anchor is None else anchor)
        scale = float(np.max(np.abs(direction))) if direction.size else 0.0
        lo, hi = self.lo, self.hi
        if within is not None:
            lo, hi = np.maximum(lo, within.lo), np.minimum(hi, within.hi)
        for step in SETTLE_STEPS:
            cand = np.clip(x + step * direction, lo, hi) if step else np.clip(x, lo, hi)
            flip = self.check(cand, within)
            if flip is not None:
                return flip
            if scale == 0.0:
                break
        return None

    # ------------------------------------------------------------------ the boundary push
    def push(self, x: np.ndarray, closes: Callable[[Flip], bool] | None = None,
             deadline: float | None = None) -> Flip | None:
        """The closest point found strictly beyond the decision boundary near the solver optimum
        x, in both evaluations (module doc), or None. Stops early at a flip `closes` accepts;
        no local closest point is started after `deadline` (perf_counter) or PUSH_LP_SECONDS."""
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if x.size != self.q.dim or not np.all(np.isfinite(x)):
            return None
        x = np.clip(x, self.lo, self.hi)
        done = closes or (lambda f: False)
        stop = time.perf_counter() + PUSH_LP_SECONDS
        deadline = stop if deadline is None else min(deadline, stop)
        best = self._line(x, x - self.q.point, PUSH_RADIAL[0], PUSH_RADIAL[1], from_zero=True)
        if best is not None and done(best):
            return best
        for base, target in self._local_points(x, deadline):
            for start in (base, x) if base is not None else (x,):
                flip = self._line(start, target - start, PUSH_SEGMENT_FIRST, 1.0)
                if flip is not None and (best is None or flip.distance < best.distance):
                    best = flip
            if best is not None and done(best):
                break
        return best

    def _line(self, base: np.ndarray, v: np.ndarray, t_first: float, t_last: float,
              from_zero: bool = False) -> Flip | None:
        """The strict flip at the smallest t found on base + t v (clipped to the region): t doubled
        from t_first to t_last, then bisected back PUSH_BISECT times; the closest one seen."""
        at = lambda t: self.check(np.clip(base + t * v, self.lo, self.hi), strict=True)  # noqa: E731
        if from_zero or not np.any(v):
            flip = self.check(base, strict=True)
            if flip is not None or not np.any(v):
                return flip
        t_bad, t, best, t_good = 0.0, t_first, None, 0.0
        while t <= t_last:
            best = at(t)
            if best is not None:
                t_good = t
                break
            t_bad, t = t, 2.0 * t
        if best is None:
            return None
        for _ in range(PUSH_BISECT):
            mid = 0.5 * (t_bad + t_good)
            flip = at(mid)
            if flip is None:
                t_bad = mid
            else:
                t_good = mid
                if flip.distance <= best.distance:
                    best = flip
        return best

    def _local_points(self, x: np.ndarray, deadline: float | None
                      ) -> Iterator[tuple[np.ndarray | None, np.ndarray]]:
        """(base, target) per activation region at x and competing class: target is the point of the
        region closest to x0 with the margin below -delta that flips strictly in both evaluations;
        base the closest with the margin <= 0 (the local optimum: a solver's x may be off it by its
        tolerances), or None. For a fixed set of active constraints the closest point moves
        linearly with delta, so the segment base -> target is the path of the optimal push."""
        q = self.q
        blocks = relu_blocks(q.net)
        if sum(blk.weight.shape[0] for blk in blocks[:-1]) * x.size > PUSH_LP_ENTRIES:
            return
        h, pattern, near = x, [], []
        for j, blk in enumerate(blocks[:-1]):
            z = blk.weight @ h + blk.bias
            terms = np.abs(blk.weight) @ np.abs(h) + np.abs(blk.bias)
            pattern.append((z > 0).astype(np.float64))
            for i in np.flatnonzero(np.abs(z) <= AMBIGUOUS * terms):
                near.append((abs(z[i]) / terms[i] if terms[i] > 0 else 0.0, j, int(i)))
            h = np.maximum(z, 0.0)
        y = blocks[-1].weight @ h + blocks[-1].bias
        scale = float(np.max(np.abs(y))) or 1.0
        near = sorted(near)[:MAX_AMBIGUOUS]
        C = q.flip.C
        if q.flip.mode == "any":  # one competing class at a time: those (nearly) reached at x
            values = C @ y
            row_sets = [[int(r)] for r in np.argsort(values, kind="stable")
                        if values[r] <= values.min() + AMBIGUOUS * scale]
        else:
            row_sets = [list(range(C.shape[0]))]
        # the pattern at x first, then those with one ambiguous ReLU switched, two, ...
        for flips in sorted(itertools.product((0, 1), repeat=len(near)), key=sum):
            if deadline is not None and time.perf_counter() > deadline:
                return
            pat = [p.copy() for p in pattern]
            for switch, (_, j, i) in zip(flips, near):
                if switch:
                    pat[j][i] = 1.0 - pat[j][i]
            G, g, A, a = _region(blocks, pat)
            for rs in row_sets:
                # the region's rows, and the margin rows C (A x + a) <= -depth
                rows, rhs = np.vstack([G, C[rs] @ A]), np.concatenate([g, -(C[rs] @ a)])
                for depth in PUSH_DEPTHS:
                    target = self._closest(rows, rhs, len(rs), depth * scale)
                    if target is None:
                        break  # (deeper is empty too)
                    if self.check(target, strict=True) is not None:
                        yield self._closest(rows, rhs, len(rs), 0.0), target
                        break

    def _closest(self, rows: np.ndarray, rhs: np.ndarray, margins: int, depth: float) -> np.ndarray | None:
        """The point of {rows x <= rhs, the last `margins` right-hand sides lowered by depth} in the
        region closest to x0."""
        rhs = rhs.copy()
        rhs[len(rhs) - margins:] -= depth
        return closest_point(rows, rhs, self.q.point, self.lo, self.hi, self.norm)


def _region(blocks, pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The closed region of an activation pattern as rows G x <= g, and the network's affine map
    (A, a) on it (the Jacobian of the pattern and its offset)."""
    n = blocks[0].weight.shape[1]
    M, d = np.eye(n), np.zeros(n)
    G, g = [], []
    for blk, s in zip(blocks[:-1], pattern):
        Mz, dz = blk.weight @ M, blk.weight @ d + blk.bias
        sign = 2.0 * s - 1.0  # active: z >= 0, inactive: z <= 0
        G.append(-sign[:, None] * Mz)
        g.append(sign * dz)
        M, d = s[:, None] * Mz, s * dz
    last = blocks[-1]
    return np.vstack(G) if G else np.zeros((0, n)), np.concatenate(g) if g else np.zeros(0), last.weight @ M, \
        last.weight @ d + last.bias


__all__ = ["Flip", "FlipReplay", "PUSH_RADIAL", "SETTLE_STEPS"]
