"""The falsifier (issue 29): `solvers.pgd.Search`, used by `certify.verify.attack.Falsifier` and
`certify.robustness.attack.FlipAttack`.

Oracles are independent of the search: the nets below are built by hand, so where their unsafe
sets lie (a corner of a 40-dimensional box; nowhere) is known in closed form, counterexamples are
re-checked with a numpy forward pass written here, and reported outputs are compared with an
onnxruntime session opened here.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import certify
from certify.verify.attack import Falsifier
from certify.verify.instances import Instance, run_instance
from certify.verify.vnnlib import parse_vnnlib
from models import load_onnx, memory
from models.ir import Affine, Network, ReLU
from models.onnx_reference import OnnxReference
from models.zoo import random_relu_net
from solvers.batch_net import BatchNet
from solvers.pgd import Search, Targets, box_projection, signed_step

N = 40  # inputs: more than verification splits or samples (16)


def corner_net(n: int = N) -> Network:
    """y_0 = sum_i relu(x_i - 1/2), y_1 = 0: on [0, 1]^n the maximum of y_0 is n/2, at x = 1."""
    return Network([Affine(np.eye(n), -0.5 * np.ones(n)), ReLU(n),
                    Affine(np.vstack([np.ones((1, n)), np.zeros((1, n))]), np.zeros(2))], name="corner")


def corner_y0(x: np.ndarray) -> float:
    return float(np.sum(np.maximum(np.asarray(x, dtype=np.float64) - 0.5, 0.0)))


def box_property(n: int, lo: float, hi: float, output: str, outputs: int = 2) -> str:
    lines = [f"(declare-const X_{i} Real)" for i in range(n)] + [f"(declare-const Y_{j} Real)" for j in range(outputs)]
    lines += [f"(assert (>= X_{i} {lo}))\n(assert (<= X_{i} {hi}))" for i in range(n)]
    return "\n".join(lines + [output])


def test_pgd_finds_a_counterexample_in_a_small_corner():
    """y_0 >= 0.95 * n/2 holds only where the x_i sum to nearly their maximum: a corner of volume
    far below 1e-20 of the box (uniform samples never land there). The answer is re-checked here."""
    net = corner_net()
    threshold = 0.95 * N / 2
    spec = parse_vnnlib(box_property(N, 0, 1, f"(assert (>= Y_0 {threshold}))"))
    res = certify.verify(net, spec, timeout=20, attack_seconds=5)
    assert res.result == "sat"
    x = np.asarray(res.counterexample["x"])
    assert np.all((0 <= x) & (x <= 1)) and corner_y0(x) >= threshold
    assert res.details["found_by"] == "attack"


def test_pgd_never_claims_an_unsat_property():
    """y_0 > n/2 is empty (y_0 <= n/2 on the box, with equality at the corner the search is drawn
    to: its margin there is 0, and the strict row rejects it exactly)."""
    net = corner_net()
    spec = parse_vnnlib(box_property(N, 0, 1, f"(assert (> Y_0 {N / 2}))"))
    falsifier = Falsifier(net, spec, OnnxReference.from_network(net), seed=0)
    out = falsifier.run(time.perf_counter() + 2.0, rounds=3)
    assert out.counterexample is None
    assert out.best_margin <= 0 and falsifier.search.points > 0
    assert corner_y0(out.best_x) <= N / 2
    res = certify.verify(net, spec, timeout=5, attack_seconds=1)
    assert res.result != "sat" and res.counterexample is None


def test_every_clause_is_a_target():
    """Two clauses, only the second reachable (y_1 is constant 0 here, y_0 <= n/2): a falsifier
    that followed only the combined margin or only the first clause could still find it, one that
    dropped clauses could not; the point found satisfies clause 2 exactly."""
    net = corner_net()
    spec = parse_vnnlib(box_property(N, 0, 1, f"(assert (or (>= Y_1 1.0) (>= Y_0 {0.9 * N / 2})))"))
    res = certify.verify(net, spec, timeout=20, attack_seconds=5)
    assert res.result == "sat" and res.replay["disjunct"] == 1
    assert corner_y0(res.counterexample["x"]) >= 0.9 * N / 2


class FakeClock:
    """A clock that advances one second every time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_search_checks_its_deadline_between_steps():
    net = random_relu_net([N, 64, 64, 3], seed=2)
    clock = FakeClock()
    search = Search(net, clock=clock)
    targets = Targets.of([(np.zeros((1, N)), np.array([[1.0, -1.0, 0.0]]), np.array([-1e9]))], N, 3)  # unreachable
    lo, hi = -np.ones(N), np.ones(N)
    X = np.random.default_rng(0).uniform(lo, hi, (8, N))
    search.descend(X, targets, np.zeros(8, dtype=int), steps=1000, deadline=clock() + 5, project=box_projection(lo, hi),
                   step=signed_step(hi - lo))
    assert 1 <= search.steps <= 6  # a step, then a read of the clock: stops once the deadline passed


