"""ONNX import: every bundled net and hand-built graphs per operator, with onnxruntime as oracle."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from models import ModelError, UnsupportedOperator, load_onnx
from models import onnx_import
from models.zoo import acasxu_paths, lipmip_suite_path, vnncomp_test_path, LIPMIP_SUITE, VNNCOMP_TEST_NETS
from tests.onnx_builders import make_model, ort_forward, rand, save


def assert_matches_ort(net, path, xs, dtype=np.float32):
    for x in xs:
        ref = ort_forward(path, x, net.input_shape, dtype)
        ours = net.forward(np.asarray(x, dtype=dtype).astype(np.float64))
        tol = 1e-5 * (1.0 + np.max(np.abs(ref)))
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=tol)


def test_all_acasxu_networks_match_onnxruntime():
    paths = acasxu_paths()
    assert len(paths) == 45
    rng = np.random.default_rng(123)
    # inputs on the scale of ACAS Xu's normalised state plus raw-range points
    xs = np.concatenate([rng.uniform(-0.5, 0.5, (3, 5)), rng.uniform(-3, 3, (2, 5))])
    for p in paths:
        net = load_onnx(p)
        assert net.input_dim == 5 and net.output_dim == 5
        assert net.relu_sizes == [50] * 6
        assert_matches_ort(net, str(p), xs)


@pytest.mark.parametrize("name", VNNCOMP_TEST_NETS)
def test_vnncomp_test_nets_match_onnxruntime(name):
    path = vnncomp_test_path(name)
    net = load_onnx(path)
    rng = np.random.default_rng(7)
    assert_matches_ort(net, str(path), rng.uniform(-3, 3, (6, net.input_dim)))


def test_vnncomp_sanity_nets_closed_forms():
    nano = load_onnx(vnncomp_test_path("test_nano"))  # y = relu(0.5 x)
    tiny = load_onnx(vnncomp_test_path("test_tiny"))  # y = relu(x)
    small = load_onnx(vnncomp_test_path("test_small"))  # 1-2-2-1 with W0 on the left of x
    for x in (-2.0, -0.25, 0.0, 0.7, 3.0):
        assert nano.forward([x])[0] == pytest.approx(max(0.5 * x, 0.0))
        assert tiny.forward([x])[0] == pytest.approx(max(x, 0.0))
        h = np.maximum(np.array([1.0, 1.0]) * x + 1.5, 0)
        h = np.maximum(np.full((2, 2), 2.0) @ h + 2.5, 0)
        assert small.forward([x])[0] == pytest.approx(3 * h.sum() + 3.5)


@pytest.mark.parametrize("name", LIPMIP_SUITE)
def test_lipmip_suite_imports(name):
    net = load_onnx(lipmip_suite_path(name))
    widths = [int(w) for w in name.split("_")[1].split("-")]
    assert net.input_dim == widths[0] and net.output_dim == widths[-1]
    assert net.relu_sizes == widths[1:-1]


def _check_graph(tmp_path, model, in_shape, seed=0, n=5, scale=1.0):
    path = save(model, tmp_path)
    net = load_onnx(path)
    rng = np.random.default_rng(seed)
    assert_matches_ort(net, path, rng.standard_normal((n, int(np.prod(in_shape)))) * scale)
    return net


def test_gemm_attributes_and_trailing_relu(tmp_path):
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Gemm", ["x", "W", "b"], ["h"], alpha=0.7, beta=1.3, transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["W2", "r"], ["t"], transA=0, transB=1),  # constant on the left: W2 @ r^T
        helper.make_node("Transpose", ["t"], ["u"], perm=[1, 0]),
        helper.make_node("Relu", ["u"], ["y"]),  # trailing ReLU on the logits
    ]
    model = make_model(nodes, {"W": rand(rng, 6, 4), "b": rand(rng, 6), "W2": rand(rng, 3, 6)}, [1, 4])
    net = _check_graph(tmp_path, model, [1, 4])
    assert net.layers[-1].kind == "relu"


def test_matmul_both_orders_and_add_sub_mul_div_neg(tmp_path):
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["a"]),
        helper.make_node("Div", ["a", "std"], ["b"]),
        helper.make_node("MatMul", ["b", "W"], ["c"]),
        helper.make_node("Add", ["bias", "c"], ["d"]),
        helper.make_node("Mul", ["d", "s"], ["e"]),
        helper.make_node("Neg", ["e"], ["f"]),
        helper.make_node("Relu", ["f"], ["g"]),
        helper.make_node("Sub", ["k", "g"], ["y"]),  # constant minus tensor
    ]
    inits = {"mean": rand(rng, 1, 5), "std": np.abs(rand(rng, 1, 5)) + 0.5, "W": rand(rng, 5, 7), "bias": rand(rng, 7),
             "s": rand(rng, 7), "k": rand(rng, 1, 7)}
    _check_graph(tmp_path, make_model(nodes, inits, [1, 5]), [1, 5])


def test_dynamic_batch_with_shape_arithmetic(tmp_path):
    """torch-style Flatten of a dynamic batch: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "W", "b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    inits = {"zero": np.array(0, dtype=np.int64), "axes0": np.array([0], dtype=np.int64), "minus1": np.array([-1], dtype=np.int64),
             "W": rand(rng, 4, 12), "b": rand(rng, 4)}
    model = make_model(nodes, inits, ["N", 3, 2, 2])
    net = _check_graph(tmp_path, model, [1, 3, 2, 2])
    assert net.input_shape == (1, 3, 2, 2)


