"""The falsifier's search: batched projected gradient descent toward an unsafe set of a ReLU net.

One core for every question that looks for a bad point (`certify.verify.attack`: a VNNLIB unsafe
set; `certify.robustness.attack`: a class flip in a ball or a box). The unsafe set is a DNF of
*targets*, each a conjunction of linear rows over the input and output,

    target t:   G_r x + H_r f(x) <= d_r   for every row r of t,

and the margin of t at x is min_r (d_r - G_r x - H_r f(x)) (>= 0: x is unsafe for t). The search
minimises, for each restart, the hinge loss  sum_r max(0, G_r x + H_r f(x) - d_r + kappa_r)  (or,
with `saturate=False`, minus the margin) of its own target (`assign[b] = t`), or of the target
closest to unsafe (`assign[b] = -1`: the combined margin of the whole DNF), by signed (or
caller-given) gradient steps whose size decays linearly over the run, each followed by the
caller's projection (an input box, a norm ball). Half of the restarts follow the gradient of the
leaky-ReLU net (`LEAK`) instead of the exact one. All restarts
are one batch through the fused network (`solvers.batch_net.BatchNet`, float32 by default); kappa
asks for a little slack so that a point survives re-evaluation in float64 and onnxruntime.

The search only *proposes* points: every point whose margin is >= 0 in the search's arithmetic is
handed to the caller's `found` hook, which replays it exactly (float64 IR and onnxruntime) and
says whether to stop. Nothing here claims a counterexample.

Cost. `Search.plan` sizes the batch to the memory budget (`models.memory.batch_rows`) and to the
time given: a forward/backward pass is timed once (`pass_cost`: a fixed part, reading the
weights, and a part per point) and the batch is the largest power of two whose `steps` passes
fit in the seconds; the deadline is checked after every step (the `clock` is injectable for
tests), so a run ends at most one step after its deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from models.ir import Network
from models.memory import batch_rows, require_work

from .batch_net import BatchNet
from .blas import single_threaded_blas
from .runtime import stop_requested

#: relative slack the search asks of every row (kappa_r = SLACK (1 + |d_r|))
SLACK = 1e-5
#: the slope inactive ReLUs pass back in every other group of restarts (`descend`'s `surrogate`):
#: nets whose ReLUs are mostly inactive in the box (MNIST fully connected nets: one active neuron
#: of 256 in a layer) hide the way to their unsafe set from the exact gradient, whose PGD then
#: ends at the same box vertex from every start
LEAK = 0.01


@dataclass(frozen=True)
class Targets:
    """The unsafe set as a DNF: rows (G, H, d) of all targets stacked, target t owning rows
    offsets[t]:offsets[t+1] (every target has at least one row)."""

    G: np.ndarray  # (R, n)
    H: np.ndarray  # (R, m)
    d: np.ndarray  # (R,)
    offsets: np.ndarray  # (T + 1,)
    kappa: np.ndarray  # (R,)

    @classmethod
    def of(cls, rows: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], n: int, m: int,
           slack: float = SLACK) -> "Targets":
        """From one (G, H, d) per target; targets without rows are not allowed (nothing to descend)."""
        if not rows or any(len(d) == 0 for _, _, d in rows):
            raise ValueError("every target needs at least one row")
        G = np.vstack([np.asarray(g, dtype=np.float64).reshape(-1, n) for g, _, _ in rows])
        H = np.vstack([np.asarray(h, dtype=np.float64).reshape(-1, m) for _, h, _ in rows])
        d = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for _, _, v in rows])
        offsets = np.concatenate([[0], np.cumsum([len(v) for _, _, v in rows])])
        return cls(G, H, d, offsets, slack * (1.0 + np.abs(d)))

    @property
    def count(self) -> int:
        return len(self.offsets) - 1

    def margins(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """(B, T) margins min_r (d_r - G_r x - H_r y) of every target at the points (X, Y)."""
        V = X @ self.G.T + Y @ self.H.T - self.d
        return -np.maximum.reduceat(V, self.offsets[:-1], axis=1)


def signed_step(width: np.ndarray | float) -> Callable[[np.ndarray, float], np.ndarray]:
    """The l_inf / box step: `frac` of the box width per coordinate, along the gradient's sign."""
    return lambda g, frac: frac * width * np.sign(g)


