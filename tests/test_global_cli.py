"""`certify global` end to end: JSON contract, methods, norm pairs, conv models, bad input (exit 2)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from certify.lipschitz.global_bounds import global_lipschitz
from models import load_onnx
from models.zoo import lipmip_suite_path, vnncomp_test_path
from solvers.norms import operator_norm
from tests.conftest import assert_bad_input

NET = lipmip_suite_path("lipmip_2-16-16-2")


def _sampled(net, p, q, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return max(operator_norm(net.jacobian(x), p, q) for x in rng.standard_normal((n, net.input_dim)) * 2)


def _save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return path


def _conv_model(path, seed=0):
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((2, 1, 3, 3)).astype(np.float32) / 3
    W = rng.standard_normal((4, 2 * 5 * 5)).astype(np.float32) / 10
    inits = [numpy_helper.from_array(K, "K"), numpy_helper.from_array(np.zeros(2, np.float32), "kb"),
             numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.zeros(4, np.float32), "b")]
    nodes = [
        helper.make_node("Conv", ["x", "K", "kb"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    return _save(graph, path)


def _nan_model(path):
    W = np.ones((2, 3), np.float32)
    W[0, 1] = np.nan
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "W"], ["y"], transB=1)], "nan",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
                              [numpy_helper.from_array(W, "W")])
    return _save(graph, path)


@pytest.mark.parametrize("method", ["naive", "eclipse-fast", "lipsdp-layer", "lipsdp-neuron"])
def test_global_json_contract(cli, method):
    r = cli("global", NET, "--method", method, "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert {"upper", "method", "seconds", "input_norm", "output_norm", "certified"} <= set(out)
    assert out["method"] == method and out["certified"] is True
    assert (out["input_norm"], out["output_norm"]) == ("l2", "l2")
    net = load_onnx(NET)
    assert _sampled(net, "l2", "l2") <= out["upper"]


def test_global_all_lists_every_method_and_the_best(cli):
    r = cli("global", NET, "--method", "all", "--input-norm", "linf", "--output-norm", "l1", "--json")
    assert r.code == 0, r.err
    out = r.json()
    methods = [x["method"] for x in out["results"]]
    assert methods == ["naive", "eclipse-fast", "lipsdp-layer", "lipsdp-neuron"]
    assert "mip" in out["skipped"]  # no --domain
    assert out["best"]["upper"] == min(x["upper"] for x in out["results"])
    sampled = _sampled(load_onnx(NET), "linf", "l1")
    assert all(x["upper"] >= sampled for x in out["results"])
    assert all(x["input_norm"] == "linf" and x["output_norm"] == "l1" for x in out["results"])


def test_global_human_output(cli):
    r = cli("global", NET, "--method", "eclipse-fast", "--input-norm", "linf")
    assert r.code == 0 and "certified" in r.out and "sqrt(2)" in r.out


def test_conv_model_every_norm_pair(cli, tmp_path):
    from certify.lipschitz.global_bounds import global_lipschitz

    path = _conv_model(tmp_path / "conv.onnx")
    r = cli("global", path, "--method", "all", "--input-norm", "linf", "--output-norm", "l1", "--json")
    assert r.code == 0, r.err
    net = load_onnx(path)
    assert net.layers[0].conv is not None
    assert r.json()["best"]["upper"] >= _sampled(net, "linf", "l1", n=300)
    for p, q in [("l2", "l2"), ("l1", "l1"), ("linf", "linf"), ("l2", "l1")]:
        sampled = _sampled(net, p, q, n=300)
        for method in ("naive", "eclipse-fast"):
            assert global_lipschitz(net, method, input_norm=p, output_norm=q).upper >= sampled


def test_bad_input_exits_2(cli, tmp_path):
    assert_bad_input(cli("global", NET, "--method", "lipsdp-network"), "unknown method")
    assert_bad_input(cli("global", NET, "--input-norm", "l3"), "unknown input norm")
    # a norm the method does not support (the MILP is exact for l1/linf only)
    assert_bad_input(cli("global", NET, "--method", "mip", "--domain", "-1,1"), "l1/linf norms only")
    assert_bad_input(cli("global", NET, "--method", "mip", "--input-norm", "linf", "--output-norm", "l1"), "domain")
    assert_bad_input(cli("global", NET, "--method", "mip", "--domain", "1,-1", "--input-norm", "linf", "--output-norm", "l1"), "lo < hi")
    assert_bad_input(cli("global", NET, "--domain", "0,x"), "--domain")
    assert_bad_input(cli("global", NET, "--method", "lipsdp-neuron", "--solver", "MOSEK"), "MOSEK")
    assert_bad_input(cli("global", NET, "--method", "lipsdp-neuron", "--solver", "cplex"), "unknown SDP solver")
    assert_bad_input(cli("global", NET, "--method", "lipsdp-layer", "--accuracy", "-1"), "accuracy")
    assert_bad_input(cli("global", _nan_model(tmp_path / "nan.onnx"), "--method", "naive"), "nan")
    pt = tmp_path / "model.pt"
    pt.write_bytes(b"not a pickle")
    assert_bad_input(cli("global", pt), "never unpickles")


def test_mip_certifies_exactly_the_domain_box():
    """No center/radius round trip: the certificate's box is the domain, and its interval holds
    against sampled difference quotients on that box (an independent lower oracle)."""
    net = load_onnx(vnncomp_test_path("test_small"))
    res = global_lipschitz(net, "mip", input_norm="linf", output_norm="l1", domain=(-2.0, 1.0))
    assert res.method == "mip" and res.scope == "box"
    assert np.all(res.box.lo == -2.0) and np.all(res.box.hi == 1.0)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-2, 1, (2, 400, 1))
    fx = np.array([net.forward(v) for v in x]).reshape(400, -1)
    fy = np.array([net.forward(v) for v in y]).reshape(400, -1)
    quotients = np.abs(fx - fy).sum(axis=1) / np.abs(x - y).max(axis=1)
    assert quotients.max() <= res.upper * (1 + 1e-9)
    assert res.lower <= res.upper