"""The results of the robustness engines (certificates of the one protocol, `certify.certificate`).

One hierarchy for every classifier: `PointRobustness` holds what every result about one point
carries (`predicted_class`, `target_class`, `point`, `features`, `domain`, `model`); ReLU networks
give `RobustnessRadius` / `RobustnessHyperrectangle`, scikit-learn linear models and tree
ensembles give `ClassifierRobustness` (`classifiers.linear.LinearRobustness`,
`classifiers.trees.TreeRobustness`), and the sampling test gives `ProbabilisticRadius` (never
certified). Consumers (LDP utility, reports) read them alike; `witness` is the JSON name of a
point of another class (`counterexample` for networks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from models.box import Box

from ..certificate import Certificate


@dataclass
class PointRobustness(Certificate):
    """Fields shared by the results about one point."""

    predicted_class: int | None = None
    target_class: int | None = None
    point: np.ndarray | None = None
    features: list[int] = field(default_factory=list)
    domain: list | None = None
    model: str = ""


@dataclass
class RobustnessRadius(PointRobustness):
    """The robustness radius at `point` in `input_norm`: [lower, upper] and a status.

    - `lower` is proven: no input at distance < lower changes the class (the sound-solve bound of
      the MILP, or the fast bound); `upper` is the distance (rounded up) of `counterexample`, a
      point replayed in float64 and onnxruntime whose class changed (ties count). `radius` is
      `upper` when the interval closed (status "optimal": upper - lower <= `gap_tolerance`, the
      larger of 1e-6 of upper and 4 ulps of the runtime's input type at the counterexample's
      largest moving coordinate), else None.
    - status "robust_within": no flip within `max_radius` (or anywhere in the domain): lower is
      that radius and upper is None. "open_gap": the search finished without closing (e.g. only
      the fast bound was asked for, or l2 bounded through the l1/linf radii); "time_limit",
      "interrupted": sound but not tight.
    - `box`: an l_inf box around the point strictly inside the ball of radius `lower` (the class
      is proven on it).
    - `solver`: the exact stage's statistics (nodes, unstable ReLUs, binaries, seconds of the
      bounds, the solver and the proof); `attack`: the attack's.
    """

    KIND: ClassVar[str] = "robustness_radius"

    counterexample: np.ndarray | None = None
    counterexample_class: int | None = None
    binding_class: int | None = None
    max_radius: float | None = None
    search_radius: float | None = None
    fast_lower: float = 0.0
    fast_method: str = "none"
    method: str = "milp"
    backend: str = "none"
    mip_gap: float | None = None
    time_limit: float | None = None
    solver: dict = field(default_factory=dict)
    attack: dict = field(default_factory=dict)
    replay: dict | None = None
    gap_tolerance: float | None = None

    @property
    def radius(self) -> float | None:
        return self.upper if self.exact else None

    def _extra_dict(self) -> dict[str, Any]:
        return {"radius": self.radius, "gap": self.gap, "witness": self.counterexample}

    def __str__(self) -> str:
        up = "inf" if self.upper is None else f"{self.upper:.9g}"
        return (f"class {self.predicted_class} kept within {self.input_norm} radius [{self.lower:.9g}, {up}] "
                f"({self.status}, {self.seconds:.2f}s)")


@dataclass
class RobustnessHyperrectangle(PointRobustness):
    """A box around `point` on which the class is proven constant (`box`), grown side by side from
    the l_inf radius box of the chosen features; `outer_box`: how far each side could move
    before a counterexample is known (`sides[k]["counterexample"]` lies in `box` with that one
    side moved to its outer value). `lower`/`upper`: the l_inf radius of the starting box.

    status "certified": every side is maximal (at the domain edge, or its proof meets a
    counterexample within the gap); "open_gap": some side stopped before its counterexample
    (the fast search only, or a proof that did not close); "time_limit", "interrupted"."""

    KIND: ClassVar[str] = "robustness_hyperrectangle"

    outer_box: Box | None = None
    sides: list[dict] = field(default_factory=list)
    radius: dict = field(default_factory=dict)
    backend: str = "none"
    time_limit: float | None = None

    def pairs(self, which: str = "box") -> list[list[float]] | None:
        """[[lo, hi], ...] per input for `box` or `outer_box` (fixed inputs: lo = hi = x_i)."""
        b = self.box if which == "box" else self.outer_box
        return None if b is None else [[float(a), float(c)] for a, c in zip(b.lo, b.hi)]

    def __str__(self) -> str:
        return f"class {self.predicted_class} proven on {self.box!r} ({self.status}, {self.seconds:.2f}s)"


@dataclass
class ProbabilisticRadius(PointRobustness):
    """A radius found by sampling (Zheng & Hu, sec. 4.2): with probability at least 1 - omega over
    the samples, at most a fraction tau of the l_inf ball of radius `lower` (`box`, within the
    domain) changes the class; omega covers all `tests` of the search (a union bound).
    Never certified. `upper`: the smallest radius whose test failed (None if none did)."""

    KIND: ClassVar[str] = "probabilistic_radius"

    omega: float = 0.05
    tau: float = 0.02
    samples: int = 0
    tests: int = 0
    precision: float = 0.0
    flip_rate: float | None = None
    seed: int | None = None

    def __str__(self) -> str:
        return (f"probabilistic radius {self.lower:.6g} (omega {self.omega:g}, tau {self.tau:g}, "
                f"{self.samples} samples per test, {self.tests} tests)")


@dataclass
class ClassifierRobustness(PointRobustness):
    """An exact robustness radius or hyperrectangle of a scikit-learn classifier (linear model or
    tree ensemble) at `point`: the same fields, JSON and one-line summary; each kind adds its own.

    `lower`/`upper`: proven bounds of the robustness radius in `input_norm` (a hyperrectangle
    reports its starting radius). `box`: a box on which the class is proven constant.
    `witness`: a point of another class at distance `upper` (replayed in the model itself).
    """

    result: str = "radius"
    witness: np.ndarray | None = None
    witness_class: Any = None

    def _extra_dict(self) -> dict:
        return {"gap": self.gap}

    def __str__(self) -> str:
        up = "inf" if self.upper is None else f"{self.upper:.9g}"
        return (f"{self.model}: class {self.predicted_class!r} kept within {self.input_norm} radius "
                f"[{self.lower:.9g}, {up}] ({self.status}); box {self.box!r}")


__all__ = ["ClassifierRobustness", "PointRobustness", "ProbabilisticRadius", "RobustnessHyperrectangle",
           "RobustnessRadius"]