def test_the_attack_keeps_its_budget_on_a_fake_clock():
    """The whole attack (every region, every round) stops at its deadline measured by its clock."""
    net = random_relu_net([N, 64, 64, 3], seed=3)
    spec = parse_vnnlib(box_property(N, -1, 1, "(assert (or (>= Y_0 1e9) (>= Y_1 1e9)))", outputs=3))
    clock = FakeClock()
    falsifier = Falsifier(net, spec, OnnxReference.from_network(net), seed=0, clock=clock)
    out = falsifier.run(clock() + 20)  # no round limit: only the deadline stops it
    assert out.counterexample is None
    assert 1 <= falsifier.search.steps <= 20


def cifar_like(hw: int = 16, channels: int = 16, seed: int = 0) -> onnx.ModelProto:
    """3 x hw x hw -> conv (stride 2) -> conv (stride 2) -> fc 100 -> 10, float32."""
    rng = np.random.default_rng(seed)
    inits = {"K0": (rng.standard_normal((channels, 3, 4, 4)) / 7).astype(np.float32),
             "k0": (0.1 * rng.standard_normal(channels)).astype(np.float32),
             "K1": (rng.standard_normal((2 * channels, channels, 4, 4)) / np.sqrt(16 * channels)).astype(np.float32),
             "k1": (0.1 * rng.standard_normal(2 * channels)).astype(np.float32)}
    flat = 2 * channels * (hw // 4) ** 2
    inits |= {"W0": (rng.standard_normal((100, flat)) / np.sqrt(flat)).astype(np.float32),
              "b0": (0.1 * rng.standard_normal(100)).astype(np.float32),
              "W1": (rng.standard_normal((10, 100)) / 10).astype(np.float32),
              "b1": (0.1 * rng.standard_normal(10)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "K0", "k0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "K1", "k1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]), helper.make_node("Flatten", ["r1"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "W0", "b0"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["h1"]),
             helper.make_node("Gemm", ["h1", "W1", "b1"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cifar_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def conv_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("falsifier") / "conv.onnx"
    onnx.save(cifar_like(), path)
    return path


def robustness_property(net: Network, x0: np.ndarray, eps: float) -> str:
    """Some class other than x0's reaches x0's class within eps of x0 (clipped to [0, 1])."""
    c = int(np.argmax(net.forward(x0)))
    n, m = x0.size, net.output_dim
    lines = [f"(declare-const X_{i} Real)" for i in range(n)] + [f"(declare-const Y_{j} Real)" for j in range(m)]
    lines += [f"(assert (>= X_{i} {float(max(v - eps, 0.0))!r}))\n(assert (<= X_{i} {float(min(v + eps, 1.0))!r}))"
              for i, v in enumerate(x0)]
    lines.append("(assert (or " + " ".join(f"(and (>= Y_{j} Y_{c}))" for j in range(m) if j != c) + "))")
    return "\n".join(lines)


def test_the_attack_keeps_its_budget_on_a_conv_net(conv_file):
    """Wall-clock behaviour on a convolutional net: the attack returns within its budget plus 2 s."""
    net = load_onnx(conv_file)
    x0 = np.random.default_rng(1).uniform(0, 1, net.input_dim)
    spec = parse_vnnlib(robustness_property(net, x0, 1e-6))  # too small a ball to flip: the attack runs out
    res = certify.verify(conv_file, spec, timeout=30, attack_seconds=1.0)
    assert res.result != "sat"
    assert res.details["attack"]["seconds"] <= 1.0 + 2.0


def test_counterexample_outputs_are_onnxruntimes(conv_file):
    """The reported Y (JSON and witness text) is what onnxruntime computes at the reported X."""
    net = load_onnx(conv_file)
    x0 = np.random.default_rng(1).uniform(0, 1, net.input_dim)
    res = certify.verify(conv_file, parse_vnnlib(robustness_property(net, x0, 0.3)), timeout=30, attack_seconds=5)
    assert res.result == "sat"
    x = np.asarray(res.counterexample["x"])
    session = ort.InferenceSession(str(conv_file), providers=["CPUExecutionProvider"])
    y_ort = session.run(None, {"x": x.astype(np.float32).reshape(1, 3, 16, 16)})[0].reshape(-1).astype(np.float64)
    assert res.counterexample["y"] == y_ort.tolist()
    text_y = [float(line.split()[1].rstrip(")")) for line in res.vnncomp_text().splitlines() if "(Y_" in line]
    assert text_y == y_ort.tolist()
    assert res.replay["y_ir"] == pytest.approx(y_ort.tolist(), abs=1e-4)  # the IR's, kept in the replay


def test_sparse_float32_copy_matches_the_network(conv_file):
    """The search's float32 copy (convolutions kept sparse) computes the IR's outputs and gradients."""
    net = load_onnx(conv_file)
    fast, exact = BatchNet(net, np.float32), BatchNet(net)
    assert any(getattr(b, "sparse", False) for b in fast.blocks)
    X = np.random.default_rng(0).uniform(0, 1, (5, net.input_dim))
    (Yf, mf), (Ye, me) = fast.forward(X), exact.forward(X)
    np.testing.assert_allclose(Yf, np.stack([net.forward(x) for x in X]), rtol=1e-4, atol=1e-4)
    gY = np.random.default_rng(1).standard_normal(Ye.shape)
    np.testing.assert_allclose(fast.backward(mf, gY), exact.backward(me, gY), rtol=1e-3, atol=1e-4)


def test_search_batches_fit_a_small_memory_budget(monkeypatch):
    """A wide layer (10 -> 8192): under a budget of a few MB the planned batch fits it and the search
    runs without MemoryError, its peak allocation within the budget."""
    net = random_relu_net([10, 8192, 10], seed=0)
    search = Search(net)
    targets = Targets.of([(np.zeros((1, 10)), np.eye(10)[:1], np.array([-1e9]))], 10, 10)
    search.pass_cost()  # timed before the limit (a few rows)
    monkeypatch.setenv(memory.ENV_VAR, str(int(memory.held_bytes() + 6 * 10**6)))
    room = memory.work_left()[0]
    rows = search.plan(60.0, 10, most=65_536, targets=targets)
    assert 1 <= rows < 65_536 and rows * search.row_bytes(targets) <= room
    lo, hi = -np.ones(10), np.ones(10)
    tracemalloc.start()
    try:
        search.descend(np.zeros((rows, 10)), targets, np.zeros(rows, dtype=int), steps=3, deadline=None,
                       project=box_projection(lo, hi), step=signed_step(hi - lo))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= room, (peak, room)


def test_seeded_attacks_repeat():
    net = corner_net()
    spec = parse_vnnlib(box_property(N, 0, 1, f"(assert (>= Y_0 {0.9 * N / 2}))"))
    a, b = (certify.verify(net, spec, timeout=20, attack_seconds=5, seed=7) for _ in range(2))
    assert a.result == b.result == "sat" and a.counterexample == b.counterexample


def unsupported_model(path) -> None:
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], name="soft")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_an_unsupported_model_is_refused_before_the_property_is_read(tmp_path, cli):
    """The property below is malformed: had it been parsed first, its error would be the answer."""
    model, prop = tmp_path / "soft.onnx", tmp_path / "bad.vnnlib"
    unsupported_model(model)
    prop.write_text("(declare-const X_0 Real)\n(assert (<== X_0 1))\n")
    r = cli("verify", str(model), str(prop))
    assert r.code == 2 and "Softmax" in r.err and "<==" not in r.err
    inst = Instance(model.name, prop.name, 10.0, model, prop, 1)
    row, _ = run_instance(inst, "b")
    assert row.result == "error" and "Softmax" in row.message and "<==" not in row.message


def test_no_room_for_a_float32_copy_means_the_float64_arrays(monkeypatch):
    """Under a budget too small for the search's float32 copy, the search runs on the network's own
    float64 arrays instead of failing, and its gradients are the network's."""
    net = random_relu_net([200, 4096, 10], seed=4)  # a float32 copy: 3.4 MB
    monkeypatch.setenv(memory.ENV_VAR, str(int(memory.held_bytes() + 2 * 10**6)))
    batch = BatchNet(net, np.float32)
    assert batch.dtype == np.float64
    X = np.random.default_rng(0).uniform(-1, 1, (3, 200))
    Y, masks = batch.forward(X)
    np.testing.assert_allclose(Y, np.stack([net.forward(x) for x in X]), rtol=1e-9, atol=1e-9)
    monkeypatch.delenv(memory.ENV_VAR)
    assert BatchNet(net, np.float32).dtype == np.float32


def test_low_dimensional_sampling_keeps_the_budget_on_a_fake_clock():
    """Sampling, dense sampling, LP polish and PGD of a low-dimensional region all stop at the
    deadline of the attack's clock."""
    net = random_relu_net([4, 64, 64, 3], seed=5)
    spec = parse_vnnlib(box_property(4, -1, 1, "(assert (>= Y_0 1e9))", outputs=3))
    clock = FakeClock()
    falsifier = Falsifier(net, spec, OnnxReference.from_network(net), seed=0, clock=clock)
    start = clock()
    out = falsifier.run(start + 30)
    assert out.counterexample is None and falsifier.points > 0
    assert clock.now <= start + 30 + 3  # the deadline was read, then at most a check or two more
