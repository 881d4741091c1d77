"""Exact local Lipschitz constants of ReLU networks by mixed-integer programming.

`local_lipschitz` certifies  L = sup_{x in B} ||J(x)||_{p->q}  over the box B = [center - radius,
center + radius] (intersected with a domain), or the constant of a scalar target c^T f, as an
interval [lower, upper]:

1. sound pre-activation bounds over B (interval -> symbolic -> LP, `solvers.bounds`);
2. one MILP per norm pair (`solvers.milp.lipschitz`), solved by Gurobi, HiGHS or CBC;
3. upper = the solver's dual bound, widened for its tolerances; lower = the norm of the exact
   Jacobian at a replayed witness (`replay`). The status is "optimal" only when they meet.

l2 norms are not MILP-linear: they are solved exactly as a nonconvex MIQP on Gurobi when it is
available and the model fits its licence, and otherwise bounded by norm interpolation,
||w||_2^2 <= ||w||_1 ||w||_inf, i.e. L_{2->q} <= sqrt(L_{1->q} L_{inf->q}) (and likewise on the
output side), which is sound but not exact.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from models.box import Box
from models.errors import BadInput
from models.ir import Network
from solvers.bounds import METHODS as BOUND_METHODS
from solvers.bounds import network_bounds
from solvers.rounding import round_up
from solvers.milp.backends import BACKEND_CHOICES, GurobiBackend, ModelTooLarge, choose_backend
from solvers.milp.lipschitz import FORMULATIONS, PASS_BOUNDS, LipschitzMilp, build_lipschitz_milp
from solvers.milp.result import MilpResult, SolveOptions
from solvers.norms import parse_norm
from solvers.regions import has_no_interior, interior_point

from ..vectors import parse_positive, parse_vector
from .certificate import LipschitzCertificate
from .replay import DifferentiablePoint, differentiable_point, direction_pair, norm_lower, sample_lower

L2_METHODS: tuple[str, ...] = ("auto", "miqp", "equivalence")
# Dual-bound widening for solver tolerances: relative WIDEN_REL plus WIDEN_ABS * (layers + 1) *
# tolerance * (the interval bound of the objective). See docs/lipschitz.md.
WIDEN_REL = 1e-9
WIDEN_ABS = 1.0
SOLVER_TOLERANCE = 1e-9
DEFAULT_MIP_GAP = 1e-6
MAX_CUTS = 20  # no-good cuts of degenerate (tie) activation patterns per call


@dataclass
class _Outcome:
    """One solved subproblem (a norm pair)."""

    pair: tuple[str, str | None]
    milp: LipschitzMilp
    result: MilpResult | None
    upper: float
    status: str
    notes: list[str]


def local_lipschitz(
    net: Network,
    center: Sequence[float] | np.ndarray | Box,
    radius: float | Sequence[float] | np.ndarray | None = None,
    *,
    domain: tuple | None = None,
    input_norm: str = "linf",
    output_norm: str = "l1",
    margin: tuple[int, int] | None = None,
    target: Sequence[float] | np.ndarray | None = None,
    backend: str = "auto",
    time_limit: float | None = None,
    mip_gap: float | None = None,
    bounds: str = "lp",
    formulation: str = "forward",
    l2_method: str = "auto",
    pass_bounds: str | None = None,
    threads: int = 2,
    warm_start: bool = True,
    verbose: bool = False,
) -> LipschitzCertificate:
    """Certified local Lipschitz constant of `net` over the l_inf box center +/- radius.

    - `radius`: a positive number or one per input; `domain`: (lo, hi) numbers or vectors that
      the box is intersected with (e.g. (0, 1) for pixels).
    - `input_norm` in l1, l2, linf; `output_norm` in l1, l2, linf (operator norm
      ||J||_{input->output}); or a scalar function: `margin=(i, j)` for f_i - f_j, or
      `target=c` for c^T f (then `output_norm` is ignored).
    - `backend`: auto (Gurobi when licensed and the model fits, else HiGHS), gurobi, highs, cbc.
    - `time_limit` (seconds, whole call), `mip_gap` (relative, default 1e-6), `bounds` (interval, symbolic,
      lp), `formulation` (forward: J w, or backward: J^T c as in LipMIP), `l2_method` (auto,
      miqp: Gurobi's exact nonconvex MIQP, equivalence: sound norm-interpolation bound),
      `pass_bounds` (interval, or lp: LP-tighten the Jacobian-product big-M constants; default
      lp when `bounds` is lp), `warm_start` (hand the solver the best sampled witness first).

    Returns a `LipschitzCertificate` with lower <= L <= upper. Raises `BadInput` for invalid
    arguments or a solver that cannot be used.
    """
    t_start = time.perf_counter()
    if not isinstance(net, Network):
        raise BadInput("net must be a certify Network (load it with certify.load_onnx or certify.from_torch)")
    box = _box(net, center, radius, domain)
    lo, hi = np.array(box.lo), np.array(box.hi)
    p = parse_norm(input_norm, "input norm")
    c = _scalar_target(net, margin, target)
    q = None if c is not None else parse_norm(output_norm, "output norm")
    if backend not in BACKEND_CHOICES:
        raise BadInput(f"unknown backend {backend!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    if bounds not in BOUND_METHODS:
        raise BadInput(f"unknown bounds method {bounds!r}; choose one of {', '.join(BOUND_METHODS)}")
    if formulation not in FORMULATIONS:
        raise BadInput(f"unknown formulation {formulation!r}; choose one of {', '.join(FORMULATIONS)}")
    if pass_bounds is None:
        pass_bounds = "lp" if bounds == "lp" else "interval"
    if pass_bounds not in PASS_BOUNDS:
        raise BadInput(f"unknown pass bounds {pass_bounds!r}; choose one of {', '.join(PASS_BOUNDS)}")
    if l2_method not in L2_METHODS:
        raise BadInput(f"unknown l2 method {l2_method!r}; choose one of {', '.join(L2_METHODS)}")
    if time_limit is not None:
        time_limit = parse_positive(time_limit, "time limit")
    mip_gap = DEFAULT_MIP_GAP if mip_gap is None else parse_positive(mip_gap, "mip gap", allow_zero=True)
    threads = int(parse_positive(threads, "threads"))
    deadline = None if time_limit is None else t_start + time_limit

    lp_deadline = None if time_limit is None else t_start + 0.25 * time_limit
    nb = network_bounds(net, lo, hi, bounds, lp_deadline=lp_deadline)  # type: ignore[arg-type]
    bound_seconds = time.perf_counter() - t_start

    notes: list[str] = []
    lower, best_point = sample_lower(net, lo, hi, p, q, c)
    best_direction = None

    build = dict(formulation=formulation, pass_bounds=pass_bounds, deadline=lp_deadline)
    pairs, method = _plan(net, nb, p, q, c, backend, l2_method, build, notes)
    outcomes: list[_Outcome] = []
    options = dict(mip_gap=mip_gap, threads=threads, verbose=verbose)
    cuts = 0
    for k, (pair, milp) in enumerate(pairs):
        sub_lower = 0.0
        while True:
            remaining = None if deadline is None else (deadline - time.perf_counter()) / (len(pairs) - k)
            start = _warm_start(milp, best_point, pair, c) if warm_start else None
            out = _solve(milp, pair, backend if method != "miqp" else "gurobi", remaining, dict(options, start=start))
            x = None if out.result is None else out.result.x
            if x is not None:
                _check_solver_point(net, nb, milp, x)
                hint = milp.direction(x) if pair == (p, q) else None
                side = "input" if milp.formulation == "forward" else "output"
                for pt in _witness_points(net, milp, x, lo, hi):
                    val = norm_lower(pt, p, q, c, hint=hint, hint_side=side)
                    if val > lower or best_point is None:
                        lower, best_point, best_direction = val, pt, hint
                    sub_lower = max(sub_lower, val if pair == (p, q) else norm_lower(pt, pair[0], pair[1], c))
            if (out.status != "optimal" or x is None or _closed(sub_lower, out.upper, mip_gap)
                    or cuts >= MAX_CUTS or milp.forward.num_binaries == 0):
                break
            # the optimum has no replayable witness: if its activation pattern provably has no
            # interior in the box it does not count (L is a max over full-dimensional regions)
            pattern = milp.pattern(x)
            if interior_point(net, pattern, lo, hi) is not None or not has_no_interior(net, pattern, lo, hi):
                break
            milp = milp.without_pattern(x)
            cuts += 1
        notes.extend(out.notes)
        outcomes.append(out)
    if cuts:
        notes.append(f"cut {cuts} activation pattern(s) whose regions have no interior in the box (ReLU ties)")

    upper = _combine([o.upper for o in outcomes])
    solved = all(o.status == "optimal" for o in outcomes)
    if lower > upper * (1.0 + 1e-7) + 1e-12:
        raise RuntimeError(f"soundness check failed: replayed lower bound {lower!r} exceeds the certified upper bound "
                           f"{upper!r}; refusing to certify (please report this model)")
    upper = max(upper, lower)
    if any(o.status == "time_limit" for o in outcomes):
        status = "time_limit"
    elif not solved:
        status = "interrupted"
    elif _closed(lower, upper, mip_gap):
        status = "optimal"
    else:
        status = "open_gap"
        raw = [o.milp.to_lipschitz(o.result.bound) for o in outcomes if o.result is not None and o.result.bound is not None]
        if method == "equivalence":
            notes.append("l2 norm bounded by norm interpolation (sound, not exact)")
        elif len(raw) == 1 and _closed(lower, max(raw[0], lower), mip_gap):
            notes.append("the solver closed its gap, but the allowance for its tolerances (sized by the objective's "
                         "interval bound, far above the constant here) keeps the interval open")
        else:
            notes.append("the solver's optimum has no replayable witness (degenerate activation pattern)")
    backends = sorted({o.result.backend for o in outcomes if o.result is not None}) or ["none"]
    if status == "optimal" and not _closed(lower, upper, DEFAULT_MIP_GAP):
        status = "open_gap"
        notes.append(f"the interval closed only to the requested gap {mip_gap:g}")
    return LipschitzCertificate(
        lower=float(lower),
        upper=float(upper),
        status=status,
        certified=True,
        box=box,
        input_norm=p,
        output_norm=q,
        seconds=time.perf_counter() - t_start,
        notes=notes,
        backend="+".join(backends),
        witness=None if best_point is None else best_point.x,
        target=c,
        margin=None if margin is None else (int(margin[0]), int(margin[1])),
        method=method,
        nodes=sum(o.result.nodes for o in outcomes if o.result is not None),
        mip_gap=mip_gap,
        time_limit=time_limit,
        bounds=bounds,
        pass_bounds=pass_bounds,
        formulation=formulation,
        unstable=nb.num_unstable,
        binaries=max(o.milp.num_binaries for o in outcomes),
        bound_seconds=bound_seconds,
        solver_seconds=sum(o.result.seconds for o in outcomes if o.result is not None),
        witness_direction=best_direction,
    )


# ----------------------------------------------------------------------------- validation
def _box(net: Network, center, radius, domain) -> Box:
    if isinstance(center, Box):
        if radius is not None or domain is not None:
            raise BadInput("give either a Box or center, radius (and domain), not both")
        return center.check_dim(net.input_dim)
    if radius is None:
        raise BadInput("local_lipschitz needs a Box, or a center and a radius")
    return Box.around(center, radius, domain=domain, dim=net.input_dim)


def _scalar_target(net: Network, margin, target) -> np.ndarray | None:
    if margin is not None and target is not None:
        raise BadInput("give either a margin (i, j) or a target vector, not both")
    m = net.output_dim
    if margin is not None:
        try:
            i, j = (int(v) for v in margin)
        except (TypeError, ValueError):
            raise BadInput(f"margin must be two output indices i,j, got {margin!r}") from None
        if not (0 <= i < m and 0 <= j < m) or i == j:
            raise BadInput(f"margin needs two different output indices in 0..{m - 1}, got {i},{j}")
        c = np.zeros(m)
        c[i], c[j] = 1.0, -1.0
        return c
    if target is not None:
        c = parse_vector(target, "target", m)
        if not np.any(c):
            raise BadInput("target vector is all zeros")
        return c
    return None


# ----------------------------------------------------------------------------- planning
def _plan(net, nb, p, q, c, backend, l2_method, build: dict, notes):
    """[(norm pair, MILP)] to solve and the method name (milp, miqp, equivalence)."""
    uses_l2 = p == "l2" or q == "l2"
    if not uses_l2:
        return [((p, q), build_lipschitz_milp(net, nb, p, q, c, **build))], "milp"
    if l2_method != "equivalence" and backend in ("auto", "gurobi"):
        milp = build_lipschitz_milp(net, nb, p, q, c, **build)
        gurobi = GurobiBackend()
        reason = gurobi.unavailable_reason() if not gurobi.available() else gurobi.unsupported_reason(milp.model)
        if not reason:
            return [((p, q), milp)], "miqp"
        if l2_method == "miqp":
            raise ModelTooLarge(f"the exact l2 MIQP needs Gurobi: {reason}; use --l2-method equivalence")
        notes.append(f"exact l2 MIQP skipped ({reason}); using the norm-interpolation bound")
    elif l2_method == "miqp":
        raise BadInput(f"the exact l2 MIQP needs --backend gurobi (or auto), not {backend}")
    if c is not None:
        pairs = [("l1", None), ("linf", None)]
    elif p == "l2" and q == "l2":
        pairs = [("l1", "l1"), ("linf", "linf")]
    elif p == "l2":
        pairs = [("l1", q), ("linf", q)]
    else:
        pairs = [(p, "l1"), (p, "linf")]
    return [(pair, build_lipschitz_milp(net, nb, pair[0], pair[1], c, **build)) for pair in pairs], "equivalence"


def _combine(uppers: list[float]) -> float:
    if len(uppers) == 1:
        return uppers[0]
    a, b = uppers
    return round_up(math.sqrt(a * b), math.sqrt(a * b), 4)


# ----------------------------------------------------------------------------- solving
def _solve(milp: LipschitzMilp, pair, backend: str, remaining: float | None, options: dict) -> _Outcome:
    naive = milp.to_lipschitz(milp.objective.naive_upper)
    if remaining is not None and remaining <= 0.01:
        return _Outcome(pair, milp, None, naive, "time_limit", ["no time left for the MILP; upper bound from interval arithmetic"])
    choice = choose_backend(backend, milp.model)
    opts = SolveOptions(time_limit=remaining, feasibility_tol=SOLVER_TOLERANCE, integrality_tol=SOLVER_TOLERANCE, **options)
    res = choice.backend.solve(milp.model, opts)
    notes = list(choice.notes)
    if res.status in ("infeasible", "unbounded") and res.backend == "cbc":
        # the MILP is always feasible (any box point with its pattern); CBC 2.10 sometimes says otherwise
        notes.append(f"CBC wrongly reported the feasible MILP {res.status}; its answer is discarded "
                     "(upper bound from interval arithmetic; use --backend highs)")
        return _Outcome(pair, milp, None, naive, "interrupted", notes)
    if res.status in ("infeasible", "unbounded"):
        raise RuntimeError(f"internal error: the Lipschitz MILP was reported {res.status} by {res.backend} ({res.message})")
    if res.status == "error":
        notes.append(f"the solver failed ({res.message}); upper bound from interval arithmetic")
    upper = naive
    if res.bound is not None and res.status in ("optimal", "time_limit", "interrupted"):
        widened = res.bound + WIDEN_REL * abs(res.bound) + _abs_widening(milp)
        upper = min(naive, milp.to_lipschitz(widened))
    status = res.status if res.status in ("optimal", "time_limit") else "interrupted"
    return _Outcome(pair, milp, res, upper, status, notes)


def _warm_start(milp: LipschitzMilp, point: DifferentiablePoint | None, pair, c) -> np.ndarray | None:
    if point is None:
        return None
    w, cvec = direction_pair(point.jacobian, pair[0], pair[1], c)
    return milp.start(point.x, point.pattern, w if milp.formulation == "forward" else cvec)


def _abs_widening(milp: LipschitzMilp) -> float:
    layers = len(milp.blocks)
    return WIDEN_ABS * (layers + 1) * SOLVER_TOLERANCE * milp.objective.naive_upper


def _closed(lower: float, upper: float, mip_gap: float) -> bool:
    """Do lower and the (widened) upper bound meet up to the MIP gap (at least 1e-7, round-off)?

    The widening is not forgiven: when it dominates (an objective whose interval bound is orders
    of magnitude above the constant) the interval is reported open, as it is.
    """
    return upper - lower <= 1.5 * max(mip_gap, 1e-7) * abs(upper) + 1e-12


def _check_solver_point(net: Network, nb, milp: LipschitzMilp, v: np.ndarray) -> None:
    """The solver's input point must respect the sound pre-activation bounds (DESIGN rule 4)."""
    x = np.clip(milp.point(v), nb.lo, nb.hi)
    for j, z in enumerate(net.preactivations(x)):
        scale = 1e-9 * (1.0 + np.abs(nb.pre_lo[j]) + np.abs(nb.pre_hi[j]))
        if np.any(z < nb.pre_lo[j] - scale) or np.any(z > nb.pre_hi[j] + scale):
            raise RuntimeError(f"internal error: the solver's point leaves the sound bounds of ReLU layer {j}; "
                               "refusing to certify (please report this model)")


def _witness_points(net: Network, milp: LipschitzMilp, v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[DifferentiablePoint]:
    """Certified-differentiable points replaying the solver's activation pattern.

    First the Chebyshev centre of the pattern's region; if that region has no interior (a tie
    pattern), the solver's point and small random perturbations of it.
    """
    out = []
    x0 = interior_point(net, milp.pattern(v), lo, hi)
    if x0 is not None:
        pt = differentiable_point(net, x0)
        if pt is not None:
            return [pt]
    xs = np.clip(milp.point(v), lo, hi)
    rng = np.random.default_rng(0)
    candidates = [xs] + [np.clip(xs + s * (hi - lo) * rng.uniform(-1, 1, xs.size), lo, hi) for s in (1e-7, 1e-5, 1e-3) for _ in range(4)]
    for x in candidates:
        pt = differentiable_point(net, x)
        if pt is not None:
            out.append(pt)
    return out
