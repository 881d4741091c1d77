"""Bounds of linear functions of a ReLU network's output under ReLU split constraints (beta-CROWN's
idea: Wang et al., NeurIPS 2021), optimised by gradient steps and evaluated soundly in float64.

A *problem* p asks for an upper bound of  max c_p . f(x) + e_p . x (+ o_p . z_t, a term on one
ReLU layer's pre-activations: `obj`)  over the box lo_p <= x <= hi_p
restricted to the ReLU phases fixed by a split assignment (`split[t][p, i]`: +1 neuron i of ReLU
layer t assumed active, z >= 0; -1 inactive, z <= 0; 0 free), given pre-activation bounds
`pre_lo[t]`, `pre_hi[t]` valid on that restricted set (the caller clamps split neurons: active
l >= 0, inactive u <= 0).

**The certified number is a Lagrangian dual bound.** With multipliers nu_t (one per neuron of
every layer, nu_K = c for the output) for the equalities z_t = W_t a_{t-1} + b_t (a_{-1} = x,
a_t = relu(z_t)), weak duality gives, for *any* real nu,

    max <= sum_t nu_t . b_t + max_{x in box} (e + W_0^T nu_0) . x
           + sum_{t<K} sum_i max_{(z, a) in S_ti} (g_ti a - nu_ti z),     g_t = W_{t+1}^T nu_{t+1},

(a term o_t . z_t of the objective makes the neuron's term g_ti a - (nu_ti - o_ti) z), where S_ti
is the relation of neuron i over its bounds: a = z (l >= 0), a = 0 (u <= 0), the
triangle a >= 0, a >= z, a <= u (z - l) / (u - l) otherwise (maximised at its vertices). A split
constraint enters through its neuron's clamped bounds, and its multiplier beta >= 0 through nu:
`dual_upper` evaluates this bound for given nu in float64 with a rounding allowance derived here
(each product and sum bounded by gamma(n) times the same sum over absolute values; the products
W^T nu enter with their own error bound times |a|), so the optimiser's floats never matter for
soundness: a poor nu only gives a poor bound.

The multipliers come from CROWN's back-substitution with lower slopes alpha in [0, 1] of the
unstable neurons and split multipliers beta >= 0 (nu_t = relax(g_t; alpha) + beta * split_t, the
term beta * s * z >= 0 of the split constraint s z >= 0 added to the objective), optimised per
problem by projected Adam steps on the same dual bound in float32 (`optimise`). With beta = 0 and
CROWN's slopes the bound is at most CROWN's (the triangle is inside every alpha relaxation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.ir import Affine

from ..rounding import gamma
from ..runtime import past
from .adam import adam_step_inplace
from .live import live_neurons, sliced_weights
from .sparse import multiplier, rmul, rmul_abs

_TINY = 1e-300


@dataclass
class SplitBounds:
    """The result of `beta_upper` for P problems: sound upper bounds (P,) (-inf where the split
    constraints are infeasible), the box corner maximising the linear bound of each problem (P, n)
    (a candidate point), the coefficients g_t = W_{t+1}^T nu_{t+1} of every ReLU output (for
    branching), the alpha / beta of the bound and the optimiser's last ones (to warm-start children)."""

    upper: np.ndarray
    x_best: np.ndarray
    g: list[np.ndarray]
    alpha: list[np.ndarray]
    beta: list[np.ndarray]
    warm_alpha: list[np.ndarray]  # the optimiser's last iterates (to warm-start children)
    warm_beta: list[np.ndarray]


def multipliers(blocks: list[Affine], c: np.ndarray, pre_lo, pre_hi, split, alpha, beta,
                obj: list | None = None) -> list[np.ndarray]:
    """nu_t for t = 0..K-1 (float64) from CROWN's back-substitution with slopes alpha and split
    multipliers beta (P, n_t), and nu_K = c; `obj[t]` (P, n_t) or None: the objective's term on z_t
    (added to nu_t: the back-substitution of o_t . z_t through layer t)."""
    K = len(blocks) - 1
    nus: list[np.ndarray] = [np.zeros(0)] * K + [c]
    nu = c
    for t in range(K - 1, -1, -1):
        g = _times(nu, blocks[t + 1].weight) if t == K - 1 else rmul(nu, blocks[t + 1].weight)
        nu = _relax(np, g, pre_lo[t], pre_hi[t], alpha[t]) + beta[t] * split[t]
        if obj is not None and obj[t] is not None:
            nu = nu + obj[t]
        nus[t] = nu
    return nus


def _times(c: np.ndarray, W: np.ndarray) -> np.ndarray:
    """c @ W for the output multipliers c: zeros without the product when c = 0 (the bounds of a
    sub-network's neurons have no output term: `split_input_layer_bounds`, `split_neuron_bounds`)."""
    return rmul(c, W) if np.any(c) else np.zeros(c.shape[:-1] + (W.shape[1],))