@pytest.mark.parametrize("pads,strides,dilations,group,auto_pad", [
    ([1, 1, 1, 1], [1, 1], [1, 1], 1, None),
    ([0, 1, 2, 0], [2, 1], [1, 1], 1, None),
    ([1, 1, 1, 1], [1, 1], [2, 2], 2, None),
    (None, [2, 2], [1, 1], 1, "SAME_UPPER"),
    (None, [1, 1], [1, 1], 1, "SAME_LOWER"),
])
def test_conv_variants_with_batchnorm_and_pooling(tmp_path, pads, strides, dilations, group, auto_pad):
    rng = np.random.default_rng(3)
    attrs = {"strides": strides, "dilations": dilations, "group": group}
    if pads is not None:
        attrs["pads"] = pads
    if auto_pad is not None:
        attrs["auto_pad"] = auto_pad
    nodes = [
        helper.make_node("Conv", ["x", "K", "kb"], ["c"], **attrs),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "mu", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("AveragePool", ["r"], ["p"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Dropout", ["f"], ["d"]),
        helper.make_node("Identity", ["d"], ["y"]),
    ]
    inits = {"K": rand(rng, 4, 4 // group, 3, 3), "kb": rand(rng, 4), "g": rand(rng, 4) + 1, "beta": rand(rng, 4),
             "mu": rand(rng, 4), "var": np.abs(rand(rng, 4)) + 0.1}
    net = _check_graph(tmp_path, make_model(nodes, inits, [1, 4, 6, 7]), [1, 4, 6, 7])
    conv_layers = [l for l in net.layers if l.kind == "affine" and l.conv is not None]
    assert conv_layers and conv_layers[0].conv.kernel.shape == (4, 4 // group, 3, 3)


def test_conv_spec_kernel_reproduces_dense_weight(tmp_path):
    """The kept kernel (BN folded in) and the unrolled matrix agree: direct loops as oracle."""
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Conv", ["x", "K"], ["c"], pads=[1, 0, 0, 1], strides=[2, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "mu", "var"], ["y"]),
    ]
    inits = {"K": rand(rng, 2, 3, 2, 3), "g": rand(rng, 2) + 1, "beta": rand(rng, 2), "mu": rand(rng, 2), "var": np.abs(rand(rng, 2)) + 0.1}
    path = save(make_model(nodes, inits, [1, 3, 5, 4]), tmp_path)
    layer = next(l for l in load_onnx(path).layers if l.kind == "affine")
    spec = layer.conv
    C, H, W = spec.in_shape
    O, OH, OW = spec.out_shape
    x = rng.standard_normal((C, H, W))
    xp = np.zeros((C, H + spec.pads[0] + spec.pads[2], W + spec.pads[1] + spec.pads[3]))
    xp[:, spec.pads[0]:spec.pads[0] + H, spec.pads[1]:spec.pads[1] + W] = x
    kh, kw = spec.kernel.shape[2:]
    direct = np.zeros((O, OH, OW))
    for o in range(O):
        for i in range(OH):
            for j in range(OW):
                r, c = i * spec.stride[0], j * spec.stride[1]
                direct[o, i, j] = np.sum(spec.kernel[o] * xp[:, r:r + kh, c:c + kw])
    np.testing.assert_allclose(layer.weight @ x.ravel(), direct.ravel(), atol=1e-12)


def test_global_average_pool_pad_concat_slice_squeeze(tmp_path):
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["xp"], mode="constant"),
        helper.make_node("GlobalAveragePool", ["xp"], ["g"]),
        helper.make_node("Squeeze", ["g", "axes"], ["s"]),
        helper.make_node("Slice", ["x", "st", "en", "ax"], ["sl"]),
        helper.make_node("Flatten", ["sl"], ["slf"], axis=1),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s2"]),
        helper.make_node("Concat", ["s2", "slf", "extra"], ["y"], axis=1),
    ]
    inits = {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64), "axes": np.array([0, 2, 3], dtype=np.int64),
             "st": np.array([1], dtype=np.int64), "en": np.array([3], dtype=np.int64), "ax": np.array([2], dtype=np.int64),
             "ax0": np.array([0], dtype=np.int64), "extra": rand(rng, 1, 2)}
    _check_graph(tmp_path, make_model(nodes, inits, [1, 2, 4, 3]), [1, 2, 4, 3])


