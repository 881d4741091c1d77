"""One certificate protocol for every result certify returns.

Every result (local and global Lipschitz bounds, robustness radii and boxes, verification, PTR)
is a `Certificate`: an interval [lower, upper] on the certified quantity with a `status` from
`Status`, a `certified` flag (True only when both numbers are proofs: a replayed witness below and
a sound bound above; False for probabilistic or empirical results), the `box` it holds on, the
norms, `seconds`, `notes` and `to_dict()`: a JSON-ready dict whose `schema` field names the
versioned JSON schema (`certify/schema/certificate.schema.json`) every certificate satisfies.
Consumers (noise calibration, reports, PTR) read these attributes and nothing else.

Identity: a certificate returned by one of certify's engines is *issued* (`issue`): it carries
`model_hash`, the fingerprint of the network it is about (`models.Network.fingerprint()`), and a
seal binding its claim (kind, model, interval, status, box, norms, target) to this process. A
consumer that turns a certificate into noise checks both (`Certificate.issued`, and
`certify.privacy.provenance.check_model`): a certificate of another network is refused, and one
that was built by hand, edited after it was issued, or loaded from JSON is not a proof, only a
claim of the user's (origin "user").
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import os
import secrets
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, TypeVar

import numpy as np

from models.box import Box

SCHEMA = "certify.certificate/1"
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "schema", "certificate.schema.json")


class Status:
    """The statuses a certificate can have (one set for every result type)."""

    OPTIMAL = "optimal"            # lower and upper meet (within the requested gap) and both are proven
    CERTIFIED = "certified"        # a one-sided proven bound (e.g. a global upper bound), nothing open
    FALLBACK = "fallback"          # proven, but from a weaker fallback method than the one asked for
    OPEN_GAP = "open_gap"          # the search finished, the proven interval did not close
    TIME_LIMIT = "time_limit"      # the time budget ran out: the interval is sound, not tight
    INTERRUPTED = "interrupted"    # stopped (Ctrl-C, solver stop, discarded solver answer): sound interval
    ROBUST_WITHIN = "robust_within"  # robustness: no counterexample within the maximum radius asked for
    PROBABILISTIC = "probabilistic"  # a statistical statement with stated (omega, tau): not a proof

    ALL: ClassVar[frozenset[str]] = frozenset({
        "optimal", "certified", "fallback", "open_gap", "time_limit", "interrupted", "robust_within",
        "probabilistic"})
    # statuses whose interval is closed (the answer is final, not a partial result)
    FINAL: ClassVar[frozenset[str]] = frozenset({"optimal", "certified", "robust_within"})


def _json_number(v: Any) -> Any:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else ("inf" if f > 0 else "-inf" if f < 0 else "nan")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types: numpy arrays and scalars converted, non-finite floats as strings."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _json_number(obj)
    if isinstance(obj, Box):
        return to_jsonable(obj.to_dict())
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    return obj


@dataclass
class Certificate:
    """Base of every result type. Subclasses are dataclasses adding their own fields.

    - `lower`, `upper`: the proven interval of the certified quantity (None when a side is not
      bounded, e.g. a global upper bound has no lower bound);
    - `status`: one of `Status.ALL`;
    - `certified`: True when the numbers are proofs (never for probabilistic/empirical results);
    - `box`: the input box the statement holds on (None for global statements);
    - `input_norm`, `output_norm`: the norms of the statement (None where they do not apply);
    - `seconds`, `notes`.
    """

    KIND: ClassVar[str] = "certificate"

    lower: float | None
    upper: float | None
    status: str
    certified: bool = True
    box: Box | None = None
    input_norm: str | None = None
    output_norm: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # the fingerprint of the network the statement is about (set by `issue`), and the seal
    model_hash: str | None = field(default=None, kw_only=True)
    _seal: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.status not in Status.ALL:
            raise ValueError(f"unknown certificate status {self.status!r}")
        if self.status == Status.PROBABILISTIC and self.certified:
            raise ValueError("a probabilistic result is never certified")

    @property
    def gap(self) -> float | None:
        if self.lower is None or self.upper is None:
            return None
        return float(self.upper) - float(self.lower)

    @property
    def exact(self) -> bool:
        """The interval closed and is proven (status optimal)."""
        return self.status == Status.OPTIMAL and self.certified

    @property
    def issued(self) -> bool:
        """True when certify's engine issued this certificate and its claim is unchanged since."""
        return self._seal is not None and self.model_hash is not None and hmac.compare_digest(self._seal, _seal(self))

    @property
    def scope(self) -> str:
        """"global" (holds for every input) or "box" (only on `box`)."""
        return "global" if self.box is None else "box"

    def to_dict(self) -> dict[str, Any]:
        """The protocol fields first, then the subclass's own fields (JSON-ready)."""
        base = {f.name for f in fields(Certificate)}
        out: dict[str, Any] = {
            "schema": SCHEMA, "kind": self.KIND,
            "lower": _json_number(self.lower), "upper": _json_number(self.upper),
            "status": self.status, "certified": bool(self.certified), "exact": self.exact,
            "scope": self.scope, "box": None if self.box is None else self.box.to_dict(),
            "input_norm": self.input_norm, "output_norm": self.output_norm,
            "seconds": float(self.seconds), "notes": list(self.notes), "model_hash": self.model_hash,
        }
        for f in fields(self):
            if f.name not in base and not f.name.startswith("_"):
                out[f.name] = to_jsonable(getattr(self, f.name))
        out.update(self._extra_dict())
        return to_jsonable(out)

    def _extra_dict(self) -> dict[str, Any]:
        """Derived values a subclass wants in its JSON (properties)."""
        return {}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