def _relax(xp, g, l, u, alpha):
    """CROWN's coefficient on z of g * relu(z): g (active), 0 (inactive), g+ u/(u-l) + g- alpha."""
    unstable = (l < 0) & (u > 0)
    slope = xp.where(unstable, u / xp.where(unstable, u - l, 1.0), xp.where(l >= 0, 1.0, 0.0))
    pos = xp.clip(g, 0.0, None) if xp is np else g.clamp(min=0.0)
    neg = g - pos
    return xp.where(unstable, pos * slope + neg * alpha, g * slope)


_FLOORS = np.array([-np.inf, 0.0])


def _floor(unstable: np.ndarray, dtype=np.float64) -> np.ndarray:
    """0 where a neuron is unstable (its relation has the vertex z = a = 0), -inf elsewhere (a
    table look-up: np.where on random masks was 30x slower than arithmetic)."""
    return _FLOORS.astype(dtype)[unstable.view(np.uint8)]


def dual_upper(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
               pre_hi: list[np.ndarray], nus: list[np.ndarray], e: np.ndarray | None = None, *,
               rigorous: bool = True, obj: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sound upper bounds (P,) of max c . f(x) + e . x (+ sum_t obj[t] . z_t) over each problem's set
    (module doc) for any multipliers nus (nu_0..nu_{K-1}, nu_K = c: (P, n_t) arrays), and the
    maximising box corner of the input term (P, n). -inf where some bound pair crosses (the set is
    empty).

    Rounding: every summand below is computed with at most 3 roundings from an exact expression
    whose absolute value is accounted in `absum`; the products W^T nu (length n) differ from the
    exact ones by at most 2 gamma(n + 2) |W|^T |nu|, times |a| <= max(u, 0) (|x| on the input).
    `rigorous=False` skips the allowance (a cheap estimate for heuristics: not a bound)."""
    K = len(blocks) - 1
    P = nus[K].shape[0]
    lo = np.broadcast_to(lo, (P, lo.shape[-1]))
    hi = np.broadcast_to(hi, (P, hi.shape[-1]))
    total = np.zeros(P)
    absum = np.zeros(P)  # sum of |exact summands| bounds: sizes the per-summand rounding allowance
    exact = np.zeros(P)  # allowances for the W^T nu products (already upper bounds of errors)
    count = 0
    empty = np.zeros(P, dtype=bool)
    for j in range(K + 1):
        nb = nus[j] * blocks[j].bias
        total += nb.sum(axis=1)
        absum += np.abs(nb).sum(axis=1)
        count += nb.shape[1]
    for t in range(K):
        W = blocks[t + 1].weight
        nu_up, nu = nus[t + 1], nus[t]
        if obj is not None and obj[t] is not None:
            # z's coefficient nu - o: one more rounding, inside the allowance's 3 per summand (the
            # products below are then of this float)
            nu = nu - obj[t]
        if t == K - 1 and not np.any(nu_up):  # no output term: g = 0 exactly, no product error
            g, gerr = np.zeros((P, W.shape[1])), (_TINY if rigorous else 0.0)
        else:
            g = rmul(nu_up, W)
            gerr = 2.0 * gamma(W.shape[0] + 2) * rmul_abs(np.abs(nu_up), W) + _TINY if rigorous else 0.0
        l, u = pre_lo[t], pre_hi[t]
        empty |= np.any(l > u, axis=1)
        amax = np.maximum(u, 0.0)
        zmax = np.maximum(np.abs(l), np.abs(u))
        act = l >= 0
        inact = (u <= 0) & ~act
        # the largest vertex value of the neuron's relation: z = l (value (g act - nu) l: h l where
        # active, -nu l otherwise), z = u ((g [not inactive] - nu) u) and z = 0 where unstable (the
        # floor 0; -inf elsewhere). g * 1 and 0 - nu are exact: the same floats as h l, -nu l, h u
        # (h = g - nu) with the same roundings, so the allowance below is unchanged. (0/1 factors
        # instead of np.where: 30x faster on random masks)
        act_f = act.astype(float)
        term = np.maximum((g * act_f - nu) * l, (g * (1.0 - inact) - nu) * u)
        term = np.maximum(term, _floor(~act & ~inact))
        if empty.any():
            term = np.where(empty[:, None], 0.0, term)
        total += term.sum(axis=1)
        absum += (np.abs(term) + np.abs(g) * amax + np.abs(nu) * zmax).sum(axis=1)
        exact += (gerr * amax).sum(axis=1)
        count += term.shape[1]
    W0 = blocks[0].weight
    e = np.zeros_like(lo) if e is None else np.broadcast_to(e, lo.shape)
    w = e + rmul(nus[0], W0)
    werr = 2.0 * gamma(W0.shape[0] + 3) * (np.abs(e) + rmul_abs(np.abs(nus[0]), W0)) + _TINY if rigorous else 0.0
    xmax = np.maximum(np.abs(lo), np.abs(hi))
    x_best = np.where(w > 0, hi, lo)
    term = np.maximum(w * lo, w * hi)
    total += term.sum(axis=1)
    absum += (np.abs(term) + np.abs(w) * xmax).sum(axis=1)
    exact += (werr * xmax).sum(axis=1)
    count += term.shape[1]
    # each summand: <= 3 roundings from its exact value (2 gamma(5) |.|); the float sums of
    # `count` summands and of the allowances: 2 gamma(count + 2) times their absolute sums
    allowance = 2.0 * gamma(5) * absum + 2.0 * gamma(count + 2) * (absum + exact) + exact
    if not rigorous:
        return np.where(empty, -np.inf, total), x_best
    upper = total + allowance * (1.0 + 4.0 * gamma(count + 2)) + _TINY
    upper = np.nextafter(upper, np.inf)
    return np.where(empty, -np.inf, upper), x_best


def optimise(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo, pre_hi, split, c: np.ndarray,
             e: np.ndarray | None, alpha: list[np.ndarray] | None, beta: list[np.ndarray] | None,
             iterations: int, lr_alpha: float = 0.1, lr_beta: float = 0.05, warm_last: bool = False,
             obj: list | None = None) -> tuple[list[np.ndarray], ...]:
    """alpha (P, n_t) in [0, 1] and beta (P, n_t) >= 0 (0 off the split neurons) chosen by projected
    Adam steps on the dual bound (float32 numpy, the gradient derived by hand: `dual_value`; a
    heuristic, not a bound). Start: the given ones, else CROWN's adaptive slopes and beta = 0. Each
    problem's best pair seen is returned, with `warm_last` also the last iterates (alpha, beta, last
    alpha, last beta: a warm start that keeps the optimiser moving). The weights' float32 copies
    (CSR for unrolled convolutions) are cached by `sparse.rmul`. numpy rather than torch: importing torch took 3 s of
    a 20 s verification budget, and these products are too small for autograd's overhead to pay."""
    alpha = [crown_slopes(l, u) for l, u in zip(pre_lo, pre_hi)] if alpha is None else alpha
    beta = [np.zeros_like(a) for a in alpha] if beta is None else beta
    if iterations <= 0:
        return (alpha, beta, alpha, beta) if warm_last else (alpha, beta)
    live = _live_neurons(blocks, pre_lo, pre_hi, split, obj, c)
    if live is None:
        return _optimise_steps(blocks, lo, hi, pre_lo, pre_hi, split, c, e, alpha, beta, iterations, lr_alpha,
                               lr_beta, warm_last, obj)
    # the same steps on the live neurons' sub-network, scattered back
    sub = _optimise_steps(**_restrict(live, blocks, pre_lo, pre_hi, split, obj, alpha, beta), lo=lo, hi=hi, c=c,
                          e=e, iterations=iterations, lr_alpha=lr_alpha, lr_beta=lr_beta, warm_last=warm_last)
    out = []
    for part, full in zip(sub, (alpha, beta) * 2):
        layers = [f.copy() for f in full]
        for t, keep in enumerate(live):
            layers[t][:, keep] = part[t]
        out.append(layers)
    return tuple(out)


