"""One memory budget, accounted before allocation, and special input files refused (issue 27, point 3).

Every test sets `CERTIFY_MEMORY_LIMIT` a few MB above what the process already holds (the networks
alive: `models.memory.held_bytes`), on nets of a few MB, so nothing large is ever allocated; peaks
are measured with tracemalloc (numpy reports its buffers to it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models.memory as smem
from models import load_onnx
from models import memory
from models.errors import BadInput, ModelError
from models.file_kinds import check_input_file
from models.ir import Affine, Network, ReLU
from models.memory import ModelTooLarge, TooLarge
from models.zoo import random_relu_net, vnncomp_test_path
from solvers.bounds import network_bounds, relu_blocks
from solvers.bounds.interval import affine_interval
from solvers.bounds.jacobian import clarke_norm_bound
from solvers.lp.expr import Expr

ROOT = Path(__file__).resolve().parents[1]
MB = 10**6


def cifar_style(hw: int = 12, channels=(8, 16, 16), fc: int = 100, outputs: int = 10, seed: int = 0) -> onnx.ModelProto:
    """The audit's CIFAR-style net scaled down: 3 x hw x hw -> conv c1 -> conv c2 (stride 2) -> conv c3
    -> fc -> fc (3x32x32 with 32, 64, 64 channels is 7.26 GB unrolled; 3x12x12 with 8, 16, 16: 12.4 MB)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], {}
    c, h, x = 3, hw, "x"
    for i, (out_c, stride) in enumerate(zip(channels, (1, 2, 1))):
        inits[f"K{i}"] = (rng.standard_normal((out_c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        inits[f"kb{i}"] = (0.1 * rng.standard_normal(out_c)).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"K{i}", f"kb{i}"], [f"c{i}"], pads=[1, 1, 1, 1], strides=[stride, stride]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x, c, h = f"r{i}", out_c, (h + 2 - 3) // stride + 1
    nodes.append(helper.make_node("Flatten", [x], ["flat"], axis=1))
    inits["W0"] = (rng.standard_normal((fc, c * h * h)) / np.sqrt(c * h * h)).astype(np.float32)
    inits["b0"] = (0.1 * rng.standard_normal(fc)).astype(np.float32)
    inits["W1"] = (rng.standard_normal((outputs, fc)) / np.sqrt(fc)).astype(np.float32)
    inits["b1"] = (0.1 * rng.standard_normal(outputs)).astype(np.float32)
    nodes += [helper.make_node("Gemm", ["flat", "W0", "b0"], ["h0"], transB=1), helper.make_node("Relu", ["h0"], ["h1"]),
              helper.make_node("Gemm", ["h1", "W1", "b1"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cifar_style", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def conv_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("mem") / "cifar_style.onnx")
    onnx.save(cifar_style(), path)
    return path


@pytest.fixture
def small_conv(tmp_path, monkeypatch):
    """3x8x8 (2.6 MB): symbolic bounds back-substitute every neuron, so a smaller net."""
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    onnx.save(cifar_style(hw=8), tmp_path / "small.onnx")
    return load_onnx(tmp_path / "small.onnx")


@pytest.fixture
def conv(conv_path, monkeypatch):
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    return load_onnx(conv_path)


def _limit(monkeypatch, extra: float) -> float:
    """CERTIFY_MEMORY_LIMIT = what the process holds now + `extra` bytes; returns the room left."""
    monkeypatch.setenv(memory.ENV_VAR, str(int(memory.held_bytes() + extra)))
    return memory.work_left()[0]


def _peak(fn):
    """(fn(), peak bytes allocated while it ran)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _largest(net: Network) -> int:
    return max(layer.weight.nbytes for layer in net.layers if isinstance(layer, Affine))


# ----------------------------------------------------------------------------- one budget
def test_one_budget_for_the_importer_and_the_solvers(monkeypatch):
    monkeypatch.setenv(memory.ENV_VAR, "50M")
    assert smem.TooLarge is TooLarge and issubclass(ModelTooLarge, TooLarge) and issubclass(TooLarge, BadInput)
    assert issubclass(ModelTooLarge, ModelError)
    # the solvers' check honours CERTIFY_MEMORY_LIMIT (it used to read MemAvailable only)
    with pytest.raises(TooLarge, match=r"an SDP, which needs about 60 MB of memory, more than the memory budget of 50 MB "
                                       r"\(CERTIFY_MEMORY_LIMIT=50M\).*use naive.*CERTIFY_MEMORY_LIMIT"):
        smem.require_memory(60 * MB, "an SDP, which", "use naive")
    smem.require_memory(1 * MB, "an SDP, which", "use naive")
    with pytest.raises(TooLarge, match=r"too large: needs 60 MB for interval bounds, but the memory budget is 50 MB "
                                       r"\(CERTIFY_MEMORY_LIMIT=50M\).*CERTIFY_MEMORY_LIMIT"):
        memory.require_work(60 * MB, "interval bounds")
    # without the variable: half of what is available, the same number for both
    monkeypatch.delenv(memory.ENV_VAR)
    monkeypatch.setattr(smem, "available_bytes", lambda: 2 * 10**9)
    with pytest.raises(TooLarge, match=r"budget of 1 GB \(half of the 2 GB of memory available\)"):
        smem.require_memory(1.5e9, "an SDP, which", "use naive")


def test_networks_alive_count_as_held():
    before = memory.held_bytes()
    net = random_relu_net([50, 200, 10], seed=0)
    own = sum(layer.weight.nbytes + layer.bias.nbytes for layer in net.layers if isinstance(layer, Affine))
    assert memory.held_bytes() - before == own
    net.fused()  # shares the arrays: not counted twice
    assert memory.held_bytes() - before == own
    del net
    assert memory.held_bytes() == before


# ----------------------------------------------------------------------------- bounds of the conv net
def test_interval_bounds_of_the_conv_net_stay_within_the_budget(conv, monkeypatch):
    """The audit's failure scaled down: the IR fits, W+ and W- of its largest layer would not. The
    copies are made in row blocks: the peak stays in the budget and the bounds are those of the
    one-piece computation up to float64 summation order (both sound)."""
    x = np.full(conv.input_dim, 0.5)
    whole = network_bounds(conv, x - 0.01, x + 0.01, "interval")
    room = _limit(monkeypatch, 0.8 * _largest(conv))  # less than W+ and W- of the largest layer
    assert 2 * _largest(conv) > room
    blocked, peak = _peak(lambda: network_bounds(conv, x - 0.01, x + 0.01, "interval"))
    assert peak <= room, (peak, room)
    for a, b in zip(whole.pre_lo + whole.pre_hi + [whole.out_lo, whole.out_hi],
                    blocked.pre_lo + blocked.pre_hi + [blocked.out_lo, blocked.out_hi]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_symbolic_bounds_back_substitute_in_blocks_within_the_budget(small_conv, monkeypatch):
    conv = small_conv
    x = np.full(conv.input_dim, 0.5)
    whole = network_bounds(conv, x - 0.01, x + 0.01, "symbolic")
    room = _limit(monkeypatch, 0.8 * _largest(conv))
    blocked, peak = _peak(lambda: network_bounds(conv, x - 0.01, x + 0.01, "symbolic"))
    assert peak <= room, (peak, room)
    assert blocked.unstable_counts() == whole.unstable_counts()
    np.testing.assert_allclose(blocked.out_hi, whole.out_hi, rtol=1e-12, atol=1e-12)


def test_bounds_that_fit_are_computed_in_one_piece(monkeypatch):
    """Where the working arrays fit nothing is blocked: results are exactly the one-line formulas."""
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    rng = np.random.default_rng(1)
    W, b, lo = rng.normal(size=(300, 200)), rng.normal(size=300), rng.normal(size=200)
    hi = lo + 0.1
    Wp, Wn = np.maximum(W, 0), np.minimum(W, 0)
    z_lo, z_hi = affine_interval(W, b, lo, hi)
    mag = np.abs(W) @ np.maximum(np.abs(lo), np.abs(hi)) + np.abs(b)
    from solvers.rounding import widen
    ref = widen(Wp @ lo + Wn @ hi + b, Wp @ hi + Wn @ lo + b, mag, 201)
    assert np.array_equal(z_lo, ref[0]) and np.array_equal(z_hi, ref[1])


def test_jacobian_bound_that_does_not_fit_is_refused_naming_a_cheaper_method(monkeypatch):
    net = random_relu_net([400, 600, 600, 3], seed=0)
    blocks = relu_blocks(net)
    W = [blk.weight for blk in blocks]
    slopes = [np.ones(600), np.ones(600)]
    _limit(monkeypatch, 2 * MB)  # the 600 x 400 Jacobian products need ~10 MB
    with pytest.raises(TooLarge, match=r"too large: needs .* MB for the Jacobian matrices of a local Lipschitz bound "
                                       r"\(up to 600 x 400\), but the memory budget is .*certify global"):
        clarke_norm_bound(W, slopes, slopes, "linf", "linf")
    with pytest.raises(TooLarge, match="Jacobian"):
        net.jacobian(np.zeros(400))
    monkeypatch.delenv(memory.ENV_VAR)
    assert np.isfinite(clarke_norm_bound(W, slopes, slopes, "linf", "linf"))


def test_fusing_layers_is_accounted_before_the_product(monkeypatch):
    rng = np.random.default_rng(0)
    net = Network([Affine(rng.normal(size=(8, 1500)), np.zeros(8)), Affine(rng.normal(size=(1500, 8)), np.zeros(1500)),
                   ReLU(1500), Affine(rng.normal(size=(2, 1500)), np.zeros(2))])
    _limit(monkeypatch, 5 * MB)  # the fused 1500 x 1500 layer alone is 18 MB
    with pytest.raises(TooLarge, match=r"fusing consecutive affine layers \(1500 x 8 times 8 x 1500\)"):
        net.fused()
    monkeypatch.delenv(memory.ENV_VAR)
    assert net.fused().layers[0].weight.shape == (1500, 1500)


def test_milp_rows_are_accounted_before_they_are_built(monkeypatch):
    W = np.random.default_rng(0).normal(size=(1000, 400))
    _limit(monkeypatch, 2 * MB)
    with pytest.raises(TooLarge, match=r"LP/MILP rows of a 1000 x 400 layer.*--bounds symbolic or interval"):
        Expr.variables(np.arange(400), 400).affine(W)


# ----------------------------------------------------------------------------- the CLI
def _certify(args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def _exit_0_or_one_line_2(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode in (0, 2), proc.stderr
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        # (HiGHS's start-up banner, when a solver prints it, is another matter: not counted here)
        lines = [l for l in proc.stderr.strip().splitlines() if not l.startswith(("Running HiGHS", "Includes third-party"))]
        assert len(lines) == 1 and "too large: needs" in lines[0] and "CERTIFY_MEMORY_LIMIT" in lines[0], proc.stderr


@pytest.mark.parametrize("command", [
    ["lipschitz", "{model}", "--center", "@{x}", "--radius", "0.01", "--method", "bounds", "--bounds", "symbolic"],
    ["lipschitz", "{model}", "--center", "@{x}", "--radius", "0.01", "--bounds", "lp"],
    ["radius", "{model}", "--point", "@{x}", "--no-exact", "--bounds", "symbolic"],
    ["verify", "{model}", "{vnnlib}", "--timeout", "5"],
])
def test_cli_on_the_conv_net_under_a_small_budget_is_exit_0_or_2(tmp_path, command):
    """IR 2.6 MB, budget 3.2 MB: bounds, Lipschitz, radius and verify answer or refuse in one line,
    never a MemoryError."""
    conv_path = str(tmp_path / "conv.onnx")
    onnx.save(cifar_style(hw=8), conv_path)
    x = tmp_path / "x.npy"
    np.save(x, np.full(192, 0.5))
    vnnlib = tmp_path / "p.vnnlib"
    lines = [f"(declare-const X_{i} Real)" for i in range(192)] + [f"(declare-const Y_{i} Real)" for i in range(10)]
    lines += [f"(assert (>= X_{i} 0.49))\n(assert (<= X_{i} 0.51))" for i in range(192)]
    lines.append("(assert (>= Y_0 1.0))")  # unsat: the bounds, not the attack, decide it
    vnnlib.write_text("\n".join(lines) + "\n")
    argv = [a.format(model=conv_path, x=x, vnnlib=vnnlib) for a in command]
    if command[0] != "verify":
        argv += ["--time-limit", "3", "--json"]
    proc = _certify(argv, {memory.ENV_VAR: "3.2M"})
    _exit_0_or_one_line_2(proc)


def test_model_larger_than_the_budget_is_refused_unread(tmp_path, monkeypatch):
    big = tmp_path / "big.onnx"
    with open(big, "wb") as fh:
        fh.truncate(100 * MB)  # sparse: nothing is written
    monkeypatch.setenv(memory.ENV_VAR, "50M")
    with pytest.raises(ModelError, match=r"model file .*big.onnx is too large: 0.1 GB, more than the memory budget of "
                                         r"50 MB.*CERTIFY_MEMORY_LIMIT"):
        load_onnx(big)


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_special_files_are_refused_before_reading(tmp_path, kind):
    """/dev/zero would be read until memory runs out and a FIFO blocks until a writer comes: both,
    and a directory, are exit 2 with one line at once (a hang fails on the subprocess timeout)."""
    if kind == "device":
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
        what = "is a character device"
    elif kind == "fifo":
        path = str(tmp_path / "model.onnx")
        os.mkfifo(path)
        what = "is a named pipe (FIFO)"
    else:
        path = str(tmp_path)
        what = "is a directory"
    t = time.perf_counter()
    with pytest.raises(BadInput, match=re.escape(what)):
        check_input_file(path, "model file")
    assert time.perf_counter() - t < 1.0
    proc = _certify(["inspect", path], timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "Traceback" not in proc.stderr
    # any input file: a vector given as @/dev/zero or a FIFO
    if kind != "directory":
        proc = _certify(["eval", str(vnncomp_test_path("test_small")), "--input", f"@{path}"], timeout=60)
        assert proc.returncode == 2 and what in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ----------------------------------------------------------------------------- attack batches
WIDE = [10, 8192, 10]  # a wide layer: 65,536 points x 8192 floats would be 4.3 GB per array


def test_verification_attack_batch_fits_the_budget(monkeypatch):
    from certify.verify.attack import Falsifier
    from models.onnx_reference import OnnxReference
    from certify.verify.vnnlib import parse_vnnlib

    net = random_relu_net(WIDE, seed=0)
    lines = [f"(declare-const X_{i} Real)" for i in range(10)] + [f"(declare-const Y_{i} Real)" for i in range(10)]
    lines += [f"(assert (>= X_{i} -1))\n(assert (<= X_{i} 1))" for i in range(10)]
    lines.append("(assert (>= Y_0 1e9))")  # unreachable: the attack only samples
    spec = parse_vnnlib("\n".join(lines))
    falsifier = Falsifier(net, spec, OnnxReference.from_network(net), seed=0)
    room = _limit(monkeypatch, 20 * MB)
    rows = falsifier.batch.rows(65_536)
    assert 1 <= rows < 65_536 and rows * falsifier.batch.row_bytes() <= room
    out, peak = _peak(lambda: falsifier.dense(0, time.perf_counter() + 0.5, share=1.0))
    assert out is None and falsifier.points > 0
    assert peak <= room, (peak, room)


def test_robustness_attack_batches_fit_the_budget(monkeypatch):
    from certify.robustness.attack import FlipAttack
    from certify.robustness.question import Classifier, FlipQuestion
    from certify.robustness.replay import FlipReplay

    net = random_relu_net(WIDE, seed=1)
    q = FlipQuestion.of(Classifier.of(net), np.zeros(10))
    attack = FlipAttack(q, FlipReplay(q, "linf"), seed=0)
    room = _limit(monkeypatch, 3 * MB)
    assert attack.batch.rows(1000) < 1000
    X = np.random.default_rng(0).uniform(-1, 1, (1000, 10))
    m, peak = _peak(lambda: attack.margins(X))
    assert m.shape == (1000,) and peak <= room
    monkeypatch.delenv(memory.ENV_VAR)
    np.testing.assert_allclose(attack.margins(X), m, rtol=0, atol=1e-9)


def test_rounding_bound_of_a_sampled_point_stays_within_the_budget(monkeypatch):
    """`differentiable_point` (the Lipschitz witness sampler) formed |W| of every layer in one
    piece: 4.3 GB for the CIFAR-style conv layer, beyond a budget the IR itself had passed (11.4 GB
    peak under CERTIFY_MEMORY_LIMIT=9G). Now by row blocks; the point and its Jacobian are the same."""
    from certify.lipschitz.replay import differentiable_point

    net = random_relu_net([600, 4000, 10], seed=3)  # |W| of the wide layer: 19.2 MB
    x = np.random.default_rng(0).uniform(-1, 1, 600)
    whole = differentiable_point(net, x)
    assert whole is not None
    _limit(monkeypatch, 6 * MB)
    blocked, peak = _peak(lambda: differentiable_point(net, x))
    assert peak < 10 * MB < _largest(net), peak
    np.testing.assert_array_equal(blocked.jacobian, whole.jacobian)
    np.testing.assert_allclose(blocked.magnitude, whole.magnitude, rtol=1e-12)


def test_kernel_readings_are_reused_only_for_small_asks_within_their_ttl(monkeypatch):
    """A branch-and-bound asks for budgets thousands of times a second: a reading of the last
    SOURCES_TTL seconds serves asks below 1/8 of it; a large ask, or a stale reading, reads again."""
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    reads, available = [], [8e9]

    def sources():
        reads.append(1)
        return [(available[0], "of memory available")]

    monkeypatch.setattr(memory, "_sources", sources)
    monkeypatch.setattr(memory, "_recent", [-float("inf"), []])
    clock = [100.0]
    monkeypatch.setattr(memory.time, "monotonic", lambda: clock[0])
    assert memory.block_rows(1000, 4000, "x") == 1000 and len(reads) == 1  # 4 MB: read once
    available[0] = 4e6  # the machine fills up, unseen by small asks within the TTL
    assert memory.block_rows(1000, 4000, "x") == 1000 and len(reads) == 1
    with pytest.raises(TooLarge):  # 2 GB is more than 1/8 of the last reading: read again, refused
        memory.require_work(2e9, "a large ask")
    assert len(reads) == 2
    available[0] = 8e9
    clock[0] += memory.SOURCES_TTL  # stale: the next small ask reads again
    assert memory.block_rows(1000, 4000, "x") == 1000 and len(reads) == 3
