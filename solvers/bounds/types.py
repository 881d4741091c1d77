"""Bounds on the pre-activations of a ReLU network over an input box."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.errors import ModelError
from models.ir import Affine, Network

from ..phases import ACTIVE, INACTIVE, UNSTABLE, phases  # noqa: F401  (the bounds package exports them)

# runs of adjacent affine layers are multiplied out in float64; a relative rounding error bound
# above this (catastrophic cancellation) is refused rather than absorbed into the certificate. It
# stays below the MILP's 1e-9 relative widening; wide layers (512 x 512) bound at ~1e-12.
FUSION_TOLERANCE = 1e-10


def relu_blocks(net: Network) -> list[Affine]:
    """Affine maps [A_0, ..., A_K-1] of the fused net with a ReLU between consecutive maps.

    A ReLU follows every map except the last; a net ending with a ReLU gets an identity last map.
    ReLU layer j is the one applied to the output of A_j, so `net.preactivations(x)[j]` is z_j.
    """
    err = net.fusion_error()
    if err > FUSION_TOLERANCE:
        raise ModelError(
            f"consecutive affine layers of the model cancel in float64 (their product has a relative rounding "
            f"error up to {err:.1e}), so no exact certificate can be built on it; fold those layers in higher "
            "precision, or remove the cancellation, before certifying")
    blocks, _ = net.affine_blocks()
    return blocks


@dataclass
class StepStats:
    """What one tightening step did: seconds spent, unstable neurons per layer after it, LPs solved."""

    name: str
    seconds: float = 0.0
    unstable: list[int] = field(default_factory=list)
    lps: int = 0

    def to_dict(self) -> dict:
        return {"name": self.name, "seconds": self.seconds, "unstable": list(self.unstable),
                "unstable_total": int(sum(self.unstable)), "lps": self.lps}


@dataclass
class Bounds:
    """Sound float64 bounds over the box lo <= x <= hi, or over a batch of boxes.

    `pre_lo[j]`, `pre_hi[j]` bound the input z_j of ReLU layer j (see `relu_blocks`);
    `out_lo`, `out_hi` bound the network output. Every bound holds for every x in the box
    (computed in float64 and widened for rounding). One box: vectors (n,); a batch of B boxes
    (`bound_boxes`): rows of (B, n) arrays, `box(b)` is box b's bounds. With fixed ReLU phases,
    `empty[b]` marks a box whose phases cannot hold (its bounds are placeholders).
    `relaxed`: the relaxed layers and magnitudes of the symbolic step (to bound output rows).
    """

    lo: np.ndarray
    hi: np.ndarray
    pre_lo: list[np.ndarray]
    pre_hi: list[np.ndarray]
    out_lo: np.ndarray
    out_hi: np.ndarray
    method: str
    steps: list[StepStats] = field(default_factory=list)
    empty: np.ndarray | None = None
    relaxed: Any = field(default=None, repr=False, compare=False)

    @property
    def num_layers(self) -> int:
        return len(self.pre_lo)

    @property
    def batch(self) -> int:
        """Boxes held (1 for one box)."""
        return 1 if self.lo.ndim == 1 else self.lo.shape[0]

    def box(self, b: int) -> "Bounds":
        """The bounds of box b of a batch (copies: a view would keep the whole batch alive)."""
        return Bounds(self.lo[b].copy(), self.hi[b].copy(), [l[b].copy() for l in self.pre_lo],
                             [u[b].copy() for u in self.pre_hi], self.out_lo[b].copy(), self.out_hi[b].copy(),
                             self.method)

    @staticmethod
    def stack(boxes: "list[Bounds]") -> "Bounds":
        """One batch from the bounds of single boxes (e.g. the parents of a batch of nodes)."""
        def rows(get):
            return np.stack([get(b) for b in boxes])

        K = boxes[0].num_layers
        return Bounds(rows(lambda b: b.lo), rows(lambda b: b.hi), [rows(lambda b: b.pre_lo[j]) for j in range(K)],
                             [rows(lambda b: b.pre_hi[j]) for j in range(K)], rows(lambda b: b.out_lo),
                             rows(lambda b: b.out_hi), boxes[0].method)

    def phase(self, j: int) -> np.ndarray:
        return phases(self.pre_lo[j], self.pre_hi[j])

    def phases(self) -> list[np.ndarray]:
        return [self.phase(j) for j in range(self.num_layers)]

    def unstable_counts(self) -> list[int]:
        return [int(np.sum(self.phase(j) == UNSTABLE)) for j in range(self.num_layers)]

    @property
    def num_unstable(self) -> int:
        return int(sum(self.unstable_counts()))

    @property
    def seconds(self) -> float:
        return float(sum(s.seconds for s in self.steps))

    def post_bounds(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the ReLU output relu(z_j)."""
        return np.maximum(self.pre_lo[j], 0.0), np.maximum(self.pre_hi[j], 0.0)

    def summary(self) -> dict:
        return {"method": self.method, "unstable": self.unstable_counts(), "unstable_total": self.num_unstable,
                "seconds": self.seconds, "steps": [s.to_dict() for s in self.steps]}