def _optimise_steps(blocks, lo, hi, pre_lo, pre_hi, split, c, e, alpha, beta, iterations: int, lr_alpha: float,
                    lr_beta: float, warm_last: bool, obj) -> tuple[list[np.ndarray], ...]:
    """`optimise`'s Adam steps on the network as given."""
    f32 = np.float32
    net = _Net32(blocks, lo, hi, pre_lo, pre_hi, split, c, e, obj=obj)
    # every layer's slopes (and multipliers) in one flat array, each layer a contiguous (P, n_t)
    # view of it: one Adam step and one best-copy per iteration instead of one per layer (numpy's
    # per-call overhead dominated on small nets)
    P = c.shape[0]
    cuts = np.cumsum([0] + [P * a.shape[1] for a in alpha])

    def views(x: np.ndarray) -> list[np.ndarray]:
        return [x[cuts[t]:cuts[t + 1]].reshape(P, -1) for t in range(len(alpha))]

    flat = [np.zeros(cuts[-1], dtype=f32) for _ in range(4)]  # A, B, dA, dB
    A, B, dA, dB = (views(x) for x in flat)
    free_a, free_b = np.empty_like(flat[0]), np.empty_like(flat[0])
    for t, (fa, fb) in enumerate(zip(views(free_a), views(free_b))):
        fa[...] = net.unst[t]
        fb[...] = net.S[t] != 0
        A[t][...] = alpha[t]
        B[t][...] = beta[t] * fb
    any_split = any(net.split_any)
    moments = [np.zeros_like(flat[0]) for _ in range(4)]
    best_val = np.full(P, np.inf, dtype=f32)
    best = [flat[0].copy(), flat[1].copy()]
    keep = list(zip(A + B, views(best[0]) + views(best[1])))  # (iterate, its best) per layer
    with np.errstate(under="ignore"):
        for k in range(iterations + 1):
            val, _ = net.value(A, B, gradient=k < iterations, grad_out=(dA, dB))
            better = val < best_val  # each problem's best multipliers (the steps are not monotone)
            if better.any():
                best_val[better] = val[better]
                for x, y in keep:
                    y[better] = x[better]
            if k == iterations:
                break
            flat[2] *= free_a
            adam_step_inplace(flat[0], flat[2], moments[0], moments[1], k + 1, lr_alpha, 1.0)
            if any_split:
                flat[3] *= free_b
                adam_step_inplace(flat[1], flat[3], moments[2], moments[3], k + 1, lr_beta, None)
                flat[1] *= free_b
    pairs = [best[0], best[1]] + ([flat[0], flat[1]] if warm_last else [])
    return tuple([x.astype(np.float64) for x in views(y)] for y in pairs)


