"""ONNX -> IR, checked against onnxruntime.

The graph is traced node by node (see `tracer`); nodes whose inputs are all constants are folded
with ONNX's reference evaluator, so shape arithmetic of dynamic-batch exports (Shape, Gather,
Concat, ...) needs no special cases. After lowering, the IR is compared with onnxruntime on random
inputs and the model is refused if they disagree.
"""

from __future__ import annotations

import math
import os
from typing import Callable, Sequence

import numpy as np

from . import matrices as mx
from .errors import ModelError, UnsupportedOperator
from .file_kinds import diagnose, read_input_file
from .ir import Network
from .runtime_check import FLOAT32_RTOL, FLOAT64_RTOL, check_against_onnxruntime, magnitude_scale, relative_error  # noqa: F401
from .tracer import Builder, Symbolic, avg_pool2d, channel_affine, conv2d


def load_onnx(path: str | os.PathLike, check: bool = True, name: str | None = None) -> Network:
    """Load an ONNX model as a `Network`.

    With `check` (the default) the IR is compared with onnxruntime on random inputs and a
    `ModelError` is raised when they disagree.
    """
    import onnx

    path = os.fspath(path)
    # a directory, device, FIFO or socket, or a file larger than the memory budget: refused unread
    data = read_input_file(path, "model file", ModelError)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf DecodeError and friends
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(diagnose(data, path) or f"{path} is not a valid ONNX model ({first[:200]})") from None
    if not model.graph.node:
        raise ModelError(diagnose(data, path) or f"{path} is not a valid ONNX model (the graph has no nodes)")
    if _load_external_data(model, path):  # weights kept in files beside the model: checked, then read
        data = model.SerializeToString()
    # onnx.checker is not run: it rejects models onnxruntime executes (e.g. missing output
    # shapes); the lowering plus the onnxruntime comparison is the stricter gate.
    net = onnx_to_network(model, name=name or os.path.splitext(os.path.basename(path))[0])
    if check:
        check_against_onnxruntime(net, data)
    return net


def onnx_to_network(model, name: str = "onnx") -> Network:
    """Lower an in-memory `onnx.ModelProto` (no runtime check)."""
    from onnx import numpy_helper

    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    values: dict[str, np.ndarray | Symbolic] = {}
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            bad = "NaN" if np.isnan(arr).any() else "inf"
            raise ModelError(f"initializer '{init.name}' contains {bad}; re-export the model with finite weights")
        values[init.name] = arr

    inputs = [i for i in graph.input if i.name not in values]
    if len(inputs) != 1:
        raise UnsupportedOperator(f"the model has {len(inputs)} inputs; certify supports single-input models")
    if len(graph.output) != 1:
        raise UnsupportedOperator(f"the model has {len(graph.output)} outputs; certify supports single-output models")
    inp = inputs[0]
    shape = _static_shape(inp)
    check_operators(graph, inp.name)  # before anything is traced or allocated
    builder = Builder(shape, name)
    values[inp.name] = builder.input()

    for node in graph.node:
        missing = [n for n in node.input if n and n not in values]
        if missing:
            raise ModelError(f"node '{node.name}' ({node.op_type}) reads undefined tensor '{missing[0]}'")
        args = [values[n] if n else None for n in node.input]
        if all(not isinstance(a, Symbolic) for a in args) and node.op_type != "Shape":
            outs = _fold(node, args, opset)
        elif node.op_type == "Shape":
            outs = [_shape_of(args[0], node)]
        else:
            outs = _HANDLERS[node.op_type](builder, node, args, _attrs(node), opset)
        for out_name, val in zip(node.output, outs):
            if out_name:
                values[out_name] = val

    out = values[graph.output[0].name]
    if not isinstance(out, Symbolic):
        raise ModelError("the model's output does not depend on its input")
    return builder.finish(out)


