"""An independent proof of a MILP's dual bound: branch-and-bound over its integer variables with
safe LP bounds at every node.

A MILP solver's dual bound is a floating-point claim made under its tolerances (on badly scaled
models Gurobi and HiGHS have returned "optimal" bounds far below the true optimum). `prove_bound`
re-proves (or corrects) such a bound without trusting the solver: nodes are boxes of the integer
variables, each bounded by the model's LP relaxation with a weak-duality bound recomputed in
float64 (`solvers.lp.SafeLp`, Neumaier-Shcherbina), plus the model's objective rounding error.
Each node's LP is warm-started from its parent's basis; branching uses pseudo-costs.
Nodes whose bound is at most the target (the solver's widened bound) are closed; the proven bound
is the largest bound among closed nodes and open ones, so a wrong target only makes the proof
larger, never wrong, and a proof cut short by the deadline still returns a sound bound.

Diagonal positive semidefinite quadratic parts (the l2 models) are relaxed soundly: an objective
term q y^2 over y in [lo, hi] by its secant (lo + hi) q y - q lo hi (an overestimate), refined by
splitting [lo, hi]; a constraint sum q_k v_k^2 + a v <= r by tangent cuts g v + a v <= r +
sum g_k^2 / (4 q_k), valid for every g (the minimum of q v^2 - g v is -g^2 / (4q)).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ..lp import MilpModel, SafeLp
from ..rounding import round_up
from ..runtime import forkable_cores
from .engine import BabProgress, NodeBound, branch_and_bound
from .proof_workers import prove_subtrees, split_rule

INTEGRALITY = 1e-6
CUT_ROUNDS = 6
MAX_CUT_ROWS = 64  # the global cut pool stays small: every node's LP carries it
# the problem's phase bound is dropped after the root when it cost more than this many root LPs
# there. Measured root ratios: LipMIP's nets 1-2 (10-10-10-10-10-2: 3421 nodes with it vs 12,653
# LP-only, 23.6 s vs 26.0 s); digits MLPs (64 inputs, 512 output functionals) 13-20 with the linear
# Jacobian pass bounds, 0.2-0.5 without them (the node bound's choice there since): digits_64 x0
# 827 nodes in 9.1 s vs 7109 LP-only in 21.5 s (with them: 827 nodes in 84 s)
PHASE_COST_CAP = 6.0
# nodes branched per round when the root's phase bound cost at least PHASE_BATCH_RATIO root LPs,
# their children's phase bounds computed in one call (one process): LipMIP's 10-10-10-10-10-2
# (ratio 4.2) 26.6-32.6 s -> 12.8-17.4 s, same nodes within the runs' spread. Branching on
# pseudo-costs a round old moves the node count chaotically: cheaper phase bounds gain too little
# to risk it (ratios 0.5-2.0 measured: digits 32-32 1228 -> 3231 nodes with BATCH, 5-60-60-2
# 3555 -> 2977); LP-only trees gain nothing from a batch
BATCH = 8
PHASE_BATCH_RATIO = 3.0


@dataclass(frozen=True)
class _Node:
    bounds: tuple[tuple[int, float, float], ...]  # (variable, lo, hi) changed from the root
    parent_bound: float = math.inf
    branched: tuple[int, int] | None = None      # (variable, direction 0 down / 1 up)
    frac: float = 0.5
    basis: object = None                         # the parent's simplex basis (warm start)
    phase: float | None = None                   # the problem's `phase_bound` of the node, when known


@dataclass
class ProofResult:
    """`bound`: proven bound on the model's objective in its own sense (upper for "max", lower
    for "min"); `complete`: the tree was exhausted at the target (else the deadline cut it short)."""

    bound: float
    complete: bool
    nodes: int
    seconds: float
    stop: str
    lp_solves: int = 0
    notes: list[str] = field(default_factory=list)


class _MilpProof:
    def __init__(self, model: MilpModel, deadline: float | None, node_bound=None, phase_bound=None,
                 target: float = -math.inf) -> None:
        self.model = model
        self.node_bound = node_bound
        self.phase_bound = phase_bound
        self.use_phase = phase_bound is not None  # (dropped after the root when too costly)
        self.probe: list[float] = []              # the root's phase-bound and LP seconds
        self.batch = 1                            # nodes branched per round (`_probe` decides)
        self.notes: list[str] = []
        self.target = target  # in the engine's (maximising) sense
        self.sign = 1.0 if model.sense == "max" else -1.0
        self.c = self.sign * model.obj
        self.const = self.sign * model.obj_offset
        self.lp = SafeLp(model)
        self.root_lo, self.root_hi = model.col_lo.copy(), model.col_hi.copy()
        self.ints = np.flatnonzero(model.integer)
        self.applied: dict[int, tuple[float, float]] = {}
        self.deadline = deadline
        self.pc_sum = np.zeros((2, model.num_vars))
        self.pc_cnt = np.zeros((2, model.num_vars))
        self.q_vars, self.q_diag = _diagonal_psd(model.q_obj)
        if model.q_obj is not None and self.q_vars is None:
            raise ValueError("only diagonal positive semidefinite quadratic objectives can be proven")
        self.cuts = [_diagonal_psd(qc.Q) + (qc,) for qc in model.q_constraints]
        self.cut_rows = 0
        if any(v is None for v, _, _ in self.cuts):
            raise ValueError("only diagonal positive semidefinite quadratic constraints can be proven")
        if self.q_vars is not None and self.sign < 0:
            raise ValueError("a convex quadratic objective can only be proven for maximisation")

    def fresh(self) -> "_MilpProof":
        """A copy with its own LP and what this one learned (pseudo-costs, the phase-bound choice):
        a proof worker's, built after the fork."""
        other = _MilpProof(self.model, self.deadline, self.node_bound, self.phase_bound, self.target)
        other.pc_sum, other.pc_cnt = self.pc_sum.copy(), self.pc_cnt.copy()
        other.use_phase, other.probe, other.batch = self.use_phase, list(self.probe), self.batch
        return other

    # ------------------------------------------------------------------ engine hooks
    def root(self) -> _Node:
        return _Node(())

    def _apply(self, node: _Node) -> tuple[np.ndarray, np.ndarray]:
        want = {v: (lo, hi) for v, lo, hi in node.bounds}
        idx, lo, hi = [], [], []
        for v in set(self.applied) | set(want):
            b = want.get(v, (self.root_lo[v], self.root_hi[v]))
            if self.applied.get(v, (self.root_lo[v], self.root_hi[v])) != b:
                idx.append(v)
                lo.append(b[0])
                hi.append(b[1])
        if idx:
            self.lp.set_col_bounds(np.array(idx), np.array(lo), np.array(hi))
        self.applied = want
        return self.lp.col_lo, self.lp.col_hi

    def _objective(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, float, float]:
        """Linear objective of the node (secants for the quadratic part), its constant, and the
        rounding allowance of both."""
        if self.q_vars is None:
            return self.c, self.const, 0.0
        c = self.c.copy()
        v, q = self.q_vars, self.q_diag
        slope, icpt = q * (lo[v] + hi[v]), q * lo[v] * hi[v]
        c[v] += slope
        # q y^2 <= slope y - icpt exactly; rounded slope/icpt/sum are covered by this allowance
        ymax = np.maximum(np.abs(lo[v]), np.abs(hi[v]))
        slack = 4.0 * 2.0**-53 * float(np.sum((np.abs(slope) + np.abs(self.c[v])) * ymax + np.abs(icpt))) + 1e-300
        const = self.const - float(np.sum(icpt))
        return c, const, slack

    def _phase_bounds(self, nodes: list[_Node]) -> list[_Node]:
        """The nodes with their `phase_bound`s, computed in one vectorised call."""
        lo = np.repeat(self.root_lo[None, :], len(nodes), axis=0)
        hi = np.repeat(self.root_hi[None, :], len(nodes), axis=0)
        for k, node in enumerate(nodes):
            for v, a, b in node.bounds:
                lo[k, v], hi[k, v] = a, b
        values = self.sign * np.asarray(self.phase_bound(lo, hi), dtype=np.float64)
        return [replace(node, phase=float(v)) for node, v in zip(nodes, values)]

    def bound(self, node: _Node) -> NodeBound:
        t0 = time.perf_counter()
        if self.use_phase and node.phase is None:
            node = self._phase_bounds([node])[0]
        phase_seconds = time.perf_counter() - t0
        if self.use_phase and not self.probe:
            # the root's first phase bound carries one-time costs (LipMIP's 10-10-10-10-10-2: 12-22 ms,
            # then 8.6-10.6 ms against a root LP of 2.5-2.8 ms: the cap of 6 LPs was met by chance,
            # and the proof took 18,643 nodes instead of 3,091): the probe times a second one too
            t1 = time.perf_counter()
            self._phase_bounds([node])
            phase_seconds = min(phase_seconds, time.perf_counter() - t1)
        lo, hi = self._apply(node)
        cheap = math.inf
        if node.phase is not None:
            # the problem's own bound of the node first: at or below the target, no LP is needed
            cheap = node.phase
            if cheap <= self.target:
                return NodeBound(cheap, leaf=True)
        if self.deadline is not None:
            self.lp.set_time_limit(max(self.deadline - time.perf_counter(), 1e-3))
        c, const, slack = self._objective(lo, hi)
        t2 = time.perf_counter()
        out = self.lp.maximize(c, basis=node.basis)
        if self.use_phase and not self.probe:
            self._probe(phase_seconds, time.perf_counter() - t2)
            if not self.use_phase:
                cheap = math.inf  # the tree's pseudo-costs compare LP bounds with LP bounds
        cuts_ok = not self.cuts
        for _ in range(CUT_ROUNDS if self.cuts and out.x is not None and self.cut_rows < MAX_CUT_ROWS else 0):
            if not self._add_cuts(out.x):
                cuts_ok = True
                break
            out = self.lp.maximize(c)
            if out.x is None:  # the cuts made the node infeasible (or the LP failed): nothing left to cut
                break
        upper = min(self._finish(out.bound, const, slack), cheap)
        if node.branched is not None and math.isfinite(node.parent_bound) and math.isfinite(upper):
            v, d = node.branched
            self.pc_sum[d, v] += max(node.parent_bound - upper, 0.0) / max(node.frac, 1e-6)
            self.pc_cnt[d, v] += 1
        if out.infeasible:
            return NodeBound(-math.inf, leaf=True)
        fixed = bool(np.all(lo[self.ints] == hi[self.ints]))
        if self.node_bound is not None and (self.q_vars is not None or self.cuts):
            # the problem's own bound of the node (exact for a full assignment): quadratic parts
            upper = min(upper, self.sign * self.node_bound(lo, hi))
            if fixed:
                return NodeBound(upper, leaf=True)
        secant_gap = 0.0 if self.q_vars is None else float(np.sum(self.q_diag * (hi[self.q_vars] - lo[self.q_vars]) ** 2)) / 4
        leaf = fixed and cuts_ok and secant_gap <= 1e-12 * max(abs(upper), 1e-300)
        lower = -math.inf
        if out.x is not None and self.q_vars is None and not self.cuts:
            xi = out.x[self.ints]
            if np.all(np.abs(xi - np.round(xi)) <= INTEGRALITY):
                lower = float(self.c @ out.x + self.const)  # a pruning hint only (not replayed)
        return NodeBound(upper, lower, leaf, (out.x, out.y, c, const, slack, None if leaf else self.lp.basis()))

    def _probe(self, phase_seconds: float, lp_seconds: float) -> None:
        """At the root: keep the phase bounds only if one costs at most PHASE_COST_CAP LPs, and
        batch them when one costs at least PHASE_BATCH_RATIO LPs (choices of speed only: every
        node keeps a sound bound either way)."""
        self.probe = [phase_seconds, lp_seconds]
        if phase_seconds >= PHASE_BATCH_RATIO * max(lp_seconds, 1e-4):
            self.batch = BATCH
        if phase_seconds > PHASE_COST_CAP * max(lp_seconds, 1e-4):
            self.use_phase = False
            self.notes.append(f"proof: phase bounds off after the root (one took {1e3 * phase_seconds:.1f} ms, the root LP "
                              f"{1e3 * lp_seconds:.1f} ms); its nodes are bounded by safe LPs alone")

    def _finish(self, lp_bound: float, const: float, slack: float) -> float:
        if not math.isfinite(lp_bound):
            return lp_bound
        total = lp_bound + const + slack + self.model.obj_err
        return round_up(total, abs(lp_bound) + abs(const) + slack + self.model.obj_err, 4)

    def branch(self, node: _Node, nb: NodeBound, prune_level: float):
        return self.branch_many([(node, nb)], prune_level)[0]

    def batch_size(self) -> int:
        """Nodes per round of the engine (`batch` while phase bounds are on)."""
        return self.batch if self.use_phase else 1

    def bound_many(self, nodes: list[_Node]) -> list[NodeBound]:
        """The engine's batched hook: each node's LP in turn (warm-started from its parent's basis)."""
        return [self.bound(node) for node in nodes]

    def branch_many(self, items: list[tuple[_Node, NodeBound]], prune_level: float) -> list[list[tuple[_Node, float | None]]]:  # noqa: ARG002
        """The children of several nodes, with the phase bounds of all of them from one call (its
        fixed cost paid once per round)."""
        groups = [self._children(node, nb) for node, nb in items]
        if not self.use_phase or not groups:
            return [[(child, None) for child in kids] for kids in groups]
        # (one at or below the prune level is closed unbounded)
        bounded = iter(self._phase_bounds([child for kids in groups for child in kids]))
        return [[(child := next(bounded), child.phase) for _ in kids] for kids in groups]

    def _children(self, node: _Node, nb: NodeBound) -> list[_Node]:
        x, y, c, const, slack, basis = nb.data
        lo, hi = (a.copy() for a in self._apply(node))
        free = self.ints[lo[self.ints] < hi[self.ints]]
        children = []
        if free.size:
            v, split, frac = self._choose(free, x, lo, hi)
            for d, (clo, chi) in enumerate(((lo[v], split), (split + 1.0, hi[v]))):
                bounds = _replace(node.bounds, v, clo, chi)
                children.append(_Node(bounds, nb.upper, (v, d), frac if d == 0 else 1 - frac, basis))
            return children
        # every integer is fixed: split the quadratic variable with the widest secant gap (or the
        # widest variable of a quadratic constraint, whose cuts then tighten)
        spatial = [(self.q_vars, self.q_diag)] if self.q_vars is not None else []
        spatial += [(vars_, q) for vars_, q, _ in self.cuts]
        cand = np.concatenate([v for v, _ in spatial])
        weight = np.concatenate([q * (hi[v] - lo[v]) ** 2 for v, q in spatial])
        v = int(cand[np.argmax(weight)])
        mid = 0.5 * (lo[v] + hi[v])
        if x is not None:
            mid = float(np.clip(x[v], lo[v] + 0.25 * (hi[v] - lo[v]), hi[v] - 0.25 * (hi[v] - lo[v])))
        return [_Node(_replace(node.bounds, v, lo[v], mid), nb.upper, basis=basis),
                _Node(_replace(node.bounds, v, mid, hi[v]), nb.upper, basis=basis)]

    def _choose(self, free: np.ndarray, x: np.ndarray | None, lo: np.ndarray, hi: np.ndarray) -> tuple[int, float, float]:
        """Pseudo-cost branching on fractional variables (most fractional before costs are known)."""
        if x is None:
            v = int(free[0])
            return v, float(lo[v]), 0.5
        xv = np.clip(x[free], lo[free], hi[free])
        f = xv - np.floor(xv)
        frac = (f > INTEGRALITY) & (f < 1 - INTEGRALITY)
        if not np.any(frac):
            v = int(free[np.argmax(np.abs(self.c[free]))]) if np.any(self.c[free]) else int(free[0])
            return v, float(lo[v]), 0.5
        cand, fc = free[frac], f[frac]
        mean = [self.pc_sum[d].sum() / self.pc_cnt[d].sum() if self.pc_cnt[d].sum() else 1.0 for d in (0, 1)]
        cost = [np.where(self.pc_cnt[d, cand] > 0, self.pc_sum[d, cand] / np.maximum(self.pc_cnt[d, cand], 1), mean[d])
                for d in (0, 1)]
        score = np.maximum(cost[0] * fc, 1e-9) * np.maximum(cost[1] * (1 - fc), 1e-9)
        k = int(np.argmax(score))
        v = int(cand[k])
        return v, float(np.floor(xv[frac][k])), float(fc[k])

    def _add_cuts(self, x: np.ndarray) -> bool:
        """Tangent cuts of the violated quadratic constraints at x; False when none is violated."""
        added = False
        for vars_, q, qc in self.cuts:
            value = float(np.sum(q * x[vars_] ** 2) + qc.a @ x)
            if value <= qc.rhs * (1 + 1e-9) + 1e-12:
                continue
            g = 2.0 * q * x[vars_]
            row = sp.csr_matrix((g, (np.zeros(vars_.size, dtype=int), vars_)), shape=(1, self.model.num_vars)) + sp.csr_matrix(qc.a)
            extra = float(np.sum(g * g / (4.0 * q)))
            rhs = round_up(qc.rhs + extra, abs(qc.rhs) + extra, vars_.size + 2)
            self.lp.add_rows(row, np.array([-np.inf]), np.array([rhs]))
            self.cut_rows += 1
            added = True
        return added


