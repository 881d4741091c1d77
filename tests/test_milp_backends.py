"""The three MILP back-ends on solver-neutral models (oracles: brute force + scipy LPs)."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from models.errors import BadInput
from solvers.milp.backends import choose_backend, get_backend
from solvers.lp import Expr
from solvers.milp.gurobi import RESTRICTED_LINEAR_LIMIT, licence
from solvers.lp import MilpBuilder
from solvers.milp import SolveOptions

BACKENDS = ["highs", "gurobi", "cbc"]


def _small_model(seed: int, sense: str):
    """3 continuous + 4 binary variables, equality, range and one-sided rows, objective offset."""
    rng = np.random.default_rng(seed)
    b = MilpBuilder()
    x = b.add_vars(3, [-1.0, 0.0, -2.0], [2.0, 3.0, 1.0], group="x")
    y = b.add_binaries(4, group="y")
    v = b.var_expr(np.r_[x, y])
    A = rng.integers(-3, 4, size=(4, 7)).astype(float)
    b.constrain(v.affine(A[:1]), lo=-1.0, hi=-1.0 + 0.5)  # range row
    b.constrain(v.affine(A[1:2]), hi=2.0)
    b.constrain(v.affine(A[2:3]), lo=-3.0)
    b.constrain(v.affine(np.r_[1.0, 1.0, 1.0, 0, 0, 0, 0][None, :]) - v.affine(np.r_[0, 0, 0, 1.0, 1.0, 0, 0][None, :]), lo=0.0, hi=0.0)
    c = rng.standard_normal(7)
    b.set_objective(v.affine(c[None, :], 1.25), sense)
    model = b.build()
    return model


def _brute_force(model) -> float:
    """Enumerate the binaries, solve the continuous LP with scipy."""
    ints = np.flatnonzero(model.integer)
    cont = np.flatnonzero(~model.integer)
    A = model.A.toarray()
    best = None
    sgn = -1.0 if model.sense == "max" else 1.0
    for bits in product((0.0, 1.0), repeat=ints.size):
        shift = A[:, ints] @ np.array(bits)
        Ac = A[:, cont]
        fin_hi, fin_lo = np.isfinite(model.row_hi), np.isfinite(model.row_lo)
        A_ub = np.vstack([Ac[fin_hi], -Ac[fin_lo]])
        b_ub = np.concatenate([model.row_hi[fin_hi] - shift[fin_hi], -(model.row_lo[fin_lo] - shift[fin_lo])])
        res = linprog(sgn * model.obj[cont], A_ub=A_ub, b_ub=b_ub, bounds=list(zip(model.col_lo[cont], model.col_hi[cont])), method="highs")
        if res.status != 0:
            continue
        val = sgn * res.fun + model.obj[ints] @ np.array(bits) + model.obj_offset
        best = val if best is None else (max(best, val) if model.sense == "max" else min(best, val))
    return best


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed,sense", [(0, "max"), (1, "min"), (2, "max"), (3, "min")])
def test_backends_match_brute_force(backend, seed, sense):
    model = _small_model(seed, sense)
    expect = _brute_force(model)
    res = get_backend(backend).solve(model, SolveOptions())
    if expect is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal", res.message
    assert res.objective == pytest.approx(expect, abs=1e-6)
    assert res.bound == pytest.approx(expect, abs=1e-5)
    # the bound is on the right side of the incumbent, and the incumbent is feasible
    assert (res.bound >= res.objective - 1e-9) if sense == "max" else (res.bound <= res.objective + 1e-9)
    ax = model.A @ res.x
    assert np.all(ax >= model.row_lo - 1e-6) and np.all(ax <= model.row_hi + 1e-6)
    assert model.objective_value(res.x) == pytest.approx(res.objective, abs=1e-9)


def _hard_model():
    """A market-split instance (Cornuejols-Dawande): far too hard to finish in a fraction of a second."""
    rng = np.random.default_rng(7)
    m, n = 4, 40
    A = rng.integers(0, 100, size=(m, n)).astype(float)
    b = MilpBuilder()
    x = b.add_binaries(n, group="x")
    s = b.add_vars(m, 0.0, np.inf, group="slack+")
    t = b.add_vars(m, 0.0, np.inf, group="slack-")
    e = b.var_expr(np.r_[x, s, t])
    rows = np.hstack([A, -np.eye(m), np.eye(m)])
    b.constrain(e.affine(rows), lo=np.floor(A.sum(axis=1) / 2), hi=np.floor(A.sum(axis=1) / 2))
    b.set_objective(e.affine(np.r_[np.zeros(n), -np.ones(2 * m)][None, :]), "max")
    return b.build()


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_limit_gives_sound_partial_result(backend):
    model = _hard_model()
    res = get_backend(backend).solve(model, SolveOptions(time_limit=0.3, threads=1))
    assert res.status == "time_limit", res.message
    # the optimum is at most 0 (CBC's log prints bounds with 3 decimals: half a unit is added)
    assert res.bound is None or res.bound <= (5e-4 + 1e-9 if backend == "cbc" else 1e-9)
    if res.bound is not None and res.objective is not None:
        assert res.objective <= res.bound
    if res.x is not None:
        assert model.objective_value(res.x) == pytest.approx(res.objective, abs=1e-6)
        if res.bound is not None:
            assert res.bound >= res.objective - 1e-6


def _model_with_vars(n: int, quadratic: bool = False):
    b = MilpBuilder()
    v = b.add_vars(n, 0.0, 1.0)
    e = b.var_expr(v)
    b.constrain(e.affine(np.ones((1, n))), hi=1.0)
    b.set_objective(e.affine(np.ones((1, n))), "max")
    if quadratic:
        b.add_quadratic_objective(sp.eye(n, format="csr") * -1.0)
    return b.build()


@pytest.mark.gurobi
def test_gurobi_size_limit_is_detected_before_solving():
    big = _model_with_vars(RESTRICTED_LINEAR_LIMIT + 5)
    lic = licence()
    assert lic.usable
    gurobi = get_backend("gurobi")
    if not lic.restricted:  # a full licence: nothing to refuse
        assert gurobi.unsupported_reason(big) is None
        return
    assert "size-limited" in gurobi.unsupported_reason(big)
    with pytest.raises(BadInput, match="size-limited"):
        choose_backend("gurobi", big)
    choice = choose_backend("auto", big)
    assert choice.backend.name == "highs" and "size-limited" in choice.notes[0]
    res = choice.backend.solve(big, SolveOptions())
    assert res.status == "optimal" and res.objective == pytest.approx(1.0)
    small = _model_with_vars(50)
    assert choose_backend("auto", small).backend.name == "gurobi"
    assert "quadratic" in gurobi.unsupported_reason(_model_with_vars(250, quadratic=True))


@pytest.mark.parametrize("backend", ["highs", "cbc"])
def test_open_backends_refuse_quadratic_models(backend):
    with pytest.raises(BadInput, match="quadratic"):
        choose_backend(backend, _model_with_vars(3, quadratic=True))


def test_unknown_backend_is_bad_input():
    with pytest.raises(BadInput, match="unknown backend"):
        get_backend("cplex")


def test_expr_algebra_matches_dense():
    rng = np.random.default_rng(0)
    e = Expr.variables(np.array([2, 0, 1]), 4) + rng.standard_normal(3)
    W = rng.standard_normal((2, 3))
    v = rng.standard_normal(4)
    dense = np.zeros((3, 4))
    dense[[0, 1, 2], [2, 0, 1]] = 1.0
    assert np.allclose(e.affine(W, 0.5).value(v), W @ (dense @ v + e.const) + 0.5)
    sc = Expr.scatter(5, [(np.array([4, 1]), e[:2]), (np.array([0]), e[2:])])
    out = sc.value(v)
    full = dense @ v + e.const
    assert np.allclose(out, [full[2], full[1], 0.0, 0.0, full[0]])


def test_highs_rejecting_a_model_reports_an_error_without_a_bound():
    """HiGHS refuses coefficients >= 1e15 at passModel and would then 'solve' an empty model whose
    dual bound (0) is meaningless: the back-end must say error and give no bound."""
    b = MilpBuilder()
    x = b.add_binaries(2, group="x")
    e = b.var_expr(x)
    b.constrain(e.affine(np.array([[1e16, 1.0]])), hi=5.0)
    b.set_objective(e.affine(np.array([[1.0, 1.0]])), "max")
    res = get_backend("highs").solve(b.build(), SolveOptions())
    assert res.status == "error" and res.bound is None


@pytest.mark.parametrize("scale", [1e-7, 1e7])
def test_cbc_bound_is_sound_at_any_objective_scale(scale):
    """CBC's log prints bounds with 3 decimals; the back-end scales the objective by a power of
    two so that the digits stay meaningful. Oracle: brute force over the binaries."""
    rng = np.random.default_rng(3)
    n = 12
    c, a = rng.uniform(0.1, 1.0, n) * scale, rng.uniform(1, 10, n)
    b = MilpBuilder()
    x = b.add_binaries(n, group="x")
    e = b.var_expr(x)
    b.constrain(e.affine(a[None, :]), hi=float(a.sum() / 3))
    b.set_objective(e.affine(c[None, :]), "max")
    best = max(float(c @ np.array(v)) for v in product((0.0, 1.0), repeat=n) if a @ np.array(v) <= a.sum() / 3)
    res = get_backend("cbc").solve(b.build(), SolveOptions(abs_gap=0.0))
    assert res.status == "optimal"
    assert best <= res.bound <= best * (1 + 1e-5)
    assert res.objective == pytest.approx(best, rel=1e-6)
