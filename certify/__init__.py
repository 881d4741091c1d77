"""certify: formal certificates for neural networks.

The Python API re-exports the model layer (`load_onnx`, `from_torch`, `Network`) and the
certificate functions of the sub-packages.
"""

from __future__ import annotations

import sys as _sys

from . import _startup

_startup.take_over_early(_sys.orig_argv)  # the CLI's Ctrl-C from the first line it runs (certify/_startup.py)

from typing import Any  # noqa: E402

__version__ = "0.1.0"

__all__ = ["Affine", "BadInput", "Box", "Certificate", "ModelError", "Network", "ReLU", "Status", "UnsupportedOperator", "from_torch",
           "load_onnx"]

# name -> module providing it; imported on first use to keep `import certify` light (the CLI takes
# over Ctrl-C before numpy loads: `certify.cli.main`)
_LAZY: dict[str, str] = {
    **{name: "models" for name in ("Affine", "Network", "ReLU")},
    **{name: "models.errors" for name in ("BadInput", "ModelError", "UnsupportedOperator")},
    "from_torch": "models.torch_import",
    "load_onnx": "models.onnx_import",
    "Box": "models.box",
    "Certificate": "certify.certificate",
    "Status": "certify.certificate",
    **{name: "certify.privacy" for name in (
        "calibrate", "chain", "compose", "Guarantee", "LapOutput", "GaussOutput", "GaussInput", "LogisticOutput",
        "perturb_weights", "sensitivity_sampler")},
    "global_lipschitz": "certify.lipschitz.global_bounds",
    "SLLLayer": "models.sll",
    "SLLNetwork": "models.sll",
    "sll_from_torch": "models.sll",
    "local_lipschitz": "certify.lipschitz",
    "LipschitzCertificate": "certify.lipschitz",
    **{name: "certify.ldp" for name in (
        "make_mechanism", "rho", "utility", "smallest_epsilon", "compare_mechanisms", "empirical_rho",
        "robustness_box")},
    **{name: "certify.robustness.classifiers" for name in (
        "linear_radius", "linear_hyperrectangle", "load_sklearn", "tree_radius", "tree_hyperrectangle")},
    **{name: "certify.verify" for name in ("verify", "load_vnnlib", "parse_vnnlib", "VerificationResult")},
    **{name: "certify.robustness" for name in ("robustness_radius", "robustness_hyperrectangle", "probabilistic_radius")},
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'certify' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
