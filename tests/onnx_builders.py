"""Small ONNX graphs built by hand for importer tests, and onnxruntime as the oracle."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def make_model(nodes, inits: dict[str, np.ndarray], in_shape: Sequence, out_shape: Sequence | None = None,
               opset: int = 13, in_name: str = "x", out_name: str = "y", elem=TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(in_name, elem, list(in_shape))],
        [helper.make_tensor_value_info(out_name, elem, None if out_shape is None else list(out_shape))],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def save(model: onnx.ModelProto, tmp_path, name: str = "m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def ort_forward(path_or_bytes, x: np.ndarray, shape: Sequence[int], dtype=np.float32) -> np.ndarray:
    """Run onnxruntime on one input reshaped to `shape`; flattened float64 output."""
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else open(path_or_bytes, "rb").read()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out = sess.run(None, {name: np.asarray(x, dtype=dtype).reshape(shape)})[0]
    return np.asarray(out, dtype=np.float64).reshape(-1)


def rand(rng: np.random.Generator, *shape: int, scale: float = 0.5) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)
