"""The smoothed gradient ascent for Lipschitz witnesses (`solvers.jacobian_ascent`,
`certify.lipschitz.witness.smooth_ascent`) against independent oracles: closed forms of a net
whose constant sits in a corner region no sampling reaches, region enumeration by LPs and
brute-force operator norms (`tests.lipschitz_oracles`) on tiny nets, and Jacobians recomputed
from an independent forward pass."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certify
from certify.lipschitz.options import NormQuestion
from certify.lipschitz.witness import WitnessSearch, high_dimensional, smooth_ascent, walk_regions
from models.box import Box
from models.ir import sequential
from solvers.jacobian_ascent import ascend
from solvers.runtime import Budget
from tests.lipschitz_oracles import exact_lipschitz, jacobian, opnorm, random_box_case, random_weights

N = 40  # inputs of the corner net


def _corner_net():
    """[0, 1]^40 -> R^2: h1 = relu(sum x - 39.5) is active only in the corner sum x > 39.5 (volume
    about 0.5^40 / 40!), h2 = relu(0.01 sum x + 1) always; y = (5 h1 + h2, 5 h1 - h2). linf -> l1
    constant (closed form): in the corner J = [[5.01]*40, [4.99]*40], ||J||_{inf->1} = 40 (5.01 + 4.99)
    = 400; elsewhere J = [[0.01]*40, [-0.01]*40], norm 0.8."""
    W1 = np.vstack([np.ones(N), 0.01 * np.ones(N)])
    b1 = np.array([-(N - 0.5), 1.0])
    W2 = np.array([[5.0, 1.0], [5.0, -1.0]])
    return [(W1, b1), (W2, np.zeros(2))]


def _search(net, lo, hi, p, q, target=None):
    question = NormQuestion.of(net, p, None if target is not None else q, None, target)
    return WitnessSearch(net, Box(tuple(lo), tuple(hi)), question, Budget(None))


def _pattern(weights, x):
    h, pattern = np.asarray(x, float), []
    for W, b in weights[:-1]:
        z = W @ h + b
        pattern.append((z > 0).astype(float))
        h = np.maximum(z, 0.0)
    return pattern


def test_smooth_ascent_reaches_a_corner_region_that_sampling_misses():
    w = _corner_net()
    net = sequential(w)
    lo, hi = np.zeros(N), np.ones(N)
    search = _search(net, lo, hi, "linf", "l1")
    search.sample(samples=256)
    assert search.lower <= 0.8 * (1 + 1e-9)  # (the test's premise: sampling sees only the flat part)
    assert high_dimensional(search.box)
    walk_regions(search, None)  # above ASCENT_DIM inputs: the smoothed ascent
    assert 400.0 * (1 - 1e-9) <= search.lower <= 400.0 * (1 + 1e-9)
    assert np.sum(search.point.x) > N - 0.5


def test_local_lipschitz_closes_on_the_corner_net():
    w = _corner_net()
    cert = certify.local_lipschitz(sequential(w), np.full(N, 0.5), 0.5, method="bab", time_limit=60)
    assert 400.0 * (1 - 1e-9) <= cert.lower <= cert.upper
    assert cert.upper <= 400.0 * (1 + 1e-6)  # the Clarke bound: the corner's Jacobian is the largest


@pytest.mark.parametrize("p,q,target", [("linf", "l1", None), ("linf", "linf", None), ("l1", "l1", None),
                                        ("linf", None, np.array([1.0, -2.0, 0.5]))])
def test_ascent_points_lie_in_the_box_and_their_estimates_are_their_norms(p, q, target):
    w = random_weights([20, 12, 10, 3], 4)
    rng = np.random.default_rng(0)
    lo, hi = rng.uniform(-1, 0, 20), rng.uniform(0, 1, 20)
    X, v = ascend([a for a, _ in w], [b for _, b in w], lo, hi, rng.uniform(lo, hi, (8, 20)), p, q, target, steps=15)
    assert X.shape == (8, 20) and np.all(X >= lo) and np.all(X <= hi)
    assert np.all(np.diff(v) <= 0)  # best first
    for x, e in zip(X, v):
        J = jacobian(w, _pattern(w, x))
        if target is not None:
            exact = np.abs(J.T @ target).sum()
        elif (p, q) == ("linf", "l1"):  # dual form over the 2^3 output signs (20 inputs: 2^20 too many)
            exact = max(np.abs(J.T @ np.array(c)).sum() for c in product((-1.0, 1.0), repeat=3))
        elif (p, q) == ("linf", "linf"):  # the largest row l1 norm (closed form)
            exact = np.abs(J).sum(axis=1).max()
        else:
            exact = opnorm(J, p, q)
        assert e == pytest.approx(exact, rel=1e-4)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 4), width=st.integers(2, 6), depth=st.integers(1, 3),
       m=st.integers(1, 3), pair=st.sampled_from([("linf", "l1"), ("linf", "linf"), ("l1", "l1"), ("l2", "l1")]),
       radius=st.floats(0.05, 1.0))
def test_smooth_ascent_never_exceeds_the_exact_constant(seed, n, width, depth, m, pair, radius):
    p, q = pair
    w, lo, hi = random_box_case(seed, n, width, depth, m, radius)
    net = sequential(w)
    search = _search(net, lo, hi, p, q)
    X = smooth_ascent(search, None, seed=seed, restarts=8)
    assert np.all(X >= lo) and np.all(X <= hi)
    assert search.lower <= exact_lipschitz(w, lo, hi, p, q) * (1 + 1e-9) + 1e-12
    if search.point is not None:  # the kept value is the oracle's norm at the kept point
        J = jacobian(w, _pattern(w, search.point.x))
        assert search.lower <= opnorm(J, p, q) * (1 + 1e-9) + 1e-12


def test_smooth_ascent_on_a_sub_box_keeps_witnesses_inside_it():
    w = random_weights([20, 10, 3], 2)
    net = sequential(w)
    lo, hi = -np.ones(20), np.ones(20)
    sub_lo, sub_hi = lo + 0.3 * (hi - lo), lo + 0.6 * (hi - lo)
    search = _search(net, lo, hi, "linf", "linf")
    X = smooth_ascent(search, None, box=(sub_lo, sub_hi), restarts=8)
    assert np.all(X >= sub_lo) and np.all(X <= sub_hi)
    assert search.point is not None and np.all(search.point.x >= sub_lo) and np.all(search.point.x <= sub_hi)


def _torch_soft_norm(torch, W, b, x, unit, kappa, p, q, c, signs):
    """The smoothed norm written independently in torch (float64, autograd differentiates it)."""
    h, soft = x, []
    for Wt, bt, u in zip(W[:-1], b[:-1], unit):
        z = h @ Wt.T + bt
        soft.append(torch.sigmoid(z / (kappa * u)))
        h = torch.relu(z)
    J = W[-1].expand(x.shape[0], -1, -1)
    for Wt, s in zip(reversed(W[:-1]), reversed(soft)):
        J = (J * s[:, None, :]) @ Wt

    def dual(g, d):
        return g.abs().sum(-1) if d == "l1" else g.abs().amax(-1) if d == "linf" else g.norm(dim=-1)

    pd = {"l1": "linf", "linf": "l1", "l2": "l2"}[p]
    if c is not None:
        return dual(torch.einsum("m,bmn->bn", c, J), pd)
    if signs is not None:
        return torch.einsum("bm,bmn->bn", signs, J).abs().sum(-1)
    if q == "linf":
        return dual(J, pd).amax(-1)
    if p == "l1":
        return dual(J.transpose(1, 2), q).amax(-1)
    return J.pow(2).sum((1, 2)).sqrt()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), depth=st.integers(1, 3), m=st.integers(1, 4),
       kappa=st.floats(0.01, 0.5),
       pair=st.sampled_from([("linf", "l1"), ("linf", "linf"), ("l1", "l1"), ("l1", "l2"), ("l2", "l2"),
                             ("linf", "target"), ("l2", "target"), ("l1", "target")]))
def test_soft_gradient_is_the_autograd_gradient_of_the_smoothed_norm(seed, depth, m, kappa, pair):
    """The ascent's hand-written reverse mode against torch's autograd of the same smoothed norm."""
    torch = pytest.importorskip("torch")
    from solvers import jacobian_ascent as ja

    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(2, 12)) for _ in range(depth + 1)] + [m]
    Ws = [rng.normal(size=(sizes[i + 1], sizes[i])).astype(np.float32) for i in range(depth + 1)]
    bs = [rng.normal(size=sizes[i + 1]).astype(np.float32) for i in range(depth + 1)]
    x = rng.uniform(-1, 1, (5, sizes[0])).astype(np.float32)
    zs, _ = ja._forward(Ws, bs, x)
    unit = [np.maximum(z.max(0) - z.min(0), 1e-3).astype(np.float32) for z in zs]
    p, q = pair
    c = rng.normal(size=m).astype(np.float32) if q == "target" else None
    q = None if q == "target" else q
    signs = np.sign(rng.normal(size=(5, m))).astype(np.float32) if (p, q) == ("linf", "l1") else None
    value, grad, signs = ja._soft_gradient(Ws, zs, unit, kappa, p, q, c, signs)
    t64 = lambda a: None if a is None else torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    obj = _torch_soft_norm(torch, [t64(w) for w in Ws], [t64(v) for v in bs], xt, [t64(u) for u in unit], kappa,
                           p, q, t64(c), t64(signs))
    (expected,) = torch.autograd.grad(obj.sum(), xt)
    scale = max(float(expected.abs().max()), 1e-6)
    assert np.allclose(value, obj.detach().numpy(), rtol=1e-4, atol=1e-5 * float(obj.detach().abs().max()))
    assert np.max(np.abs(grad - expected.numpy())) <= 1e-3 * scale


def test_the_image_sized_lipschitz_path_does_not_load_torch():
    """The smoothed ascent runs in numpy: a question never waits seconds for torch to import."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from certify.lipschitz.options import NormQuestion\n"
            "from certify.lipschitz.witness import WitnessSearch, smooth_ascent\n"
            "from models.box import Box\n"
            "from models.ir import sequential\n"
            "from solvers.runtime import Budget\n"
            "from tests.lipschitz_oracles import random_weights\n"
            "net = sequential(random_weights([40, 16, 16, 3], 3))\n"
            "search = WitnessSearch(net, Box((-1.0,) * 40, (1.0,) * 40), NormQuestion.of(net, 'linf', 'l1', None, None),"
            " Budget(None))\n"
            "smooth_ascent(search, None, restarts=8)\n"
            "assert search.lower > 0\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip().splitlines()[-1] == "False"
