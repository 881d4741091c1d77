"""Falsification: PGD toward every clause of the unsafe set, sampling where it pays; seeded,
time- and memory-bounded.

The gradient search is the project's one falsifier core (`solvers.pgd.Search`, also used by the
robustness attacks): per region of the spec, one batch of restarts, each aimed at one clause of
the region (its hinge loss  sum_r max(0, G_r x + H_r y - d_r + kappa_r)) or at the combined margin
(the clause closest to unsafe), signed-gradient steps of decaying size projected on the region's
box, in float32. The batch is sized to the memory budget and to the time left (one pass is timed);
the deadline is checked after every step. kappa asks for a little slack so that the point
survives float32 evaluation in onnxruntime.

Sampling pays only in low dimension: for regions with at most `LOW_DIM` free inputs, uniform
samples and an LP polish in the best samples' activation regions (ACAS Xu's unsafe sets a few 1e-4
wide); in higher dimension the only samples are the PGD restarts' starting points.

Every point with a non-negative margin is re-evaluated in the float64 IR and replayed
(`check_counterexample`: float64 IR and onnxruntime, no tolerance); only a replayed point is
returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from models.ir import Network
from models.memory import fits
from models.onnx_reference import OnnxReference
from solvers.batch_net import BatchNet
from solvers.pgd import Search, Targets, box_projection, signed_step
from solvers.runtime import past

from .counterexample import Counterexample, check_counterexample
from .spec import Spec

#: regions with at most this many free inputs are sampled densely (above, sampling finds nothing)
LOW_DIM = 16
#: PGD steps per round, and restarts per target at most (small nets: the batch does not depend on
#: the machine's speed, so seeded runs repeat)
STEPS = 60
RESTARTS_PER_TARGET = 32
#: rounds of PGD the attack's budget is planned for
ROUNDS = 3


@dataclass
class AttackOutcome:
    counterexample: Counterexample | None
    best_margin: float  # largest unsafe margin seen at an evaluated point of the input set (IR)
    best_x: np.ndarray | None
    points: int  # points evaluated


class Falsifier:
    """PGD over every region of a spec (sampling in low dimension), keeping the best margin seen."""

    def __init__(self, net: Network, spec: Spec, reference: OnnxReference, seed: int = 0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.net, self.spec, self.reference = net, spec, reference
        self.batch = BatchNet(net)  # float64: the margins of candidates, dense sampling, LP polish
        self._search: Search | None = None  # float32: the gradient search (made on first use)
        self.clock = clock
        self.rng = np.random.default_rng(seed)
        self.regions = spec.regions()
        index = {id(d): k for k, d in enumerate(spec.disjuncts)}
        self.clause_ids = [[index[id(c)] for c in r.clauses] for r in self.regions]
        # per region: the clauses with rows (PGD targets) and their Targets
        self.aimed = [[c for c, cl in enumerate(r.clauses) if cl.rows.count] for r in self.regions]
        self._targets: dict[int, Targets] = {}
        self._turn = [0] * len(self.regions)  # rotates the targets when a batch has fewer restarts
        self.best_margin = -np.inf
        self.best_x: np.ndarray | None = None
        self.replays = 0
        self.evaluated = 0  # points evaluated in float64 (samples, candidates, the search's node centers)

    @property
    def search(self) -> Search:
        """The gradient search; its float32 copy of the network is made (and its cost paid) by the
        first phase that needs it, inside the attack's budget."""
        if self._search is None:
            self._search = Search(self.net, clock=self.clock)
        return self._search

    @property
    def points(self) -> int:
        """Points pushed through the network (float64 evaluations and gradient-search steps)."""
        return self.evaluated + (self._search.points if self._search is not None else 0)

    def past(self, deadline: float | None) -> bool:
        return past(None) or (deadline is not None and self.clock() >= deadline)

    def targets(self, r: int) -> Targets | None:
        if r not in self._targets and self.aimed[r]:
            reg = self.regions[r]
            self._targets[r] = Targets.of([(reg.clauses[c].rows.G, reg.clauses[c].rows.H, reg.clauses[c].rows.d)
                                           for c in self.aimed[r]], reg.dim, self.net.output_dim)
        return self._targets.get(r)

    # ---------------------------------------------------------------- evaluation
    def margins(self, r: int, X: np.ndarray) -> np.ndarray:
        """(B, clauses) unsafe margins of the points X (inside region r's box) in the IR."""
        Y, _ = self.batch.forward(X)
        self.evaluated += len(X)
        return np.stack([c.margin(X, Y) for c in self.regions[r].clauses], axis=1)

    def consider(self, r: int, X: np.ndarray, M: np.ndarray) -> Counterexample | None:
        """Track the best point; replay the points with a non-negative margin (best first)."""
        best = M.max(axis=1)
        i = int(np.argmax(best))
        if best[i] > self.best_margin:
            self.best_margin, self.best_x = float(best[i]), X[i].copy()
        for i in np.argsort(-best)[:8]:
            if best[i] < 0:
                break
            self.replays += 1
            cex = check_counterexample(self.net, self.spec, X[i], self.reference, self.clause_ids[r])
            if cex is not None:
                return cex
        return None

    def outcome(self, cex: Counterexample | None) -> AttackOutcome:
        if cex is not None and cex.margin > self.best_margin:
            self.best_margin, self.best_x = cex.margin, cex.x
        return AttackOutcome(cex, self.best_margin, self.best_x, self.points)

    def free_inputs(self, r: int) -> int:
        reg = self.regions[r]
        return int(np.sum(reg.hi > reg.lo))

    # ---------------------------------------------------------------- phases
    def sample(self, r: int, n: int) -> Counterexample | None:
        reg = self.regions[r]
        n = self.batch.rows(n)
        X = self.rng.uniform(reg.lo, reg.hi, size=(n, reg.dim))
        X[0] = 0.5 * (reg.lo + reg.hi)
        return self.consider(r, X, self.margins(r, X))

    def dense(self, r: int, deadline: float, share: float = 0.3, batch: int = 65_536, polish: int = 4) -> Counterexample | None:
        """Dense sampling for `share` of the time left, then an LP polish (`lp_polish`) of the best
        points of each clause: unsafe sets of a few 1e-4 in the input space (ACAS Xu N5_3 property
        2) are missed by PGD's signed steps but land near some of a million samples. The batch fits
        the memory budget and a quarter of the sampling time (one pass is timed by the search)."""
        reg = self.regions[r]
        stop = self.clock() + share * max(deadline - self.clock(), 0.0)
        per_row = self.search.seconds_per_row()  # a float32 forward + backward ~ a float64 forward
        batch = self.batch.rows(max(1, min(batch, int(0.25 * (stop - self.clock()) / per_row))))
        keep_x, keep_m = np.zeros((0, reg.dim)), np.zeros((0, len(reg.clauses)))
        while not self.past(stop):  # (Ctrl-C and the command deadline stop it too)
            X = self.rng.uniform(reg.lo, reg.hi, size=(batch, reg.dim))
            M = self.margins(r, X)
            cex = self.consider(r, X, M)
            if cex is not None:
                return cex
            top = np.unique(np.argsort(-M, axis=0)[:polish].ravel())
            keep_x, keep_m = np.vstack([keep_x, X[top]]), np.vstack([keep_m, M[top]])
        for c in range(len(reg.clauses)):
            for i in np.argsort(-keep_m[:, c])[:polish] if len(keep_m) else []:
                if self.past(deadline):
                    return None
                cex = self.lp_polish(r, c, keep_x[i], reg.lo, reg.hi)
                if cex is not None:
                    return cex
        return None

    def descend(self, r: int, starts: np.ndarray, assign: np.ndarray, targets: Targets, steps: int,
                deadline: float, lo: np.ndarray, hi: np.ndarray) -> Counterexample | None:
        """The search from `starts` (restart b toward target `assign[b]`, -1: the closest) within
        [lo, hi]; its hits and its best points are re-evaluated in float64 and replayed."""
        found: list[Counterexample] = []

        def hit(X: np.ndarray, _m: np.ndarray) -> bool:
            cex = self.consider(r, X, self.margins(r, X))
            if cex is not None:
                found.append(cex)
            return cex is not None or self.past(deadline)

        best_x, best_m = self.search.descend(starts, targets, assign, steps=steps, deadline=deadline,
                                             project=box_projection(lo, hi), step=signed_step(hi - lo), found=hit)
        if found:
            return found[0]
        top = np.argsort(-best_m)[:8]  # the best points, for the best margin (and a last replay)
        return self.consider(r, best_x[top], self.margins(r, best_x[top]))

    def pgd(self, r: int, clause: int, starts: np.ndarray, steps: int, deadline: float,
            lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> Counterexample | None:
        """PGD on one clause of region r from `starts`, within [lo, hi] (default the region's box)."""
        reg = self.regions[r]
        lo = reg.lo if lo is None else lo
        hi = reg.hi if hi is None else hi
        X = np.clip(starts, lo, hi)
        if reg.clauses[clause].rows.count == 0:
            return self.consider(r, X, self.margins(r, X))
        targets = self.targets(r)
        X = X[: self.search.memory_rows(len(X), targets)]
        assign = np.full(len(X), self.aimed[r].index(clause))
        return self.descend(r, X, assign, targets, steps, deadline, lo, hi)

    def pgd_round(self, r: int, deadline: float, steps: int = STEPS, first: bool = False,
                  restarts: int = RESTARTS_PER_TARGET) -> Counterexample | None:
        """One batch of restarts on region r, sized to the time until `deadline`: one restart per
        clause and one for the combined margin (rotating when the batch is smaller), starting at
        the box's center (first round) or the best point so far, else uniformly in the box."""
        reg = self.regions[r]
        targets = self.targets(r)
        if targets is None:
            return None
        kinds = targets.count + (targets.count > 1)  # the clauses, and the combined margin
        rows = self.search.plan(deadline - self.clock(), steps, max(restarts, 1) * kinds, targets=targets)
        assign = (self._turn[r] + np.arange(rows)) % kinds
        self._turn[r] = int((self._turn[r] + rows) % kinds)
        assign = np.where(assign == targets.count, -1, assign)
        X = self.rng.uniform(reg.lo, reg.hi, size=(rows, reg.dim))
        if first:
            X[: min(rows, kinds)] = 0.5 * (reg.lo + reg.hi)
        elif self.best_x is not None and np.all(self.best_x >= reg.lo) and np.all(self.best_x <= reg.hi):
            X[0] = self.best_x
        return self.descend(r, X, assign, targets, steps, deadline, reg.lo, reg.hi)

    def lp_polish(self, r: int, clause: int, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  walks: int = 4) -> Counterexample | None:
        """Maximise the clause margin over the activation region of x0 within [lo, hi]: the net is
        affine there, so this is one LP (scipy's HiGHS). The optimum is re-linearised a few times
        (it sits on a region boundary, the next region may be better) and every optimum is
        replayed like any candidate: the LP only proposes points."""
        from scipy.optimize import linprog

        rows = self.regions[r].clauses[clause].rows
        if rows.count == 0:
            return None
        n = x0.size
        hidden = [blk.out_dim for blk in self.batch.blocks[:-1]]
        if not fits(8.0 * n * (n + 4 * max(hidden + [n]) + 2 * sum(hidden) + 2 * rows.count)):
            return None  # the dense region LP does not fit in memory: it only proposes points
        if n * sum(blk.weight.size for blk in self.batch.blocks) > 1e8:
            return None  # (issue 29 stopgap, unchecked time: 1 s per LP on mnist_fc, 15 s to build on a CIFAR net)
        x, best_t = np.clip(x0, lo, hi), -np.inf
        for _ in range(walks):
            M, c = np.eye(n), np.zeros(n)
            region_rows, region_rhs = [], []
            for blk in self.batch.blocks[:-1]:
                Mz, cz = blk.weight @ M, blk.weight @ c + blk.bias
                act = Mz @ x + cz > 0
                sign = np.where(act, -1.0, 1.0)  # active: -z <= 0, inactive: z <= 0
                region_rows.append(sign[:, None] * Mz)
                region_rhs.append(-sign * cz)
                M, c = act[:, None] * Mz, np.where(act, cz, 0.0)
            last = self.batch.blocks[-1]
            A_out, c_out = last.weight @ M, last.weight @ c + last.bias
            k = rows.count
            # max t  s.t.  (G + H A) x + t <= d - H c,  region rows,  lo <= x <= hi
            A_ub = np.vstack([np.hstack([rows.G + rows.H @ A_out, np.ones((k, 1))]),
                              np.hstack([np.vstack(region_rows or [np.zeros((0, n))]),  # (no hidden layer: no region rows)
                                         np.zeros((sum(len(b) for b in region_rhs), 1))])])
            b_ub = np.concatenate([rows.d - rows.H @ c_out] + region_rhs)
            res = linprog(np.r_[np.zeros(n), -1.0], A_ub=A_ub, b_ub=b_ub, bounds=list(zip(lo, hi)) + [(None, None)],
                          method="highs")
            if res.status != 0 or -res.fun <= best_t:
                return None
            best_t = -res.fun
            x = np.clip(res.x[:n], lo, hi)
            cex = self.consider(r, x[None], self.margins(r, x[None]))
            if cex is not None:
                return cex
        return None

    def run(self, deadline: float, *, samples: int = 256, restarts: int = RESTARTS_PER_TARGET, steps: int = STEPS,
            rounds: int | None = None) -> AttackOutcome:
        """Sample the low-dimensional regions, then PGD rounds over every region until `deadline`
        or `rounds` rounds (each round and region its share of the time left, at most `restarts`
        restarts per target); returns the first replayed counterexample, if any."""
        order = []
        for r in range(len(self.regions)):
            if self.past(deadline):
                return self.outcome(None)
            reg = self.regions[r]
            if self.free_inputs(r) <= LOW_DIM:  # a first sample within a tenth of the time left
                n = int(0.1 * max(deadline - self.clock(), 0.0) / self.search.seconds_per_row())
                cex = self.sample(r, max(1, min(samples, n))) or self.dense(r, deadline)
            else:  # the center only: uniform samples of a high-dimensional box are far from unsafe
                center = 0.5 * (reg.lo + reg.hi)[None]
                cex = self.consider(r, center, self.margins(r, center))
            if cex is not None:
                return self.outcome(cex)
            order.append(r)
        done = 0
        while not self.past(deadline) and (rounds is None or done < rounds):
            planned = max((rounds or ROUNDS) - done, 1)
            for k, r in enumerate(order):
                share = (deadline - self.clock()) / (planned * len(order) - k)
                cex = self.pgd_round(r, self.clock() + share, steps, first=done == 0, restarts=restarts)
                if cex is not None:
                    return self.outcome(cex)
                if self.past(deadline):
                    return self.outcome(None)
            done += 1
        return self.outcome(None)


def find_counterexample(net: Network, spec: Spec, reference: OnnxReference, *, seconds: float = 5.0,
                        seed: int = 0, rounds: int | None = None) -> AttackOutcome:
    """Random sampling plus PGD for up to `seconds`; a replayed counterexample or None."""
    return Falsifier(net, spec, reference, seed).run(time.perf_counter() + seconds, rounds=rounds)


__all__ = ["AttackOutcome", "Falsifier", "find_counterexample"]