#: per-process key of the seals: a certificate is a proof only in the process that computed it
_KEY = secrets.token_bytes(32)
#: the fields a consumer reads: the seal covers exactly these (notes and timings may change)
_CLAIM_FIELDS = ("lower", "upper", "status", "certified", "input_norm", "output_norm", "model_hash")
_CLAIM_EXTRAS = ("target", "margin", "method", "omega", "tau", "predicted_class", "target_class", "features")


def _claim(cert: Certificate) -> bytes:
    claim: dict[str, Any] = {"kind": cert.KIND, "scope": cert.scope,
                             "box": None if cert.box is None else cert.box.to_dict()}
    claim.update({k: getattr(cert, k) for k in _CLAIM_FIELDS})
    claim.update({k: getattr(cert, k) for k in _CLAIM_EXTRAS if hasattr(cert, k)})
    return json.dumps(to_jsonable(claim), sort_keys=True).encode()


def _seal(cert: Certificate) -> str:
    return hmac.new(_KEY, _claim(cert), hashlib.sha256).hexdigest()


def model_fingerprint(model: Any) -> str | None:
    """The fingerprint of a `models.Network`, of anything holding one as `.net` (a classifier
    wrapper), or of a torch module (imported with `certify.from_torch`); None for a model certify
    cannot read (a plain callable)."""
    own = getattr(model, "fingerprint", None)  # a Network or an SLLNetwork
    if callable(own):
        return str(own())
    net = getattr(model, "net", None)
    if callable(getattr(net, "fingerprint", None)):
        return str(net.fingerprint())
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    if isinstance(model, torch.nn.Module):
        from models.torch_import import from_torch

        try:
            return from_torch(model).fingerprint()
        except Exception:  # noqa: BLE001 - a module certify cannot trace has no fingerprint
            return None
    return None


C = TypeVar("C", bound=Certificate)


def issue(cert: C, model: Any) -> C:
    """Bind a certificate computed by certify for `model` to it: set `model_hash` and seal the claim.
    Certificates nested in it (a comparison's results) are issued too. A model without a
    fingerprint (a plain callable) leaves the certificate unissued: no consumer could check it."""
    digest = model_fingerprint(model)
    if digest is None:  # nothing certify can identify (e.g. a sampled classifier): left unissued
        return cert
    for inner in getattr(cert, "results", None) or ():
        if isinstance(inner, Certificate):
            issue(inner, model)
    cert.model_hash = digest
    cert._seal = _seal(cert)
    return cert


def issues(fn: Callable[..., C]) -> Callable[..., C]:
    """Decorator of an engine's entry point `fn(model, ...)`: its certificate is issued for `model`."""
    @functools.wraps(fn)
    def wrapper(model: Any, *args: Any, **kwargs: Any) -> C:
        return issue(fn(model, *args, **kwargs), model)

    return wrapper


def load_schema() -> dict:
    with open(SCHEMA_PATH) as fh:
        return json.load(fh)


__all__ = ["Certificate", "SCHEMA", "Status", "issue", "issues", "load_schema", "model_fingerprint", "to_jsonable"]