def test_torch_exported_conv_net_roundtrip(tmp_path):
    """A real exporter's output (torch legacy ONNX export with a dynamic batch axis)."""
    import io

    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3 * 3 * 3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2),
    )
    with torch.no_grad():
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    model.eval()
    buf = io.BytesIO()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(1, 1, 6, 6), buf, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "N"}})
    path = tmp_path / "t.onnx"
    path.write_bytes(buf.getvalue())
    net = load_onnx(path)
    rng = np.random.default_rng(11)
    with torch.no_grad():
        for _ in range(4):
            x = rng.standard_normal((1, 1, 6, 6)).astype(np.float32)
            ref = model(torch.from_numpy(x)).double().numpy().ravel()
            np.testing.assert_allclose(net.forward(x.ravel().astype(np.float64)), ref, rtol=1e-5, atol=1e-5)


def test_float64_model_is_checked_tightly(tmp_path):
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    model = make_model(nodes, {"W": rng.standard_normal((3, 4))}, [1, 3], elem=TensorProto.DOUBLE)
    path = save(model, tmp_path)
    net = load_onnx(path)
    x = rng.standard_normal(3)
    np.testing.assert_allclose(net.forward(x), ort_forward(path, x, [1, 3], np.float64), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- refusals
def test_unknown_operator_names_op_and_node(tmp_path):
    nodes = [helper.make_node("Gemm", ["x", "W"], ["h"], transB=1, name="fc"), helper.make_node("Sigmoid", ["h"], ["y"], name="act1")]
    path = save(make_model(nodes, {"W": np.ones((2, 2), np.float32)}, [1, 2]), tmp_path)
    with pytest.raises(UnsupportedOperator, match=r"Sigmoid.*act1"):
        load_onnx(path)


def test_nonlinear_product_of_inputs_is_refused(tmp_path):
    nodes = [helper.make_node("Mul", ["x", "x"], ["y"], name="sq")]
    path = save(make_model(nodes, {}, [1, 2]), tmp_path)
    with pytest.raises(UnsupportedOperator, match="not affine"):
        load_onnx(path)


def test_skip_connection_across_relu_is_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"], name="res")]
    path = save(make_model(nodes, {}, [1, 2]), tmp_path)
    with pytest.raises(UnsupportedOperator, match="skip"):
        load_onnx(path)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_name_the_initializer(tmp_path, bad):
    W = np.ones((2, 2), np.float32)
    W[0, 1] = bad
    path = save(make_model([helper.make_node("Gemm", ["x", "Wbad"], ["y"])], {"Wbad": W}, [1, 2]), tmp_path)
    with pytest.raises(ModelError, match=r"Wbad.*(NaN|inf)"):
        load_onnx(path)


def test_disagreement_with_onnxruntime_is_refused(tmp_path, monkeypatch):
    """The runtime check can fail: a deliberately wrong lowering of Neg is caught."""
    nodes = [helper.make_node("Neg", ["x"], ["y"])]
    path = save(make_model(nodes, {}, [1, 3]), tmp_path)
    monkeypatch.setitem(onnx_import._HANDLERS, "Neg", onnx_import._identity)
    with pytest.raises(ModelError, match="disagrees with onnxruntime"):
        load_onnx(path)


def test_multiple_inputs_and_malformed_files(tmp_path):
    from onnx import helper as h

    graph = h.make_graph([h.make_node("Add", ["a", "b"], ["y"])], "g",
                         [h.make_tensor_value_info("a", TensorProto.FLOAT, [1, 2]), h.make_tensor_value_info("b", TensorProto.FLOAT, [1, 2])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    path = save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), tmp_path)
    with pytest.raises(UnsupportedOperator, match="2 inputs"):
        load_onnx(path)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07not a protobuf at all")
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        load_onnx(junk)
    with pytest.raises(ModelError, match="does not exist"):
        load_onnx(tmp_path / "missing.onnx")


def test_sparse_paths_of_the_tracer_match_onnxruntime(tmp_path):
    """Operators on a non-identity map (no ReLU between them): conv -> average pool (ceil mode,
    padding counted), broadcasting Mul to a larger shape, Gather with a negative index, Transpose,
    W @ X on a 2-D tensor, Gemm with transA and alpha, Sub of two traced tensors, Concat with a
    constant, and Pad."""
    rng = np.random.default_rng(8)
    nodes = [
        helper.make_node("Conv", ["x", "K"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         ceil_mode=1, count_include_pad=1),
        helper.make_node("Mul", ["p", "m"], ["pm"]),  # (1, 2, 3, 4) * (2, 1, 1, 4) -> (2, 2, 3, 4)
        helper.make_node("Gather", ["pm", "gi"], ["g"], axis=1),  # channels [-1, 0]
        helper.make_node("Reshape", ["g", "s2"], ["g2"]),  # (6, 8)
        helper.make_node("Transpose", ["g2"], ["gt"], perm=[1, 0]),
        helper.make_node("MatMul", ["A", "gt"], ["ag"]),  # (4, 8) @ (8, 6)
        helper.make_node("Gemm", ["ag", "B"], ["h"], transA=1, alpha=0.5),  # (6, 4) @ (4, 3)
        helper.make_node("Slice", ["h", "st", "en", "ax"], ["hs"]),
        helper.make_node("Sub", ["h", "hs"], ["d"]),  # broadcast (6, 3) - (1, 3)
        helper.make_node("Concat", ["d", "extra"], ["cc"], axis=0),
        helper.make_node("Pad", ["cc", "pads"], ["y"], mode="constant"),
    ]
    inits = {"K": rand(rng, 2, 1, 3, 3), "m": rand(rng, 2, 1, 1, 4), "gi": np.array([-1, 0], dtype=np.int64),
             "s2": np.array([6, 8], dtype=np.int64), "A": rand(rng, 4, 8), "B": rand(rng, 4, 3),
             "st": np.array([2], dtype=np.int64), "en": np.array([3], dtype=np.int64), "ax": np.array([0], dtype=np.int64),
             "extra": rand(rng, 2, 3), "pads": np.array([1, 0, 0, 2], dtype=np.int64)}
    net = _check_graph(tmp_path, make_model(nodes, inits, [1, 1, 5, 6]), [1, 1, 5, 6])
    assert net.output_dim == 9 * 5


# ----------------------------------------------------------------------------- values outside float range (item 11)
def _two_layer(tmp_path, scale1, scale2, elem=TensorProto.FLOAT):
    dtype = np.float64 if elem == TensorProto.DOUBLE else np.float32
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1, name="fc1"), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1, name="fc2")]
    inits = {"W1": np.full((4, 3), scale1, dtype), "b1": np.zeros(4, dtype), "W2": np.full((2, 4), scale2, dtype), "b2": np.zeros(2, dtype)}
    return save(make_model(nodes, inits, [1, 3], elem=elem), tmp_path)