def box_projection(lo: np.ndarray, hi: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Projection on a box (or on a box per row: lo, hi of shape (B, n))."""
    return lambda X: np.clip(X, lo, hi)


class Search:
    """Batched PGD over one network (see the module doc); `clock` is `time.perf_counter` unless a
    test passes a fake one."""

    def __init__(self, net: Network | BatchNet, dtype: type = np.float32,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.batch = net if isinstance(net, BatchNet) else BatchNet(net, dtype)
        self.dtype = self.batch.dtype
        self.clock = clock
        self.points = 0  # points pushed through the network (forward passes)
        self.steps = 0  # gradient steps taken (batches)
        self._cost: tuple[float, float] | None = None

    # ------------------------------------------------------------------ sizing
    def row_bytes(self, targets: Targets | None = None) -> float:
        """Working bytes per restart: the network's pass plus the rows' values, hinges and masks."""
        rows = 0 if targets is None else len(targets.d)
        return self.batch.row_bytes() + 4.0 * self.batch.itemsize * rows

    def memory_rows(self, wanted: int, targets: Targets | None = None) -> int:
        """How many of `wanted` restarts fit in the memory budget at once (>= 1, or `TooLarge`)."""
        per_row = self.row_bytes(targets)
        rows = batch_rows(wanted, per_row)
        if rows < 1:
            require_work(per_row, "one restart of the attack's batch")
        return max(rows, 1)

    def pass_cost(self) -> tuple[float, float]:
        """(seconds per step, seconds per point) of a forward + backward pass, timed once on one
        point and on a batch: a pass costs a fixed part (reading the weights, small batches are
        bound by memory traffic) plus a part per point."""
        if self._cost is None:
            with single_threaded_blas():
                self._cost = self._time_passes()
        return self._cost

    def _time_passes(self) -> tuple[float, float]:
        n, out = self.batch.blocks[0].in_dim, self.batch.blocks[-1].out_dim
        k = max(2, min(32, self.memory_rows(32)))
        X = np.random.default_rng(0).standard_normal((k, n)).astype(self.dtype)
        times = []
        for rows in (1, k):
            best = np.inf
            for _ in range(2):
                t = time.perf_counter()
                Y, masks = self.batch.forward(X[:rows])
                self.batch.backward(masks, np.ones((rows, out), dtype=self.dtype))
                best = min(best, time.perf_counter() - t)
            times.append(best)
        per_row = max((times[1] - times[0]) / (k - 1), times[1] / k / 4, 1e-9)
        return max(times[0] - per_row, 0.0), per_row

    def seconds_per_row(self) -> float:
        """Seconds per point of a forward + backward pass in large batches."""
        return self.pass_cost()[1]

    def plan(self, seconds: float, steps: int, most: int, least: int = 1, targets: Targets | None = None) -> int:
        """Restarts for a run of `steps` steps in `seconds`: the largest power of two (at most
        `most`, at least `least`) whose passes fit in the time, within the memory budget."""
        fixed, per_row = self.pass_cost()
        fit = int((max(seconds, 0.0) / max(steps, 1) - fixed) / per_row)
        rows = max(min(most, fit), least, 1)
        rows = max(1 << (rows.bit_length() - 1), least)
        return min(rows, self.memory_rows(rows, targets))

    def past(self, deadline: float | None) -> bool:
        return stop_requested() or (deadline is not None and self.clock() >= deadline)

    # ------------------------------------------------------------------ search
    def descend(self, X: np.ndarray, targets: Targets, assign: np.ndarray, *, steps: int, deadline: float | None,
                project: Callable[[np.ndarray], np.ndarray], step: Callable[[np.ndarray, float], np.ndarray],
                found: Callable[[np.ndarray, np.ndarray], bool] | None = None,
                first: float = 0.1, last: float = 0.002, surrogate: bool = True,
                saturate: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """PGD from the rows of X, restart b toward target `assign[b]` (-1: the closest target).

        The step fraction decays linearly from `first` to `last` over the `steps`; after each
        evaluation the points with margin >= 0 (and their margins) go to `found`, which returns True
        to stop. With `surrogate`, every other group of restarts (a group: one restart per distinct
        target of `assign`) follows the gradient of the leaky-ReLU net (slope `LEAK`), the others
        the exact gradient (the margins are always the ReLU network's). With `saturate=False`
        the loss is the target's margin itself (its binding row), so a restart keeps moving deeper
        into the unsafe set after reaching it (the robustness attacks pull their points back
        toward x0 afterwards). Returns each restart's best point (float64, inside the set) and its
        margin in the search's arithmetic. (The callers, verification and the robustness
        questions, run with single-threaded BLAS: `solvers.blas`.)"""
        assign = np.asarray(assign, dtype=np.int64)
        group = max(len(np.unique(assign)), 1)
        leak = np.where((np.arange(len(assign)) // group) % 2 == 1, LEAK, 0.0) if surrogate else None
        dt = self.dtype
        G, H, d = targets.G.astype(dt), targets.H.astype(dt), targets.d.astype(dt)
        kappa = targets.kappa.astype(dt)
        starts = targets.offsets[:-1]
        owner = np.repeat(np.arange(targets.count), np.diff(targets.offsets))  # target of each row
        rows = np.arange(len(X))
        X64 = project(np.asarray(X, dtype=np.float64))  # the iterate, inside the set (float64)
        best_x, best_m = X64.copy(), np.full(len(X64), -np.inf)
        for t in range(steps):
            X = X64.astype(dt)
            Y, masks = self.batch.forward(X)
            self.points += len(X)
            self.steps += 1
            V = X @ G.T + Y @ H.T - d  # (B, R): > 0 where a row is violated
            M = -np.maximum.reduceat(V, starts, axis=1)  # (B, T) target margins
            own = np.where(assign >= 0, M[rows, np.maximum(assign, 0)], M.max(axis=1)).astype(np.float64)
            better = own > best_m
            best_m[better] = own[better]
            best_x[better] = X64[better]
            hit = own >= 0
            if found is not None and np.any(hit) and found(X64[hit], own[hit]):
                break
            if t == steps - 1 or self.past(deadline):
                break
            viol = V + kappa
            if saturate:
                L = np.add.reduceat(np.maximum(viol, 0), starts, axis=1)  # (B, T) hinge loss of every target
                pick = np.where(assign >= 0, assign, np.argmin(L, axis=1))
                gV = ((viol > 0) & (owner[None, :] == pick[:, None])).astype(dt)
            else:  # the binding row of the target (the closest target for assign -1)
                pick = np.where(assign >= 0, assign, np.argmax(M, axis=1))
                gV = ((owner[None, :] == pick[:, None]) & (V >= -M[rows, pick][:, None])).astype(dt)
            gX = gV @ G + self.batch.backward(masks, gV @ H, leak)
            frac = first + (last - first) * t / max(steps - 1, 1)
            X64 = project(X64 - step(gX.astype(np.float64), frac))
        return best_x, best_m


__all__ = ["LEAK", "SLACK", "Search", "Targets", "box_projection", "signed_step"]
