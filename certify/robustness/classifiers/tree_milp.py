"""Kantchelian et al. (2016) MILP: can the ensemble's class change inside a box, and how close?

Variables (only for what the box leaves open):
- one predicate binary p per (feature, cutoff) that the box straddles (blo <= cutoff < bhi):
  p = 1 iff x_f <= cutoff; cutoffs the box lies on one side of are constants;
- one leaf variable in [0, 1] per reachable leaf, one per tree summing to 1; for every reachable
  split with an open predicate, sum(left leaves) <= p and sum(right leaves) <= 1 - p. With integral
  predicates this selects exactly the leaf the point reaches, so the leaves need not be integral;
- monotone predicates per feature: p(T_a) <= p(T_b) for T_a < T_b;
- flip: some competitor j has S_c - S_j <= rhs (one binary z_j per competitor, big-M from the
  exact maximum of the margin; binary problems need none).

Objectives: "radius" minimises the linf distortion t >= distance from x0 to the cell the
predicates select (telescoped rows per feature side, coefficients rounded down so the model is a
relaxation); "lower"/"upper" maximise how far the flip lies along one feature (number of open
cutoffs it is above / below); "none" asks feasibility only.

Every row is exact as stored, coefficients that come from rounding are rounded toward a
relaxation, and the flip row's right-hand side includes the scores' rounding bound, so the set of
points the model admits contains every float64 point of the box whose class may change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from solvers.lp import Expr, MilpBuilder, MilpModel

from .tree_model import TreeEnsemble


@dataclass
class FlipModel:
    """The built model and the map from its predicate variables back to cutoffs."""

    model: MilpModel | None            # None: no flip is possible in the box (proven exactly)
    cutoffs: dict[int, np.ndarray] = field(default_factory=dict)   # feature -> open cutoffs (ascending)
    pvars: dict[int, np.ndarray] = field(default_factory=dict)     # feature -> variable index per cutoff
    n_open: int = 0

    def cells(self, x: np.ndarray) -> dict[int, tuple[float, float]]:
        """Per feature with open cutoffs, (a, b): the solution's predicates say a < x_f <= b."""
        out = {}
        for f, cs in self.cutoffs.items():
            p = x[self.pvars[f]] > 0.5
            above = cs[~p]
            below = cs[p]
            out[f] = (float(above.max()) if above.size else -np.inf, float(below.min()) if below.size else np.inf)
        return out


def fraction_down(v: Fraction) -> float:
    """The largest float64 <= v."""
    f = float(v)
    return f if Fraction(f) <= v else float(np.nextafter(f, -np.inf))


def fraction_up(v: Fraction) -> float:
    """The smallest float64 >= v."""
    f = float(v)
    return f if Fraction(f) >= v else float(np.nextafter(f, np.inf))


def first_above(c: float) -> float:
    """The smallest float64 > c (the nearest point sent right by the split x <= c)."""
    return float(np.nextafter(c, np.inf))


