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


# ----------------------------------------------------------------------------- convolutional nets
# Stand-ins for the VNN-COMP convolutional families (the originals are not shipped): same operator
# mix and layer sizes, random weights. Also used by benchmarks/onnx_import_memory.py.
def conv_net(in_shape: Sequence[int] = (1, 3, 32, 32), channels: Sequence[int] = (16, 16), outputs: int = 10,
             batchnorm: bool = False, pool: str | None = None, tail: Sequence[str] = (), seed: int = 0) -> onnx.ModelProto:
    """Conv 3x3 (pad 1) [+ BatchNorm] + Relu [+ 2x2 pool] per entry of `channels`, then Flatten + Gemm.

    `pool` is None, "AveragePool" or "MaxPool"; `tail` appends unary operators after the logits
    (e.g. ("Softmax", "ArgMax") like segmentation/classification exports).
    """
    rng = np.random.default_rng(seed)
    nodes, inits = [], {}
    c, h, w = in_shape[1:]
    x = "x"
    for i, out_c in enumerate(channels):
        inits[f"K{i}"] = rand(rng, out_c, c, 3, 3, scale=1.0 / np.sqrt(9 * c))
        inits[f"kb{i}"] = rand(rng, out_c, scale=0.1)
        nodes.append(helper.make_node("Conv", [x, f"K{i}", f"kb{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"))
        x, c = f"c{i}", out_c
        if batchnorm:
            inits.update({f"g{i}": np.abs(rand(rng, c)) + 0.5, f"be{i}": rand(rng, c, scale=0.1),
                          f"mu{i}": rand(rng, c, scale=0.1), f"var{i}": np.abs(rand(rng, c)) + 0.5})
            nodes.append(helper.make_node("BatchNormalization", [x, f"g{i}", f"be{i}", f"mu{i}", f"var{i}"], [f"bn{i}"], name=f"bn{i}"))
            x = f"bn{i}"
        nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
        if pool is not None:
            nodes.append(helper.make_node(pool, [x], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2], name=f"pool{i}"))
            x, h, w = f"p{i}", h // 2, w // 2
    nodes.append(helper.make_node("Flatten", [x], ["flat"], axis=1, name="flatten"))
    inits["Wfc"] = rand(rng, outputs, c * h * w, scale=1.0 / np.sqrt(c * h * w))
    inits["bfc"] = rand(rng, outputs, scale=0.1)
    out = "logits" if tail else "y"
    nodes.append(helper.make_node("Gemm", ["flat", "Wfc", "bfc"], [out], transB=1, name="fc"))
    for k, op in enumerate(tail):
        nxt = "y" if k == len(tail) - 1 else f"t{k}"
        attrs = {"axis": 1} if op in ("Softmax", "ArgMax") else {}
        nodes.append(helper.make_node(op, [out], [nxt], name=f"{op.lower()}{k}", **attrs))
        out = nxt
    elem = TensorProto.INT64 if tail and tail[-1] == "ArgMax" else TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "conv_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

