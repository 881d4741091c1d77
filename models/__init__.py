"""Network IR, importers (ONNX, torch) and reference models.

>>> from models import load_onnx, zoo
>>> net = load_onnx(zoo.acasxu_path(1, 1))
>>> net.describe()["relu_count"]
300
"""

from __future__ import annotations

from typing import Any

from .errors import BadInput, ModelError, UnsupportedOperator

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


_LAZY = {"Affine": "ir", "ConvSpec": "ir", "Network": "ir", "ReLU": "ir", "sequential": "ir",
         "from_torch": "torch_import", "Normalize": "torch_import", "load_onnx": "onnx_import",
         "onnx_to_network": "onnx_import", "save_onnx": "onnx_export", "to_onnx": "onnx_export"}


def __getattr__(name: str) -> Any:
    # the IR and importers load on first use (numpy, torch, onnx and scipy.sparse stay out of the
    # CLI's start-up: `certify --help` imports no numpy)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'models' has no attribute {name!r}")
