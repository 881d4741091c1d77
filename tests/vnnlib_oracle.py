"""Independent oracles for verification tests.

- `unsafe_by_oracle(text, x, y)`: evaluates the VNNLIB formula text itself at a point (its own
  S-expression reader and a recursive evaluator; nothing shared with certify's parser);
- `exact_max_margin(net, lo, hi, G, H, d)`: the exact maximum over the box of
  min_r (d_r - G_r x - H_r f(x)) by enumerating every activation region (LP feasibility pruning,
  scipy's HiGHS), the network composed from its layers directly.
"""

from __future__ import annotations

import re

import numpy as np
from scipy.optimize import linprog

from models.ir import Affine, ReLU


def _sexpr(text: str):
    toks = re.findall(r"\(|\)|[^\s()]+", re.sub(r";[^\n]*", "", text))
    stack = [[]]
    for t in toks:
        if t == "(":
            stack.append([])
        elif t == ")":
            last = stack.pop()
            stack[-1].append(last)
        else:
            stack[-1].append(t)
    return stack[0]


def _value(term, env):
    if isinstance(term, str):
        return env[term] if term in env else float(term)
    op, *args = term
    vals = [_value(a, env) for a in args]
    if op == "+":
        return sum(vals)
    if op == "-":
        return -vals[0] if len(vals) == 1 else vals[0] - sum(vals[1:])
    if op == "*":
        return float(np.prod(vals))
    raise AssertionError(op)


def _holds(f, env) -> bool:
    if f == "true":
        return True
    if f == "false":
        return False
    op, *args = f
    if op == "and":
        return all(_holds(a, env) for a in args)
    if op == "or":
        return any(_holds(a, env) for a in args)
    if op == "not":
        return not _holds(args[0], env)
    v = [_value(a, env) for a in args]
    cmp = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
           ">": lambda a, b: a > b, "=": lambda a, b: a == b}[op]
    return all(cmp(a, b) for a, b in zip(v, v[1:]))


def unsafe_by_oracle(text: str, x, y) -> bool:
    """Do the asserts of VNNLIB `text` all hold at inputs x, outputs y? (evaluated directly)"""
    env = {f"X_{i}": float(v) for i, v in enumerate(x)} | {f"Y_{j}": float(v) for j, v in enumerate(y)}
    return all(_holds(form[1], env) for form in _sexpr(text) if form[0] == "assert")


def _feasible(P: list, q: list, lo, hi) -> bool:
    if not P:
        return True
    res = linprog(np.zeros(len(lo)), A_ub=np.array(P), b_ub=np.array(q), bounds=list(zip(lo, hi)), method="highs")
    return res.status == 0


def activation_regions(net, lo, hi):
    """Yield (P, q, A, c): x in the box with P x <= q has f(x) = A x + c; the regions cover the box."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    n = lo.size
    layers = list(net.layers)

    def walk(k, M, c, P, q):
        while k < len(layers) and isinstance(layers[k], Affine):
            M, c = layers[k].weight @ M, layers[k].weight @ c + layers[k].bias
            k += 1
        if k == len(layers):
            yield P, q, M, c
            return
        assert isinstance(layers[k], ReLU)
        yield from split(k, 0, M, c, M.copy(), c.copy(), P, q)

    def split(k, i, M, c, Mo, co, P, q):
        if i == M.shape[0]:
            yield from walk(k + 1, Mo, co, P, q)
            return
        row, c0 = M[i], c[i]
        zmin = c0 + np.minimum(row * lo, row * hi).sum()
        zmax = c0 + np.maximum(row * lo, row * hi).sum()
        if zmin >= 0:  # active on the whole box
            yield from split(k, i + 1, M, c, Mo, co, P, q)
            return
        if zmax <= 0:
            Mz, cz = Mo.copy(), co.copy()
            Mz[i], cz[i] = 0.0, 0.0
            yield from split(k, i + 1, M, c, Mz, cz, P, q)
            return
        Pa, qa = P + [-row], q + [c0]  # z_i >= 0
        if _feasible(Pa, qa, lo, hi):
            yield from split(k, i + 1, M, c, Mo, co, Pa, qa)
        Pi, qi = P + [row], q + [-c0]  # z_i <= 0
        if _feasible(Pi, qi, lo, hi):
            Mz, cz = Mo.copy(), co.copy()
            Mz[i], cz[i] = 0.0, 0.0
            yield from split(k, i + 1, M, c, Mz, cz, Pi, qi)

    yield from walk(0, np.eye(n), np.zeros(n), [], [])


def exact_max_margin(net, lo, hi, G, H, d) -> tuple[float, int]:
    """max over the box of min_r (d_r - G_r x - H_r f(x)) (and the number of regions), by one LP per
    activation region: max t s.t. t <= d_r - (G_r + H_r A) x - H_r c, region rows, box."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    n = lo.size
    best, count = -np.inf, 0
    for P, q, A, c in activation_regions(net, lo, hi):
        count += 1
        rows = G + H @ A  # (R, n)
        A_ub = np.hstack([rows, np.ones((len(d), 1))])  # rows x + t <= d - H c
        b_ub = d - H @ c
        if P:
            A_ub = np.vstack([A_ub, np.hstack([np.array(P), np.zeros((len(P), 1))])])
            b_ub = np.concatenate([b_ub, q])
        res = linprog(np.r_[np.zeros(n), -1.0], A_ub=A_ub, b_ub=b_ub, bounds=list(zip(lo, hi)) + [(None, None)],
                      method="highs")
        if res.status == 0:
            best = max(best, -res.fun)
    return best, count


def disagreements(res, exact: float, text: str, net, lo, hi, tol: float = 1e-6) -> list[str]:
    """How a verification result `res` contradicts the exact maximum unsafe margin `exact` (of
    `exact_max_margin`) and the property `text`: its interval missing the margin, `unsat` with a
    reachable unsafe point, `sat` with a negative margin or a counterexample outside the box or
    that the formula evaluator above finds safe. Empty when it agrees (`tol`: the LPs' tolerance)."""
    why = []
    if res.upper is not None and res.upper < exact - tol:
        why.append(f"upper {res.upper} below the exact margin {exact}")
    if res.lower is not None and res.lower > exact + tol:
        why.append(f"lower {res.lower} above the exact margin {exact}")
    if res.result == "unsat" and exact >= tol:
        why.append(f"unsat with a reachable unsafe margin {exact}")
    if res.result == "sat":
        x = np.asarray(res.counterexample["x"], dtype=np.float64)
        if not (np.all(x >= lo) and np.all(x <= hi) and unsafe_by_oracle(text, x, net.forward(x))):
            why.append("counterexample not unsafe")
        if exact < -tol:
            why.append(f"sat with a negative exact margin {exact}")
    return why