def build_flip_model(ens: TreeEnsemble, c: int, blo: np.ndarray, bhi: np.ndarray, rhs: float, *,
                     objective: str = "none", x0: np.ndarray | None = None, feature: int | None = None) -> FlipModel:
    """The flip MILP over the closed box [blo, bhi] (see the module docstring)."""
    b = MilpBuilder()
    # ---- open predicates
    open_cut: dict[int, np.ndarray] = {}
    pvars: dict[int, np.ndarray] = {}
    for f, cs in enumerate(ens.cutoffs()):
        cs = cs[(cs >= blo[f]) & (cs < bhi[f])]
        if cs.size:
            open_cut[f] = cs
            pvars[f] = b.add_binaries(cs.size, group=f"pred{f}")
    def pvar(f: int, cut: float) -> int | None:
        cs = open_cut.get(f)
        if cs is None:
            return None
        k = int(np.searchsorted(cs, cut))
        return int(pvars[f][k]) if k < cs.size and cs[k] == cut else None

    # ---- reachable leaves and consistency rows
    rows: list[tuple[dict[int, float], float, float]] = []  # (coef, lo, hi)
    tree_leaves: list[tuple[np.ndarray, np.ndarray]] = []   # (leaf node ids, variable ids)
    for t in ens.trees:
        leaves: list[int] = []
        splits: list[tuple[int, list[int], list[int]]] = []  # (pred var, left leaf positions, right ones)

        def walk(node: int) -> list[int]:
            f = t.feature[node]
            if f < 0:
                leaves.append(node)
                return [len(leaves) - 1]
            cut = t.cutoff[node]
            go_left, go_right = blo[f] <= cut, bhi[f] > cut
            left = walk(int(t.left[node])) if go_left else []
            right = walk(int(t.right[node])) if go_right else []
            if go_left and go_right:
                splits.append((pvar(f, cut), left, right))
            return left + right

        walk(0)
        ids = b.add_vars(len(leaves), 0.0, 1.0, group="leaf")
        tree_leaves.append((np.array(leaves), ids))
        rows.append(({int(i): 1.0 for i in ids}, 1.0, 1.0))
        for p, left, right in splits:
            if p is None:  # pragma: no cover - every straddled cutoff has a predicate
                raise AssertionError("open split without predicate")
            rows.append(({**{int(ids[k]): 1.0 for k in left}, p: -1.0}, -np.inf, 0.0))
            rows.append(({**{int(ids[k]): 1.0 for k in right}, p: 1.0}, -np.inf, 1.0))
    for f, cs in open_cut.items():  # x <= T_a implies x <= T_b for T_a < T_b
        v = pvars[f]
        for k in range(cs.size - 1):
            rows.append(({int(v[k]): 1.0, int(v[k + 1]): -1.0}, -np.inf, 0.0))
    # ---- flip rows
    K = ens.n_classes
    comps = []
    for j in range(K):
        if j == c:
            continue
        lo_m = hi_m = Fraction(float(ens.base[c])) - Fraction(float(ens.base[j]))
        coef: dict[int, float] = {}
        for t, (leaves, ids) in zip(ens.trees, tree_leaves):
            w = [Fraction(float(t.value[lf, c])) - Fraction(float(t.value[lf, j])) for lf in leaves]
            lo_m += min(w)
            hi_m += max(w)
            for wk, vid in zip(w, ids):
                if wk != 0:
                    coef[int(vid)] = float(wk)  # rounding covered by rhs (see tree_model.guard)
        if lo_m > Fraction(rhs) + 2 * Fraction(ens.guard):
            continue  # class j cannot win anywhere in the box
        const = float(Fraction(float(ens.base[c])) - Fraction(float(ens.base[j])))
        if not coef and const > rhs:
            continue
        comps.append((coef, const, fraction_up(hi_m)))
    if not comps:
        return FlipModel(None, open_cut, pvars, sum(cs.size for cs in open_cut.values()))
    if len(comps) == 1:
        coef, const, _ = comps[0]
        rows.append((coef, -np.inf, rhs - const))
    else:
        z = b.add_binaries(len(comps), group="competitor")
        rows.append(({int(v): 1.0 for v in z}, 1.0, 1.0))
        for (coef, const, big), zj in zip(comps, z):
            M = max(big - rhs, 0.0) * 2 + 1.0  # margin - rhs <= M (1 - z): inactive when z = 0
            rows.append(({**coef, int(zj): M}, -np.inf, rhs - const + M))
    # ---- objective
    obj: dict[int, float] = {}
    sense = "min"
    if objective == "radius":
        assert x0 is not None
        tvar = int(b.add_vars(1, 0.0, np.inf, group="t")[0])
        obj = {tvar: 1.0}
        for f, cs in open_cut.items():
            xf = Fraction(float(x0[f]))
            right = [(Fraction(first_above(float(cut))) - xf, int(v)) for cut, v in zip(cs, pvars[f]) if cut >= x0[f]]
            left = [(xf - Fraction(float(cut)), int(v)) for cut, v in zip(cs, pvars[f]) if cut < x0[f]]
            right.sort()
            left.sort()
            # right of x0 (ascending): t >= sum_k D_k (1 - p_k); left (nearest first): t >= sum_k D_k p_k
            for side, flip_on_one in ((right, False), (left, True)):
                if not side:
                    continue
                prev, coef, total = Fraction(0), {tvar: 1.0}, Fraction(0)
                for d, v in side:
                    delta = fraction_down(d - prev)
                    prev = d
                    total += Fraction(delta)
                    coef[v] = -delta if flip_on_one else delta
                rows.append((coef, 0.0 if flip_on_one else fraction_down(total), np.inf))
    elif objective in ("lower", "upper"):
        sense = "max"
        if feature in open_cut:
            for v in pvars[feature]:
                obj[int(v)] = -1.0 if objective == "lower" else 1.0
    elif objective != "none":
        raise ValueError(f"unknown objective {objective!r}")
    N = b.num_vars
    r_idx, c_idx, vals = [], [], []
    for r, (coef, _, _) in enumerate(rows):
        r_idx.extend([r] * len(coef))
        c_idx.extend(coef.keys())
        vals.extend(coef.values())
    A = sp.csr_matrix((np.array(vals, dtype=np.float64), (np.array(r_idx, dtype=np.int64),
                       np.array(c_idx, dtype=np.int64))), shape=(len(rows), N))
    b.constrain(Expr(A, np.zeros(len(rows))), np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
                group="rows")
    oidx = np.fromiter(obj.keys(), dtype=np.int64)
    oval = np.fromiter(obj.values(), dtype=np.float64)
    b.set_objective(Expr(sp.csr_matrix((oval, (np.zeros(oidx.size, dtype=np.int64), oidx)), shape=(1, N)),
                         np.zeros(1)), sense)
    return FlipModel(b.build(), open_cut, pvars, sum(cs.size for cs in open_cut.values()))


__all__ = ["FlipModel", "build_flip_model", "first_above", "fraction_down", "fraction_up"]
