"""Lipschitz certificates: global upper bounds (`global_bounds`, `sll`) and local constants.

`local_lipschitz(net, center, radius, ...)`: the exact local constant over an input box by MILP
(an interval [lower, upper] with a status), see `certify.lipschitz.local` and docs/lipschitz.md.
"""

from typing import Any

__all__ = ["LipschitzCertificate", "local_lipschitz"]


def __getattr__(name: str) -> Any:
    # imported on first use: `certify lipschitz --help` reads only the options module
    if name == "local_lipschitz":
        from .local import local_lipschitz

        return local_lipschitz
    if name == "LipschitzCertificate":
        from .certificate import LipschitzCertificate

        return LipschitzCertificate
    raise AttributeError(f"module 'certify.lipschitz' has no attribute {name!r}")
