"""Lower bounds of one Lipschitz question: sampled points and replayed solver solutions.

Every value kept here is the norm of an exact Jacobian at a point of the box where the network is
certified differentiable (`replay`), so it is a sound lower bound whatever produced the point.
The same object supplies warm starts to the MILP and the `refine` hook of the sound-solve policy:
when the solver's optimum has no replayable witness and its activation pattern provably has no
interior in the box (a tie pattern), the pattern is cut and the MILP re-solved (the constant is a
supremum over full-dimensional regions, so this keeps every bound sound).
"""

from __future__ import annotations


import numpy as np

from models.box import Box
from models.ir import Network
from solvers.bounds.types import relu_blocks
from solvers.lp import MilpModel
from solvers.milp.lipschitz import LipschitzMilp
from solvers.milp.result import MilpResult
from solvers.regions import has_no_interior, interior_point
from solvers.runtime import Budget, past

from .options import NormQuestion
from .replay import DifferentiablePoint, differentiable_point, direction_pair, norm_estimates, norm_lower, sample_lower

# no-good cuts of degenerate (tie) activation patterns per question without a time limit; with one,
# cutting goes on while time remains (it converges: finitely many patterns, each cut once)
MAX_CUTS = 20


class WitnessSearch:
    """The best replayed lower bound of one question (and its point and direction)."""

    def __init__(self, net: Network, box: Box, question: NormQuestion, budget: Budget) -> None:
        self.net, self.box, self.question, self.budget = net, box, question, budget
        self.blocks = relu_blocks(net)
        self.lower = 0.0
        self.point: DifferentiablePoint | None = None
        self.direction: np.ndarray | None = None
        self._replayed: dict = {}  # (model, pair, solution) -> value: the policy replays before the proof and refines
        self.cuts = 0
        self.exact_witness = False  # the best witness was replayed in rationals

    def sample(self, samples: int = 32) -> None:
        q = self.question
        lo, hi = np.array(self.box.lo), np.array(self.box.hi)
        self.lower, self.point = sample_lower(self.net, lo, hi, q.p, q.q, q.target, samples=samples, blocks=self.blocks,
                                              deadline=self.budget.stage(0.05))

    def value(self, pt: DifferentiablePoint, pair: tuple[str, str | None], hint=None, side: str = "input") -> float:
        return norm_lower(pt, pair[0], pair[1], self.question.target, hint=hint, hint_side=side)

    def replay(self, milp: LipschitzMilp, pair: tuple[str, str | None], v: np.ndarray) -> float:
        """Replay a solver solution; returns the best value for `pair` (which may be a norm pair
        of an l2 interpolation, not the question's own) and updates the question's lower bound."""
        key = (id(milp.model), pair, np.asarray(v, dtype=np.float64).tobytes())
        if key in self._replayed:
            return self._replayed[key]
        q = self.question
        own = pair == (q.p, q.q)
        hint = milp.direction(v) if own else None
        side = "input" if milp.formulation == "forward" else "output"
        best = 0.0
        for pt in self._points(milp, v):
            val = self.value(pt, (q.p, q.q), hint, side)
            if val > self.lower or self.point is None:
                self.lower, self.point, self.direction, self.exact_witness = val, pt, hint, False
            best = max(best, val if own else self.value(pt, pair))
        self._replayed[key] = best
        return best

    def why_short(self, milp: LipschitzMilp, v: np.ndarray, replayed: float) -> str:
        """Why a solver solution replayed below its objective: a tie pattern, or the solver's value."""
        lo, hi = np.array(self.box.lo), np.array(self.box.hi)
        inside = interior_point(self.net, milp.pattern(v), lo, hi, deadline=self.budget.deadline)
        if inside is None and self.budget.expired():  # (its LP may have been cut short)
            return f"points near it replay to {replayed:.9g}; its region was not examined: the time limit had passed"
        if inside is None:
            return ("its activation pattern has no interior point in the box (a tie of ReLU phases that the MILP "
                    f"relaxes); points near it replay to {replayed:.9g}")
        return (f"the exact Jacobian inside its activation pattern's region gives {replayed:.9g}: the solver's "
                "objective value rests on its tolerances")

    def _points(self, milp: LipschitzMilp, v: np.ndarray) -> list[DifferentiablePoint]:
        """Certified-differentiable points replaying the solution's activation pattern: the
        Chebyshev centre of the pattern's region, else (a tie pattern) the solver's point and
        small random perturbations of it."""
        lo, hi = np.array(self.box.lo), np.array(self.box.hi)
        x0 = interior_point(self.net, milp.pattern(v), lo, hi, deadline=self.budget.deadline)
        if x0 is not None:
            pt = differentiable_point(self.net, x0, self.blocks)
            if pt is not None:
                return [pt]
        xs = np.clip(milp.point(v), lo, hi)
        rng = np.random.default_rng(0)
        candidates = [xs] + [np.clip(xs + s * (hi - lo) * rng.uniform(-1, 1, xs.size), lo, hi)
                             for s in (1e-7, 1e-5, 1e-3) for _ in range(4)]
        out = []
        for x in candidates:
            if self.budget.expired():
                break
            pt = differentiable_point(self.net, x, self.blocks)
            if pt is not None:
                out.append(pt)
        return out

    def offer(self, x: np.ndarray) -> float:
        """Replay the point x of the box (kept when it beats the lower bound); its value, or -inf
        when x is not certified differentiable."""
        return _value_at(self, np.clip(np.asarray(x, dtype=np.float64), self.box.lo, self.box.hi), self.question)

    def offer_exact(self, x: np.ndarray, jacobian: np.ndarray, pattern: list[np.ndarray]) -> float:
        """Keep a witness replayed in exact arithmetic (`solvers.exact_witness`: x is the float
        rounding of a rational point strictly inside `pattern`'s region, `jacobian` that region's
        exact Jacobian rounded entrywise, an error the replay's allowance covers); its value."""
        pt = DifferentiablePoint(np.asarray(x, dtype=np.float64), jacobian, np.abs(jacobian), pattern, 1)
        val = self.value(pt, (self.question.p, self.question.q))
        if val > self.lower or self.point is None:
            self.lower, self.point, self.exact_witness = val, pt, True
        return val

    def start(self, milp: LipschitzMilp, pair: tuple[str, str | None]) -> np.ndarray | None:
        """A warm start for `milp`: the best point so far with its pattern and best direction."""
        rem = self.budget.remaining()
        if self.point is None or self.budget.expired() or (rem is not None and rem < 1.0):
            return None
        w, c = direction_pair(self.point.jacobian, pair[0], pair[1], self.question.target)
        limit = 5.0 if rem is None else min(5.0, 0.1 * rem)
        return milp.start(self.point.x, self.point.pattern, w if milp.formulation == "forward" else c, limit)

    def check_point(self, net_bounds, milp: LipschitzMilp):
        """The policy's `check_point` hook: a solver point must respect the sound bounds."""
        def check(v: np.ndarray) -> str | None:
            x = np.clip(milp.point(v), net_bounds.lo, net_bounds.hi)
            for j, z in enumerate(self.net.preactivations(x)):
                tol = 1e-9 * (1.0 + np.abs(net_bounds.pre_lo[j]) + np.abs(net_bounds.pre_hi[j]))
                if np.any(z < net_bounds.pre_lo[j] - tol) or np.any(z > net_bounds.pre_hi[j] + tol):
                    return f"ReLU layer {j}"
            return None
        return check

    def refine(self, holder: list[LipschitzMilp], pair: tuple[str, str | None], mip_gap: float):
        """The policy's `refine` hook for the MILP in holder[0] (replaced when a pattern is cut)."""
        def hook(model: MilpModel, res: MilpResult) -> MilpModel | None:
            milp = holder[0]
            sub_lower = self.replay(milp, pair, res.x)
            if (res.bound is None or closed(sub_lower, milp.to_lipschitz(res.bound), mip_gap)
                    or (self.cuts >= MAX_CUTS and self.budget.deadline is None) or milp.num_binaries == 0
                    or self.budget.expired()):
                return None
            # the optimum has no replayable witness: cut its pattern if its region has no interior
            lo, hi = np.array(self.box.lo), np.array(self.box.hi)
            pattern = milp.pattern(res.x)
            deadline = self.budget.deadline
            if (interior_point(self.net, pattern, lo, hi, deadline=deadline) is not None
                    or not has_no_interior(self.net, pattern, lo, hi, deadline=deadline)):
                return None
            holder[0] = milp.without_pattern(res.x)
            self.cuts += 1
            return holder[0].model
        return hook

    def seconds_left(self) -> float | None:
        rem = self.budget.remaining()
        return None if rem is None else max(rem, 0.0)