def check_operators(graph, input_name: str) -> None:
    """Refuse the model when a node certify cannot lower acts on the input, naming every such
    operator and its first node, before any tensor is traced.

    A node acts on the input when one of its inputs does (Shape only reads the static shape);
    nodes on constants alone are folded, except operators from other domains (never evaluable).
    """
    dependent = {input_name}
    bad: dict[str, list[str]] = {}
    for node in graph.node:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        on_input = node.op_type != "Shape" and any(n in dependent for n in node.input if n)
        if on_input:
            dependent.update(n for n in node.output if n)
        if (on_input and node.op_type not in _HANDLERS) or node.domain not in ("", "ai.onnx"):
            bad.setdefault(op, []).append(node.name or (node.output[0] if node.output else "?"))
    if not bad:
        return
    parts = []
    for op, nodes in bad.items():
        parts.append(f"{op} (node '{nodes[0]}')" if len(nodes) == 1 else f"{op} ({len(nodes)} nodes, first '{nodes[0]}')")
    listed = ", ".join(parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")
    raise UnsupportedOperator(
        f"unsupported operator{'s' if len(parts) > 1 else ''} {listed}; certify handles affine layers and ReLU "
        "(the README's Models section lists the supported operators)"
    )


def _static_shape(value_info) -> tuple[int, ...]:
    """Input shape with dynamic (symbolic or 0) dimensions fixed to 1 (batch size 1)."""
    tt = value_info.type.tensor_type
    if tt.elem_type not in (1, 11):  # FLOAT, DOUBLE
        raise UnsupportedOperator(f"input '{value_info.name}' has element type {tt.elem_type}; only float32/float64 inputs are supported")
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value == 0:  # onnxruntime takes it literally: no values at all
            shown = [x.dim_value if x.HasField("dim_value") else (x.dim_param or "?") for x in tt.shape.dim]
            raise ModelError(f"input '{value_info.name}' has shape {shown} with a dimension of size 0, so it holds no "
                             "values; re-export the model with the input's real shape (a dynamic axis as a name "
                             "such as 'batch', not 0)")
        dims.append(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1)
    return tuple(dims) if dims else (1,)


def _load_external_data(model, path: str) -> bool:
    """Read the tensors a model keeps in external data files into the model (True when there were
    any). Each file must be a regular file inside the model's folder (a relative location that
    stays there, also through symbolic links) and hold the tensor's bytes: a missing, foreign or
    short file is a `ModelError` naming the tensor and the file, never a read elsewhere."""
    from onnx import helper
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, load_external_data_for_model, uses_external_data

    from .file_kinds import check_input_file

    tensors = [t for t in _get_all_tensors(model) if uses_external_data(t)]
    if not tensors:
        return False
    folder = os.path.dirname(os.path.abspath(path))
    real_folder = os.path.realpath(folder)
    for t in tensors:
        info = ExternalDataInfo(t)
        where = f"{path}: tensor '{t.name}' keeps its data in"
        location = info.location or ""
        if not location or os.path.isabs(location):
            raise ModelError(f"{where} {location or 'no file'!r}; certify reads external data only from a file named "
                             "relative to the model's folder: re-save the model with a relative location "
                             "(onnx.save(..., save_as_external_data=True, location='NAME.data'))")
        full = os.path.join(folder, location)
        real = os.path.realpath(full)
        if os.path.commonpath([real, real_folder]) != real_folder:
            raise ModelError(f"{where} {location!r}, outside the model's folder {folder}; certify reads external data "
                             "only from the model's folder: move the data file beside the model and re-save it")
        if not os.path.lexists(full):
            raise ModelError(f"{where} {location!r}, which is missing from the model's folder {folder}; copy the "
                             "model's data file there (it is saved beside the .onnx file)")
        size = check_input_file(full, f"external data file of tensor '{t.name}':", ModelError)
        offset = int(info.offset or 0)
        try:
            need = int(np.prod(list(t.dims), dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except (KeyError, TypeError, ValueError):
            need = 0  # a type without a fixed size per element: the declared length is all there is to check
        if info.length is not None:
            if int(info.length) < need:
                raise ModelError(f"{where} {location!r} with a length of {int(info.length)} bytes, but its shape "
                                 f"{list(t.dims)} needs {need}; the model file is damaged: re-export it")
            need = int(info.length)
        if offset < 0 or offset + need > size:
            raise ModelError(f"{where} {location!r} at bytes {offset}..{offset + need}, but the file has {size} bytes: "
                             "it is truncated or belongs to another model; copy the model's data file again")
    try:
        load_external_data_for_model(model, folder)
    except Exception as exc:  # checked above; anything left is a damaged file
        raise ModelError(f"{path}: cannot read its external data ({' '.join(str(exc).split())[:200]})") from None
    return True


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _fold(node, args: list, opset: int) -> list[np.ndarray]:
    """Evaluate a node whose inputs are all constants with ONNX's reference implementation."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    feeds = {n: a for n, a in zip(node.input, args) if n}
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.shape(a)) for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output]
    graph = helper.make_graph([node], "fold", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    except Exception as exc:
        raise ModelError(f"cannot evaluate constant node '{node.name}' ({node.op_type}): {exc}") from None


def _shape_of(t, node) -> np.ndarray:
    shape = t.shape if isinstance(t, Symbolic) else np.shape(t)
    a = _attrs(node)
    start, end = a.get("start", 0), a.get("end", None)
    return np.asarray(shape, dtype=np.int64)[start:end]


def _sym_and_const(args: Sequence, node) -> tuple[Symbolic, np.ndarray, bool]:
    """(symbolic, constant, symbolic_is_first) for a binary op with exactly one symbolic input."""
    a, b = args[0], args[1]
    if isinstance(a, Symbolic) and not isinstance(b, Symbolic):
        return a, np.asarray(b, dtype=np.float64), True
    if isinstance(b, Symbolic) and not isinstance(a, Symbolic):
        return b, np.asarray(a, dtype=np.float64), False
    raise UnsupportedOperator(
        f"{node.op_type} of two input-dependent tensors (node '{node.name}') is not affine; unsupported"
    )


# ----------------------------------------------------------------------------- handlers
def _identity(b, node, args, attrs, opset):
    return [args[0]]


def _relu(b, node, args, attrs, opset):
    return [b.relu(args[0], f"Relu (node '{node.name}')")]


def _add(b, node, args, attrs, opset):
    if isinstance(args[0], Symbolic) and isinstance(args[1], Symbolic):
        return [b.add(args[0], args[1], f"Add (node '{node.name}')")]
    t, c, _ = _sym_and_const(args, node)
    return [b.add_const(t, c, node.op_type)]


def _sub(b, node, args, attrs, opset):
    if isinstance(args[0], Symbolic) and isinstance(args[1], Symbolic):
        return [b.add(args[0], args[1].neg(), f"Sub (node '{node.name}')")]
    t, c, first = _sym_and_const(args, node)
    if first:
        return [b.add_const(t, -c, node.op_type)]
    return [b.add_const(t.neg(), c, node.op_type)]


def _mul(b, node, args, attrs, opset):
    t, c, _ = _sym_and_const(args, node)
    return [t.scale(c)]


def _div(b, node, args, attrs, opset):
    t, c, first = _sym_and_const(args, node)
    if not first:
        raise UnsupportedOperator(f"Div by an input-dependent tensor (node '{node.name}') is not affine; unsupported")
    if np.any(c == 0):
        raise ModelError(f"Div by a constant containing 0 (node '{node.name}')")
    return [t.scale(c, divide=True)]


def _neg(b, node, args, attrs, opset):
    return [args[0].neg()]


def _matmul(b, node, args, attrs, opset):
    t, w, first = _sym_and_const(args, node)
    return [t.matmul(w) if first else t.left_matmul(w)]


def _gemm(b, node, args, attrs, opset):
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)
    t, w, first = _sym_and_const(args[:2], node)
    if first:
        out = (t.transpose((1, 0)) if ta else t).matmul(w.T if tb else w)
    else:
        out = (t.transpose((1, 0)) if tb else t).left_matmul(w.T if ta else w)
    if alpha != 1.0:
        out = out.scale(alpha)
    if len(args) > 2 and args[2] is not None:
        if isinstance(args[2], Symbolic):
            raise UnsupportedOperator(f"Gemm with an input-dependent C (node '{node.name}')")
        out = b.add_const(out, beta * np.asarray(args[2], dtype=np.float64), "Gemm")
    return [out]


def _transpose(b, node, args, attrs, opset):
    t = args[0]
    perm = attrs.get("perm", list(range(len(t.shape)))[::-1])
    return [t.transpose(perm)]


def _flatten(b, node, args, attrs, opset):
    t = args[0]
    axis = attrs.get("axis", 1)
    axis = axis + len(t.shape) if axis < 0 else axis
    return [t.reshape((int(np.prod(t.shape[:axis])), int(np.prod(t.shape[axis:]))))]


def _reshape(b, node, args, attrs, opset):
    t, target = args[0], np.asarray(args[1], dtype=np.int64).tolist()
    allowzero = attrs.get("allowzero", 0)
    shape = [t.shape[i] if (s == 0 and not allowzero) else s for i, s in enumerate(target)]
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape[shape.index(-1)] = int(np.prod(t.shape)) // max(known, 1)
    if int(np.prod(shape)) != int(np.prod(t.shape)):
        raise ModelError(f"Reshape (node '{node.name}') from {list(t.shape)} to {target} changes the size")
    return [t.reshape(shape)]


def _axes(node, args, attrs, opset) -> list[int] | None:
    if len(args) > 1 and args[1] is not None:
        return [int(a) for a in np.asarray(args[1]).reshape(-1)]
    return attrs.get("axes")


def _squeeze(b, node, args, attrs, opset):
    t = args[0]
    axes = _axes(node, args, attrs, opset)
    nd = len(t.shape)
    axes = [a + nd if a < 0 else a for a in axes] if axes is not None else [i for i, s in enumerate(t.shape) if s == 1]
    return [t.reshape([s for i, s in enumerate(t.shape) if i not in axes])]


def _unsqueeze(b, node, args, attrs, opset):
    t = args[0]
    axes = _axes(node, args, attrs, opset)
    nd = len(t.shape) + len(axes)
    shape = list(t.shape)
    for a in sorted(a + nd if a < 0 else a for a in axes):
        shape.insert(a, 1)
    return [t.reshape(shape)]


def _concat(b, node, args, attrs, opset):
    syms = [a for a in args if isinstance(a, Symbolic)]
    for s in syms:
        b._check(s, f"Concat (node '{node.name}')")
    # rows of the stacked symbolic parts; constant parts contribute zero rows (-1) and their values
    src, consts, offset = [], [], 0
    for a in args:
        if isinstance(a, Symbolic):
            src.append(a.positions() + offset)
            consts.append(a.const)
            offset += a.size
        else:
            arr = np.asarray(a, dtype=np.float64)
            src.append(np.full(arr.shape, -1))
            consts.append(arr)
    axis = attrs["axis"]
    axis = axis + len(consts[0].shape) if axis < 0 else axis
    stacked = Symbolic(mx.vstack([t.matrix for t in syms]), np.zeros(offset), syms[0].frontier)
    return [stacked.take(np.concatenate(src, axis=axis), np.concatenate(consts, axis=axis))]


def _gather(b, node, args, attrs, opset):
    t, idx = args[0], np.asarray(args[1], dtype=np.int64)
    if isinstance(args[1], Symbolic):
        raise UnsupportedOperator(f"Gather with input-dependent indices (node '{node.name}')")
    axis = attrs.get("axis", 0)
    axis = axis + len(t.shape) if axis < 0 else axis
    return [t.take(np.take(t.positions(), idx, axis=axis), np.take(t.const, idx, axis=axis))]


def _slice(b, node, args, attrs, opset):
    t = args[0]
    if opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes = attrs.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = [np.asarray(a).reshape(-1).tolist() for a in args[1:3]]
        axes = np.asarray(args[3]).reshape(-1).tolist() if len(args) > 3 and args[3] is not None else list(range(len(starts)))
        steps = np.asarray(args[4]).reshape(-1).tolist() if len(args) > 4 and args[4] is not None else [1] * len(starts)
    index = [slice(None)] * len(t.shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + len(t.shape) if a < 0 else a
        index[a] = slice(int(max(min(s, 2**62), -(2**62))), int(max(min(e, 2**62), -(2**62))), int(st))
    return [t.take(t.positions()[tuple(index)], t.const[tuple(index)])]


def _pad(b, node, args, attrs, opset):
    t = args[0]
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "constant":
        raise UnsupportedOperator(f"Pad mode '{mode}' (node '{node.name}'); only constant padding is supported")
    if opset < 11:
        pads, value = attrs["pads"], attrs.get("value", 0.0)
    else:
        pads = np.asarray(args[1]).reshape(-1).tolist()
        value = float(np.asarray(args[2]).reshape(-1)[0]) if len(args) > 2 and args[2] is not None else 0.0
        if len(args) > 3 and args[3] is not None:
            raise UnsupportedOperator(f"Pad with axes (node '{node.name}')")
    nd = len(t.shape)
    width = [(int(pads[i]), int(pads[i + nd])) for i in range(nd)]
    if any(p < 0 for w in width for p in w):
        raise UnsupportedOperator(f"Pad with negative pads (node '{node.name}')")
    return [t.take(np.pad(t.positions(), width, constant_values=-1), np.pad(t.const, width, constant_values=value))]


def _conv(b, node, args, attrs, opset):
    t = args[0]
    if isinstance(args[1], Symbolic) or (len(args) > 2 and isinstance(args[2], Symbolic)):
        raise UnsupportedOperator(f"Conv with input-dependent weights (node '{node.name}')")
    w = np.asarray(args[1], dtype=np.float64)
    bias = np.asarray(args[2], dtype=np.float64) if len(args) > 2 and args[2] is not None else None
    one_d = w.ndim == 3
    if one_d:  # 1-D convolution as a 2-D one with height 1
        w = w[:, :, None, :]
        t = t.reshape(t.shape[:-1] + (1, t.shape[-1]))
    if w.ndim != 4:
        raise UnsupportedOperator(f"Conv with {w.ndim - 2} spatial dimensions (node '{node.name}'); only 1-D and 2-D are supported")
    k = w.shape[2:]
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if one_d:
        strides, dil = [1] + strides, [1] + dil
        pads = [0, pads[0], 0, pads[1]] if len(pads) == 2 else [0, 0, 0, 0]
    pads = _resolve_auto_pad(attrs, t.shape[-2:], k, strides, dil, pads)
    top, left, bottom, right = pads[0], pads[1], pads[2], pads[3]
    out = conv2d(t, b, w, bias, strides, (top, left, bottom, right), dil, attrs.get("group", 1), f"Conv (node '{node.name}')")
    if one_d:
        out = out.reshape(out.shape[:-2] + (out.shape[-1],))
    return [out]


def _resolve_auto_pad(attrs, spatial, k, strides, dil, pads) -> list[int]:
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        return [int(p) for p in pads]
    if auto == "VALID":
        return [0, 0, 0, 0]
    begin, end = [], []
    for size, kk, s, d in zip(spatial, k, strides, dil):
        total = max((math.ceil(size / s) - 1) * s + (kk - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else large)
        end.append(large if auto == "SAME_UPPER" else small)
    return begin + end


def _batchnorm(b, node, args, attrs, opset):
    if attrs.get("training_mode", 0):
        raise UnsupportedOperator(f"BatchNormalization in training mode (node '{node.name}'); export the model in eval mode")
    t = args[0]
    scale, bias, mean, var = (np.asarray(a, dtype=np.float64) for a in args[1:5])
    s = scale / np.sqrt(var + attrs.get("epsilon", 1e-5))
    return [channel_affine(t, s, bias - mean * s, f"BatchNormalization (node '{node.name}')")]


def _avgpool(b, node, args, attrs, opset):
    t = args[0]
    if node.op_type == "GlobalAveragePool":
        k = list(t.shape[-2:])
        return [avg_pool2d(t, k, k, (0, 0, 0, 0), True, False, f"GlobalAveragePool (node '{node.name}')")]
    k = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * len(k)))
    pads = _resolve_auto_pad(attrs, t.shape[-2:], k, strides, [1, 1], attrs.get("pads", [0] * 2 * len(k)))
    return [avg_pool2d(t, k, strides, pads, bool(attrs.get("count_include_pad", 0)), bool(attrs.get("ceil_mode", 0)), f"AveragePool (node '{node.name}')")]


def _cast(b, node, args, attrs, opset):
    if attrs.get("to") not in (1, 10, 11):
        raise UnsupportedOperator(f"Cast of the input-dependent tensor to type {attrs.get('to')} (node '{node.name}')")
    return [args[0]]


_HANDLERS: dict[str, Callable] = {
    "Identity": _identity,
    "Dropout": _identity,
    "Cast": _cast,
    "Relu": _relu,
    "Add": _add,
    "Sub": _sub,
    "Mul": _mul,
    "Div": _div,
    "Neg": _neg,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Transpose": _transpose,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Gather": _gather,
    "Slice": _slice,
    "Pad": _pad,
    "Conv": _conv,
    "BatchNormalization": _batchnorm,
    "AveragePool": _avgpool,
    "GlobalAveragePool": _avgpool,
}

SUPPORTED_OPS = tuple(sorted(_HANDLERS))
