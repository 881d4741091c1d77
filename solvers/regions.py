"""Activation regions of a ReLU network inside an input box.

The region of an activation pattern s (0/1 per ReLU) is the polytope
{x in [lo, hi] : (2 s_i - 1) z_i(x) >= 0 for every neuron}, where z_i is affine in x once the
upstream slopes are fixed to s. In box-normalised coordinates x = lo + (hi - lo) * xi we ask for
the deepest point: max t s.t. (2 s_i - 1) z_i >= t * n_i, t <= xi <= 1 - t.

- `interior_point`: that point when t > 0 (used to replay a MILP's pattern away from ties).
- `has_no_interior`: a *sound* proof that the region has empty interior: a dual certificate of
  t <= 0, checked first in float64 with a rounding allowance when the LP's t is negative (the
  closed region is empty), else in exact rational arithmetic (the LP's multipliers with their
  residual absorbed by the box rows, or multipliers solved exactly on the LP's support, or else
  the region LP solved exactly: `solvers.exact_lp`).
  Patterns so proven can be cut from a MILP, or dropped from a branch-and-bound, without changing
  the supremum over full-dimensional regions.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from models.ir import Network

from .bounds.types import relu_blocks
from .exact_lp import ExactLp, exact_max
from .rational import rref


@dataclass
class RegionLp:
    """max t <= 1/2 s.t. A_ub [xi; t] <= b_ub (region and, with `box_rows`, box constraints as rows;
    without them the box is the columns' bounds 0 <= xi <= 1)."""

    A_ub: np.ndarray
    b_ub: np.ndarray
    n: int
    empty: bool  # a neuron constant over the region has the wrong sign
    box_rows: bool = True


def _region_lp(net: Network, pattern: list[np.ndarray], lo: np.ndarray, hi: np.ndarray, mask=None,
               box_rows: bool = True) -> RegionLp:
    blocks = relu_blocks(net)
    n = lo.size
    w = hi - lo
    M, d = np.eye(n), np.zeros(n)
    rows, rhs = [], []
    empty = False
    for j, (blk, s) in enumerate(zip(blocks[:-1], pattern)):
        Mz, dz = blk.weight @ M, blk.weight @ d + blk.bias
        sign = 2.0 * np.asarray(s, dtype=np.float64) - 1.0
        G = Mz * w[None, :]
        c0 = Mz @ lo + dz
        scale = np.abs(G).sum(axis=1) + np.abs(c0)
        flat = np.abs(G).sum(axis=1) == 0
        decided = _decided(mask, j, sign.size)
        if np.any(flat & (sign * c0 < 0) & decided):
            empty = True  # a neuron constant over the region with the wrong sign
        keep = (scale > 0) & decided  # z == 0 on the whole region constrains nothing
        # sign * (G xi + c0) >= t * scale   <=>   -sign*G xi / scale + t <= sign*c0 / scale
        # (rows normalised by scale, so that the LP's duals are accurate enough for the exact check)
        sk = scale[keep, None]
        rows.append(np.hstack([-(sign[keep, None] * G[keep]) / sk, np.ones_like(sk)]))
        rhs.append(sign[keep] * c0[keep] / sk[:, 0])
        M, d = s[:, None] * Mz, s * dz
    if not box_rows:
        return RegionLp(np.vstack(rows) if rows else np.zeros((0, n + 1)), np.concatenate(rhs) if rhs else np.zeros(0),
                        n, empty, box_rows=False)
    box = np.vstack([np.hstack([-np.eye(n), np.ones((n, 1))]), np.hstack([np.eye(n), np.ones((n, 1))])])
    A = np.vstack(rows + [box])
    b = np.concatenate(rhs + [np.zeros(n), np.ones(n)])
    return RegionLp(A, b, n, empty)


def _decided(mask, j: int, size: int) -> np.ndarray:
    """Which neurons of layer j carry a sign constraint: all, unless `mask` (a partial pattern's
    decided neurons, one boolean array per layer) says otherwise."""
    if mask is None or j >= len(mask) or mask[j] is None:
        return np.ones(size, dtype=bool)
    return np.asarray(mask[j], dtype=bool)


@dataclass
class _Solution:
    """The fields of scipy's `linprog` result that the callers read (status 0: optimal; the
    marginals of the rows are HiGHS's row duals, as scipy reports them)."""

    status: int
    x: np.ndarray | None
    ineqlin: SimpleNamespace


def _solve(lp: RegionLp, deadline: float | None = None) -> _Solution:
    """max t over the region LP, with HiGHS called directly (importing scipy.optimize for its
    `linprog` costs about half a second of a small question's start-up). `deadline`: HiGHS stops
    there, but not before LP_GRACE seconds (then no solution: status 2). Without the LP's
    `box_rows` the box is the columns' bounds and t the depth from the region's own hyperplanes only
    (x may lie on a face of the box): no dual certificate of emptiness then, but a point faster
    (0.10 s instead of 0.56 s for an MNIST net's region, 784 inputs)."""
    import highspy as hp

    from .lp.highs import new_highs

    m, k = lp.A_ub.shape
    h = new_highs()
    inf = hp.kHighsInf
    cost = np.zeros(k)
    cost[-1] = -1.0
    # the box is in the rows (so that dual certificates see it), else in the columns' bounds; t < 0
    # when the region is empty
    col_lo, col_hi = np.full(k, -inf), np.full(k, inf)
    col_hi[-1] = 0.5
    if not lp.box_rows:
        col_lo[: lp.n], col_hi[: lp.n] = 0.0, 1.0
    h.addVars(k, col_lo, col_hi)
    h.changeColsCost(k, np.arange(k, dtype=np.int32), cost)
    A = np.asarray(lp.A_ub, dtype=np.float64)
    rows, cols = np.nonzero(A)
    starts = np.searchsorted(rows, np.arange(m)).astype(np.int32)
    if m:
        h.addRows(m, np.full(m, -inf), np.asarray(lp.b_ub, dtype=np.float64), rows.size, starts, cols.astype(np.int32),
                  A[rows, cols])
    if deadline is not None:  # (set here: filling in a large region's rows takes time too)
        h.setOptionValue("time_limit", max(deadline - time.perf_counter(), LP_GRACE))
    h.run()
    if h.getModelStatus() != hp.HighsModelStatus.kOptimal:
        return _Solution(2, None, SimpleNamespace(marginals=None))
    sol = h.getSolution()
    return _Solution(0, np.asarray(sol.col_value, dtype=np.float64),
                     SimpleNamespace(marginals=np.asarray(sol.row_dual, dtype=np.float64)))


def _past(deadline: float | None) -> bool:
    """Past `deadline`: a region LP is not even built (on a 3072-input net building one took
    about 2 s; an LP begun before the deadline gets LP_GRACE at least)."""
    return deadline is not None and time.perf_counter() > deadline


def interior_point(net: Network, pattern: list[np.ndarray], lo: np.ndarray, hi: np.ndarray,
                   mask=None, deadline: float | None = None, box_depth: bool = True) -> np.ndarray | None:
    """The deepest point of the pattern's region in the box, or None if it looks flat (or, with a
    `deadline`, when called past it or when its LP ran out of time). A partial pattern (the layers
    given, and in each only the neurons where `mask` is True) constrains only its decided neurons.
    Without `box_depth` the depth counts from the region's hyperplanes only (the point may lie on a
    face of the box; faster on many inputs: `_solve`)."""
    if _past(deadline):
        return None
    lp = _region_lp(net, pattern, lo, hi, mask, box_rows=box_depth)
    if lp.empty:
        return None
    res = _solve(lp, deadline)
    if res.status != 0 or res.x[-1] <= 1e-9:
        return None
    return np.clip(lo + (hi - lo) * res.x[: lp.n], lo, hi)


# seconds a region LP with a deadline gets even at or past it (small regions' LPs take milliseconds;
# one region of a 3072-input CIFAR net took 19 s, 20 s past a Lipschitz question's time limit)
LP_GRACE = 0.2
# exact (rational) verification is attempted up to this many multiply-adds
EXACT_WORK_LIMIT = 2_000_000
EXACT_SECONDS_PER_OP = 1e-5  # measured: ~7.5 us per rational multiply-add of float64 weights


def has_no_interior(net: Network, pattern: list[np.ndarray], lo: np.ndarray, hi: np.ndarray,
                    deadline: float | None = None, exact: bool = True, mask=None) -> bool:
    """True only if the pattern's region provably has empty interior in the box.

    The proof is a dual certificate of max t <= 0. When the LP's t is negative its multipliers are
    first checked in float64 with a rounding allowance (`_empty_by_float_farkas`: the closed region
    is empty, microseconds); otherwise, or if that fails, in exact rational arithmetic on the
    exact region data (the network weights are rationals): the float LP only suggests which
    constraints carry the certificate. Any doubt, too much work, `exact=False`, a call or an LP
    past `deadline` (a `time.perf_counter()` value; an LP begun before it gets LP_GRACE at least)
    or an exact check estimated to run past it returns False. A partial pattern (`mask`, as in
    `interior_point`) is proven for every completion of it.
    """
    if _past(deadline):
        return False
    lp = _region_lp(net, pattern, lo, hi, mask)
    if lp.empty:
        return exact and _exact_constant_violation(net, pattern, lo, hi, mask)
    return _proven_flat(net, pattern, lo, hi, lp, _solve(lp, deadline), deadline, exact, mask)


def classify_region(net: Network, pattern: list[np.ndarray], lo: np.ndarray, hi: np.ndarray,
                    deadline: float | None = None, mask=None) -> tuple[np.ndarray | None, bool]:
    """(`interior_point`, `has_no_interior`) of one (partial) pattern from a single LP solve: a
    point when the LP finds depth, else whether the region provably has no interior."""
    if _past(deadline):
        return None, False
    lp = _region_lp(net, pattern, lo, hi, mask)
    if lp.empty:
        return None, _exact_constant_violation(net, pattern, lo, hi, mask)
    res = _solve(lp, deadline)
    # any positive depth counts here (`interior_point` wants 1e-9 for a replayable point): a region
    # 1e-12 deep is a region all the same, and no certificate could prove it flat
    if res.status == 0 and res.x[-1] > 1e-15:
        return np.clip(lo + (hi - lo) * res.x[: lp.n], lo, hi), False
    # (no exact LP here: a branch-and-bound's flat-looking partial patterns are many, and one kept
    # costs only search, while its leaves are decided exactly; net171 l1->l1, 14 unstable ReLUs,
    # went from 0.8 s to open at 5 s with it)
    return None, _proven_flat(net, pattern, lo, hi, lp, res, deadline, True, mask, solve_lp=False)


def _proven_flat(net: Network, pattern, lo: np.ndarray, hi: np.ndarray, lp: RegionLp, res, deadline, exact: bool,
                 mask, solve_lp: bool = True) -> bool:
    """`has_no_interior` after its LP: the certificate checks (`solve_lp`: the exact LP last)."""
    if res.status != 0 or res.x[-1] > 1e-9:
        return False
    y = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=np.float64), 0.0)
    if res.x[-1] < 0 and np.any(y > 0) and _empty_by_float_farkas(net, pattern, lo, hi, y, mask):
        return True
    blocks = relu_blocks(net)
    work = sum(b.weight.size for b in blocks[:-1]) * lo.size
    if not exact or not np.any(y > 0) or work > EXACT_WORK_LIMIT:
        return False
    if deadline is not None and time.perf_counter() + work * EXACT_SECONDS_PER_OP > deadline:
        return False
    data = _exact_region_rows(net, pattern, lo, hi, mask)
    if data is None:
        return False
    A, b = data  # exact rows of  A [xi; t] <= b, same order as the float LP
    if A.shape[0] != lp.A_ub.shape[0]:
        return False
    if _farkas_bound(A, b, y, lo.size) <= 0:
        return True
    # else solve for exact multipliers on the float support (works when the float ones are poor
    # but the active set is right)
    support = np.flatnonzero(y > 1e-9 * max(1.0, float(np.max(y))))
    y_exact = _exact_dual(A[support], y[support])
    if y_exact is not None and all(v >= 0 for v in y_exact):
        if sum((yi * bi for yi, bi in zip(y_exact, b[support])), Fraction(0)) <= 0:
            return True
    if not solve_lp:
        return False
    # else the float LP's support was wrong: solve the LP exactly, from the float LP's basis
    opt = exact_depth(A, b, res.x, deadline)
    return opt is not None and opt.value <= 0


