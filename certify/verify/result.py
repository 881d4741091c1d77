"""`VerificationResult`: the certificate of a VNNLIB verification.

The certified quantity is the *unsafe margin* maximised over the property's input set,
M = max_k max_{x in X_k} min_r (d_r - G_r x - H_r f(x))  (see `certify.verify.spec`): the property
is violated (sat) iff M >= 0 (strict rows: > 0). `lower` is the margin at the best replayed point
(a witness), `upper` a bound proven by the search (every leaf of the input split bounded soundly);
either may be None when unknown. `unsat` needs upper < 0 (or every clause proven infeasible),
`sat` a counterexample replayed in the IR and onnxruntime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..certificate import Certificate, Status
from .counterexample import Counterexample, format_witness

RESULTS = ("sat", "unsat", "timeout", "unknown")
_STATUS = {"sat": Status.OPTIMAL, "unsat": Status.OPTIMAL, "timeout": Status.TIME_LIMIT, "unknown": Status.OPEN_GAP}


@dataclass
class VerificationResult(Certificate):
    """`result` in sat / unsat / timeout / unknown; `counterexample` {"x", "y"} (sat only);
    `nodes` bounded by the search; `replay` how the counterexample checked out in both runtimes;
    `details` per-phase statistics. `status` is optimal when decided, time_limit on timeout,
    open_gap when the search gave up without a decision."""

    KIND: ClassVar[str] = "verification"

    result: str = "unknown"
    counterexample: dict[str, list[float]] | None = None
    nodes: int = 0
    model: str | None = None
    vnnlib: str | None = None
    replay: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.result not in RESULTS:
            raise ValueError(f"unknown verification result {self.result!r}")
        # a timeout cut short by Ctrl-C is reported as interrupted (the same undecided answer)
        if self.status != _STATUS[self.result] and (self.result, self.status) != ("timeout", Status.INTERRUPTED):
            raise ValueError(f"result {self.result} needs status {_STATUS[self.result]}, got {self.status}")
        if (self.result == "sat") != (self.counterexample is not None):
            raise ValueError("a sat result needs a counterexample, and only a sat result has one")
        super().__post_init__()

    @classmethod
    def build(cls, result: str, *, cex: Counterexample | None = None, **kwargs: Any) -> "VerificationResult":
        """A result with the status its answer implies (and the counterexample's fields)."""
        if cex is not None:
            kwargs["counterexample"] = cex.to_dict()
            kwargs["replay"] = cex.replay_dict()
        status = kwargs.pop("status", None) or _STATUS[result]
        return cls(status=status, result=result, **kwargs)

    @property
    def witness(self) -> str | None:
        """The counterexample in VNN-COMP format `((X_0 v) ... (Y_0 v) ...)` (sat only)."""
        if self.counterexample is None:
            return None
        return format_witness(self.counterexample["x"], self.counterexample["y"])

    def vnncomp_text(self) -> str:
        """What a VNN-COMP result file holds: the result word, then the witness for sat."""
        return self.result + ("\n" + self.witness if self.witness else "")


__all__ = ["RESULTS", "VerificationResult"]