def closed(lower: float, upper: float, mip_gap: float) -> bool:
    """Do lower and upper meet up to the MIP gap (at least 1e-7 relative, for round-off)?"""
    return upper - lower <= 1.5 * max(mip_gap, 1e-7) * abs(upper) + 1e-300



def walk_regions(search: WitnessSearch, deadline: float | None, starts: int = 16, steps: int = 30,
                 seed: int = 0, pool: int = 256, rounds: int = 8) -> None:
    """Stronger lower bounds: dense sampling and a batched local search (`dense_ascent`, about
    half the time; above ASCENT_DIM inputs the smoothed gradient ascent `smooth_ascent` instead),
    then hill-climbing across activation regions from the best points found.

    ||J|| is constant on each region, so gradients say nothing; instead, from a point x the walk
    crosses the nearest region boundaries (the hyperplanes z_i = 0 of neurons close to 0, stepping
    just past them along grad z_i) and moves to the neighbouring region whose Jacobian norm is
    largest, while that improves. Every value kept is a replayed witness (`WitnessSearch.value`)."""
    import time

    q = search.question
    rng = np.random.default_rng(seed)
    lo, hi = np.array(search.box.lo), np.array(search.box.hi)
    blocks = search.blocks
    half = None if deadline is None else time.perf_counter() + DENSE_SHARE * max(deadline - time.perf_counter(), 0.0)
    search_of = smooth_ascent if high_dimensional(search.box) else dense_ascent
    best = search_of(search, half, seed=seed)
    points = ([search.point.x] if search.point is not None else []) + list(best[: starts // 2])
    if not _climb(search, points, q, blocks, lo, hi, steps, deadline):
        return
    for r in range(rounds):
        # start from the best of a fresh random pool (estimated together, replayed by the climb)
        pool_x = rng.uniform(lo, hi, (pool, lo.size))
        vals = norm_estimates(blocks, pool_x, q.p, q.q, q.target, np.float32)
        if not _climb(search, list(pool_x[np.argsort(-vals)[:starts]]), q, blocks, lo, hi, steps, deadline):
            return


DENSE_SHARE = 0.5     # of the walk's time for `dense_ascent`
DENSE_SAMPLES = 16384  # points of the box whose Jacobian norms are estimated together
DENSE_STARTS = 8       # best of them improved by the batched local search ...
DENSE_ROUNDS = 40      # ... for at most this many rounds ...
DENSE_POP = 128        # ... of this many perturbations each


def dense_ascent(search: WitnessSearch, deadline: float | None, samples: int = DENSE_SAMPLES,
                 starts: int = DENSE_STARTS, rounds: int = DENSE_ROUNDS, pop: int = DENSE_POP,
                 seed: int = 0, box: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Dense sampling of the box (or of `box`, a sub-box of the question's: its points are
    witnesses of the question all the same), then a batched (1+pop) evolution strategy from the
    best points; returns the final points, best first. Jacobian norms are estimated in float32 over the whole
    batch (`norm_estimates`: ranking only, half the time at most for the sampling); the final
    points and the best samples are replayed (`_value_at`), the only values kept."""
    import time

    q = search.question
    rng = np.random.default_rng(seed + 1)
    lo, hi = (np.array(search.box.lo), np.array(search.box.hi)) if box is None else (np.asarray(box[0]), np.asarray(box[1]))
    width = hi - lo
    blocks = search.blocks
    n = lo.size

    # a chunk costs about 2e7 multiply-adds (the Jacobians from the smaller side); without a
    # deadline the sampling and the search each stop after about 1e9
    side = min(blocks[-1].weight.shape[0], n)
    per_point = side * sum(b.weight.size for b in blocks) + 1
    chunk = int(np.clip(2e7 // per_point, 4, 4096))
    if deadline is None:
        samples = int(min(samples, max(1e9 // per_point, 64)))
    starts = min(starts, samples)
    pop = int(max(2, min(pop, 4 * chunk // max(starts, 1))))  # a round: about four chunks
    if deadline is None:
        rounds = int(min(rounds, max(1e9 // (per_point * starts * pop), 4)))

    def estimate(X: np.ndarray) -> np.ndarray:
        v = np.concatenate([norm_estimates(blocks, X[k: k + chunk], q.p, q.q, q.target, np.float32)
                            for k in range(0, X.shape[0], chunk)]).astype(np.float64)
        return np.nan_to_num(v, nan=-np.inf, posinf=-np.inf)

    def late(until: float | None) -> bool:  # (Ctrl-C and the command deadline count too)
        return past(until)

    t0 = time.perf_counter()
    sample_until = None if deadline is None else t0 + 0.5 * max(deadline - t0, 0.0)
    X_best = np.empty((0, n))
    v_best = np.empty(0)
    done = 0
    while done < samples and not (done and late(sample_until)):
        m = min(chunk, samples - done)
        X = rng.uniform(lo, hi, (m, n))
        # a quarter of the points on faces of the box (each coordinate at a bound with prob. 1/4)
        face = rng.random((m, n)) < 0.25
        face[: 3 * m // 4] = False
        X = np.where(face, np.where(rng.random((m, n)) < 0.5, lo, hi), X)
        v = estimate(X)
        keep = np.argsort(-v)[: 4 * starts]
        X_best, v_best = np.vstack([X_best, X[keep]]), np.concatenate([v_best, v[keep]])
        order = np.argsort(-v_best)[: 4 * starts]
        X_best, v_best = X_best[order], v_best[order]
        done += m
    for x in X_best[:starts]:
        _value_at(search, x, q)
    cur, val = X_best[:starts].copy(), v_best[:starts].copy()
    k = cur.shape[0]
    sigma = np.full(k, 0.1)
    for _ in range(rounds):
        if k == 0 or late(deadline):
            break
        steps = sigma[:, None, None] * width * rng.standard_normal((k, pop, n))
        Y = np.clip(cur[:, None, :] + steps, lo, hi)
        ev = estimate(Y.reshape(-1, n)).reshape(k, pop)
        b = np.argmax(ev, axis=1)
        gain = ev[np.arange(k), b] > val * (1 + 1e-9)
        cur[gain], val[gain] = Y[np.arange(k), b][gain], ev[np.arange(k), b][gain]
        sigma = np.clip(np.where(gain, 1.5 * sigma, 0.5 * sigma), 1e-7, 0.5)
    order = np.argsort(-val)
    cur = cur[order]
    for x in cur:
        _value_at(search, x, q)
    return cur


ASCENT_DIM = 16       # above this many inputs `smooth_ascent` replaces `dense_ascent` (random points and
                      # perturbations almost never change the activation region in 784 dimensions)
ASCENT_RESTARTS = 32  # restarts of one smoothed ascent (one float32 batch)
ASCENT_REPLAYS = 4    # its best end points replayed


def high_dimensional(box: Box) -> bool:
    """More than ASCENT_DIM free inputs: witnesses come from `smooth_ascent`."""
    return int(np.sum(np.asarray(box.hi) > np.asarray(box.lo))) > ASCENT_DIM


def smooth_ascent(search: WitnessSearch, deadline: float | None, seed: int = 0,
                  box: tuple[np.ndarray, np.ndarray] | None = None, restarts: int = ASCENT_RESTARTS) -> np.ndarray:
    """Witnesses from a gradient ascent on a smoothed Jacobian norm (`solvers.jacobian_ascent`)
    over the question's box (or `box`, a sub-box of it), from its centre, the best witness so far
    (when inside) and random points; the best end points are replayed (`_value_at`), the only
    values kept. Returns the end points, best first. Falls back to `dense_ascent` when the
    search's float32 copy of the weights does not fit in the memory budget."""
    from models.memory import fits
    from solvers.jacobian_ascent import ascend

    q = search.question
    lo, hi = (np.array(search.box.lo), np.array(search.box.hi)) if box is None else (np.asarray(box[0]), np.asarray(box[1]))
    weights = [b.weight for b in search.blocks]
    # (the float32 weights, a few (restarts, m, width) products and the partial products of every layer)
    if not fits(4.0 * sum(w.size for w in weights) + 4.0 * restarts * weights[-1].shape[0]
                * (8 * max(max(w.shape) for w in weights) + sum(w.shape[1] for w in weights))):
        return dense_ascent(search, deadline, seed=seed, box=box)
    rng = np.random.default_rng(seed)
    starts = [0.5 * (lo + hi)]
    if search.point is not None and np.all((search.point.x >= lo) & (search.point.x <= hi)):
        starts.append(search.point.x)
    starts = np.vstack(starts + [rng.uniform(lo, hi, (max(restarts - len(starts), 1), lo.size))])
    X, _ = ascend(weights, [b.bias for b in search.blocks], lo, hi, starts, q.p, q.q, q.target, deadline=deadline)
    for x in X[:ASCENT_REPLAYS]:
        _value_at(search, x, q)
    return X


def _climb(search, points, q, blocks, lo, hi, steps, deadline) -> bool:
    """Greedy walks from `points`, all together: each step estimates the neighbours of every
    walk in one batch (`norm_estimates`, float64, ranking only) and moves each walk to its best
    neighbour while that improves; the end points (else the last point before) are replayed.
    False when the deadline passed."""
    import time

    if not len(points):
        return True
    paths = [[np.asarray(x, dtype=np.float64)] for x in points]
    vals = norm_estimates(blocks, np.array([p[-1] for p in paths]), q.p, q.q, q.target)
    active = list(range(len(paths)))
    on_time = True
    for _ in range(steps):
        if not active:
            break
        if past(deadline):
            on_time = False
            break
        cands, owner = [], []
        for a in active:
            if past(deadline):  # one walk's neighbours cost a Jacobian: check between walks
                break
            nb = _neighbours(blocks, paths[a][-1], lo, hi)
            cands += nb
            owner += [a] * len(nb)
        if past(deadline):
            on_time = False
            break
        if not cands:
            break
        ev = norm_estimates(blocks, np.array(cands), q.p, q.q, q.target)
        owner_arr = np.array(owner)
        still = []
        for a in active:
            mine = np.flatnonzero(owner_arr == a)
            b = mine[np.argmax(ev[mine])]
            if ev[b] > vals[a] * (1 + 1e-12):
                paths[a].append(cands[b])
                vals[a] = ev[b]
                still.append(a)
        active = still
    for path in paths:
        for x in reversed(path):  # the end point, else the last one certified differentiable
            if _value_at(search, x, q) > -np.inf:
                break
    return on_time


def climb(search: WitnessSearch, points, steps: int, deadline: float | None = None) -> None:
    """Greedy walks across activation regions from `points` (see `walk_regions`); the end points
    are replayed, the only values kept."""
    lo, hi = np.array(search.box.lo), np.array(search.box.hi)
    _climb(search, points, search.question, search.blocks, lo, hi, steps, deadline)


FLIP_TRIES = 24  # flipped patterns per step checked by a region LP (the best by their Jacobian's norm):
                 # MNIST 256x4 at radius 0.02, from the same start: 8 stopped at 3.271, 24 and 64 reached 3.327
FLIP_WORK = 2e9  # multiply-adds of one step's Jacobians (flips x outputs x weights) beyond which no walk
                 # starts (MNIST 256x4, 60 flips: 2.4e8; a CIFAR conv net unrolled: 1e10 and more)


def flip_search(search: WitnessSearch, free: list[np.ndarray], deadline: float | None) -> bool:
    """Witnesses one neuron away from the best one: every neuron of `free` (per ReLU layer, the
    neurons unstable on the box; the others keep their phase on all of it) is flipped in the best
    witness's activation pattern, the flipped patterns are ranked by their Jacobian's norm
    (`jacobian_norms`, exact for linf -> l1 with few outputs), and the best FLIP_TRIES above the
    lower bound are checked in turn by a region LP (`interior_point`, only the free neurons' signs
    as rows, the box as bounds); a point found is replayed (`_value_at`, the only values kept) and
    the walk goes on from its pattern while that raises the lower bound. On MNIST 256x4 at radius
    0.02 such walks reached 3.31 where the smoothed ascent stays at 3.07-3.11 (each region LP about
    0.1 s at 784 inputs). True when it raised the lower bound."""
    from .replay import jacobian_norms, pattern_jacobians

    q = search.question
    lo, hi = np.array(search.box.lo), np.array(search.box.hi)
    cand = [(t, i) for t, f in enumerate(free) for i in np.flatnonzero(f)]
    if len(cand) * search.blocks[-1].out_dim * sum(b.weight.size for b in search.blocks) > FLIP_WORK:
        return False
    start = search.lower
    while cand and search.point is not None and not past(deadline):
        cur = search.point.pattern
        pats = [np.repeat(s[None, :], len(cand), axis=0) for s in cur]
        for k, (t, i) in enumerate(cand):
            pats[t][k, i] = 1.0 - pats[t][k, i]
        with np.errstate(over="ignore", invalid="ignore"):  # (a ranking: an overflowed norm is tried first, then replayed)
            vals = jacobian_norms(pattern_jacobians(search.blocks, pats), q.p, q.q, q.target, exact_outputs=True)
        before = search.lower
        for k in np.argsort(-vals, kind="stable")[:FLIP_TRIES]:
            if vals[k] <= search.lower * (1 + 1e-9) or past(deadline):
                break
            x = interior_point(search.net, [p[k] for p in pats], lo, hi, mask=free, deadline=deadline,
                               box_depth=False)
            if x is not None and _value_at(search, x, q) > before:
                break
        if search.lower <= before:
            break
    return search.lower > start


def _value_at(search: WitnessSearch, x: np.ndarray, q) -> float:
    pt = differentiable_point(search.net, x, search.blocks)
    if pt is None:
        return -np.inf
    val = search.value(pt, (q.p, q.q))
    if val > search.lower or search.point is None:
        search.lower, search.point, search.exact_witness = val, pt, False
    return val


def _neighbours(blocks, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, k: int = 8) -> list[np.ndarray]:
    """Points just across the k nearest ReLU boundaries from x (inside the box)."""
    h, J = x, np.eye(x.size)
    cands = []
    for blk in blocks[:-1]:
        z, G = blk.weight @ h + blk.bias, blk.weight @ J
        gn = np.sqrt((G * G).sum(axis=1))
        # A neuron whose pre-activation does not depend on x has no boundary to cross.
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.where(gn > 1e-150, np.abs(z) / gn, np.inf)
        for i in np.argsort(dist)[:k]:
            if not np.isfinite(dist[i]):
                break
            step = -(z[i] / gn[i] ** 2) * G[i] * 1.001 - np.sign(z[i]) * G[i] / gn[i] * 1e-9 * (1 + np.abs(x).max())
            cands.append((dist[i], np.clip(x + step, lo, hi)))
        s = (z > 0).astype(float)
        h, J = s * z, s[:, None] * G
    cands.sort(key=lambda t: t[0])
    return [c for _, c in cands[:k]]


__all__ = ["MAX_CUTS", "WitnessSearch", "climb", "closed", "dense_ascent", "flip_search", "high_dimensional", "smooth_ascent",
           "walk_regions"]
