"""`verify(model, spec, timeout=...)`: attack, then input splitting with sound node bounds.

1. Falsification (sampling + PGD, a small share of the budget) for an early `sat`.
2. Input-splitting search, every node bounded by a `NodeBounder` (default `BatchedSymbolicBounds`);
   above `max_split_dims` free inputs, ReLU splitting (`relu_split`, beta-CROWN node bounds).
   `unsat` only when every node of every region is closed by sound bounds; a counterexample found
   on the way (node centers, PGD in the worst node) is replayed before `sat` is claimed.
3. Otherwise `timeout` (budget spent) or `unknown` (nodes that cannot be closed nor split, e.g.
   a user bounder on too many input dimensions, or a ReLU-split node the LP finisher cannot
   close). A failed search never becomes `unsat`.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from models.box import Box
from models.errors import BadInput
from models.ir import Network
from models.onnx_reference import OnnxReference, resolve_model
from solvers.blas import single_threaded_blas
from solvers.runtime import command_deadline, earliest, interrupted, past

from ..certificate import Status, issue
from .attack import Falsifier
from .node_bounds import BatchedSymbolicBounds, NodeBounder
from .result import VerificationResult
from .relu_split import ReluSplitSearch
from .search import EXHAUSTED, SAT, TIMEOUT, UNSAT, InputSplitSearch
from .spec import Spec
from .vnnlib import load_vnnlib

_RESULT = {SAT: "sat", UNSAT: "unsat", TIMEOUT: "timeout", EXHAUSTED: "unknown"}
#: seconds after the deadline within which the default node bounds stop tightening
BOUND_GRACE = 0.5


def _witness_margin(net: Network, spec: Spec, x: np.ndarray | None) -> float | None:
    """The unsafe margin at x recomputed with the IR's own float64 forward pass (the lower bound)."""
    if x is None:
        return None
    m = spec.margin(x, net.forward(x))
    return float(m) if np.isfinite(m) else None


def verify(
    model: Network | str | os.PathLike,
    spec: Spec | str | os.PathLike,
    timeout: float = 60.0,
    *,
    reference: OnnxReference | str | os.PathLike | None = None,
    seed: int = 0,
    bounder: NodeBounder | None = None,
    attack_seconds: float | None = None,
    max_split_dims: int = 16,
    batch_size: int = 32,
    root_lp: bool = True,
    second_search: bool = True,
) -> VerificationResult:
    """Decide a VNNLIB property: `sat` (counterexample), `unsat` (proof), `timeout` or `unknown`.

    - `model`: a `Network` or an ONNX path (then also the onnxruntime reference for replays);
    - `spec`: a `Spec` or a `.vnnlib` path (the asserts describe the unsafe set);
    - `timeout`: seconds for the whole run; `seed` makes the attack reproducible;
    - `reference`: onnxruntime model for replays (default: the ONNX path, else a float64 export);
    - `bounder`: the node bounding function of the search (default `BatchedSymbolicBounds(net)`);
    - `attack_seconds`: budget of the initial attack (default 5% of the timeout, 0.2..3 s);
    - `max_split_dims`: regions with more free input dimensions are searched by ReLU splitting
      (`relu_split.ReluSplitSearch`, beta-CROWN node bounds) unless a `bounder` is given;
    - `root_lp`: that search's open root bounds its unstable neurons by LPs with ideal cuts first
      (up to half the time left; off for runs that mostly look for counterexamples);
    - `second_search`: a tree that search leaves open after 30% of the time left at its root is
      searched again with every node's neurons bounded under all of its splits, where the cost
      measured at the root lets 100 such nodes fit (off: one search, the whole time).
    """
    with single_threaded_blas():  # small matrix products: OpenBLAS threads only wait for each other
        return _verify(model, spec, timeout, reference, seed, bounder, attack_seconds, max_split_dims, batch_size,
                       root_lp, second_search)