def _live_neurons(blocks, pre_lo, pre_hi, split, obj, c) -> list[np.ndarray] | None:
    """Per ReLU layer, the neurons some problem needs (`live.live_neurons`): not inactive (u <= 0
    and l < 0, as `_Net32` reads the bounds), or split, or with an objective term. An inactive
    neuron's relaxation is a = 0 (its slope 0, no multiplier of its own), so its nu is 0 and the
    bound does not depend on its alpha / beta: the dual bound of the sub-network without it is the
    same function of the other neurons' alpha / beta. With c = 0 (a sub-network's neurons bounded
    under splits) the last ReLU layer's g is 0: there only split neurons and objective terms have a
    multiplier (nu = beta s + o), the others' terms are max(0 l, 0 u, floor) = 0. None also for
    convolutions."""
    if any(getattr(b, "conv", None) is not None for b in blocks):
        return None
    term = [(s != 0) | (False if obj is None or obj[t] is None else obj[t] != 0) for t, s in enumerate(split)]
    needed = [(u > 0) | (l >= 0) | x for l, u, x in zip(pre_lo, pre_hi, term)]
    if needed and not np.any(c):
        needed[-1] = term[-1]
    return live_neurons(needed, [b.weight for b in blocks])


def _restrict(live, blocks, pre_lo, pre_hi, split, obj, alpha, beta):
    """`optimise`'s arguments on the live neurons (`_live_neurons`)."""
    K = len(blocks) - 1
    weights = sliced_weights([b.weight for b in blocks], live)
    sub_blocks = [Affine(W, b.bias if t == K else b.bias[live[t]]) for t, (W, b) in enumerate(zip(weights, blocks))]
    cut = lambda arrays: [a[:, k] for a, k in zip(arrays, live)]  # noqa: E731
    o = None if obj is None else [None if x is None else x[:, k] for x, k in zip(obj, live)]
    return dict(blocks=sub_blocks, pre_lo=cut(pre_lo), pre_hi=cut(pre_hi), split=cut(split), obj=o,
                alpha=cut(alpha), beta=cut(beta))


