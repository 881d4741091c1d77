"""Falsification: random sampling then PGD on the unsafe constraints, seeded and time-bounded.

For each clause (rows G x + H y <= d) we minimise the hinge loss  sum_r max(0, G_r x + H_r y - d_r
+ kappa_r)  over the clause's input box by signed-gradient steps projected on the box (the input
rows are part of the loss). kappa_r asks for a little slack so that the point survives float32
evaluation in onnxruntime. Gradients are exact numpy backprop through the fused float64 IR (no
torch). Every point with a non-negative margin is replayed (`check_counterexample`); only a
replayed point is returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from models.ir import Network
from models.memory import fits
from models.onnx_reference import OnnxReference
from solvers.batch_net import BatchNet
from solvers.runtime import past

from .counterexample import Counterexample, check_counterexample
from .spec import Spec


@dataclass
class AttackOutcome:
    counterexample: Counterexample | None
    best_margin: float  # largest unsafe margin seen at an evaluated point of the input set (IR)
    best_x: np.ndarray | None
    points: int  # points evaluated


class Falsifier:
    """Sampling + PGD over every region of a spec, keeping the best margin seen."""

    def __init__(self, net: Network, spec: Spec, reference: OnnxReference, seed: int = 0) -> None:
        self.net, self.spec, self.reference = net, spec, reference
        self.batch = BatchNet(net)
        self.rng = np.random.default_rng(seed)
        self.regions = spec.regions()
        index = {id(d): k for k, d in enumerate(spec.disjuncts)}
        self.clause_ids = [[index[id(c)] for c in r.clauses] for r in self.regions]
        self.best_margin = -np.inf
        self.best_x: np.ndarray | None = None
        self.points = 0
        self.replays = 0

    # ---------------------------------------------------------------- evaluation
    def margins(self, r: int, X: np.ndarray) -> np.ndarray:
        """(B, clauses) unsafe margins of the points X (inside region r's box) in the IR."""
        Y, _ = self.batch.forward(X)
        self.points += len(X)
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
        2) are missed by PGD's signed steps but land near some of a million samples."""
        reg = self.regions[r]
        # the batch within the memory budget (65,536 points of a wide net's layers would not fit)
        batch = self.batch.rows(batch)
        # (issue 29, a stopgap until the attack's rewrite: a batch of about 1e9 multiply-adds at most, so
        # that the time check between batches holds on wide nets: 65,536 CIFAR points took 20 s)
        batch = max(1, min(batch, int(1e9 / sum(blk.weight.size for blk in self.batch.blocks))))
        stop = time.perf_counter() + share * max(deadline - time.perf_counter(), 0.0)
        keep_x, keep_m = np.zeros((0, reg.dim)), np.zeros((0, len(reg.clauses)))
        while not past(stop):  # (Ctrl-C and the command deadline stop it too)
            X = self.rng.uniform(reg.lo, reg.hi, size=(batch, reg.dim))
            M = self.margins(r, X)
            cex = self.consider(r, X, M)
            if cex is not None:
                return cex
            top = np.unique(np.argsort(-M, axis=0)[:polish].ravel())
            keep_x, keep_m = np.vstack([keep_x, X[top]]), np.vstack([keep_m, M[top]])
        for c in range(len(reg.clauses)):
            for i in np.argsort(-keep_m[:, c])[:polish] if len(keep_m) else []:
                if past(deadline):
                    return None
                cex = self.lp_polish(r, c, keep_x[i], reg.lo, reg.hi)
                if cex is not None:
                    return cex
        return None

    def pgd(self, r: int, clause: int, starts: np.ndarray, steps: int, deadline: float,
            lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> Counterexample | None:
        """PGD on one clause of region r from `starts`, within [lo, hi] (default the region's box)."""
        reg = self.regions[r]
        lo = reg.lo if lo is None else lo
        hi = reg.hi if hi is None else hi
        rows = reg.clauses[clause].rows
        X = np.clip(starts, lo, hi)
        if rows.count == 0:
            return self.consider(r, X, self.margins(r, X))
        kappa = 1e-5 * (1.0 + np.abs(rows.d))
        width = hi - lo
        for t in range(steps):
            Y, masks = self.batch.forward(X)
            viol = X @ rows.G.T + Y @ rows.H.T - rows.d + kappa  # (B, k) > 0: row not yet satisfied
            active = (viol > 0).astype(np.float64)
            gX = active @ rows.G + self.batch.backward(masks, active @ rows.H)
            step = 0.1 * (1.0 - t / steps) + 0.002
            X = np.clip(X - step * width * np.sign(gX), lo, hi)
            if t % 10 == 9 or t == steps - 1:
                cex = self.consider(r, X, self.margins(r, X))
                if cex is not None or past(deadline):
                    return cex
        return None

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
                              np.hstack([np.vstack(region_rows), np.zeros((sum(len(b) for b in region_rhs), 1))])])
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

    def run(self, deadline: float, *, samples: int = 256, restarts: int = 16, steps: int = 60,
            rounds: int | None = None) -> AttackOutcome:
        """Sample every region, then PGD rounds (most promising clauses first) until `deadline`
        or `rounds` rounds; returns the first replayed counterexample, if any."""
        order = []
        for r in range(len(self.regions)):
            if past(deadline):
                return self.outcome(None)
            cex = self.sample(r, samples) or self.dense(r, deadline)
            if cex is not None:
                return self.outcome(cex)
            order.append(r)
        done = 0
        while not past(deadline) and (rounds is None or done < rounds):
            for r in order:
                reg = self.regions[r]
                for c in range(len(reg.clauses)):
                    starts = self.rng.uniform(reg.lo, reg.hi, size=(self.batch.rows(restarts), reg.dim))
                    if self.best_x is not None and done == 0 and np.all(self.best_x >= reg.lo) and np.all(self.best_x <= reg.hi):
                        starts[0] = self.best_x
                    cex = self.pgd(r, c, starts, steps, deadline)
                    if cex is not None:
                        return self.outcome(cex)
                    if past(deadline):
                        return self.outcome(None)
            done += 1
        return self.outcome(None)


def find_counterexample(net: Network, spec: Spec, reference: OnnxReference, *, seconds: float = 5.0,
                        seed: int = 0, rounds: int | None = None) -> AttackOutcome:
    """Random sampling plus PGD for up to `seconds`; a replayed counterexample or None."""
    return Falsifier(net, spec, reference, seed).run(time.perf_counter() + seconds, rounds=rounds)


__all__ = ["AttackOutcome", "Falsifier", "find_counterexample"]