def exact_depth(A: np.ndarray, b: np.ndarray, z: np.ndarray | None, deadline: float | None = None) -> ExactLp | None:
    """The region LP max t s.t. A [xi; t] <= b (exact rows, scaled) solved in rationals
    (`solvers.exact_lp`), warm-started from the float optimum z = [xi; t] (the box's centre when
    None): an exact optimal vertex with its dual certificate, or None (no budget or trouble). Its
    value's sign decides the region (> 0: the vertex is strictly inside; <= 0: no interior)."""
    n = A.shape[1] - 1

    def start() -> list[Fraction]:
        xi = [Fraction(1, 2)] * n if z is None else [min(max(Fraction(float(v)), Fraction(0)), Fraction(1))
                                                     for v in z[:n]]
        # every region row has a positive t coefficient: t = the smallest slack is feasible
        t = min((rhs - sum((a * x for a, x in zip(row[:n], xi) if a), Fraction(0))) / row[n] for row, rhs in zip(A, b))
        return xi + [t]

    # each row times the lcm of its denominators: integer rows (cheaper rationals in the
    # eliminations). A positive row scaling keeps the feasible set and the objective, so the
    # optimum (and its sign, all the callers read) is unchanged; only the multipliers rescale
    rows, rhs = [], []
    for row, r in zip(A, b):
        scale = math.lcm(*(v.denominator for v in row), r.denominator)
        rows.append([Fraction(v * scale) for v in row])
        rhs.append(Fraction(r * scale))
    c = [Fraction(0)] * n + [Fraction(1)]
    return exact_max(rows, rhs, c, start, deadline=deadline, hint=None if z is None else _float_basis(A, b, z))


