"""The certified Lipschitz constant an Inference Privacy mechanism needs, computed from a model.

Output mechanisms need L with the input norm of the privacy radius and the output norm of the
noise (l1 for Laplace/logistic, l2 for Gaussian). The bound must hold between any two inputs the
mechanism protects, so it is a global bound, or the exact MILP constant over a declared input
domain (`method="mip"` with `domain`), never a local constant around one input.
"""

from __future__ import annotations

from typing import Any

from ..errors import BadInput
from .calibration import MECHANISMS

#: cheap certified methods tried by method="auto" (the smallest bound wins)
AUTO_METHODS = ("naive", "eclipse-fast")


def mechanism_norms(mechanism: str, metric: str) -> tuple[str, str]:
    """(input norm, output norm) of the Lipschitz constant that `mechanism` is calibrated from."""
    family, kind = MECHANISMS[mechanism]
    if kind != "output":
        raise BadInput(f"{mechanism} does not use the model's Lipschitz constant; drop --model")
    return metric, ("l2" if family == "gaussian" else "l1")


def certified_lipschitz(net: Any, mechanism: str, metric: str = "l2", method: str = "auto",
                        domain: tuple[Any, Any] | None = None, **options: Any):
    """A certified global upper bound (a `GlobalLipschitzResult`) for calibrating `mechanism`.

    `method` is "auto" (the best of the cheap certified bounds: product of norms and
    ECLipsE-Fast) or any method of `certify.global_lipschitz` ("lipsdp-neuron" is usually the
    tightest l2 bound; "mip" the exact constant over `domain`).
    """
    from ..lipschitz.global_bounds import global_lipschitz

    p, q = mechanism_norms(mechanism, metric)
    if method == "auto":
        results = [global_lipschitz(net, m, input_norm=p, output_norm=q, **options) for m in AUTO_METHODS]
        return min(results, key=lambda r: r.upper)
    if method == "mip" and domain is None:
        raise BadInput("--lipschitz-method mip needs --domain LO,HI: the input domain the guarantee covers")
    result = global_lipschitz(net, method, input_norm=p, output_norm=q, domain=domain, **options)
    if method != "all":
        return result
    # the guarantee covers the domain when one is given: a domain-only MILP value may be used
    return result.best_on_domain or result.best
