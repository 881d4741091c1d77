"""IR -> ONNX (Gemm + Relu), so networks built or trained in Python can be used from the CLI."""

from __future__ import annotations

import os

import numpy as np

from .ir import Affine, Network


def to_onnx(net: Network, dtype: str = "float64", opset: int = 13):
    """An `onnx.ModelProto` computing `net` on a (1, input_dim) input; convolutions are written as
    their dense (unrolled) matrices. float64 round-trips exactly; float32 rounds the weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    np_dtype = {"float64": np.float64, "float32": np.float32}[dtype]
    elem = TensorProto.DOUBLE if dtype == "float64" else TensorProto.FLOAT
    nodes, inits = [], []
    cur = "input"
    for i, layer in enumerate(net.layers):
        out = f"h{i}"
        if isinstance(layer, Affine):
            inits.append(numpy_helper.from_array(layer.weight.astype(np_dtype), f"W{i}"))
            inits.append(numpy_helper.from_array(layer.bias.astype(np_dtype), f"b{i}"))
            nodes.append(helper.make_node("Gemm", [cur, f"W{i}", f"b{i}"], [out], transB=1, name=f"gemm{i}"))
        else:
            nodes.append(helper.make_node("Relu", [cur], [out], name=f"relu{i}"))
        cur = out
    nodes.append(helper.make_node("Identity", [cur], ["output"], name="output"))
    graph = helper.make_graph(
        nodes,
        net.name,
        [helper.make_tensor_value_info("input", elem, [1, net.input_dim])],
        [helper.make_tensor_value_info("output", elem, [1, net.output_dim])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="certify")
    onnx.checker.check_model(model)
    return model


def save_onnx(net: Network, path: str | os.PathLike, dtype: str = "float64") -> None:
    """Write `net` as an ONNX file (see `to_onnx`)."""
    import onnx

    onnx.save(to_onnx(net, dtype), os.fspath(path))