def _float_basis(A: np.ndarray, b: np.ndarray, z: np.ndarray) -> list[int] | None:
    """The n + 1 tightest linearly independent rows at the float optimum z (a likely basis)."""
    Af = np.array([[float(v) for v in row] for row in A])
    bf = np.array([float(v) for v in b])
    k = Af.shape[1]
    chosen: list[int] = []
    for i in np.argsort(bf - Af @ z, kind="stable"):
        trial = Af[chosen + [int(i)]]
        if np.linalg.matrix_rank(trial, tol=1e-10 * max(1.0, float(np.abs(trial).max()))) == len(chosen) + 1:
            chosen.append(int(i))
            if len(chosen) == k:
                return chosen
    return None


def _empty_by_float_farkas(net: Network, pattern, lo: np.ndarray, hi: np.ndarray, y: np.ndarray, mask=None) -> bool:
    """True if multipliers y >= 0 of the LP's region rows prove, in float64 with a rounding
    allowance, that no point of the closed box satisfies the pattern's sign constraints.

    Row i of the LP is sign_i z_i(x) >= t * scale_i, so with c_i = y_i / scale_i >= 0 (any
    nonnegative float works: the check does not need the LP's accuracy) every point of the region
    has h(x) = sum_i c_i sign_i z_i(x) >= 0. The computed z_i differ from the exact affine maps by
    at most gamma(N) times their absolute-value chain (|W| products with the pattern's slopes,
    applied to max(|lo|, |hi|) and |b|), and forming h and maximising it over the box adds
    roundings bounded by the same magnitudes; if the maximum plus three such allowances is still
    negative, the region is empty."""
    from .rounding import gamma

    blocks = relu_blocks(net)
    n = lo.size
    w = hi - lo
    xmag = np.maximum(np.abs(lo), np.abs(hi))
    M, d = np.eye(n), np.zeros(n)
    Mm, dm = np.eye(n), np.zeros(n)  # absolute-value chains of M, d
    g, h0, mag = np.zeros(n), 0.0, 0.0
    row = 0
    for j, (blk, s) in enumerate(zip(blocks[:-1], pattern)):
        Mz, dz = blk.weight @ M, blk.weight @ d + blk.bias
        Mmz, dmz = np.abs(blk.weight) @ Mm, np.abs(blk.weight) @ dm + np.abs(blk.bias)
        sign = 2.0 * np.asarray(s, dtype=np.float64) - 1.0
        G, c0 = Mz * w[None, :], Mz @ lo + dz
        scale = np.abs(G).sum(axis=1) + np.abs(c0)
        keep = (scale > 0) & _decided(mask, j, sign.size)  # the rows `_region_lp` kept, in its order
        coef = np.zeros(sign.size)
        coef[keep] = y[row: row + int(keep.sum())] / scale[keep]
        row += int(keep.sum())
        g += (coef * sign) @ Mz
        h0 += float((coef * sign) @ dz)
        mag += float(coef @ (Mmz @ xmag + dmz))
        M, d = s[:, None] * Mz, s * dz
        Mm, dm = s[:, None] * Mmz, s * dmz
    if not np.all(np.isfinite(g)) or not np.isfinite(h0) or not np.isfinite(mag):
        return False
    value = float(np.maximum(g * lo, g * hi).sum() + h0)
    N = sum(b.in_dim for b in blocks) + row + n + 8
    return value + 3.0 * gamma(N) * mag * (1.0 + 1e-12) + 1e-300 < 0.0