class _Net32:
    """The dual bound of `dual_upper` (without its rounding allowance) as a function of alpha and
    beta, in float32 (or `dtype`), with its gradient by reverse accumulation written out (the bound is piecewise
    linear in the multipliers; at a kink one side's derivative is taken).

    Written for few passes over the (P, n_t) arrays (they, not the matrix products, dominated its
    time on mnist_fc): a neuron's term is the largest of its relation's vertex values, z = l
    (value (g act - nu) l), z = u (value (g [not inactive] - nu) u) and, when unstable, z = 0
    (value 0: a floor of 0 there, -inf elsewhere); with one box for every problem (the usual case)
    the input term max(w lo, w hi) is w . mid + |w| . rad, two matrix-vector products."""

    def __init__(self, blocks, lo, hi, pre_lo, pre_hi, split, c, e, dtype=np.float32, obj=None) -> None:
        f32 = dtype  # (float64 for the tests of the gradient)
        P = c.shape[0]
        self.K = len(blocks) - 1
        # the IR's float64 weights, multiplied by their cached copies in `dtype` (CSR when sparse)
        self.W = [b.weight for b in blocks]
        self.dtype = f32
        self.fwd = [multiplier(W, f32) for W in self.W]  # X -> X W
        self.bwd: list | None = None  # X -> X W^T, made at the first gradient
        self.b = [np.asarray(b.bias, dtype=f32) for b in blocks]
        self.shared_box = lo.shape[0] == 1 and hi.shape[0] == 1
        if self.shared_box:
            self.mid = np.asarray((lo[0] + hi[0]) / 2.0, dtype=f32)
            self.rad = np.asarray((hi[0] - lo[0]) / 2.0, dtype=f32)
        self.x_lo = np.asarray(np.broadcast_to(lo, (P, lo.shape[-1])), dtype=f32)
        self.x_hi = np.asarray(np.broadcast_to(hi, (P, hi.shape[-1])), dtype=f32)
        self.L = [np.asarray(a, dtype=f32) for a in pre_lo]
        self.U = [np.asarray(a, dtype=f32) for a in pre_hi]
        self.S = [np.asarray(s, dtype=f32) for s in split]
        self.split_any = [bool(np.any(s)) for s in self.S]
        self.C = np.asarray(c, dtype=f32)
        self.g_top: np.ndarray | None = None
        self.E = None if e is None or not np.any(e) else np.asarray(np.broadcast_to(e, (P, lo.shape[-1])), dtype=f32)
        self.unst = [(l < 0) & (u > 0) for l, u in zip(self.L, self.U)]
        self.act = [l >= 0 for l in self.L]
        self.inact = [(u <= 0) & ~a for u, a in zip(self.U, self.act)]
        self.slope = [np.where(q, u / np.where(q, u - l, f32(1.0)), a.astype(f32))
                      for q, l, u, a in zip(self.unst, self.L, self.U, self.act)]
        # per-neuron constants of the vertex form (class doc)
        self.unst_f = [q.astype(f32) for q in self.unst]
        self.stable_slope = [s * (1 - q) for s, q in zip(self.slope, self.unst_f)]
        self.act_f = [a.astype(f32) for a in self.act]
        self.notin_f = [(~q).astype(f32) for q in self.inact]
        self.floor = [_floor(q, f32) for q in self.unst]
        self.O = [None if obj is None or o is None else np.asarray(o, dtype=f32) for o in (obj or [None] * self.K)]

    def _top(self) -> np.ndarray:
        """g_{K-1} = c W_K, the same at every step (read only): computed once, without the
        product when c = 0 (a sub-network's neurons bounded with no output term)."""
        if self.g_top is None:
            self.g_top = (self.fwd[self.K](self.C) if np.any(self.C) else
                          np.zeros((self.C.shape[0], self.W[self.K].shape[1]), dtype=self.dtype))
        return self.g_top

    def value(self, A, Bt, gradient: bool = True, grad_out=None):
        """The bound (P,) for slopes A and split multipliers Bt, and its gradient (dA + dB lists;
        with `grad_out` = (dA, dB), lists of arrays, written into those instead)."""
        K = self.K
        nu = self.C
        val = self.C @ self.b[K]
        saved = []
        for t in range(K - 1, -1, -1):
            g = self._top() if t == K - 1 else self.fwd[t + 1](nu)
            pos = (g > 0).astype(g.dtype)
            # d nu_t / d g: the upper chord's slope where g > 0, else alpha (unstable) / the exact slope
            neg_slope = A[t] * self.unst_f[t] + self.stable_slope[t]
            coef = neg_slope + pos * (self.slope[t] - neg_slope)
            nu_t = g * coef
            if self.split_any[t]:
                nu_t += Bt[t] * self.S[t]
            # z's coefficient: nu_t less the objective's term on z_t (which nu_t carries downward)
            zc = nu_t
            if self.O[t] is not None:
                zc = nu_t.copy()
                nu_t += self.O[t]
            vl = (g * self.act_f[t] - zc) * self.L[t]
            vu = (g * self.notin_f[t] - zc) * self.U[t]
            top = np.maximum(vl, vu)
            val = val + np.maximum(top, self.floor[t]).sum(axis=1) + nu_t @ self.b[t]
            if gradient:
                u_wins = (vu >= vl).astype(g.dtype)
                zero = (top < 0) * self.unst_f[t]  # the vertex z = 0 attains
                saved.append((g, pos, coef, u_wins, zero))
            nu = nu_t
        w = self.fwd[0](nu)
        w = w if self.E is None else self.E + w
        if self.shared_box:
            val = val + w @ self.mid + np.abs(w) @ self.rad
        else:
            val = val + np.maximum(w * self.x_lo, w * self.x_hi).sum(axis=1)
        if not gradient:
            return val, None
        if self.bwd is None:
            self.bwd = [multiplier(W.T, self.dtype) for W in self.W[:K]]
        dA: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * K
        dB: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * K
        if grad_out is not None:
            dA, dB = grad_out
        # d val / d nu_0 through w: the maximising box corner, W_0-transposed
        corner = self.mid + np.sign(w) * self.rad if self.shared_box else np.where(w > 0, self.x_hi, self.x_lo)
        down = self.bwd[0](corner)
        for t in range(K):
            g, pos, coef, u_wins, zero = saved[K - 1 - t]
            # the attaining vertex z (0 where the floor wins): d term / d nu_t = -z, d term / d g =
            # z times a's slope there (1 where active; at z = u also where unstable). Masks enter as
            # 0/1 factors: np.where on random masks was 30x slower than a product here
            L, U = self.L[t], self.U[t]
            z = (1 - zero) * (L + u_wins * (U - L))
            gnu = down + self.b[t] - z
            if grad_out is None:
                dA[t] = (1 - pos) * gnu * g * self.unst_f[t]
                dB[t] = gnu * self.S[t] if self.split_any[t] else np.zeros_like(g)
            else:  # (the caller masks the unstable neurons; layers without splits keep their 0)
                np.multiply((1 - pos) * gnu, g, out=dA[t])
                if self.split_any[t]:
                    np.multiply(gnu, self.S[t], out=dB[t])
            if t + 1 < K:  # (nu_K = c is no variable)
                dg = z * (self.act_f[t] + u_wins * (self.notin_f[t] - self.act_f[t])) + gnu * coef
                down = self.bwd[t + 1](dg)  # d val / d nu_{t+1} through g_t = nu_{t+1} W_{t+1}
        return val, (None if grad_out is not None else dA + dB)


