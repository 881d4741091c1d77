"""Reference models bundled with certify.

- `acasxu_path(i, j)`: the 45 ACAS Xu networks of VNN-COMP (5 inputs, 6x50 ReLUs, 5 outputs);
  `acasxu_property_path(k)` their VNNLIB properties 1-10.
- `vnncomp_test_path(name)`: VNN-COMP sanity nets (test_nano, test_tiny, test_small, test_sat, test_unsat).
- `lipmip_suite_path(name)`: the three LipMIP benchmark nets.
- `random_relu_net(sizes, seed)`: seeded random dense ReLU nets (IR).
- `digits_net(hidden, seed)` / `digits_data()`: small nets trained on scikit-learn's bundled
  8x8 digits at call time (no downloads), see `models.zoo.digits`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import BadInput
from ..ir import Network, sequential

DATA = Path(__file__).resolve().parent / "data"

VNNCOMP_TEST_NETS = ("test_nano", "test_tiny", "test_small", "test_sat", "test_unsat")
LIPMIP_SUITE = ("lipmip_2-16-16-2", "lipmip_2-20-20-20-2", "lipmip_10-10-10-10-10-2")


def acasxu_path(i: int, j: int) -> Path:
    """Path of ACAS Xu network N_{i,j}, 1 <= i <= 5, 1 <= j <= 9."""
    if not (1 <= i <= 5 and 1 <= j <= 9):
        raise BadInput(f"ACAS Xu networks are N_1_1 .. N_5_9, got N_{i}_{j}")
    return DATA / "acasxu" / f"ACASXU_run2a_{i}_{j}_batch_2000.onnx"


def acasxu_paths() -> list[Path]:
    return [acasxu_path(i, j) for i in range(1, 6) for j in range(1, 10)]


def acasxu_property_path(k: int) -> Path:
    if not 1 <= k <= 10:
        raise BadInput(f"ACAS Xu properties are 1..10, got {k}")
    return DATA / "acasxu" / f"prop_{k}.vnnlib"


def vnncomp_test_path(name: str) -> Path:
    if name not in VNNCOMP_TEST_NETS:
        raise BadInput(f"unknown VNN-COMP test net {name!r}; choose one of {', '.join(VNNCOMP_TEST_NETS)}")
    return DATA / "vnncomp_test" / f"{name}.onnx"


def lipmip_suite_path(name: str) -> Path:
    if name not in LIPMIP_SUITE:
        raise BadInput(f"unknown LipMIP suite net {name!r}; choose one of {', '.join(LIPMIP_SUITE)}")
    return DATA / "lipmip_suite" / f"{name}.onnx"


def random_relu_net(sizes: tuple[int, ...] | list[int], seed: int = 0, bias_scale: float = 0.1) -> Network:
    """Dense ReLU net with layer widths `sizes` (input first), He-scaled Gaussian weights."""
    if len(sizes) < 2 or min(sizes) < 1:
        raise BadInput(f"layer sizes must be >= 2 positive widths, got {list(sizes)}")
    rng = np.random.default_rng(seed)
    weights = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        w = rng.standard_normal((fan_out, fan_in)) * np.sqrt(2.0 / fan_in)
        b = rng.standard_normal(fan_out) * bias_scale
        weights.append((w, b))
    return sequential(weights, name=f"random_{'-'.join(map(str, sizes))}_s{seed}")


def __getattr__(name: str):
    if name in ("digits_net", "digits_data", "train_digits_mlp"):
        from . import digits

        return getattr(digits, name)
    raise AttributeError(name)
