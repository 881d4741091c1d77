"""A best-first branch-and-bound engine whose upper bound is a proof at every moment.

The engine maximises; a problem supplies three things (`BabProblem`): the root node, a sound bound
of a node (`NodeBound`: an upper bound on the objective over the node's subset, optionally a
feasible value below it, and whether the node is a leaf that cannot be split), and the children of
a node (which must cover it). The engine keeps the open nodes in a frontier (`frontier.BestFirst`,
a max-heap, unless the caller picks another expansion order) and

    upper = max(bounds of the open nodes, bounds of the nodes already closed),

so `upper` is a sound bound on the whole problem whenever the search stops (time limit, node
limit, Ctrl-C); `lower` is the best value the problem reported (callers replay it). A node is
closed when it is a leaf or its bound is at most the prune level max(target, lower). The same
engine proves MILP dual bounds (`solvers.bab.milp`) and runs the network searches: Lipschitz at
scale, verification's input splitting (depth-first, stops at a counterexample) and PTR's
split decisions (best-first, stops at a witness above the proposal), each with its own node bounds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, Protocol, TypeVar

from ..runtime import interrupted
from .frontier import BestFirst, Frontier

N = TypeVar("N")

ROUND_SECONDS = 0.1  # batched rounds are sized to take about this long once the deadline is near


@dataclass
class NodeBound:
    """What a problem knows about one node."""

    upper: float                  # sound: no point of the node has a larger objective
    lower: float = -math.inf      # a value attained in the node (the problem vouches for it), or -inf
    leaf: bool = False            # cannot (or need not) be split further: its upper bound is final
    data: Any = None              # whatever the problem needs to branch (e.g. the LP solution)
    witness: Any = None           # what attains `lower` (returned as the incumbent)


class BabProblem(Protocol[N]):
    def root(self) -> N: ...

    # optional, instead of `root`: several roots covering the problem (e.g. a union of regions),
    # bounded together with `bound_many` when the search is batched
    # def roots(self) -> list[N]: ...

    def bound(self, node: N) -> NodeBound: ...

    def branch(self, node: N, bound: NodeBound, prune_level: float) -> list[tuple[N, float | None]]:
        """Children covering `node`, each with an optional cheap upper bound (None: unknown).
        A child whose cheap bound is <= `prune_level` is closed without being bounded."""
        ...

    # optional, used with `branch_and_bound(..., batch > 1)`: the bounds of several nodes at once
    # (same contract as `bound`, one `NodeBound` per node, in order)
    # def bound_many(self, nodes: list[N]) -> list[NodeBound]: ...
    # optional with `bound_many`: `branch` of several (node, bound) pairs at once, one list of
    # children per pair; a child may come with its full `NodeBound` (bounded while choosing the
    # split, e.g. strong branching), recorded as if `bound_many` had returned it
    # def branch_many(self, items: list[tuple[N, NodeBound]], prune_level: float) -> list[list[tuple[N, Any]]]: ...
    # optional: the best value attained anywhere so far (the problem vouches for it), for witnesses
    # found beside the node bounds (e.g. a search running between rounds); polled every round
    # def attained(self) -> float: ...


@dataclass
class BabProgress:
    """A progress event (also the final state): the proven interval and the search size."""

    lower: float
    upper: float
    nodes: int
    open_nodes: int
    seconds: float


@dataclass
class BabResult(Generic[N]):
    upper: float
    lower: float
    incumbent: Any
    nodes: int
    open_nodes: int
    seconds: float
    stop: str  # "closed" (tree exhausted), "gap", "above" (a value above the target, or at least
    #            `stop_at`), "time_limit", "node_limit", "interrupted", "split" (`split_when`)
    max_depth: int = 0
    closed_bound: float = -math.inf  # largest bound among closed nodes (part of `upper`)
    open_bounds: list[float] = field(default_factory=list)
    # stop "split" only: every open entry (bound, depth, node, node bound), taken off the frontier
    open_entries: list = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.stop in ("closed", "gap")


def branch_and_bound(
    problem: BabProblem,
    *,
    target: float = -math.inf,
    gap: float | None = None,
    deadline: float | None = None,
    max_nodes: int | None = None,
    progress: Callable[[BabProgress], None] | None = None,
    progress_every: float = 0.5,
    lower: float = -math.inf,
    batch: int | Callable[[], int] = 1,
    stop_above: bool = False,
    stop_at: float | None = None,
    frontier: Frontier | None = None,
    interrupt: Callable[[], bool] = interrupted,
    round_seconds: float | None = ROUND_SECONDS,
    split_when: Callable[[int, int, float], bool] | None = None,
) -> BabResult:
    """Run the search. `target`: close nodes whose bound is <= target (prove upper <= target);
    `gap`: stop once upper - lower <= gap * |upper|; `deadline`: a `time.perf_counter()` value;
    `lower`: a value already known to be attained (prunes like the target); `stop_above`: a
    decision "max <= target?": stop (stop "above") once a value above the target is attained;
    `stop_at`: likewise once a value >= stop_at is attained (a counterexample to "max < stop_at?");
    `frontier`: the open nodes and their expansion order (default `BestFirst`); `interrupt`: polled
    every round, a stop request (stop "interrupted"); `round_seconds`: batched rounds are sized
    (from the last round's seconds per node) to take at most this long and to end by the deadline
    (None: only by the deadline); a problem whose bound calls have a large fixed cost, such as
    optimised node bounds, needs longer rounds than the default to fill its batches;
    `split_when(nodes, open nodes, seconds)`: polled every round, True stops the search (stop
    "split") and hands every open entry to the caller (`BabResult.open_entries`), e.g. to search
    the subtrees on other cores (`proof_workers`); `upper` still covers them.

    `batch` > 1 with a problem that has `bound_many`: up to `batch` of the best open nodes are
    branched together and all their children bounded in one call (vectorised bounds amortise
    per-node overhead); a callable `batch` is asked before each round (a problem that stops
    batching midway). Until the children are pushed, the largest bound of the nodes taken off
    the frontier stays part of `upper` (`pending`), so every stop keeps the bound sound."""
    t0 = time.perf_counter()
    front: Frontier = BestFirst() if frontier is None else frontier
    closed = -math.inf
    incumbent = None
    nodes = 0
    max_depth = 0
    last_report = t0
    stop = "closed"
    # the bound of a node taken off the frontier whose children are not all pushed yet (+inf before
    # the root is bounded): an interruption must not lose that part of the search space
    pending = math.inf
    hard_stop = False

    def prune_level() -> float:
        return max(target, lower)

    def push(node, nb: NodeBound | None, bound: float, depth: int) -> None:
        nonlocal closed, max_depth
        max_depth = max(max_depth, depth)
        if bound <= (target if target > lower else lower) or (nb is not None and nb.leaf):  # prune_level(), inlined
            closed = max(closed, bound)
            return
        front.push((bound, depth, node, nb))

    def evaluate(node, depth: int, cap: float = math.inf) -> None:
        record(node, problem.bound(node), depth, cap)

    def record(node, nb: NodeBound, depth: int, cap: float = math.inf) -> None:
        nonlocal nodes, lower, incumbent
        nodes += 1
        if nb.upper > cap:
            # a child covers part of its parent, so the parent's bound holds for it: a child bounded
            # worse (e.g. a cheaper bound at the deadline, 10x looser on ACAS Xu) keeps the parent's
            nb = replace(nb, upper=cap)
        if nb.lower > lower:
            lower, incumbent = nb.lower, nb.witness
        push(node, nb, nb.upper, depth)

    attained = getattr(problem, "attained", None)
    many = getattr(problem, "bound_many", None) if callable(batch) or batch > 1 else None
    branch_many = getattr(problem, "branch_many", None) if many is not None else None

    def current_upper() -> float:
        return max(closed, front.top(), lower, pending)

    try:
        roots = getattr(problem, "roots", None)
        if roots is None:
            evaluate(problem.root(), 0)
        else:
            starts = roots()
            for node, nb in zip(starts, many(starts) if many is not None else [problem.bound(r) for r in starts],
                                strict=True):
                record(node, nb, 0)
        pending = -math.inf
        per_node = 0.0  # seconds per branched node in the last round (sizes the batched rounds)
        while front:
            if attained is not None:
                lower = max(lower, attained())
            up = current_upper()
            if gap is not None and up - lower <= gap * abs(up):
                stop = "gap"
                break
            if (stop_above and lower > target) or (stop_at is not None and lower >= stop_at):
                stop = "above"
                break
            if deadline is not None and time.perf_counter() >= deadline:
                stop = "time_limit"
                break
            if interrupt():
                stop = "interrupted"
                break
            if max_nodes is not None and nodes >= max_nodes:
                stop = "node_limit"
                break
            if split_when is not None and split_when(nodes, len(front), time.perf_counter() - t0):
                stop = "split"
                break
            taken = []  # (depth, node, bound, node bound) of the nodes branched in this round
            want = (batch() if callable(batch) else batch) if many is not None else 1
            if deadline is not None and want > 1 and per_node > 0:
                # rounds short enough to end within ROUND_SECONDS of the deadline: the deadline is
                # only checked between rounds
                room = max(deadline - time.perf_counter(), 0.0)
                room = room if round_seconds is None else min(round_seconds, room)
                want = max(1, min(want, int(room / per_node)))
            round_t0 = time.perf_counter()
            level = prune_level()
            while front and len(taken) < want:
                for bound, depth, node, nb in front.pop(want - len(taken)):
                    if bound <= level:  # the prune level rose since it was pushed
                        closed = max(closed, bound)
                        continue
                    pending = max(pending, bound)
                    taken.append((depth, node, bound, nb))
            kids = []
            groups = (branch_many([(node, nb) for _, node, _, nb in taken], prune_level()) if branch_many is not None
                      else [problem.branch(node, nb, prune_level()) for _, node, _, nb in taken])
            for (depth, _, parent, _), children in zip(taken, groups, strict=True):
                for child, cheap in children:
                    if isinstance(cheap, NodeBound):  # bounded while branching (e.g. strong branching)
                        record(child, cheap, depth + 1, parent)
                        continue
                    if cheap is not None and min(cheap, parent) <= prune_level():
                        closed = max(closed, min(cheap, parent))
                        continue
                    if many is None:
                        evaluate(child, depth + 1, parent)
                    else:
                        kids.append((child, depth + 1, parent))
            if kids:
                for (child, depth, parent), cb in zip(kids, many([c for c, _, _ in kids]), strict=True):
                    record(child, cb, depth, parent)
            pending = -math.inf
            per_node = (time.perf_counter() - round_t0) / max(len(taken), 1)
            if progress is not None and time.perf_counter() - last_report >= progress_every:
                last_report = time.perf_counter()
                progress(BabProgress(lower, current_upper(), nodes, len(front), last_report - t0))
    except KeyboardInterrupt:
        stop, hard_stop = "interrupted", True
    upper = current_upper()
    result = BabResult(upper, lower, incumbent, nodes, len(front), time.perf_counter() - t0, stop, max_depth, closed,
                       sorted(front.bounds(), reverse=True)[:8])
    if stop == "split":
        result.open_entries = front.pop(len(front))
    if progress is not None:
        progress(BabProgress(lower, upper, nodes, len(front), result.seconds))
    if hard_stop:
        raise BabInterrupted(result)
    return result


class BabInterrupted(KeyboardInterrupt):
    """A hard KeyboardInterrupt during a search (a first Ctrl-C inside `solvers.runtime.
    interruptible()` only stops it, with stop "interrupted"); `result` holds the sound interval."""

    def __init__(self, result: BabResult) -> None:
        super().__init__("interrupted")
        self.result = result


__all__ = ["BabInterrupted", "BabProblem", "BabProgress", "BabResult", "NodeBound", "branch_and_bound"]
