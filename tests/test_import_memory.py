"""Importing convolutional models: memory grows with the unrolled IR, not its square (issue 11, item 8).

The subprocess tests cap the address space (RLIMIT_AS) like a small machine would: the import then
succeeds or is refused as bad input (exit 2, "model too large"), never MemoryError (exit 1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

from models import ModelError, UnsupportedOperator, load_onnx
from models import onnx_import
from models.memory import ModelTooLarge
from tests.onnx_builders import conv_net, ort_forward

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GB = 10**9


def _save(model, tmp_path, name="m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _default_env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "CERTIFY_MEMORY_LIMIT"}


def _run_capped(argv: list[str], cap_bytes: int) -> subprocess.CompletedProcess:
    """The CLI in a child whose address space is capped at `cap_bytes`."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({cap_bytes}, {cap_bytes}))\n"
        "from certify.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=_default_env(), timeout=300)


@pytest.mark.parametrize("kwargs,fits", [
    (dict(in_shape=(1, 3, 16, 16), channels=(16, 16)), True),  # 0.16 GB of IR
    (dict(in_shape=(1, 3, 32, 32), channels=(16, 32, 32), batchnorm=True), False),  # cifar-size: 13.3 GB
    (dict(in_shape=(1, 1, 28, 28), channels=(32, 64), pool="AveragePool"), False),  # verivital-size: 2 GB
])
def test_conv_import_under_a_capped_address_space_is_exit_0_or_2(tmp_path, kwargs, fits):
    path = _save(conv_net(**kwargs), tmp_path)
    proc = _run_capped(["inspect", path, "--json"], 2 * GB)
    assert proc.returncode != 1 and "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    if fits:
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["input_dim"] == int(np.prod(kwargs["in_shape"]))
    else:
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "model too large: needs" in lines[0] and "CERTIFY_MEMORY_LIMIT" in lines[0]


def test_unsupported_tail_is_reported_before_anything_is_unrolled(tmp_path, monkeypatch):
    """carvana-like: a big conv net ending in Softmax/ArgMax is refused by the operator check,
    naming both operators and their nodes, without tracing a single layer."""
    path = _save(conv_net(in_shape=(1, 3, 64, 64), channels=(32, 32), tail=("Softmax", "ArgMax")), tmp_path)

    def no_tracing(*args, **kwargs):
        raise AssertionError("the model was traced before its operators were checked")

    monkeypatch.setattr(onnx_import, "Builder", no_tracing)
    with pytest.raises(UnsupportedOperator, match=r"operators Softmax \(node 'softmax0'\), ArgMax \(node 'argmax1'\)"):
        load_onnx(path)


def test_maxpool_is_refused_up_front_naming_every_node(tmp_path, monkeypatch):
    path = _save(conv_net(in_shape=(1, 3, 32, 32), channels=(32, 64), pool="MaxPool"), tmp_path)
    monkeypatch.setattr(onnx_import, "Builder", None)  # would fail if tracing started
    with pytest.raises(UnsupportedOperator, match=r"MaxPool \(2 nodes, first 'pool0'\)"):
        load_onnx(path)


def test_too_large_is_a_model_error_with_the_size(tmp_path, monkeypatch):
    path = _save(conv_net(in_shape=(1, 3, 16, 16), channels=(16, 16)), tmp_path)
    monkeypatch.setenv("CERTIFY_MEMORY_LIMIT", "100M")
    # dense IR: 768 x 4096 + 4096 x 4096 + 4096 x 10 doubles = 0.16 GB, largest the 4096 x 4096 conv
    with pytest.raises(ModelTooLarge, match=r"needs 0\.16 GB for the network's 3 unrolled affine layers \(largest: layer 2, a 4096 x 4096 convolution"):
        load_onnx(path)
    assert issubclass(ModelTooLarge, ModelError)  # the CLI's exit 2
    monkeypatch.setenv("CERTIFY_MEMORY_LIMIT", "1G")
    assert load_onnx(path).layers[2].weight.shape == (4096, 4096)


PEAK_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])


def status_bytes(key):  # VmHWM (peak) is per process image, unlike ru_maxrss, which survives fork + exec
    line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024


from models import load_onnx
import onnxruntime  # imported by the check anyway: part of the baseline
before = status_bytes("VmRSS")
net = load_onnx(sys.argv[1])
ir = sum(l.weight.nbytes for l in net.layers if l.kind == "affine")
print(json.dumps({"growth": status_bytes("VmHWM") - before, "ir": ir}))
"""


def test_peak_memory_of_a_conv_import_is_a_small_multiple_of_the_ir(tmp_path):
    """conv 3x16x16 -> 16 -> 16 channels: 0.16 GB of dense IR. Unrolling through an identity basis
    peaked at 1.85 GB (11x the IR); building the maps from the kernels stays within 3x."""
    path = _save(conv_net(in_shape=(1, 3, 16, 16), channels=(16, 16)), tmp_path)
    proc = subprocess.run([sys.executable, "-c", PEAK_CHILD, path, ROOT], capture_output=True, text=True, timeout=300,
                          env=_default_env())
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["ir"] == 8 * (768 * 4096 + 4096 * 4096 + 4096 * 10)
    assert res["growth"] < 3 * res["ir"], res


def test_imported_conv_weights_are_the_unrolled_kernels_bit_for_bit(tmp_path):
    """The IR is the same float64 matrices as torch's convolution of the identity (BN folded by
    one multiplication per entry), and the whole net matches onnxruntime."""
    model = conv_net(in_shape=(1, 2, 6, 5), channels=(3, 4), batchnorm=True, seed=3)
    path = _save(model, tmp_path)
    net = load_onnx(path)
    inits = {i.name: onnx.numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    convs = [l for l in net.layers if l.kind == "affine" and l.conv is not None]
    chw = (2, 6, 5)
    for k, layer in enumerate(convs):
        n = int(np.prod(chw))
        eye = torch.nn.functional.pad(torch.eye(n, dtype=torch.float64).reshape((n,) + chw), (1, 1, 1, 1))
        unrolled = torch.nn.functional.conv2d(eye, torch.from_numpy(inits[f"K{k}"])).reshape(n, -1).T.numpy()
        scale = inits[f"g{k}"] / np.sqrt(inits[f"var{k}"] + 1e-5)
        rows = np.repeat(scale, unrolled.shape[0] // scale.size)
        assert np.array_equal(layer.weight, unrolled * rows[:, None])
        chw = layer.conv.out_shape
    rng = np.random.default_rng(0)
    for x in rng.standard_normal((3, net.input_dim)):
        ref = ort_forward(path, x, net.input_shape)
        np.testing.assert_allclose(net.forward(x.astype(np.float32).astype(np.float64)), ref, rtol=1e-5, atol=1e-5)
