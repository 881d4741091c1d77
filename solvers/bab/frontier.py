"""The open nodes of a branch-and-bound search and the order in which they are expanded.

A frontier holds entries (bound, depth, node, node bound) and hands them out in batches; the
engine (`engine.branch_and_bound`) owns everything else (pruning, the sound upper bound, budgets).

- `BestFirst`: largest bound first (a max-heap). The default: the engine's upper bound then
  drops as fast as the node bounds allow (proofs, MILP dual bounds, decisions "max <= D?").
- `DepthFirst`: mostly the newest nodes first (the frontier stays small, so nodes can carry their
  bounder state, e.g. pre-activation bounds), a share of each batch best-first by a problem's own
  priority (e.g. how close a node's centre is to a counterexample). Used by verification, where
  the aim is to close every node or find a counterexample, not to lower the bound.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any, Protocol

# (bound, depth, node, node bound): what the engine pushes and pops
Entry = tuple[float, int, Any, Any]


class Frontier(Protocol):
    def push(self, entry: Entry) -> None: ...

    def pop(self, k: int) -> list[Entry]:
        """Up to k open entries, in expansion order (removed from the frontier)."""
        ...

    def __len__(self) -> int: ...

    def bounds(self) -> Iterator[float]:
        """The bounds of the open entries (any order)."""
        ...

    def top(self) -> float:
        """The largest open bound (-inf when empty)."""
        ...


class BestFirst:
    """Largest bound first; ties in push order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any, Any]] = []
        self._count = itertools.count()

    def push(self, entry: Entry) -> None:
        bound, depth, node, nb = entry
        heapq.heappush(self._heap, (-bound, next(self._count), depth, node, nb))

    def pop(self, k: int) -> list[Entry]:
        out = []
        while self._heap and len(out) < k:
            neg, _, depth, node, nb = heapq.heappop(self._heap)
            out.append((-neg, depth, node, nb))
        return out

    def __len__(self) -> int:
        return len(self._heap)

    def bounds(self) -> Iterator[float]:
        return (-h[0] for h in self._heap)

    def top(self) -> float:
        return -self._heap[0][0] if self._heap else -math.inf


class _Slot:
    """An entry of `DepthFirst` (it sits on the stack and possibly in the best-first heap too)."""

    __slots__ = ("entry", "taken")

    def __init__(self, entry: Entry) -> None:
        self.entry: Entry | None = entry
        self.taken = False

    def take(self) -> Entry:
        """The entry, which the slot then lets go of: a slot taken from the heap stays on the stack
        (and one taken from the stack in the heap) until it is reached, and must not keep the
        expanded node's arrays alive (ReLU splitting: 100 KB of bounds per CIFAR node)."""
        entry, self.entry, self.taken = self.entry, None, True
        return entry


class DepthFirst:
    """Newest first, with `best_share` of every batch taken best-first by `priority(node, nb)`
    (larger first) while fewer than `best_first_max` nodes are on the stack (bounded memory).

    The nodes pushed between two pops are stacked in increasing priority (the most promising child
    is expanded first)."""

    def __init__(self, priority: Callable[[Any, Any], float], *, best_share: float = 0.25,
                 best_first_max: int = 20_000) -> None:
        self.priority = priority
        self.best_share = best_share
        self.best_first_max = best_first_max
        self._stack: list[_Slot] = []
        self._best: list[tuple[float, int, _Slot]] = []  # lazy deletion: slots taken from the stack stay
        self._new: list[Entry] = []
        self._open = 0
        self._count = itertools.count()

    def push(self, entry: Entry) -> None:
        self._new.append(entry)

    def _flush(self) -> None:
        if not self._new:
            return
        new, self._new = self._new, []
        prio = [self.priority(e[2], e[3]) for e in new]
        order = sorted(range(len(new)), key=prio.__getitem__)  # stable: ties keep push order
        slots = [_Slot(new[i]) for i in order]
        self._stack += slots
        self._open += len(slots)
        if len(self._stack) < self.best_first_max:
            best, count = self._best, self._count
            for i, slot in zip(order, slots):
                heapq.heappush(best, (-prio[i], next(count), slot))

    def pop(self, k: int) -> list[Entry]:
        self._flush()
        out: list[Entry] = []
        want_best = int(k * self.best_share)
        while self._best and len(out) < want_best:
            slot = heapq.heappop(self._best)[2]
            if not slot.taken:
                out.append(slot.take())
        while self._stack and len(out) < k:
            slot = self._stack.pop()
            if not slot.taken:
                out.append(slot.take())
        self._open -= len(out)
        if len(self._best) > 2 * len(self._stack) + 1000:  # drop the entries of expanded nodes
            self._best = [e for e in self._best if not e[2].taken]
            heapq.heapify(self._best)
        return out

    def open_entries(self) -> list[Entry]:
        """The open entries, oldest first (e.g. to run a search inside the most promising one)."""
        self._flush()
        return [s.entry for s in self._stack if not s.taken]

    def __len__(self) -> int:
        return self._open + len(self._new)

    def bounds(self) -> Iterator[float]:
        return (e[0] for e in self.open_entries())

    def top(self) -> float:
        return max(self.bounds(), default=-math.inf)


__all__ = ["BestFirst", "DepthFirst", "Entry", "Frontier"]
