"""onnxruntime as the second, independent evaluation of a network, and the one model resolver.

The IR is what certify reasons about; onnxruntime is what a user (and the VNN-COMP checker) runs.
`runtime_check.ort_session` is the one place an onnxruntime session is opened (single-threaded,
CPU, quiet): the import check and `OnnxReference`, which replays counterexamples (a `sat` answer
or a flip is only given for a point that is unsafe in both), use it. A network built in
Python has no source file: it is exported to a float64 ONNX graph (exact) so the runtime still
recomputes it. `resolve_model` turns what a caller passes (a `Network` or an ONNX path, and an
optional reference) into the network, its reference, its name and notes.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import BadInput, ModelError
from .ir import Network
from .runtime_check import ort_session


class OnnxReference:
    """An onnxruntime session evaluating one flattened input vector at the model's input dtype."""

    def __init__(self, model_bytes: bytes, input_shape: tuple[int, ...], source: str = "<memory>") -> None:
        import onnx

        model = onnx.load_model_from_string(model_bytes)
        init_names = {i.name for i in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in init_names]
        if len(inputs) != 1:
            raise ModelError(f"{source}: the model has {len(inputs)} inputs; verification needs exactly one")
        elem = inputs[0].type.tensor_type.elem_type
        dtypes = {1: np.float32, 11: np.float64, 10: np.float16}
        if elem not in dtypes:
            raise ModelError(f"{source}: unsupported input element type {elem} (expected float32, float64 or float16)")
        self.dtype = dtypes[elem]
        self.input_name = inputs[0].name
        self.input_shape = tuple(input_shape)
        self.source = source
        self.session = ort_session(model_bytes, source)

    @classmethod
    def from_file(cls, path: str | os.PathLike, net: Network) -> "OnnxReference":
        with open(path, "rb") as fh:
            return cls(fh.read(), net.input_shape, os.fspath(path))

    @classmethod
    def from_network(cls, net: Network) -> "OnnxReference":
        """A float64 ONNX export of `net` (exact): checks our arithmetic, not an importer."""
        from .onnx_export import to_onnx

        model = to_onnx(net, "float64")
        return cls(model.SerializeToString(), (1, net.input_dim), f"{net.name} (float64 ONNX export)")

    def as_evaluated(self, x: np.ndarray) -> np.ndarray:
        """The input the runtime actually computes on: x rounded to the model's dtype (float64 view)."""
        return np.asarray(x, dtype=np.float64).astype(self.dtype).astype(np.float64)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Output (flattened, float64) of the runtime at x cast to the model's input dtype."""
        arr = np.asarray(x, dtype=np.float64).astype(self.dtype).reshape(self.input_shape)
        out = self.session.run(None, {self.input_name: arr})[0]
        return np.asarray(out, dtype=np.float64).reshape(-1)


#: the note of a result whose counterexamples are replayed on an export (no ONNX source given)
EXPORT_NOTE = ("no ONNX source given: counterexamples are replayed in onnxruntime on a float64 ONNX export of "
               "the network")


def resolve_model(model: Any, reference: Any = None) -> tuple[Network, OnnxReference, str, tuple[str, ...]]:
    """(network, reference, name, notes) from a `Network` or an ONNX path; `reference`: an
    `OnnxReference` or ONNX path (default: the model's file, else a float64 ONNX export)."""
    notes: tuple[str, ...] = ()
    if isinstance(model, Network):
        net, name = model, model.name
    elif isinstance(model, (str, os.PathLike)):
        from .onnx_import import load_onnx

        net, name = load_onnx(model), os.fspath(model)
        reference = model if reference is None else reference
    else:
        raise BadInput(f"model must be a certify Network or the path of an ONNX file, got {type(model).__name__}")
    if isinstance(reference, (str, os.PathLike)):
        reference = OnnxReference.from_file(reference, net)
    elif reference is None:
        reference = OnnxReference.from_network(net)
        notes = (EXPORT_NOTE,)
    elif not isinstance(reference, OnnxReference):
        raise BadInput("reference must be an ONNX path or a models.onnx_reference.OnnxReference")
    return net, reference, name, notes


__all__ = ["EXPORT_NOTE", "OnnxReference", "resolve_model"]