def _farkas_bound(A: np.ndarray, b: np.ndarray, y_float: np.ndarray, n: int) -> Fraction:
    """An exact upper bound on max t over {A [xi; t] <= b} from approximate multipliers y >= 0.

    For y >= 0 with A^T y = e_t, every feasible point has t = y^T A [xi; t] <= y^T b. The float
    y only nearly cancels the xi columns; the exact residual r is cancelled with the box rows
    (-e_k + e_t <= 0 and e_k + e_t <= 1, the last 2n rows), which keeps y >= 0, and the result
    is normalised by its t column. Returns +inf (as a large Fraction) when that column is not positive.
    """
    y = [Fraction(float(v)) for v in y_float]
    cols = [sum((yi * A[i, j] for i, yi in enumerate(y) if yi), Fraction(0)) for j in range(n + 1)]
    value = sum((yi * b[i] for i, yi in enumerate(y) if yi), Fraction(0))
    t_col = cols[n]
    for k in range(n):
        r = cols[k]
        if r > 0:  # add r * (lower box row k): -r e_k + r e_t <= 0
            t_col += r
        elif r < 0:  # add |r| * (upper box row k): |r| e_k + |r| e_t <= |r|
            t_col -= r
            value -= r
    if t_col <= 0:
        return Fraction(10**18)
    return value / t_col