def estimate_upper(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo, pre_hi, split, c: np.ndarray,
                   e: np.ndarray | None, alpha: list[np.ndarray], beta: list[np.ndarray]) -> np.ndarray:
    """The dual bound of `dual_upper` for the multipliers of slopes alpha and split multipliers
    beta, in float32 without rounding allowance (P,): a cheap estimate for heuristics (strong
    branching), not a bound. Split neurons' bounds must be clamped."""
    net = _Net32(blocks, lo, hi, pre_lo, pre_hi, split, c, e)
    f32 = np.float32
    A = [np.asarray(a, dtype=f32) for a in alpha]
    Bt = [np.asarray(b, dtype=f32) * (s != 0) for b, s in zip(beta, net.S)]
    with np.errstate(under="ignore"):
        val, _ = net.value(A, Bt, gradient=False)
    empty = np.zeros(c.shape[0], dtype=bool)
    for l, u in zip(pre_lo, pre_hi):
        empty |= np.any(l > u, axis=1)
    return np.where(empty, -np.inf, val.astype(np.float64))


def crown_slopes(l: np.ndarray, u: np.ndarray) -> np.ndarray:
    """CROWN's adaptive lower slopes (1 where u > -l, else 0) of the unstable neurons."""
    return np.where(u > -l, 1.0, 0.0)


def beta_upper(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
               pre_hi: list[np.ndarray], split: list[np.ndarray], c: np.ndarray, e: np.ndarray | None = None, *,
               alpha: list[np.ndarray] | None = None, beta: list[np.ndarray] | None = None,
               iterations: int = 20, obj: list | None = None, lr_beta: float = 0.05) -> SplitBounds:
    """Sound upper bounds of max c_p . f(x) + e_p . x (+ sum_t obj[t]_p . z_t) over each problem's box
    and split phases (module doc): alpha / beta optimised (`optimise`), the multipliers rebuilt
    from them in float64 and the dual bound evaluated soundly (`dual_upper`). Split neurons' bounds
    must be clamped."""
    alpha, beta, warm_alpha, warm_beta = optimise(blocks, lo, hi, pre_lo, pre_hi, split, c, e, alpha, beta,
                                                  iterations, warm_last=True, obj=obj, lr_beta=lr_beta)
    nus = multipliers(blocks, c, pre_lo, pre_hi, split, alpha, beta, obj)
    upper, x_best = dual_upper(blocks, lo, hi, pre_lo, pre_hi, nus, e, obj=obj)
    K = len(blocks) - 1
    g = [(_times if t == K - 1 else rmul)(nus[t + 1], blocks[t + 1].weight) for t in range(K)]
    return SplitBounds(upper, x_best, g, alpha, beta, warm_alpha, warm_beta)


