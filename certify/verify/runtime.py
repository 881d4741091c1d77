"""onnxruntime as the second, independent evaluation of a counterexample.

The IR is what certify reasons about; onnxruntime is what a user (and the VNN-COMP checker) runs.
A `sat` answer is only given for a point that is unsafe in both. A network built in Python has no
source file: it is exported to a float64 ONNX graph (exact) so the runtime still recomputes it.
"""

from __future__ import annotations

import os

import numpy as np

from models.errors import ModelError
from models.ir import Network


class OnnxReference:
    """An onnxruntime session evaluating one flattened input vector at the model's input dtype."""

    def __init__(self, model_bytes: bytes, input_shape: tuple[int, ...], source: str = "<memory>") -> None:
        import onnx
        import onnxruntime as ort

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
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelError(f"onnxruntime cannot load {source} ({str(exc).splitlines()[0][:200]})") from None

    @classmethod
    def from_file(cls, path: str | os.PathLike, net: Network) -> "OnnxReference":
        with open(path, "rb") as fh:
            return cls(fh.read(), net.input_shape, os.fspath(path))

    @classmethod
    def from_network(cls, net: Network) -> "OnnxReference":
        """A float64 ONNX export of `net` (exact): checks our arithmetic, not an importer."""
        from models.onnx_export import to_onnx

        model = to_onnx(net, "float64")
        ref = cls(model.SerializeToString(), (1, net.input_dim), f"{net.name} (float64 ONNX export)")
        return ref

    def as_evaluated(self, x: np.ndarray) -> np.ndarray:
        """The input the runtime actually computes on: x rounded to the model's dtype (float64 view)."""
        return np.asarray(x, dtype=np.float64).astype(self.dtype).astype(np.float64)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Output (flattened, float64) of the runtime at x cast to the model's input dtype."""
        arr = np.asarray(x, dtype=np.float64).astype(self.dtype).reshape(self.input_shape)
        out = self.session.run(None, {self.input_name: arr})[0]
        return np.asarray(out, dtype=np.float64).reshape(-1)


__all__ = ["OnnxReference"]
