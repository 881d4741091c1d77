"""Counterexample replay and the VNN-COMP witness format.

Tolerance policy. VNN-COMP's checker accepts a witness whose X lies in the input set and whose
outputs violate the property up to an absolute tolerance (1e-4), and whose Y matches onnxruntime
up to a relative one. certify uses *no* tolerance: a candidate x is accepted only if

1. x lies in the disjunct's input set under exact float64 comparisons (box and input rows), and
2. the float64 IR output y satisfies every row of that disjunct (strict rows strictly), and
3. the onnxruntime output at x (cast to the model's input dtype, as the checker does) satisfies
   them too.

For float32 models the witness x is first moved to a float32-representable point of the box (the
nearest one, nudged inward), so the IR and the runtime evaluate the very same input. A point that
passes in one evaluation but not the other is discarded and the search goes on: `sat` is never
claimed on a point that fails in onnxruntime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.ir import Network

from models.onnx_reference import OnnxReference
from .spec import Disjunct, Spec


@dataclass(frozen=True)
class Counterexample:
    """A replayed unsafe point: `x` (the witness), `y` = IR output in float64, `y_runtime` =
    onnxruntime output (the one reported: `to_dict`, `witness`), the index of the disjunct it
    satisfies and its margins in both."""

    x: np.ndarray
    y: np.ndarray
    y_runtime: np.ndarray
    disjunct: int
    margin: float
    margin_runtime: float

    def to_dict(self) -> dict[str, Any]:
        """The witness as reported: x and onnxruntime's output at x (what VNN-COMP's checker
        recomputes; the IR's float64 output is in `replay_dict`)."""
        return {"x": self.x.tolist(), "y": self.y_runtime.tolist()}

    def replay_dict(self) -> dict[str, Any]:
        return {"y_onnxruntime": self.y_runtime.tolist(), "y_ir": self.y.tolist(), "disjunct": self.disjunct,
                "margin": self.margin, "margin_onnxruntime": self.margin_runtime}

    def witness(self) -> str:
        return format_witness(self.x, self.y_runtime)


def format_witness(x: np.ndarray, y: np.ndarray) -> str:
    """VNN-COMP witness `((X_0 v) ... (Y_0 v) ...)`, values in shortest round-trip float64 form."""
    parts = [f"(X_{i} {float(v)!r})" for i, v in enumerate(np.asarray(x).reshape(-1))]
    parts += [f"(Y_{j} {float(v)!r})" for j, v in enumerate(np.asarray(y).reshape(-1))]
    return "(" + "\n ".join(parts) + ")"


def representable_point(x: np.ndarray, d: Disjunct, dtype: type) -> np.ndarray:
    """x with each coordinate inside the box moved to the nearest value of `dtype` in the box
    (nudged inward); coordinates outside the box, or whose box holds no such value, are kept."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == np.float64:
        return x
    r = x.astype(dtype)
    up = r.astype(np.float64) < d.lo
    r[up] = np.nextafter(r[up], np.array(np.inf, dtype=dtype))
    down = r.astype(np.float64) > d.hi
    r[down] = np.nextafter(r[down], np.array(-np.inf, dtype=dtype))
    out = r.astype(np.float64)
    keep = (x < d.lo) | (x > d.hi) | (out < d.lo) | (out > d.hi)
    out[keep] = x[keep]
    return out


def check_counterexample(net: Network, spec: Spec, x: np.ndarray, reference: OnnxReference,
                         disjuncts: list[int] | None = None) -> Counterexample | None:
    """Replay a candidate; return a `Counterexample` if it is unsafe in the IR *and* onnxruntime.

    `disjuncts` restricts the clauses tried (indices into `spec.disjuncts`; default all)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size != spec.num_inputs or not np.all(np.isfinite(x)):
        return None
    tried: dict[bytes, tuple[np.ndarray, np.ndarray | None]] = {}
    for k in (range(len(spec.disjuncts)) if disjuncts is None else disjuncts):
        d = spec.disjuncts[k]
        for cand in (representable_point(x, d, reference.dtype), x):
            if not d.contains_input(cand):
                continue
            key = cand.tobytes()
            if key not in tried:
                tried[key] = (net.forward(cand), None)
            y, y_rt = tried[key]
            if not d.satisfied(cand, y):
                continue
            if y_rt is None:
                y_rt = reference(cand)
                tried[key] = (y, y_rt)
            if d.satisfied(cand, y_rt):
                return Counterexample(cand, y, y_rt, k, float(d.margin(cand, y)), float(d.margin(cand, y_rt)))
    return None


__all__ = ["Counterexample", "check_counterexample", "format_witness", "representable_point"]