def split_neuron_bounds(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
                        pre_hi: list[np.ndarray], split: list[np.ndarray], layer: np.ndarray, neuron: np.ndarray,
                        iterations: int = 60, lr_beta: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds (lower (P,), upper (P,)) of one pre-activation z_{layer_p}[neuron_p] per problem
    p (a node: box lo, hi (P, n) or (1, n), bounds (P, n_t) per ReLU layer valid on its set, split
    neurons clamped) under *all* of the node's split phases, those of the same and deeper layers
    included: max z and max -z over the sub-network down to the deepest split (no output term), with
    the neuron's z as the objective's term (`obj`). A node's bounds of its layers ignore the splits'
    half-spaces; these see them, so a neuron unstable by those bounds may be proven stable on the
    node, or the node empty (lower > upper). The split multipliers take larger steps than a margin's
    (`lr_beta`): proving a phase or an empty node needs them large (mnist_fc 256x4, chosen splits of
    open nodes with a child the triangle LP proves empty: 7 of 26 shown at 20 steps of 0.05, 22 at 60
    steps of 0.5, 2.7 ms per node). The given bounds must not cross (callers drop such
    nodes: they are empty already)."""
    P = layer.size
    depth = max([int(layer.max()) + 1] + [t + 1 for t, s in enumerate(split) if np.any(s)])
    rows = np.concatenate([np.arange(P), np.arange(P)])
    obj: list = [None] * depth
    for t in np.unique(layer):
        o = np.zeros((2 * P, pre_lo[t].shape[1]))
        mine = np.flatnonzero(layer == t)
        o[mine, neuron[mine]] = 1.0
        o[P + mine, neuron[mine]] = -1.0
        obj[t] = o
    box = (lo, hi) if lo.shape[0] == 1 else (lo[rows], hi[rows])  # (one shared box: two products per step)
    c = np.zeros((2 * P, blocks[depth].weight.shape[0]))
    res = beta_upper(blocks[: depth + 1], *box, [a[rows] for a in pre_lo[:depth]],
                     [a[rows] for a in pre_hi[:depth]], [np.asarray(s[rows], dtype=np.float64) for s in split[:depth]],
                     c, iterations=iterations, obj=obj, lr_beta=lr_beta)
    return -res.upper[P:], res.upper[:P]


def clamp_splits(pre_lo: list[np.ndarray], pre_hi: list[np.ndarray], split: list[np.ndarray]
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The bounds restricted to the split phases: l >= 0 where active, u <= 0 where inactive."""
    return ([np.where(s > 0, np.maximum(l, 0.0), l) for l, s in zip(pre_lo, split)],
            [np.where(s < 0, np.minimum(u, 0.0), u) for u, s in zip(pre_hi, split)])


def split_layer_bounds(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
                       pre_hi: list[np.ndarray], split: list[np.ndarray], j: int, iterations: int = 20,
                       deadline: float | None = None, nearer_side: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of the pre-activations z_j of ReLU layer j of B nodes: node b's box lo[b] <= x <=
    hi[b] (B, n) restricted to its split phases `split[t][b]` of layers t < j, given bounds (B, n_t)
    of those layers valid there (split neurons clamped). Each unstable neuron's max z and max -z is
    a `beta_upper` problem of the sub-network ending at layer j, so a split couples the later layers
    with the input (beta-CROWN's intermediate bounds); the problems of all nodes go in batches of
    at most SPLIT_LAYER_FLOATS floats per (problem x neuron) array, until `deadline` (the
    neurons not reached keep their bounds). Returns (l_j, u_j) (B, n_j) intersected with the given
    ones; l > u somewhere in a node whose phases (split or implied) cannot hold together on its box
    (a node whose given bounds cross already keeps its layer j as given).

    `nearer_side`: each neuron's bound on the side nearer 0 only (max z where u <= -l, else max -z),
    half the problems, for callers that read the layer's phases only (the last ReLU layer of the
    Lipschitz tree: its Jacobian's slopes): the side that may make the neuron stable."""
    l_j, u_j = pre_lo[j].copy(), pre_hi[j].copy()
    for nd, nr, sub in _neuron_problems(lo, hi, pre_lo, pre_hi, split, j, j, deadline, both=not nearer_side):
        if nearer_side:  # one problem per neuron, max z (+1) or max -z (-1)
            sign = np.where(u_j[nd, nr] <= -l_j[nd, nr], 1.0, -1.0)
        else:  # the pairs, max first
            sign, nd, nr = np.repeat([1.0, -1.0], nd.size), np.concatenate([nd, nd]), np.concatenate([nr, nr])
        c = np.zeros((sign.size, l_j.shape[1]))
        c[np.arange(sign.size), nr] = sign
        res = beta_upper(blocks[: j + 1], *sub, c, iterations=iterations)
        up = sign > 0
        u_j[nd[up], nr[up]] = np.minimum(u_j[nd[up], nr[up]], res.upper[up])
        l_j[nd[~up], nr[~up]] = np.maximum(l_j[nd[~up], nr[~up]], -res.upper[~up])
    return l_j, u_j


def split_input_layer_bounds(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
                             pre_hi: list[np.ndarray], split: list[np.ndarray], depth: int, iterations: int = 20,
                             deadline: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of the first ReLU layer's pre-activations z_0 = W_0 x + b_0 of B nodes under the
    split phases of layers 0..depth-1 (the same layer's and deeper ones; `split_layer_bounds`
    only sees earlier layers): z_0 is linear in x, so max +-z_0i is a `beta_upper` problem of the
    sub-network ending at layer `depth` with c = 0 and the input term e = +-W_0[i] (the splits
    enter by their multipliers alone). Returns (l_0, u_0) intersected with the given ones."""
    W0, b0 = blocks[0].weight, blocks[0].bias
    l_0, u_0 = pre_lo[0].copy(), pre_hi[0].copy()
    for nd, nr, sub in _neuron_problems(lo, hi, pre_lo, pre_hi, split, 0, depth, deadline):
        m = nd.size
        c = np.zeros((2 * m, blocks[depth].weight.shape[0]))
        res = beta_upper(blocks[: depth + 1], *sub, c, np.concatenate([W0[nr], -W0[nr]]), iterations=iterations)
        # z = e.x + b: the bias added, rounded outward (one addition)
        u_0[nd, nr] = np.minimum(u_0[nd, nr], np.nextafter(res.upper[:m] + b0[nr], np.inf))
        l_0[nd, nr] = np.maximum(l_0[nd, nr], np.nextafter(-res.upper[m:] + b0[nr], -np.inf))
    return l_0, u_0


def split_layer_bounds_all(blocks: list[Affine], lo: np.ndarray, hi: np.ndarray, pre_lo: list[np.ndarray],
                           pre_hi: list[np.ndarray], split: list[np.ndarray], j: int, iterations: int = 60,
                           deadline: float | None = None, floats: int = 2_000_000) -> tuple[np.ndarray, np.ndarray]:
    """`split_layer_bounds` under *all* of each node's splits (`split_neuron_bounds`: those of layer j
    and deeper ones too), for B nodes sharing one box (lo, hi (1, n)) or each with its own (B, n):
    every unstable neuron of layer j, in batches of at most `floats` floats per (problem x neuron)
    array, until `deadline`. Returns (l_j, u_j) intersected with the given ones (l > u: the node is
    empty); nodes whose given bounds cross keep theirs."""
    l_j, u_j = pre_lo[j].copy(), pre_hi[j].copy()
    for nd, nr in _unstable_batches(lo.shape[1], pre_lo, pre_hi, j, len(pre_lo), deadline, floats):
        box = (lo, hi) if lo.shape[0] == 1 else (lo[nd], hi[nd])
        lower, upper = split_neuron_bounds(blocks, *box, [a[nd] for a in pre_lo], [a[nd] for a in pre_hi],
                                           [s[nd] for s in split], np.full(nd.size, j), nr, iterations=iterations)
        u_j[nd, nr] = np.minimum(u_j[nd, nr], upper)
        l_j[nd, nr] = np.maximum(l_j[nd, nr], lower)
    return l_j, u_j


def _unstable_batches(n_in: int, pre_lo, pre_hi, layer: int, depth: int, deadline: float | None, floats: int):
    """(nodes, neurons) of the unstable neurons of `layer`, in batches of problem pairs whose
    (problem x neuron) arrays over the input and ReLU layers 0..depth stay within `floats`, until
    `deadline`. Nodes whose bounds of layers 0..depth-1 cross are left out (empty already: nothing
    to bound, and no inf in the optimiser's steps)."""
    crossed = np.zeros(pre_lo[0].shape[0], dtype=bool)
    for a, b in zip(pre_lo[:depth], pre_hi[:depth]):
        crossed |= np.any(a > b, axis=1)
    node, neuron = np.nonzero((pre_lo[layer] < 0) & (pre_hi[layer] > 0) & ~crossed[:, None])
    width = n_in + sum(a.shape[1] for a in pre_lo[: depth + 1])
    step = max(1, floats // (2 * width))
    for start in range(0, node.size, step):
        if start and past(deadline):
            return
        yield node[start:start + step], neuron[start:start + step]


def _neuron_problems(lo, hi, pre_lo, pre_hi, split, layer: int, depth: int, deadline: float | None,
                     both: bool = True):
    """The problem pairs (max z, max -z) of the unstable neurons of `layer` over the sub-network's
    ReLU layers 0..depth-1, in batches within SPLIT_LAYER_FLOATS, until `deadline`: (nodes,
    neurons, the `beta_upper` arguments lo, hi, pre_lo, pre_hi, split of each problem, rows stacked
    max first; `_unstable_batches`); with `both=False` one problem per neuron."""
    # nodes that differ by their phases only (no input split) share one box: the bound's input term is
    # then two matrix-vector products instead of passes over (problems x inputs) arrays
    shared = lo.shape[0] == 1 or (np.all(lo == lo[0]) and np.all(hi == hi[0]))
    floats = SPLIT_LAYER_FLOATS if both else 2 * SPLIT_LAYER_FLOATS  # (`_unstable_batches` counts pairs)
    for nd, nr in _unstable_batches(lo.shape[1], pre_lo, pre_hi, layer, depth, deadline, floats):
        rows = np.concatenate([nd, nd]) if both else nd
        box = (lo[:1], hi[:1]) if shared else (lo[rows], hi[rows])
        yield nd, nr, (*box, [a[rows] for a in pre_lo[:depth]], [a[rows] for a in pre_hi[:depth]],
                       [np.asarray(s[rows], dtype=np.float64) for s in split[:depth]])

SPLIT_LAYER_FLOATS = 4_000_000  # per batch of `split_layer_bounds`: the optimiser keeps some 15 such arrays

__all__ = ["SplitBounds", "beta_upper", "clamp_splits", "crown_slopes", "dual_upper", "estimate_upper", "multipliers", "optimise", "split_input_layer_bounds", "split_layer_bounds",
           "split_layer_bounds_all", "split_neuron_bounds"]
