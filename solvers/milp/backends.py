"""Back-end registry and selection (`auto` = Gurobi when licensed and the model fits, else HiGHS)."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.errors import BadInput

from .cbc import CbcBackend
from .gurobi import GurobiBackend
from .highs import HighsBackend
from ..choices import BACKEND_CHOICES
from ..lp.model import MilpModel
from .result import MilpResult, SolveOptions

BACKENDS = {"gurobi": GurobiBackend, "highs": HighsBackend, "cbc": CbcBackend}


class BackendUnavailable(BadInput):
    """The requested solver is not installed or not licensed."""


class ModelTooLarge(BadInput):
    """The model exceeds what the requested solver (licence) can solve."""


@dataclass
class Choice:
    backend: object
    notes: list[str] = field(default_factory=list)


def get_backend(name: str):
    if name not in BACKENDS:
        raise BadInput(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    return BACKENDS[name]()


def choose_backend(name: str, model: MilpModel) -> Choice:
    """The back-end to solve `model` with; BadInput when an explicit choice cannot solve it."""
    if name == "auto":
        gurobi = GurobiBackend()
        if gurobi.available():
            reason = gurobi.unsupported_reason(model)
            if reason is None:
                return Choice(gurobi)
            note = f"gurobi skipped: {reason}; using highs"
        else:
            note = f"gurobi unavailable ({gurobi.unavailable_reason()}); using highs"
        highs = HighsBackend()
        reason = highs.unsupported_reason(model)
        if reason is not None:
            raise ModelTooLarge(f"no available solver can handle this model: {note}; {reason}")
        return Choice(highs, [note])
    backend = get_backend(name)
    if not backend.available():
        raise BackendUnavailable(f"backend {name} is not available: {backend.unavailable_reason()}; use --backend highs")
    reason = backend.unsupported_reason(model)
    if reason is not None:
        hint = "use --backend highs (or auto)" if name == "gurobi" else "use --backend gurobi (or auto)"
        raise ModelTooLarge(f"backend {name} cannot solve this model: {reason}; {hint}")
    return Choice(backend)


def refuse_early(name: str, min_vars: int, min_rows: int, quadratic: bool = False) -> None:
    """Refuse an explicitly requested back-end before any model is built, when a *lower bound* on
    the model's size already exceeds what it can solve (the size-limited Gurobi licence)."""
    if name != "gurobi":
        return
    from .gurobi import RESTRICTED_LINEAR_LIMIT, RESTRICTED_QUADRATIC_LIMIT, licence

    lic = licence()
    if not lic.usable:
        raise BackendUnavailable(f"backend gurobi is not available: {lic.reason}; use --backend highs")
    if not lic.restricted:
        return
    if quadratic and min_vars > RESTRICTED_QUADRATIC_LIMIT:
        raise ModelTooLarge(f"the model will have at least {min_vars} variables with quadratic terms, beyond the "
                            f"size-limited Gurobi licence ({RESTRICTED_QUADRATIC_LIMIT}); use --l2-method equivalence")
    if min_vars > RESTRICTED_LINEAR_LIMIT or min_rows > RESTRICTED_LINEAR_LIMIT:
        raise ModelTooLarge(f"the model will have at least {min_vars} variables and {min_rows} constraints, beyond the "
                            f"size-limited Gurobi licence ({RESTRICTED_LINEAR_LIMIT} of each); use --backend highs (or auto)")


def solve(model: MilpModel, backend: str = "auto", options: SolveOptions | None = None) -> tuple[MilpResult, list[str]]:
    choice = choose_backend(backend, model)
    return choice.backend.solve(model, options or SolveOptions()), choice.notes
