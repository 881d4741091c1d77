"""The certificate shared by the exact robustness results of scikit-learn classifiers (linear
models and tree ensembles): the same fields, JSON and one-line summary; each kind adds its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..certificate import Certificate


@dataclass
class ClassifierRobustness(Certificate):
    """A certified robustness radius or hyperrectangle of a classifier at `point`.

    `lower`/`upper`: proven bounds of the robustness radius in `input_norm` (a hyperrectangle
    reports its starting radius). `box`: a box on which the class is proven constant.
    `witness`: a point of another class at distance `upper` (replayed in the model itself).
    """

    result: str = "radius"
    model: str = ""
    predicted_class: Any = None
    point: np.ndarray | None = None
    features: list[int] = field(default_factory=list)
    domain: list | None = None
    witness: np.ndarray | None = None
    witness_class: Any = None

    def _extra_dict(self) -> dict:
        return {"gap": self.gap}

    def __str__(self) -> str:
        up = "inf" if self.upper is None else f"{self.upper:.9g}"
        return (f"{self.model}: class {self.predicted_class!r} kept within {self.input_norm} radius "
                f"[{self.lower:.9g}, {up}] ({self.status}); box {self.box!r}")


__all__ = ["ClassifierRobustness"]
