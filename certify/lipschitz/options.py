"""Choices, defaults and validation of `local_lipschitz`'s options (the CLI imports them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.errors import BadInput
from solvers.choices import BACKEND_CHOICES, BOUND_METHODS, FORMULATIONS, NORMS, PASS_BOUNDS
from solvers.norms import parse_norm

from ..boundary.vectors import parse_positive, parse_vector

L2_METHODS: tuple[str, ...] = ("auto", "miqp", "equivalence")
# auto: the Jacobian branch-and-bound when it splits inputs (at most AUTO_BAB_INPUTS free inputs,
# l1/linf norms: measured faster than the MILP with its proof on LipMIP's 2-input nets and random
# 5-input ones), else the exact MILP when the bounds leave at most AUTO_MILP_UNSTABLE unstable ReLUs
# (or when a MILP back-end is named), else the branch-and-bound; bounds: the Jacobian bound alone
METHODS: tuple[str, ...] = ("auto", "milp", "bab", "bounds")
# auto's race (`certify.lipschitz.race`): the MILP in a forked child against the region stage and the
# tree; auto: where Linux's fork and two cores are there; on: with fork, whatever the cores; off: the rule
RACE_CHOICES: tuple[str, ...] = ("auto", "on", "off")
AUTO_MILP_UNSTABLE = 60
AUTO_BAB_INPUTS = 8  # (the branch-and-bound splits inputs up to bab.INPUT_SPLIT_DIM, the same 8)
# ... and the MILP only up to this many free inputs: with an image's inputs the MILP and its proof
# do not move in a minute where the tree does (VNN-COMP mnist 784-256x4-10, radius 0.02, 60
# unstable ReLUs, 60 s: MILP 11.81, its root bound; tree 10.29-10.36), while the digits MLPs' 64 inputs
# close by the MILP in 3-7 s (`certify bench lipschitz`); nothing was measured in between
AUTO_MILP_INPUTS = 100
# the box's pre-activation LPs (bounds "lp") take this many rounds of ideal ReLU cuts per LP
# (`solvers.bounds.lp.lp_tighten_layer`) on boxes with more than AUTO_BAB_INPUTS free inputs, where
# no tree splits inputs and every node inherits the root's bounds. Measured, linf -> l1, 60 s, same
# load: mnist 784-256x4-10 at radius 0.02 60 instead of 71 unstable ReLUs (2.1 s instead of 0.6 s),
# interval ratio 4.14 -> 3.35; 784-256x6-10 9.72 -> 6.75; the digits MLPs the same times (within
# 0.4 s); LipMIP's 10-10-10-10-10-2 24 instead of 28, the same proof (3217 vs 3489 nodes, 25.9 vs
# 24.7 s); its 2-input nets are left out (2-20-20-20-2: 22 instead of 27, but 1099 proof nodes
# instead of 465 in one run)
LP_CUTS = 2
# auto runs the region stage first (certify.lipschitz.exact_regions) before the MILP, and before the
# branch-and-bound only up to this many unstable untied ReLUs. Measured with the pattern
# branch-and-bound of solvers.region_bab (same runs): at 14 it beats the tree (LipMIP 2-16-16-2
# 0.075 s vs 0.082 s, random 5-16-16-16-2 0.14 vs 0.19 s) and closes soundness/net171 in 0.3-0.5 s
# where the tree stays open after 10 s; at 17 (5-16-16-16-16-2) it is 1.5x slower than the tree
# (0.41-0.51 vs 0.27-0.34 s), at 27 (2-20-20-20-2) it gives up after 2.5 s
AUTO_REGIONS_BEFORE_BAB = 16
# before the MILP (more than AUTO_BAB_INPUTS free inputs), l1/linf norms: the region stage only up to
# this many unstable untied ReLUs. Measured (certify bench lipschitz, 2-core machine at load ~6):
# the digits MLPs (4-15 unstable) close there in 0.3-28 s against the MILP's 4-40 s, LipMIP's
# 10-10-10-10-10-2 (28) never did in 30 s (its 3 s before the MILP were lost). l2 questions keep it up
# to exact_regions.REGION_UNSTABLE: without Gurobi the region stage is their only exact path.
AUTO_REGIONS_BEFORE_MILP = 16
DEFAULT_INPUT_NORM = "linf"
DEFAULT_OUTPUT_NORM = "l1"
DEFAULT_MIP_GAP = 1e-6
DEFAULT_BOUNDS = "lp"
DEFAULT_FORMULATION = "forward"
DEFAULT_THREADS = 2

__all__ = ["BACKEND_CHOICES", "BOUND_METHODS", "DEFAULT_BOUNDS", "DEFAULT_FORMULATION", "DEFAULT_INPUT_NORM",
           "DEFAULT_MIP_GAP", "DEFAULT_OUTPUT_NORM", "DEFAULT_THREADS", "FORMULATIONS", "L2_METHODS", "LocalOptions",
           "METHODS", "RACE_CHOICES", "AUTO_BAB_INPUTS", "AUTO_MILP_INPUTS", "AUTO_MILP_UNSTABLE", "LP_CUTS", "AUTO_REGIONS_BEFORE_BAB", "AUTO_REGIONS_BEFORE_MILP", "NORMS", "NormQuestion", "PASS_BOUNDS"]


@dataclass(frozen=True)
class NormQuestion:
    """Which constant: ||J||_{p->q}, or the scalar c^T f (`target`, with `margin` when c = e_i - e_j)."""

    p: str
    q: str | None
    target: np.ndarray | None = None
    margin: tuple[int, int] | None = None

    @classmethod
    def of(cls, net, input_norm: str, output_norm: str | None, margin=None, target=None) -> "NormQuestion":
        p = parse_norm(input_norm, "input norm")
        if margin is not None and target is not None:
            raise BadInput("give either a margin (i, j) or a target vector, not both")
        m = net.output_dim
        if margin is not None:
            try:
                i, j = (int(v) for v in margin)
            except (TypeError, ValueError):
                raise BadInput(f"margin must be two output indices i,j, got {margin!r}") from None
            if not (0 <= i < m and 0 <= j < m) or i == j:
                raise BadInput(f"margin needs two different output indices in 0..{m - 1} (the model has {m} outputs), "
                               f"got {i},{j}")
            c = np.zeros(m)
            c[i], c[j] = 1.0, -1.0
            return cls(p, None, c, (i, j))
        if target is not None:
            c = parse_vector(target, "target")
            if c.size != m:
                raise BadInput(f"target has {c.size} values but the model has {m} outputs")
            if not np.any(c):
                raise BadInput("target vector is all zeros")
            return cls(p, None, c)
        return cls(p, parse_norm(DEFAULT_OUTPUT_NORM if output_norm is None else output_norm, "output norm"))

    @property
    def uses_l2(self) -> bool:
        return self.p == "l2" or self.q == "l2"


@dataclass(frozen=True)
class LocalOptions:
    """Validated solver options of one `local_lipschitz` call."""

    backend: str = "auto"
    time_limit: float | None = None
    mip_gap: float = DEFAULT_MIP_GAP
    bounds: str = DEFAULT_BOUNDS
    formulation: str = DEFAULT_FORMULATION
    l2_method: str = "auto"
    pass_bounds: str = "lp"
    threads: int = DEFAULT_THREADS
    warm_start: bool = True
    verbose: bool = False
    method: str = "auto"
    milp_finish: bool = False  # bab: close nodes with few unstable neurons by the exact MILP
    race: str = "auto"  # method auto: race the MILP against the tree (RACE_CHOICES)

    @classmethod
    def of(cls, backend="auto", time_limit=None, mip_gap=None, bounds=DEFAULT_BOUNDS, formulation=DEFAULT_FORMULATION,
           l2_method="auto", pass_bounds=None, threads=DEFAULT_THREADS, warm_start=True, verbose=False,
           method="auto", milp_finish=False, race="auto") -> "LocalOptions":
        for value, choices, what in ((backend, BACKEND_CHOICES, "backend"), (bounds, BOUND_METHODS, "bounds method"),
                                     (method, METHODS, "method"), (race, RACE_CHOICES, "race choice"),
                                     (formulation, FORMULATIONS, "formulation"), (l2_method, L2_METHODS, "l2 method")):
            if value not in choices:
                raise BadInput(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")
        if pass_bounds is None:
            pass_bounds = "lp" if bounds == "lp" else "interval"
        if pass_bounds not in PASS_BOUNDS:
            raise BadInput(f"unknown pass bounds {pass_bounds!r}; choose one of {', '.join(PASS_BOUNDS)}")
        if time_limit is not None:
            time_limit = parse_positive(time_limit, "time limit")
        mip_gap = DEFAULT_MIP_GAP if mip_gap is None else parse_positive(mip_gap, "mip gap", allow_zero=True)
        if mip_gap >= 1:
            raise BadInput(f"mip gap is relative and must be below 1, got {mip_gap:g} (the default is {DEFAULT_MIP_GAP:g})")
        if isinstance(threads, bool) or int(parse_positive(threads, "threads")) != threads:
            raise BadInput(f"threads must be a positive integer, got {threads!r}")
        return cls(backend, time_limit, mip_gap, bounds, formulation, l2_method, pass_bounds, int(threads),
                   bool(warm_start), bool(verbose), method, bool(milp_finish), race)