def test_float32_overflow_names_the_problem_not_a_lowering_bug(tmp_path):
    """Weights 1e30: onnxruntime's float32 reaches inf (1e60 after the second layer)."""
    with pytest.raises(ModelError, match=r"overflow float32.*layer 2 \(affine\).*1e\+30 in initializer 'W1'") as exc:
        load_onnx(_two_layer(tmp_path, 1e30, 1e30))
    assert "please report" not in str(exc.value)


def test_float32_underflow_and_float64_overflow_are_named(tmp_path):
    with pytest.raises(ModelError, match="below float32's range") as exc:
        load_onnx(_two_layer(tmp_path, 1e-30, 1e-30))
    assert "please report" not in str(exc.value)
    with pytest.raises(ModelError, match=r"overflow float64.*1e\+200 in initializer 'W1'"):
        load_onnx(_two_layer(tmp_path, 1e200, 1e200, elem=TensorProto.DOUBLE))


def test_large_but_representable_weights_still_import(tmp_path):
    net = load_onnx(_two_layer(tmp_path, 1e15, 1e15))  # 1e30 outputs: inside float32's range
    assert net.forward(np.ones(3))[0] == pytest.approx(12e30, rel=1e-6)


# ----------------------------------------------------------------------------- files that are not ONNX (item 13)
def _zipped(data: bytes) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("net.onnx", data)
    return buf.getvalue()


