"""Where a Lipschitz constant used for calibration came from.

A noise scale is only as sound as the sensitivity it was calibrated from, so every mechanism
records its `LipschitzSource`: a number given by the user (taken on trust and labelled so), a
`certify.certificate.Certificate` (read through the protocol: `upper`, `certified`, norms, `box`;
its `to_dict()` is recorded), or the layer-product bound computed here from a network IR.
Lower bounds and uncertified estimates are refused: only an upper bound keeps the noise sufficient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..certificate import Certificate
from ..errors import BadInput
from .params import check_lipschitz, check_metric


@dataclass(frozen=True)
class LipschitzSource:
    """A certified (or user-asserted) upper bound on a Lipschitz constant, with its origin.

    `origin` is "user" (a number the user gave; certify did not verify it), "certificate" (an
    engine's certified upper bound; `certificate` holds its `to_dict()`), or "layer-product"
    (product of per-layer operator norms of the IR: a valid, usually loose, global bound).
    """

    value: float
    input_norm: str | None = None
    output_norm: str | None = None
    origin: str = "user"
    method: str | None = None
    certificate: dict | None = field(default=None, compare=False)
    # (lo, hi) when the constant holds only on a box (a local or domain certificate): mechanisms
    # calibrated from it release only for inputs in that box
    domain: tuple[tuple[float, ...], tuple[float, ...]] | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"value": self.value, "input_norm": self.input_norm,
                               "output_norm": self.output_norm, "origin": self.origin}
        if self.method:
            out["method"] = self.method
        if self.domain is not None:
            out["domain"] = {"lo": list(self.domain[0]), "hi": list(self.domain[1])}
        if self.certificate is not None:
            out["certificate"] = self.certificate
        return out

    def describe(self) -> str:
        norms = f"{self.input_norm or '?'}->{self.output_norm or '?'}"
        how = {"user": "given by the user (not verified)", "certificate": f"certificate ({self.method or 'engine'})",
               "layer-product": "product of layer operator norms (certified, loose)"}.get(self.origin, self.origin)
        where = "" if self.domain is None else ", valid only for inputs in its domain box"
        return f"L_{norms} <= {self.value:.6g}, {how}{where}"

    def check_inputs(self, x: np.ndarray) -> None:
        """Refuse inputs (rows of a batch) outside the box the constant was certified on."""
        if self.domain is None:
            return
        lo, hi = (np.asarray(v, dtype=np.float64) for v in self.domain)
        x = np.asarray(x, dtype=np.float64)
        if x.size % lo.size:
            raise BadInput(f"inputs of shape {list(x.shape)} do not match the certified domain's {lo.size} values")
        rows = x.reshape(-1, lo.size)  # one input (d,) or a batch (n, ...)
        if np.any(rows < lo) or np.any(rows > hi):
            raise BadInput("input outside the box the Lipschitz certificate covers: the privacy guarantee does not "
                           "hold there; certify the constant on a domain containing every input you release")


def lipschitz_source(obj: Any, *, input_norm: str | None = None, output_norm: str | None = None,
                     what: str = "lipschitz") -> LipschitzSource:
    """Turn a number, a `LipschitzSource` or a certificate object into a `LipschitzSource`.

    `output_norm` (and `input_norm`, when given) are the norms the mechanism needs; a certificate
    stating other norms is refused, since a constant for another norm does not bound this
    sensitivity.
    """
    if isinstance(obj, LipschitzSource):
        src = obj
    elif isinstance(obj, Certificate):
        src = _from_certificate(obj, what)
    elif isinstance(obj, (int, float, np.integer, np.floating)) and not isinstance(obj, bool):
        src = LipschitzSource(check_lipschitz(obj, what), input_norm, output_norm, "user")
    else:
        raise BadInput(
            f"{what}: expected a number or a certify certificate (certify.local_lipschitz, certify.global_lipschitz), "
            f"got {type(obj).__name__}"
        )
    for need, have, side in ((input_norm, src.input_norm, "input"), (output_norm, src.output_norm, "output")):
        if need is not None and have is not None and check_metric(have, f"{side} norm") != need:
            raise BadInput(
                f"{what} is a Lipschitz constant with {side} norm {have}, but this mechanism needs the "
                f"{need} {side} norm; certify the constant for {need}"
            )
    return LipschitzSource(src.value, src.input_norm or input_norm, src.output_norm or output_norm,
                           src.origin, src.method, src.certificate, src.domain)


def _from_certificate(cert: Certificate, what: str) -> LipschitzSource:
    """Read a certificate through the protocol (`certify.certificate`): upper, certified, norms, box."""
    if not cert.certified:
        raise BadInput(f"{what}: the certificate says its bound is not certified ({cert.status}); calibrate only "
                       "from a certified upper bound")
    if cert.upper is None:
        raise BadInput(f"{what}: the certificate has no upper bound (only a lower bound?); noise needs a certified upper bound")
    value = float(cert.upper)
    if not math.isfinite(value):
        raise BadInput(f"{what}: the certificate's upper bound is {value}; no finite noise scale can be calibrated from it")
    value = check_lipschitz(value, f"{what} (certificate upper bound)")
    if getattr(cert, "target", None) is not None or getattr(cert, "margin", None) is not None:
        raise BadInput(f"{what}: the certificate bounds a scalar c^T f (a margin or target), not the output vector "
                       "the noise is added to; certify the constant for the output norm the mechanism needs")
    box = cert.box
    domain = None if box is None else (tuple(float(v) for v in box.lo), tuple(float(v) for v in box.hi))
    return LipschitzSource(value, cert.input_norm, cert.output_norm, "certificate",
                           str(getattr(cert, "method", None) or cert.KIND), cert.to_dict(), domain)


def layer_product_bound(net: Any, input_norm: str = "l2", output_norm: str = "l2") -> LipschitzSource:
    """Global Lipschitz upper bound of a ReLU network IR: the product of layer operator norms.

    This is `certify.global_lipschitz(net, "naive")` (best chain of intermediate norms, every
    factor a certified upper bound, float64 rounding covered) recorded as a `LipschitzSource`.
    Sound but loose; `certify.global_lipschitz` with an SDP method usually gives a smaller bound.
    """
    from ..lipschitz.global_bounds import global_lipschitz

    p = check_metric(input_norm, "input norm")
    q = check_metric(output_norm, "output norm")
    result = global_lipschitz(net, "naive", input_norm=p, output_norm=q)
    return LipschitzSource(result.upper, p, q, "layer-product", "naive", result.to_dict())


__all__ = ["LipschitzSource", "layer_product_bound", "lipschitz_source"]