def _replace(bounds: tuple, v: int, lo: float, hi: float) -> tuple:
    return tuple(b for b in bounds if b[0] != v) + ((v, float(lo), float(hi)),)


def _diagonal_psd(Q: sp.spmatrix | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    if Q is None:
        return None, None
    Q = sp.coo_matrix(Q)
    if np.any(Q.row != Q.col) or np.any(Q.data < 0):
        return None, None
    keep = Q.data > 0
    return Q.row[keep].astype(np.int64), Q.data[keep].astype(np.float64)


def prove_bound(
    model: MilpModel,
    target: float | None = None,
    *,
    deadline: float | None = None,
    progress=None,
    node_bound=None,
    phase_bound=None,
    workers: int = 1,
    available=None,
) -> ProofResult:
    """Prove (or correct) a bound on `model`'s optimum: for "max" an upper bound, for "min" a lower
    bound, in the model's own objective units. `target` is the claimed bound (e.g. a MILP solver's
    widened dual bound): nodes at or beyond it are closed. Without a target the search runs to its
    own optimum (or the deadline). `node_bound(col_lo, col_hi)`, when given, returns a sound bound
    on the objective (in the model's sense) over the solutions within those column bounds; it
    tightens the nodes of models with quadratic parts and closes their leaves.

    `phase_bound(col_lo, col_hi)`, when given, returns for a batch of nodes ((B, num_vars) column
    bounds) sound bounds (B values, in the model's sense) on the quantity the model stands for
    (e.g. a Lipschitz constant in the objective's units) over each node, computed before the LPs
    (the children of one branching in one call, or of up to BATCH branchings where the root's
    phase bound cost at least PHASE_BATCH_RATIO root LPs). A node bounded at or below the
    target is closed without an LP, the others keep the smaller of both bounds (the LP decides the
    fully fixed ones: the problem's bound may not see that their region is empty). The proven
    bound then holds for that quantity (which the model's optimum may exceed, e.g. at ties of
    ReLU phases). When the root's phase bound costs more than PHASE_COST_CAP root LPs, the rest of
    the tree is bounded by its LPs alone (a note says so).

    `workers` > 1: once the tree is large enough, its open subtrees are proven on up to that many
    forked processes (`proof_workers`; `available()`, when given, says how many may run now), for
    a proof against a target of a linear model (no cut rows: each worker has its own LP)."""
    t0 = time.perf_counter()
    if deadline is not None and time.perf_counter() >= deadline:
        # no time for even the root LP: callers fall back to a bound they already hold
        sign = 1.0 if model.sense == "max" else -1.0
        return ProofResult(sign * math.inf, False, 0, 0.0, "time_limit")
    sign = 1.0 if model.sense == "max" else -1.0
    tgt = -math.inf if target is None else sign * float(target)
    problem = _MilpProof(model, deadline, node_bound, phase_bound, tgt)

    def report(ev: BabProgress) -> None:
        if progress is not None:
            progress(BabProgress(sign * ev.lower, sign * ev.upper, ev.nodes, ev.open_nodes, ev.seconds))

    workers = min(int(workers), forkable_cores()) if target is not None and not problem.cuts else 1
    res = branch_and_bound(problem, target=tgt, deadline=deadline, progress=report if progress else None,
                           gap=None if target is not None else 1e-9, split_when=split_rule(workers),
                           batch=problem.batch_size)
    if res.stop != "split":
        return ProofResult(sign * res.upper, res.complete, res.nodes, time.perf_counter() - t0, res.stop, problem.lp.solves,
                           problem.notes)
    sub = prove_subtrees(problem, res.open_entries, target=tgt, lower=res.lower, closed=res.closed_bound,
                         deadline=deadline, workers=workers, available=available, nodes0=res.nodes,
                         progress=report if progress else None)
    notes = problem.notes + [f"proof: {len(res.open_entries)} subtrees on {sub.workers} worker process(es) after "
                             f"{res.nodes} nodes"]
    notes += [f"a proof worker failed ({e}); its subtree was searched again" for e in sub.errors]
    return ProofResult(sign * sub.upper, sub.complete, res.nodes + sub.nodes, time.perf_counter() - t0, sub.stop,
                       problem.lp.solves + sub.lp_solves, notes)


__all__ = ["ProofResult", "prove_bound"]
