"""A global Lipschitz bound given to PTR: proven, refuted, or accepted only as the user's claim.

The search accepts every box at once when a global bound is <= D_p, so a wrong global bound
makes PTR release with the noise of D_p where the true sensitivity is larger. A bound given to
`certify.ptr.ptr(global_bound=...)` (the CLI's `--global-bound`) is therefore resolved here,
before any noise is drawn:

- a certificate certify issued for this network (`certify.global_lipschitz`), with the search's
  norms and global scope: a proof, used as is;
- a number (or a certificate certify did not issue) at or above certify's own certified bound
  (the layer product, `bounds.global_upper`): it adds nothing; certify's bound is used;
- a number below it is checked against replayed witnesses (the exact Jacobian norm at the point
  and at sampled points of the widest box searched): a witness above it refutes it (`BadInput`);
- otherwise it can be neither proven nor refuted: refused, unless the user vouches for it
  (`trust=True`, `--trust-global-bound`); the guarantee is then conditional on the claim, which
  the result says in its JSON, text and HTML. Every witness the search replays later is
  checked against it too (`StabilitySearch.claimed_global`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.ir import Network

from ..certificate import Certificate
from ..errors import BadInput
from ..privacy.params import as_number
from ..privacy.provenance import lipschitz_source
from .bounds import global_upper, sampled_lower

#: sampled points of the widest box the claim is checked on (plus the point and the box's centre)
CHECK_SAMPLES = 64


@dataclass(frozen=True)
class GlobalBound:
    """The global bound the search may use: `value`, and `claim` when it rests on the user's word."""

    value: float
    claim: str | None = None
    note: str | None = None


def refuted(value: float, witness: np.ndarray, norm: float, p: str, q: str) -> BadInput:
    """The error for a global bound that a replayed witness exceeds."""
    at = ", ".join(f"{v:.6g}" for v in np.asarray(witness).reshape(-1)[:8])
    return BadInput(f"the global bound {value:g} ({p}->{q}) is false: the exact Jacobian at the input "
                    f"[{at}{', ...' if np.size(witness) > 8 else ''}] has norm {norm:.6g} > {value:g} "
                    "(replayed in float64); drop --global-bound or give a certified bound (`certify global`)")


def resolve_global_bound(net: Network, given: Any, *, trust: bool, p: str, q: str, point: np.ndarray,
                         lo: np.ndarray, hi: np.ndarray) -> GlobalBound | None:
    """The global bound PTR's search may use from `given` (see the module doc); None when none is given.
    [lo, hi]: the widest box the search will probe (the claim is checked on it)."""
    if given is None:
        if trust:
            raise BadInput("--trust-global-bound needs --global-bound G")
        return None
    if isinstance(given, Certificate):
        src = lipschitz_source(given, input_norm=p, output_norm=q, what="global bound", model=net)
        if src.proven:
            if src.domain is not None:
                raise BadInput("global bound: the certificate holds only on its box (a local or domain certificate); "
                               "PTR needs a bound valid for every input, e.g. certify.global_lipschitz(net, ...)")
            return GlobalBound(src.value)
        value = src.value
    else:
        value = as_number(given, "global bound")
        if not (value > 0 and math.isfinite(value)):
            raise BadInput(f"the global bound must be a positive finite number, got {given}")
    own = global_upper(net, p, q)
    if value >= own:
        return GlobalBound(own, note=f"the given global bound {value:g} is not below certify's certified bound "
                                     f"{own:g} (layer product), which is used instead")
    witnesses = sampled_lower(net, point, point, p, q, 0, seed=0) + sampled_lower(net, lo, hi, p, q, CHECK_SAMPLES, seed=0)
    for x, norm in witnesses:
        if norm > value:
            raise refuted(value, x, norm, p, q)
    if not trust:
        raise BadInput(f"the global bound {value:g} ({p}->{q}) cannot be verified: certify's certified bound is "
                       f"{own:g} and no replayed witness refutes it; pass --trust-global-bound to use it as your "
                       "claim (the guarantee is then conditional on it), or drop it")
    return GlobalBound(value, claim=f"the global Lipschitz bound {value:g} ({p}->{q}) given by the user, not "
                                    "verified by certify")


__all__ = ["CHECK_SAMPLES", "GlobalBound", "refuted", "resolve_global_bound"]
