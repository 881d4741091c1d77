"""Lipschitz certificates: global upper bounds (`global_bounds`, `sll`) and local constants.

`local_lipschitz(net, center, radius, ...)`: the exact local constant over an input box by MILP
(an interval [lower, upper] with a status), see `certify.lipschitz.local` and docs/lipschitz.md.
"""

from .certificate import LipschitzCertificate
from .local import local_lipschitz

__all__ = ["LipschitzCertificate", "local_lipschitz"]