def _check_options(attack_seconds, max_split_dims, batch_size, root_lp, second_search) -> None:
    """One-line refusals of option values the search would misread (a string is truthy, a float
    count would slice nothing)."""
    if attack_seconds is not None and (isinstance(attack_seconds, bool) or not isinstance(attack_seconds, (int, float))
                                       or not math.isfinite(attack_seconds) or attack_seconds < 0):
        raise BadInput(f"attack_seconds must be None or a non-negative number of seconds, got {attack_seconds!r}")
    for name, value, least in (("max_split_dims", max_split_dims, 0), ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise BadInput(f"{name} must be an integer >= {least}, got {value!r}")
    for name, value in (("root_lp", root_lp), ("second_search", second_search)):
        if not isinstance(value, bool):
            raise BadInput(f"{name} must be True or False, got {value!r}")


def _verify(model, spec, timeout, reference, seed, bounder, attack_seconds, max_split_dims, batch_size,
            root_lp, second_search) -> VerificationResult:
    t0 = time.perf_counter()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise BadInput(f"timeout must be a positive number of seconds, got {timeout!r}")
    _check_options(attack_seconds, max_split_dims, batch_size, root_lp, second_search)
    net, reference, name, resolved = resolve_model(model, reference)
    notes = list(resolved)
    if not isinstance(spec, Spec):
        spec = load_vnnlib(spec)
    spec.check_model(net)
    notes += list(spec.notes)
    deadline = earliest(t0 + float(timeout), command_deadline())  # (the CLI's whole-command limit)
    common: dict[str, Any] = {"model": name, "vnnlib": spec.source, "certified": True}
    if spec.is_empty:
        return issue(VerificationResult.build("unsat", lower=None, upper=-math.inf, box=None, nodes=0,
                                              seconds=time.perf_counter() - t0,
                                              notes=notes + ["every clause of the property is empty"], **common), net)
    lo, hi = spec.hull()
    box = Box.from_bounds(lo, hi)
    regions = spec.regions()
    if len(regions) > 1 or any(d.input_rows.count for d in spec.disjuncts):
        notes.append(f"the input set is a union of {len(regions)} region(s) inside `box` (see the property)")

    falsifier = Falsifier(net, spec, reference, seed)
    budget = min(max(0.05 * timeout, 0.2), 3.0) if attack_seconds is None else float(attack_seconds)
    t_attack = time.perf_counter()
    # three PGD rounds when input splitting follows (it evaluates points and runs PGD in its nodes
    # too); the whole budget where the search can only bound the root (too many free inputs)
    splits = all(falsifier.free_inputs(r) <= max_split_dims for r in range(len(regions)))
    attack = falsifier.run(min(deadline, t_attack + budget), rounds=3 if splits else None)
    attack_time = time.perf_counter() - t_attack
    details: dict[str, Any] = {"attack": {"seconds": attack_time, "points": attack.points}}
    if attack.counterexample is not None:
        details["found_by"] = "attack"
        return issue(VerificationResult.build("sat", cex=attack.counterexample, lower=attack.counterexample.margin,
                                              upper=None, box=box, nodes=0, seconds=time.perf_counter() - t0,
                                              notes=notes, details=details, **common), net)

    if bounder is None and not splits:  # too many inputs to split: split ReLUs (beta-CROWN)
        search: InputSplitSearch | ReluSplitSearch = ReluSplitSearch(falsifier, net, bound_grace=BOUND_GRACE, root_lp=root_lp,
                                                                      deep_iterations=None if second_search else 0)
        bounder_name = "beta-crown-relu-split"
    else:
        # (a batch of node bounds in flight at the deadline may finish within BOUND_GRACE: a cheap root,
        # 0.05 s on mnist_fc, still closes when loading took the whole timeout; a CIFAR root is cut)
        bounder = bounder or BatchedSymbolicBounds(net, deadline=deadline + BOUND_GRACE)
        search = InputSplitSearch(falsifier, bounder, batch_size=batch_size, max_split_dims=max_split_dims)
        bounder_name = getattr(bounder, "name", type(bounder).__name__)
    t_search = time.perf_counter()
    out = search.run(deadline)
    details["search"] = {"seconds": time.perf_counter() - t_search, "bounder": bounder_name,
                         "nodes": out.nodes, "open_nodes": out.open_nodes, "max_depth": out.max_depth}
    details["attack"]["points"] = falsifier.points
    notes += out.notes
    result = _RESULT[out.status]
    if result == "unknown" and past(deadline):
        # the bounds were cut short by the deadline (`BoundOptions.deadline`): more time could close
        # the nodes left open. A closed search (unsat) or a replayed counterexample (sat) is reported
        # as such even when the deadline passed while it finished.
        result = "timeout"
        notes.append("the time limit passed while the nodes left open were bounded")
    status = Status.INTERRUPTED if result == "timeout" and interrupted() else None
    if status:
        notes.append("interrupted (Ctrl-C): the search stopped undecided")
    lower = _witness_margin(net, spec, falsifier.best_x)
    if out.counterexample is not None:
        details["found_by"] = "search"
        lower = max(lower if lower is not None else -math.inf, out.counterexample.margin)
    if lower is not None and out.upper is not None and lower > out.upper + 1e-9 * (1.0 + abs(lower)):
        # a point of the input set whose margin exceeds a proven bound (beyond float64 noise of the
        # fused network): never report such a result
        raise RuntimeError(f"internal error: the margin {lower!r} at an input point exceeds the proven bound "
                           f"{out.upper!r}; please report this model and property")
    return issue(VerificationResult.build(result, cex=out.counterexample, lower=lower, upper=out.upper, box=box,
                                          nodes=out.nodes, seconds=time.perf_counter() - t0, notes=notes,
                                          details=details, status=status, **common), net)


__all__ = ["verify"]