@pytest.mark.parametrize("name,wrap,message", [
    ("net.onnx.gz", lambda d: __import__("gzip").compress(d), r"gzip-compressed.*gunzip -k .*net\.onnx\.gz"),
    ("net.onnx.bz2", lambda d: __import__("bz2").compress(d), r"bzip2-compressed.*bunzip2"),
    ("net.zip", _zipped, "zip archive.*extract"),
    ("net.onnx", lambda d: b"\x80\x04\x95" + b"\x00" * 40, "pickle.*never unpickles"),  # recognised, never loaded
    ("prop.onnx", lambda d: b"; ACAS Xu property 1\n(declare-const X_0 Real)\n", "VNNLIB property"),
    ("lfs.onnx", lambda d: b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n", "git lfs pull"),
    ("empty.onnx", lambda d: b"", "is empty"),
])
def test_compressed_and_foreign_files_say_what_to_do(tmp_path, name, wrap, message):
    from models.zoo import acasxu_path

    path = tmp_path / name
    path.write_bytes(wrap(acasxu_path(1, 1).read_bytes()))
    with pytest.raises(ModelError, match=message):
        load_onnx(path)


def test_gzip_model_on_the_command_line_is_exit_2_with_the_hint(tmp_path, cli):
    import gzip

    from models.zoo import acasxu_path
    from tests.conftest import assert_bad_input

    gz = tmp_path / "net.onnx.gz"
    gz.write_bytes(gzip.compress(acasxu_path(1, 1).read_bytes()))
    assert_bad_input(cli("inspect", gz), "gzip-compressed", "gunzip")