def _exact_region_rows(net: Network, pattern, lo, hi, mask=None):
    """The rows of the region LP in exact rationals (None when a row degenerates differently)."""
    n = lo.size
    rows, rhs = [], []
    for j, s in enumerate(pattern):
        G, c0 = _exact_layer(net, lo, hi, pattern, j)
        decided = _decided(mask, j, len(G))
        for i in range(len(G)):
            if not decided[i] or G[i] is None:
                continue  # (None: z == 0 on the whole region, no constraint; matches the float LP)
            if s[i] > 0.5:
                rows.append([-g for g in G[i]] + [Fraction(1)])
                rhs.append(c0[i])
            else:
                rows.append(list(G[i]) + [Fraction(1)])
                rhs.append(-c0[i])
    for k in range(n):
        e = [Fraction(0)] * (n + 1)
        e[k], e[n] = Fraction(-1), Fraction(1)
        rows.append(e)
        rhs.append(Fraction(0))
    for k in range(n):
        e = [Fraction(0)] * (n + 1)
        e[k], e[n] = Fraction(1), Fraction(1)
        rows.append(e)
        rhs.append(Fraction(1))
    return np.array(rows, dtype=object), np.array(rhs, dtype=object)


# exact layer data by (net, box, phases of the layers before): a branch-and-bound over patterns
# proves many siblings that share every earlier layer, and the rational products dominate its time
_EXACT_LAYERS: dict[tuple, tuple] = {}
_EXACT_LAYERS_MAX = 4096


