"""Network IR, importers (ONNX, torch) and reference models.

>>> from models import load_onnx, zoo
>>> net = load_onnx(zoo.acasxu_path(1, 1))
>>> net.describe()["relu_count"]
300
"""

from __future__ import annotations

from typing import Any

from .errors import BadInput, ModelError, UnsupportedOperator
from .ir import Affine, ConvSpec, Network, ReLU, sequential
from .onnx_export import save_onnx, to_onnx
from .onnx_import import load_onnx, onnx_to_network

__all__ = [
    "Affine",
    "BadInput",
    "ConvSpec",
    "ModelError",
    "Network",
    "Normalize",
    "ReLU",
    "UnsupportedOperator",
    "from_torch",
    "load_onnx",
    "onnx_to_network",
    "save_onnx",
    "sequential",
    "to_onnx",
]


def __getattr__(name: str) -> Any:
    # torch is imported only when a torch model is used (keeps the CLI start-up light)
    if name in ("from_torch", "Normalize"):
        from . import torch_import

        return getattr(torch_import, name)
    raise AttributeError(f"module 'models' has no attribute {name!r}")
