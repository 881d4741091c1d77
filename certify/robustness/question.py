"""The validated question every robustness engine answers: which inputs count as a flip.

A `Classifier` is a ReLU network (the exact object of every proof) with the onnxruntime session that
replays counterexamples (the ONNX file it came from, else a float64 ONNX export of the network).
A `FlipQuestion` fixes the point x0, its predicted class c = argmax f(x0) (the first index on a
tie, as numpy), the target class k (targeted) or none, the features allowed to move (the others
stay at x0) and the input domain. Flips are decided by class-margin rows (`FlipRows`):

- untargeted: f_c - f_j <= 0 for some j != c;
- targeted:   f_j - f_k <= 0 for every j != k (k is among the largest logits).

Ties count as flips: a point where another class reaches the predicted logit is not robust.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.box import Box, parse_domain
from models.ir import Network
from models.onnx_reference import OnnxReference, resolve_model
from solvers.milp.robustness import FlipRows

from ..boundary.indices import class_index, feature_mask
from ..errors import BadInput


@dataclass(frozen=True)
class Classifier:
    """A network, the runtime that replays its counterexamples, a name and how it was resolved."""

    net: Network
    reference: OnnxReference
    name: str
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, model: Any, reference: Any = None) -> "Classifier":
        """From a `Network` or an ONNX path; `reference`: an `OnnxReference` or ONNX path
        (default: the model's file, else a float64 ONNX export of the network): `resolve_model`."""
        if isinstance(model, Classifier):
            return model
        net, reference, name, notes = resolve_model(model, reference)
        if net.output_dim < 2:
            raise BadInput(f"robustness needs a classifier with one output per class (at least 2); this model has "
                           f"{net.output_dim} output (a scalar score: compare it with a threshold as two logits, "
                           "e.g. append the layer [s, 0])")
        return cls(net, reference, name, notes)


@dataclass(frozen=True)
class FlipQuestion:
    """x0, its class, what counts as a flip, which inputs move and the domain (see module doc)."""

    classifier: Classifier
    point: np.ndarray
    predicted: int
    target: int | None
    flip: FlipRows
    movable: np.ndarray
    domain: tuple[np.ndarray, np.ndarray] | None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, classifier: Classifier, point: Any, *, target_class: Any = None, domain: Any = None,
           features: Any = None) -> "FlipQuestion":
        net = classifier.net
        try:
            x0 = np.asarray(point, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise BadInput(f"the point must be a vector of {net.input_dim} numbers") from None
        x0 = net.check_input(x0, "the point")
        dom = parse_domain(domain, net.input_dim)
        if dom is not None and (np.any(x0 < dom[0]) or np.any(x0 > dom[1])):
            i = int(np.flatnonzero((x0 < dom[0]) | (x0 > dom[1]))[0])
            raise BadInput(f"the point lies outside the domain: input {i} is {x0[i]:g}, not in "
                           f"[{dom[0][i]:g}, {dom[1][i]:g}]")
        movable = feature_mask(features, net.input_dim)
        m = net.output_dim
        y0 = net.forward(x0)
        c = int(np.argmax(y0))
        target = None if target_class is None else class_index(target_class, m)
        if target is not None and target == c:
            raise BadInput(f"the target class {target} is the class predicted at the point; choose another class")
        eye = np.eye(m)
        if target is None:
            flip = FlipRows(np.array([eye[c] - eye[j] for j in range(m) if j != c]), "any")
        else:
            flip = FlipRows(np.array([eye[j] - eye[target] for j in range(m) if j != target]), "all")
        notes = list(classifier.notes)
        y_rt = classifier.reference(x0)
        if int(np.argmax(y_rt)) != c:
            notes.append(f"onnxruntime predicts class {int(np.argmax(y_rt))} at the point, certify's float64 "
                         f"evaluation class {c} (a near tie); the question is about class {c}")
        return cls(classifier, x0, c, target, flip, movable, dom, notes)

    # ------------------------------------------------------------------ queries
    @property
    def net(self) -> Network:
        return self.classifier.net

    @property
    def dim(self) -> int:
        return int(self.point.size)

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Where inputs may go at all: the domain (or the reals), fixed inputs pinned to x0."""
        lo = np.full(self.dim, -np.inf) if self.domain is None else self.domain[0].copy()
        hi = np.full(self.dim, np.inf) if self.domain is None else self.domain[1].copy()
        lo[~self.movable] = hi[~self.movable] = self.point[~self.movable]
        return lo, hi

    def box(self, radius: float) -> Box:
        """The l_inf box x0 +/- radius on the movable inputs, within the domain."""
        lo, hi = self.limits()
        r = np.where(self.movable, float(radius), 0.0)
        return Box.from_bounds(np.maximum(self.point - r, lo), np.minimum(self.point + r, hi))

    def flips(self, y: np.ndarray) -> np.ndarray | bool:
        """Do outputs y (m,) or (B, m) flip the decision (ties included)?"""
        return self.flip.margin(y) <= 0


__all__ = ["Classifier", "FlipQuestion", "class_index"]
