"""Certified upper bounds on badly scaled networks: never below a proven value.

`tests/data/soundness/cases.json` holds nets on which solvers' "optimal" dual bounds were up to 86%
below the true constant (each with a value proven by a replayed witness or region enumeration).
The fuzz builds more such nets (tiny/huge layers, scaled rows and entries, duplicated and negated
neurons, biases near the box centre or corners) and checks every norm pair, margins and every
back-end against an oracle of its own: activation regions enumerated with verified interior points
(the network's own pattern at the region's centre), whose exact Jacobians are witnesses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import certify
from models.ir import sequential
from solvers.milp.backends import BACKENDS
from tests.lipschitz_oracles import jacobian, opnorm, regions

DATA = Path(__file__).parent / "data" / "soundness"
CASES = json.loads((DATA / "cases.json").read_text())
AVAILABLE = [name for name, cls in BACKENDS.items() if cls().available()]


def _certify(case, backend, time_limit):
    net = certify.load_onnx(str(DATA / case["model"]))
    return certify.local_lipschitz(net, case["center"], case["radius"], domain=case["domain"],
                                   input_norm=case["input_norm"], output_norm=case["output_norm"] or "l1",
                                   margin=case["margin"], backend=backend, time_limit=time_limit)


# the default run: every case once, back-ends in turn (about a minute); all of them: slow
DEFAULT = [(i, AVAILABLE[i % len(AVAILABLE)]) for i in range(len(CASES))]
EVERY = [(i, b) for i in range(len(CASES)) for b in AVAILABLE if (i, b) not in DEFAULT]


def _check(case, cert):
    assert cert.upper >= case["proven_lower"], (cert.upper, case["proven_lower"], cert.status, cert.notes)
    assert cert.lower <= cert.upper and cert.certified


@pytest.mark.parametrize("index,backend", DEFAULT)
def test_regression_cases_are_never_below_the_proven_value(index, backend):
    _check(CASES[index], _certify(CASES[index], backend, time_limit=6))


@pytest.mark.slow
@pytest.mark.parametrize("index,backend", EVERY)
def test_regression_cases_on_every_backend(index, backend):
    _check(CASES[index], _certify(CASES[index], backend, time_limit=60))


# ----------------------------------------------------------------------------- fuzz
PAIRS = [(p, q) for p in ("l1", "l2", "linf") for q in ("l1", "l2", "linf")] + [("linf", "margin"), ("l1", "margin"),
                                                                                 ("l2", "margin")]


def _fuzz_net(rng):
    n = int(rng.integers(2, 4))
    sizes = [n] + [int(rng.integers(3, 7)) for _ in range(int(rng.integers(1, 3)))] + [int(rng.integers(2, 4))]
    mode = rng.choice(["tiny", "huge", "row", "entry", "tie"])
    center = rng.uniform(-1, 1, n)
    radius = float(rng.uniform(0.05, 1.0))
    corners = rng.random() < 0.5
    weights = []
    for k, (a, b) in enumerate(zip(sizes, sizes[1:])):
        W = rng.standard_normal((b, a)) / np.sqrt(a)
        if mode == "tiny":
            W *= 10.0 ** rng.uniform(-3, -1)
        elif mode == "huge":
            W *= 10.0 ** rng.uniform(1, 3)
        elif mode == "row":
            W *= 10.0 ** rng.uniform(-3, 3, (b, 1))
        elif mode == "entry":
            W *= 10.0 ** rng.uniform(-2, 2, (b, a))
        weights.append([W, np.zeros(b)])
    # biases: pre-activations zero at the box centre or at a corner (ties on the box)
    x = center + (radius * np.sign(rng.standard_normal(n)) if corners else 0.0)
    h = x
    for k, (W, b) in enumerate(weights):
        z = W @ h
        b[:] = -z + rng.normal(0, 1e-3, z.size) * np.abs(z).max()
        if mode == "tie" and k < len(weights) - 1 and W.shape[0] > 1:
            W[1] = -W[0] if rng.random() < 0.5 else W[0]  # a negated or duplicated neuron
            b[1] = -b[0] if np.all(W[1] == -W[0]) else b[0]
        h = np.maximum(W @ h + b, 0.0)
    return [(W, b) for W, b in weights], center, radius


def _oracle(weights, lo, hi, p, q, c):
    """max over regions of the Jacobian norm at the region's verified interior point."""
    best = 0.0
    net = sequential(weights)
    for pattern in regions(weights, lo, hi):
        J = jacobian(weights, pattern)
        if c is not None:
            g = J.T @ c
            val = {"linf": np.abs(g).sum(), "l1": np.abs(g).max(), "l2": np.linalg.norm(g)}[p]
        else:
            val = opnorm(J, p, q)
        # verify: some point of the box has exactly this pattern (its region is real)
        x = _point_with(weights, pattern, lo, hi)
        if x is not None and np.allclose(net.jacobian(x), J, rtol=1e-9, atol=0):
            best = max(best, float(val))
    return best


def _point_with(weights, pattern, lo, hi):
    from scipy.optimize import linprog

    n = lo.size
    M, d = np.eye(n), np.zeros(n)
    A, b = [], []
    for (W, bias), s in zip(weights[:-1], pattern):
        Mz, dz = W @ M, W @ d + bias
        sign = 2 * s - 1
        scale = np.abs(Mz).sum(axis=1) + np.abs(dz) + 1e-300
        A.append(np.hstack([-(sign[:, None] * Mz) / scale[:, None], np.ones((s.size, 1))]))
        b.append(sign * dz / scale)
        M, d = s[:, None] * Mz, s * dz
    A = np.vstack(A + [np.hstack([np.eye(n), np.ones((n, 1))]), np.hstack([-np.eye(n), np.ones((n, 1))])])
    b = np.concatenate(b + [hi, -lo])
    res = linprog(np.r_[np.zeros(n), -1.0], A_ub=A, b_ub=b, bounds=[(None, None)] * n + [(0, None)], method="highs")
    return None if res.status != 0 or res.x[-1] <= 0 else res.x[:n]


def _fuzz(seed: int):
    rng = np.random.default_rng(seed)
    weights, center, radius = _fuzz_net(rng)
    net = sequential(weights)
    lo, hi = center - radius, center + radius
    p, q = PAIRS[int(rng.integers(len(PAIRS)))]
    c = None
    if q == "margin":
        c = np.zeros(weights[-1][0].shape[0])
        c[0], c[1] = 1.0, -1.0
    backend = AVAILABLE[seed % len(AVAILABLE)]
    cert = certify.local_lipschitz(net, center, radius, input_norm=p, output_norm="l1" if c is not None else q,
                                   margin=(0, 1) if c is not None else None, backend=backend, time_limit=20)
    value = _oracle(weights, lo, hi, p, None if c is not None else q, c)
    assert cert.upper >= value * (1 - 1e-12), (seed, p, q, backend, cert.upper, value, cert.status, cert.notes)
    assert cert.lower <= cert.upper, (seed, cert)


@pytest.mark.parametrize("seed", range(60))
def test_fuzz_badly_scaled_nets_never_get_a_bound_below_a_witness(seed):
    _fuzz(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60, 460))
def test_fuzz_badly_scaled_nets_many(seed):
    _fuzz(seed)
