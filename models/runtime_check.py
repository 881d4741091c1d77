"""The importers' independent check: the IR against the model's own runtime on random inputs; and
`ort_session`, the one place an onnxruntime session is opened (the check, `onnx_reference`).

A disagreement is refused. When the runtime's float32 arithmetic cannot represent the model's
values (outputs or intermediate values beyond float32's range, inf/NaN) the message says so and
names the layer and the largest constant, instead of blaming the lowering.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import ModelError
from .ir import Affine, Network

FLOAT32_RTOL = 1e-5
FLOAT64_RTOL = 1e-9
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
_CHUNK_BYTES = 32 * 2**20


def magnitude_scale(net: Network, x: np.ndarray) -> np.ndarray:
    """|W| |h| + |b| propagated through the net: a (loose) size of the terms summed per output.

    `x` is one input (n,) or a batch (k, n); each |W| is formed once, by row blocks, for the batch.
    """
    h = np.abs(np.asarray(x, dtype=np.float64))
    for layer in net.layers:
        if isinstance(layer, Affine):
            h = _abs_times(layer.weight, h) + np.abs(layer.bias)
    return h


def _abs_times(w: np.ndarray, h: np.ndarray) -> np.ndarray:
    """h @ |W|^T by row blocks of W (no full-size temporary for a large unrolled layer)."""
    rows = max(1, _CHUNK_BYTES // max(8 * w.shape[1], 1))
    return np.concatenate([h @ np.abs(w[i : i + rows]).T for i in range(0, w.shape[0], rows)], axis=-1)


def relative_error(ours: np.ndarray, ref: np.ndarray, magnitude: float) -> float:
    """max |ours - ref| relative to the largest reference output over all samples.

    The floor 1e-9 * magnitude only matters when every output cancels to almost nothing, where a
    float32 runtime cannot be compared relatively.
    """
    den = max(float(np.max(np.abs(ref))), 1e-9 * magnitude, 1e-300)
    return float(np.max(np.abs(ours - ref))) / den


def _largest_constant(constants: Mapping[str, np.ndarray], what: str) -> str:
    best, name = 0.0, None
    for key, arr in constants.items():
        arr = np.asarray(arr)
        if arr.dtype.kind == "f" and arr.size:
            m = float(np.max(np.abs(arr)))
            if m > best:
                best, name = m, key
    return f"; the largest constant is {best:.3g} in {what} '{name}'" if name is not None else ""


def _first_layer_beyond(net: Network, xs: np.ndarray, limit: float) -> tuple[int, float] | None:
    """First IR layer whose float64 values exceed `limit` in magnitude on the samples."""
    h = np.asarray(xs, dtype=np.float64)
    for i, layer in enumerate(net.layers):
        with np.errstate(over="ignore", invalid="ignore"):
            h = layer(h)
        big = float(np.max(np.abs(h))) if np.all(np.isfinite(h)) else float("inf")
        if big > limit:
            return i, big
    return None


def explain_range_problem(net: Network, xs: np.ndarray, refs: np.ndarray, ours: np.ndarray, float32: bool,
                          constants: Mapping[str, np.ndarray], runtime: str, what: str) -> str | None:
    """Why the reference runtime cannot be compared, when the model's values leave its float range."""
    fix = "rescale the model's weights" + (" or export it in float64" if float32 else "")
    extra = _largest_constant(constants, what)
    if not np.all(np.isfinite(ours)):
        where = _first_layer_beyond(net, xs, float(np.finfo(np.float64).max))
        at = f" from layer {where[0]} ({net.layers[where[0]].kind}) on" if where else ""
        return f"the model's values overflow float64{at} random inputs{extra}; {fix}"
    if not float32:
        return None
    if not np.all(np.isfinite(refs)):
        where = _first_layer_beyond(net, xs, FLOAT32_MAX)
        at = (f": values reach {where[1]:.3g} at layer {where[0]} ({net.layers[where[0]].kind}) of the imported network"
              if where else " inside a layer")
        return (f"{runtime} computes inf/NaN on random inputs because the model's values overflow float32 "
                f"(max {FLOAT32_MAX:.3g}){at}{extra}; {fix}")
    top = float(np.max(np.abs(ours)))
    if 0.0 < top < FLOAT32_TINY * 2**23:
        return (f"the model's outputs (at most {top:.3g} on random inputs) are below float32's range, where "
                f"{runtime} rounds them to zero or a few bits; {fix}")
    return None


def ort_session(model_bytes: bytes, source: str = "the model"):
    """An onnxruntime CPU session of `model_bytes` (one thread, warnings off); ModelError when it
    cannot load."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ModelError(f"onnxruntime cannot load {source} ({str(exc).splitlines()[0][:200]})") from None


def check_against_onnxruntime(net: Network, model_bytes: bytes, samples: int = 8, seed: int = 0) -> float:
    """Compare the IR with onnxruntime on random inputs; return the worst relative error."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_model_from_string(model_bytes)
    init_names = {i.name for i in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in init_names)
    float64 = inp.type.tensor_type.elem_type == 11
    sess = ort_session(model_bytes, "the model")
    xs = random_inputs(net.input_dim, samples, seed)
    dtype = np.float64 if float64 else np.float32
    rtol = FLOAT64_RTOL if float64 else FLOAT32_RTOL
    xs = xs.astype(dtype).astype(np.float64)
    refs = []
    for x in xs:
        with np.errstate(over="ignore", invalid="ignore"):
            ref = np.asarray(sess.run(None, {inp.name: x.astype(dtype).reshape(net.input_shape)})[0], dtype=np.float64).reshape(-1)
        if ref.size != net.output_dim:
            raise ModelError(f"onnxruntime returns {ref.size} outputs, the imported network {net.output_dim}")
        refs.append(ref)
    refs_a = np.array(refs)
    with np.errstate(over="ignore", invalid="ignore"):
        ours_a = net.forward(xs)  # the whole batch: one pass over each (possibly large) weight
        worst = relative_error(ours_a, refs_a, float(np.max(magnitude_scale(net, xs))))
    if not np.isfinite(worst) or worst > rtol:
        constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        why = explain_range_problem(net, xs, refs_a, ours_a, not float64, constants, "onnxruntime", "initializer")
        if why is not None:
            raise ModelError(why)
        raise ModelError(
            f"the imported network disagrees with onnxruntime (relative error {worst:.2e} > {rtol:.0e}); "
            "the model uses a construct certify lowers incorrectly: please report it"
        )
    return worst


def random_inputs(dim: int, samples: int, seed: int) -> np.ndarray:
    """Half standard normal, half uniform on [0, 1] (image-like inputs)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.standard_normal((samples // 2, dim)), rng.uniform(0, 1, (samples - samples // 2, dim))])
