"""torch.nn.Module -> IR, checked against the module's own forward.

The module is traced with torch.fx, so `nn.Sequential` stacks and custom modules whose `forward`
composes supported layers and arithmetic (e.g. an input normalisation `(x - mean) / std`) both
work. The CLI never calls this: it loads ONNX only and never unpickles a file.
"""

from __future__ import annotations

import copy
import operator
from typing import Any, Sequence

import numpy as np
import torch

from .errors import BadInput, ModelError, UnsupportedOperator
from .ir import Network
from .tracer import Builder, Symbolic, avg_pool2d, channel_affine, conv2d

TORCH_FLOAT32_RTOL = 1e-5
TORCH_FLOAT64_RTOL = 1e-9


def _torch():
    return torch


class Normalize(torch.nn.Module):
    """Input normalisation (x - mean) / std per channel (axis 1); folded into the first affine map."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], spatial_dims: int = 2) -> None:
        super().__init__()
        shape = (1, -1) + (1,) * spatial_dims
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32).reshape(shape))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32).reshape(shape))

    def forward(self, x):
        return (x - self.mean) / self.std


def from_torch(
    module,
    input_shape: Sequence[int] | None = None,
    check: bool = True,
    name: str | None = None,
) -> Network:
    """Lower a torch module to a `Network`.

    `input_shape` includes the batch dimension (e.g. (1, 64) or (1, 1, 28, 28)); it is inferred
    when the first layer is `nn.Linear`. The module is imported in eval mode (batch-norm uses its
    running statistics, dropout is the identity); the original module is not modified.
    With `check`, the IR is compared with the module's forward on random inputs.
    """
    torch = _torch()
    import torch.fx as fx

    if not isinstance(module, torch.nn.Module):
        raise BadInput(f"from_torch expects a torch.nn.Module, got {type(module).__name__}")
    model = copy.deepcopy(module).eval()
    for pname, p in list(model.named_parameters()) + list(model.named_buffers()):
        if p.is_floating_point() and not torch.all(torch.isfinite(p)):
            raise ModelError(f"parameter '{pname}' contains NaN or inf; the model cannot be certified")
    if input_shape is None:
        first = next((m for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Conv1d))), None)
        if not isinstance(first, torch.nn.Linear):
            raise BadInput("pass input_shape=(1, C, H, W) for models that do not start with nn.Linear")
        input_shape = (1, first.in_features)
    input_shape = tuple(int(s) for s in input_shape)
    try:
        gm = fx.symbolic_trace(model)
    except Exception as exc:
        raise UnsupportedOperator(f"torch.fx cannot trace the module ({str(exc).splitlines()[0][:200]})") from None
    net = _lower(gm, input_shape, name or type(module).__name__)
    if check:
        check_against_torch(net, module)
    return net


def _lower(gm, input_shape: tuple[int, ...], name: str) -> Network:
    torch = _torch()
    builder = Builder(input_shape, name)
    env: dict[str, Any] = {}
    modules = dict(gm.named_modules())
    out = None
    for node in gm.graph.nodes:
        args = _map_args(node.args, env)
        kwargs = _map_args(node.kwargs, env)
        where = f"{node.op} '{node.target}'" if node.op != "call_module" else f"module '{node.target}'"
        if node.op == "placeholder":
            if env.get("__input_seen__"):
                raise UnsupportedOperator("the module takes several inputs; certify supports single-input models")
            env["__input_seen__"] = True
            env[node.name] = builder.input()
        elif node.op == "get_attr":
            env[node.name] = _to_numpy(_fetch_attr(gm, node.target))
        elif node.op == "call_module":
            env[node.name] = _call_module(builder, modules[node.target], args, kwargs, where)
        elif node.op == "call_function":
            env[node.name] = _call_function(builder, node.target, args, kwargs, where)
        elif node.op == "call_method":
            env[node.name] = _call_method(builder, node.target, args, kwargs, where)
        elif node.op == "output":
            out = args[0]
    if isinstance(out, (tuple, list)):
        if len(out) != 1:
            raise UnsupportedOperator("the module returns several outputs; certify supports single-output models")
        out = out[0]
    if not isinstance(out, Symbolic):
        raise ModelError("the module's output does not depend on its input")
    return builder.finish(out)


def _map_args(a, env):
    import torch.fx as fx

    if isinstance(a, fx.Node):
        return env[a.name]
    if isinstance(a, (list, tuple)):
        return type(a)(_map_args(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _map_args(v, env) for k, v in a.items()}
    return a


def _fetch_attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _to_numpy(x):
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy() if x.is_floating_point() else x.detach().cpu().numpy()
    return x


def _tensor(x: np.ndarray):
    return _torch().from_numpy(np.ascontiguousarray(x))


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _linear(t: Symbolic, w: np.ndarray, b: np.ndarray | None) -> Symbolic:
    return t.matmul(np.asarray(w, dtype=np.float64).T, b)


def _call_module(builder: Builder, m, args, kwargs, where: str):
    torch = _torch()
    nn = torch.nn
    t = args[0]
    if not isinstance(t, Symbolic):
        raise UnsupportedOperator(f"{where} applied to a constant")
    if isinstance(m, nn.Linear):
        return _linear(t, _to_numpy(m.weight), None if m.bias is None else _to_numpy(m.bias))
    if isinstance(m, nn.ReLU):
        return builder.relu(t, where)
    if isinstance(m, (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d)):
        return t
    if isinstance(m, nn.Flatten):
        return _flatten(t, m.start_dim, m.end_dim)
    if isinstance(m, nn.Unflatten):
        dim = m.dim + len(t.shape) if m.dim < 0 else m.dim
        return t.reshape(t.shape[:dim] + tuple(m.unflattened_size) + t.shape[dim + 1 :])
    if isinstance(m, (nn.Conv2d, nn.Conv1d)):
        if m.padding_mode != "zeros":
            raise UnsupportedOperator(f"{where}: padding_mode '{m.padding_mode}' (only zeros)")
        w = _to_numpy(m.weight)
        bias = None if m.bias is None else _to_numpy(m.bias)
        one_d = isinstance(m, nn.Conv1d)
        if one_d:
            w = w[:, :, None, :]
            t = t.reshape(t.shape[:-1] + (1, t.shape[-1]))
            stride, dil = (1, m.stride[0]), (1, m.dilation[0])
            pad_spec = m.padding if isinstance(m.padding, str) else (0, m.padding[0])
        else:
            stride, dil = _pair(m.stride), _pair(m.dilation)
            pad_spec = m.padding if isinstance(m.padding, str) else _pair(m.padding)
        if isinstance(pad_spec, str):
            if pad_spec == "valid":
                pads = (0, 0, 0, 0)
            else:  # 'same' (stride 1): torch puts the odd extra pad at the end
                tot = [d * (k - 1) for d, k in zip(dil, w.shape[2:])]
                pads = (tot[0] // 2, tot[1] // 2, tot[0] - tot[0] // 2, tot[1] - tot[1] // 2)
        else:
            pads = (pad_spec[0], pad_spec[1], pad_spec[0], pad_spec[1])
        out = conv2d(t, builder, w, bias, stride, pads, dil, m.groups, where)
        if one_d:
            out = out.reshape(out.shape[:-2] + (out.shape[-1],))
        return out
    if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
        if m.running_mean is None:
            raise UnsupportedOperator(f"{where}: batch-norm without running statistics")
        var, mean = _to_numpy(m.running_var), _to_numpy(m.running_mean)
        scale = 1.0 / np.sqrt(var + m.eps)
        shift = -mean * scale
        if m.affine:
            g, beta = _to_numpy(m.weight), _to_numpy(m.bias)
            scale, shift = scale * g, shift * g + beta
        return channel_affine(t, scale, shift, where)
    if isinstance(m, nn.AvgPool2d):
        if m.divisor_override is not None:
            raise UnsupportedOperator(f"{where}: divisor_override")
        k, s, p = _pair(m.kernel_size), _pair(m.stride or m.kernel_size), _pair(m.padding)
        return avg_pool2d(t, k, s, (p[0], p[1], p[0], p[1]), m.count_include_pad, m.ceil_mode, where)
    if isinstance(m, nn.AdaptiveAvgPool2d):
        h, w = t.shape[-2:]
        oh, ow = _pair(m.output_size if m.output_size is not None else (h, w))
        if h % oh or w % ow:
            raise UnsupportedOperator(f"{where}: adaptive pooling from {h}x{w} to {oh}x{ow} is not a uniform pooling")
        k = (h // oh, w // ow)
        return avg_pool2d(t, k, k, (0, 0, 0, 0), True, False, where)
    raise UnsupportedOperator(f"unsupported layer {type(m).__name__} ({where}); certify handles affine layers and ReLU")


def _flatten(t: Symbolic, start: int = 0, end: int = -1) -> Symbolic:
    nd = len(t.shape)
    start, end = start % nd, end % nd
    return t.reshape(t.shape[:start] + (int(np.prod(t.shape[start : end + 1])),) + t.shape[end + 1 :])


def _reshape(t: Symbolic, shape) -> Symbolic:
    shape = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else list(shape)
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape[shape.index(-1)] = int(np.prod(t.shape)) // max(known, 1)
    if int(np.prod(shape)) != int(np.prod(t.shape)):
        raise ModelError(f"reshape from {list(t.shape)} to {shape} changes the size")
    return t.reshape(shape)


def _binary(builder: Builder, op, a, b, where: str):
    sa, sb = isinstance(a, Symbolic), isinstance(b, Symbolic)
    if not sa and not sb:
        return op(a, b)
    if op in (operator.add, operator.sub) and sa and sb:
        nb = b if op is operator.add else b.neg()
        return builder.add(a, nb, where)
    if op is operator.add:
        return builder.add_const(a if sa else b, np.asarray(b if sa else a, dtype=np.float64), where)
    if op is operator.sub:
        if sa:
            return builder.add_const(a, -np.asarray(b, dtype=np.float64), where)
        return builder.add_const(b.neg(), np.asarray(a, dtype=np.float64), where)
    if op in (operator.mul, operator.truediv) and sa != sb:
        if op is operator.truediv and not sa:
            raise UnsupportedOperator(f"division by an input-dependent tensor ({where}) is not affine")
        t, c = (a, np.asarray(b, dtype=np.float64)) if sa else (b, np.asarray(a, dtype=np.float64))
        if op is operator.truediv:
            if np.any(c == 0):
                raise ModelError(f"division by a constant containing 0 ({where})")
            c = 1.0 / c
        return t.scale(c)
    raise UnsupportedOperator(f"{getattr(op, '__name__', op)} of two input-dependent tensors ({where}) is not affine")


def _call_function(builder: Builder, fn, args, kwargs, where: str):
    torch = _torch()
    F = torch.nn.functional
    if fn in (F.relu, torch.relu):
        return builder.relu(args[0], where)
    if fn in (operator.add, torch.add):
        return _binary(builder, operator.add, args[0], args[1], where)
    if fn in (operator.sub, torch.sub):
        return _binary(builder, operator.sub, args[0], args[1], where)
    if fn in (operator.mul, torch.mul):
        return _binary(builder, operator.mul, args[0], args[1], where)
    if fn in (operator.truediv, torch.div):
        return _binary(builder, operator.truediv, args[0], args[1], where)
    if fn in (operator.neg, torch.neg):
        t = args[0]
        return t.neg() if isinstance(t, Symbolic) else -t
    if fn is torch.flatten:
        return _flatten(args[0], *(args[1:] or [kwargs.get("start_dim", 0), kwargs.get("end_dim", -1)]))
    if fn is torch.reshape:
        return _reshape(args[0], args[1:])
    if fn is F.linear:
        w = args[1] if len(args) > 1 else kwargs["weight"]
        b = args[2] if len(args) > 2 else kwargs.get("bias")
        return _linear(args[0], np.asarray(w), None if b is None else np.asarray(b))
    if fn is operator.getitem and not isinstance(args[0], Symbolic):
        return args[0][args[1]]
    if fn is getattr and isinstance(args[0], Symbolic) and args[1] == "shape":
        return tuple(args[0].shape)
    raise UnsupportedOperator(f"unsupported function {getattr(fn, '__name__', fn)} ({where})")


def _call_method(builder: Builder, method: str, args, kwargs, where: str):
    t = args[0]
    if not isinstance(t, Symbolic):
        raise UnsupportedOperator(f"method {method} on a constant ({where})")
    if method in ("view", "reshape"):
        return _reshape(t, args[1:])
    if method == "flatten":
        return _flatten(t, *(args[1:] or [kwargs.get("start_dim", 0), kwargs.get("end_dim", -1)]))
    if method == "size":
        return tuple(t.shape) if len(args) == 1 else t.shape[args[1]]
    if method == "relu":
        return builder.relu(t, where)
    if method in ("contiguous", "float", "double"):
        return t
    if method == "unsqueeze":
        d = args[1] % (len(t.shape) + 1)
        return t.reshape(t.shape[:d] + (1,) + t.shape[d:])
    if method == "squeeze":
        if len(args) == 1:
            return t.reshape(tuple(s for s in t.shape if s != 1))
        d = args[1] % len(t.shape)
        return t.reshape(t.shape[:d] + t.shape[d + 1 :]) if t.shape[d] == 1 else t
    raise UnsupportedOperator(f"unsupported tensor method .{method}() ({where})")


def check_against_torch(net: Network, module, samples: int = 8, seed: int = 0) -> float:
    """Compare the IR with the module's eval-mode forward; return the worst relative error."""
    torch = _torch()
    from .runtime_check import explain_range_problem, magnitude_scale, random_inputs, relative_error

    model = copy.deepcopy(module).eval()
    dtype = next((p.dtype for p in model.parameters()), torch.float32)
    rtol = TORCH_FLOAT64_RTOL if dtype == torch.float64 else TORCH_FLOAT32_RTOL
    xs = random_inputs(net.input_dim, samples, seed)
    refs = []
    with torch.no_grad():
        for x in xs:
            ref = model(torch.as_tensor(x, dtype=dtype).reshape(net.input_shape)).detach().double().numpy().reshape(-1)
            if ref.size != net.output_dim:
                raise ModelError(f"torch returns {ref.size} outputs, the imported network {net.output_dim}")
            refs.append(ref)
    xs_used = torch.as_tensor(xs, dtype=dtype).double().numpy()  # the inputs torch saw
    refs_a = np.array(refs)
    with np.errstate(over="ignore", invalid="ignore"):
        ours_a = net.forward(xs_used)
        worst = relative_error(ours_a, refs_a, float(np.max(magnitude_scale(net, xs))))
    if not np.isfinite(worst) or worst > rtol:
        constants = {k: _to_numpy(v) for k, v in list(model.named_parameters()) + list(model.named_buffers())}
        why = explain_range_problem(net, xs_used, refs_a, ours_a, dtype != torch.float64, constants, "torch", "parameter")
        raise ModelError(why or f"the imported network disagrees with torch (relative error {worst:.2e} > {rtol:.0e})")
    return worst
