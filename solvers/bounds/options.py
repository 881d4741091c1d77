"""One options object for every bound computation (`bound_boxes`, `network_bounds`)."""

from __future__ import annotations

from dataclasses import dataclass

from models.errors import BadInput

from ..choices import BOUND_METHODS

LOWER_SLOPES = ("crown", "best-of-three", "alpha")
ROWS = ("all", "unstable", "per-box")


@dataclass(frozen=True)
class BoundOptions:
    """How pre-activation bounds are computed.

    - `method`: the last step of interval -> symbolic (CROWN back-substitution) -> LP.
    - `lower_slopes` of the unstable ReLUs' relaxations in the pre-activation rows: CROWN's adaptive
      ones, the best of CROWN's, the parallel and the flipped ones ("best-of-three"), or those
      then optimised per row by `alpha_steps` projected Adam steps ("alpha", with "per-box" rows;
      for a layer whose optimisation is estimated within `alpha_work` multiply-adds, None:
      `alpha.WORK`). With `alpha_deadline` (`time.perf_counter()`) the optimisation of layer j
      stops at its share of the time left, (alpha_deadline - now) / (layers left), so a deep
      layer still gets its turn; past it the slopes stay fixed (every choice is sound).
    - `rows` back-substituted per ReLU layer: "all" neurons of a box without parent bounds (their
      tighter bounds size later layers) and the unstable ones below a parent; "unstable": neurons
      unstable in some box of the batch; "per-box": each box's own unstable neurons.
    - `symbolic_output`: the output layer back-substituted too (else its interval bounds).
    - `lp_deadline` (`time.perf_counter()`): LP tightening stops there; `lp_output` also LP-tightens
      the output bounds; `lp_cuts`: rounds of ideal cuts per LP (`lp.lp_tighten_layer`; 0: the
      triangle relaxation); `lp_min_gain`: a layer's LPs stop when its first neurons gain less
      (`lp_tighten_layer`'s `min_gain`); `lp_workers`: processes a layer's LPs may run on
      (`lp.share_neurons`: for callers whose second core is idle meanwhile).
    - `deadline` (`time.perf_counter()`): every tightening step (symbolic, optimised slopes, LP) stops
      there and at Ctrl-C, checked between blocks of about `pipeline.CHUNK_WORK` multiply-adds; the
      neurons not reached keep their interval bounds (sound, looser). The caller folds the command
      deadline in (`solvers.runtime.earliest`), or leaves a grace after it (verify: to finish a bound
      begun just before). None: only the LP step watches `lp_deadline` and the command's deadline.
    """

    method: str = "symbolic"
    lower_slopes: str = "crown"
    alpha_steps: int = 10
    alpha_work: float | None = None
    alpha_deadline: float | None = None
    rows: str = "all"
    symbolic_output: bool = True
    lp_deadline: float | None = None
    lp_output: bool = False
    lp_cuts: int = 0
    lp_min_gain: float = 0.0
    lp_workers: int = 1
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.method not in BOUND_METHODS:
            raise BadInput(f"unknown bounds method {self.method!r}; choose one of {', '.join(BOUND_METHODS)}")
        if self.lower_slopes not in LOWER_SLOPES:
            raise ValueError(f"unknown lower slopes {self.lower_slopes!r}; choose one of {', '.join(LOWER_SLOPES)}")
        if self.rows not in ROWS:
            raise ValueError(f"unknown rows {self.rows!r}; choose one of {', '.join(ROWS)}")

    @property
    def symbolic(self) -> bool:
        return self.method != "interval"


__all__ = ["BoundOptions", "LOWER_SLOPES", "ROWS"]