def _exact_layer(net: Network, lo: np.ndarray, hi: np.ndarray, pattern, j: int):
    """(G, c0) of hidden layer j under the exact phases pattern[:j]: the layer's pre-activations
    in box coordinates xi in [0, 1]^n, z = G xi + c0, each row divided by the float64 rounding of
    its l1 norm as the float LP normalises it (rationals; the weights and box ends are read as the
    rationals they are; a row of G None where z == 0 on the whole box)."""
    key = (id(net), lo.tobytes(), hi.tobytes(), tuple(np.asarray(s, dtype=np.float64).tobytes() for s in pattern[:j]))
    hit = _EXACT_LAYERS.get(key)
    if hit is not None and hit[0] is net:
        return hit[1][2:]
    F = np.vectorize(Fraction, otypes=[object])
    blk = relu_blocks(net)[j]
    if j == 0:
        n = lo.size
        M = np.array([[Fraction(int(i == k)) for k in range(n)] for i in range(n)], dtype=object)
        d = np.array([Fraction(0)] * n, dtype=object)
    else:
        prev = _exact_layer_maps(net, lo, hi, pattern, j - 1)
        sv = np.array([Fraction(int(v > 0.5)) for v in pattern[j - 1]], dtype=object)
        M, d = sv[:, None] * prev[0], sv * prev[1]
    W, bias = F(blk.weight), F(blk.bias)
    Mz, dz = W.dot(M), W.dot(d) + bias
    lo_f, w_f = F(lo), F(hi) - F(lo)
    G = Mz * w_f[None, :]
    c0 = Mz.dot(lo_f) + dz
    Gn: list = []
    cn: list = []
    for i in range(G.shape[0]):
        scale = sum(abs(g) for g in G[i]) + abs(c0[i])
        # the float LP's normalisation, exactly (any positive row scaling keeps the region)
        sc = Fraction(float(scale)) if scale != 0 else None
        Gn.append(None if sc is None else tuple(g / sc for g in G[i]))
        cn.append(None if sc is None else c0[i] / sc)
    if len(_EXACT_LAYERS) >= _EXACT_LAYERS_MAX:
        _EXACT_LAYERS.pop(next(iter(_EXACT_LAYERS)))
    _EXACT_LAYERS[key] = (net, (Mz, dz, Gn, cn))
    return Gn, cn


def _exact_layer_maps(net: Network, lo: np.ndarray, hi: np.ndarray, pattern, j: int):
    """(Mz, dz): hidden layer j's exact pre-activations as an affine map of x (cached with `_exact_layer`)."""
    _exact_layer(net, lo, hi, pattern, j)
    key = (id(net), lo.tobytes(), hi.tobytes(), tuple(np.asarray(s, dtype=np.float64).tobytes() for s in pattern[:j]))
    return _EXACT_LAYERS[key][1][:2]


def _exact_dual(A_s: np.ndarray, y_float: np.ndarray) -> list[Fraction] | None:
    """Exact y >= 0 (hopefully) with A_s^T y = (0, ..., 0, 1): the t-column sums to 1, the xi
    columns cancel. Free unknowns keep their float values; pivots are solved exactly."""
    m, k = A_s.shape  # k = n + 1 equations, m unknowns
    aug, pivots = rref([[A_s[i, j] for i in range(m)] + [Fraction(int(j == k - 1))] for j in range(k)], m)
    if any(all(v == 0 for v in row[:m]) and row[m] != 0 for row in aug):
        return None  # inconsistent: the float support was wrong
    y = [Fraction(float(v)) for v in y_float]
    for row_i, col in enumerate(pivots):
        rest = sum((aug[row_i][j] * y[j] for j in range(m) if j not in pivots), Fraction(0))
        y[col] = aug[row_i][m] - rest
    return y


def _exact_constant_violation(net: Network, pattern, lo, hi, mask=None) -> bool:
    """The float LP found a constant neuron of the wrong sign: confirm it exactly."""
    data = _exact_region_rows(net, pattern, lo, hi, mask)
    if data is None:
        return False
    A, b = data
    n = lo.size
    for row, rhs in zip(A, b):
        if all(v == 0 for v in row[:n]) and rhs < 0 and row[n] > 0:
            return True  # 0 + scale * t <= rhs < 0 forces t < 0: no interior point
    return False
