"""Counterexample replay: a point is a flip only when certify's float64 evaluation of the network
*and* onnxruntime (the model as users run it) both say so.

No tolerance is used: the point must lie in the domain and in the region asked about (exact
float64 comparisons), keep the fixed inputs at x0 exactly, and reach a margin <= 0 (a tie is a
flip) in both evaluations. Its distance to x0 is rounded up, so it is an upper bound of the
radius. A solver's optimum sits *on* the decision boundary, where rounding decides; `settle`
moves such a point a few ulps to a few millionths further out (away from an anchor) until both
evaluations agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.box import Box

from .geometry import distance_up
from .question import FlipQuestion

# how far `settle` moves a boundary point beyond it, relative to its distance from the anchor
SETTLE_STEPS = (0.0, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 3e-9, 1e-8, 3e-8, 1e-7, 2e-7, 4e-7, 7e-7, 1e-6, 2e-6, 5e-6, 1e-5)


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

    def check(self, x: np.ndarray, within: Box | None = None) -> Flip | None:
        """The replayed flip at x, or None (outside the region, or not a flip in both evaluations)."""
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
        if margin > 0:
            return None
        y_rt = self.q.classifier.reference(x)
        margin_rt = float(self.q.flip.margin(y_rt))
        if not margin_rt <= 0:  # (NaN from the runtime is not a flip either)
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


__all__ = ["Flip", "FlipReplay", "SETTLE_STEPS"]
