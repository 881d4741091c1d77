"""Where a Lipschitz constant used for calibration came from.

A noise scale is only as sound as the sensitivity it was calibrated from, so every mechanism
records its `LipschitzSource`: a number given by the user (taken on trust and labelled so: the
guarantee is then conditional on it), a certificate that certify issued for *this* model (read
through the protocol: `upper`, `certified`, norms, `box`; its `to_dict()` is recorded), or the
layer-product bound computed here from a network IR. Lower bounds and uncertified estimates are
refused: only an upper bound keeps the noise sufficient.

Only certify makes a proven source: a `LipschitzSource` built by hand with origin "certificate"
or "layer-product" is refused, and a certificate object certify did not issue (built by hand,
changed after it was issued, or read back from JSON; `Certificate.issued`) counts as the user's
claim. A certificate issued for another network than the mechanism's model is refused
(`Certificate.model_hash` against `models.Network.fingerprint()`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..certificate import Certificate, model_fingerprint
from ..errors import BadInput
from .params import check_lipschitz, check_metric

ORIGINS = ("user", "certificate", "layer-product")
#: the token of sources made here: only this module creates proven (non-user) sources
_ISSUER = object()


@dataclass(frozen=True)
class LipschitzSource:
    """A certified (or user-asserted) upper bound on a Lipschitz constant, with its origin.

    `origin` is "user" (a number the user gave, or a certificate certify did not issue: a claim
    certify did not verify), "certificate" (an engine's certified upper bound, issued for the
    network `model_hash`; `certificate` holds its `to_dict()`), or "layer-product" (product of
    per-layer operator norms of the IR: a valid, usually loose, global bound). Only
    `lipschitz_source` and `layer_product_bound` make the last two.
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
    # the fingerprint of the network a proven constant is about
    model_hash: str | None = field(default=None, compare=False)
    _issuer: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise BadInput(f"unknown Lipschitz origin {self.origin!r}; choose one of {', '.join(ORIGINS)}")
        if self.origin != "user" and self._issuer is not _ISSUER:
            raise BadInput(
                f"a LipschitzSource with origin {self.origin!r} is made only by certify, from a certificate it issued "
                "for the model; pass the certificate object itself (certify.global_lipschitz, "
                "certify.local_lipschitz), or the number (recorded as your claim, origin 'user')"
            )

    @property
    def proven(self) -> bool:
        """True when certify proved the constant (origin certificate or layer-product)."""
        return self.origin != "user"

    def claim(self) -> str | None:
        """The user's claim a guarantee calibrated from this source rests on (None when proven)."""
        return None if self.proven else f"the Lipschitz constant {self.describe()}"

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"value": self.value, "input_norm": self.input_norm,
                               "output_norm": self.output_norm, "origin": self.origin, "proven": self.proven}
        if self.model_hash is not None:
            out["model_hash"] = self.model_hash
        if self.method:
            out["method"] = self.method
        if self.domain is not None:
            out["domain"] = {"lo": list(self.domain[0]), "hi": list(self.domain[1])}
        if self.certificate is not None:
            out["certificate"] = self.certificate
        return out

    def describe(self) -> str:
        norms = f"{self.input_norm or '?'}->{self.output_norm or '?'}"
        how = {"user": f"given by the user, not verified by certify{f' ({self.method})' if self.method else ''}",
               "certificate": f"certificate ({self.method or 'engine'})",
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
                     what: str = "lipschitz", model: Any = None) -> LipschitzSource:
    """Turn a number, a `LipschitzSource` or a certificate object into a `LipschitzSource`.

    `output_norm` (and `input_norm`, when given) are the norms the mechanism needs; a certificate
    stating other norms is refused, since a constant for another norm does not bound this
    sensitivity. `model`: the model the noise is calibrated for; a proven constant of another
    network is refused (and one for a model certify cannot fingerprint: a plain callable).
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
    if src.proven and model is not None:
        check_model(src.model_hash, model, what)
    return LipschitzSource(src.value, src.input_norm or input_norm, src.output_norm or output_norm,
                           src.origin, src.method, src.certificate, src.domain, src.model_hash,
                           _ISSUER if src.proven else None)


def check_model(model_hash: str | None, model: Any, what: str) -> None:
    """Refuse a proven constant that is not about `model` (fingerprints differ, or none exists)."""
    have = model_fingerprint(model)
    if have is None:
        raise BadInput(
            f"{what}: certify cannot identify a {type(model).__name__} to check that the certificate is about it; "
            "pass the models.Network (or torch module) the certificate was computed for, or pass the constant "
            "as a number (your claim: the guarantee then says it rests on it)"
        )
    if have != model_hash:
        raise BadInput(
            f"{what}: the certificate was issued for another network (fingerprint {str(model_hash)[:12]}..., this "
            f"model's is {have[:12]}...); a constant of one network says nothing about another: certify this model"
        )


def _from_certificate(cert: Certificate, what: str) -> LipschitzSource:
    """Read a certificate through the protocol (`certify.certificate`): upper, certified, norms, box.
    One that certify did not issue (or that was changed since) is the user's claim."""
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
    method = str(getattr(cert, "method", None) or cert.KIND)
    if not cert.issued:
        return LipschitzSource(value, cert.input_norm, cert.output_norm, "user",
                               f"{method} certificate object that certify did not issue (built by hand, changed "
                               "after it was issued, or read from a file)", cert.to_dict(), domain)
    return LipschitzSource(value, cert.input_norm, cert.output_norm, "certificate", method, cert.to_dict(), domain,
                           cert.model_hash, _ISSUER)


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
    return LipschitzSource(result.upper, p, q, "layer-product", "naive", result.to_dict(),
                           model_hash=result.model_hash, _issuer=_ISSUER)


__all__ = ["LipschitzSource", "check_model", "layer_product_bound", "lipschitz_source"]
