"""method="mip": the exact constant over a domain box from the local-Lipschitz MILP (issue 3).

Oracles: exact Jacobian operator norms at
sampled points of the box (lower bounds), hand-computed constants of a two-neuron net, and the
validated SDP / norm-product bounds (upper bounds).
"""

from __future__ import annotations

import numpy as np
import pytest

from models.ir import sequential
from models.zoo import random_relu_net, vnncomp_test_path
from solvers.norms import operator_norm


def _sampled(net, lo, hi, p, q, n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = lo + (hi - lo) * rng.random((n, net.input_dim))
    return max(operator_norm(net.jacobian(x), p, q) for x in X)


@pytest.mark.parametrize("sizes,seed", [((2, 8, 8, 2), 0), ((3, 6, 6, 3), 1)])
@pytest.mark.parametrize("p,q", [("linf", "l1"), ("l1", "l1"), ("linf", "linf")])
def test_sandwich_sampled_mip_sdp_naive(sizes, seed, p, q):
    from certify.lipschitz.global_bounds import global_lipschitz

    net = random_relu_net(sizes, seed=seed)
    mip = global_lipschitz(net, "mip", input_norm=p, output_norm=q, domain=(-1.0, 1.0))
    assert mip.method == "mip" and mip.certified
    assert mip.lower <= mip.upper
    assert _sampled(net, -1.0, 1.0, p, q) <= mip.upper
    neuron = global_lipschitz(net, "lipsdp-neuron", input_norm=p, output_norm=q).upper
    layer = global_lipschitz(net, "lipsdp-layer", input_norm=p, output_norm=q).upper
    naive = global_lipschitz(net, "naive", input_norm=p, output_norm=q).upper
    assert mip.upper <= neuron * (1 + 1e-6)
    assert neuron <= layer * (1 + 1e-3)
    assert layer <= global_lipschitz(net, "naive", input_norm="l2", output_norm="l2").upper * _factor(net, p, q) * (1 + 1e-9)
    assert mip.upper <= naive * (1 + 1e-6)
    if mip.status == "optimal":
        assert mip.exact


def _factor(net, p, q):
    return (np.sqrt(net.input_dim) if p == "linf" else 1.0) * (np.sqrt(net.output_dim) if q == "l1" else 1.0)


def test_domain_restricts_the_constant():
    from certify.lipschitz.global_bounds import global_lipschitz

    # f(x) = relu(x) - relu(x - 1): slope 1 on (0, 1), 0 elsewhere
    net = sequential([(np.array([[1.0], [1.0]]), np.array([0.0, -1.0])), (np.array([[1.0, -1.0]]), np.zeros(1))])
    whole = global_lipschitz(net, "mip", input_norm="linf", output_norm="l1", domain=(-1.0, 2.0))
    assert whole.lower == pytest.approx(1.0, abs=1e-6) and whole.upper == pytest.approx(1.0, abs=1e-6)
    flat = global_lipschitz(net, "mip", input_norm="linf", output_norm="l1", domain=(2.0, 3.0))
    assert flat.upper == pytest.approx(0.0, abs=1e-6)
    assert global_lipschitz(net, "naive", input_norm="linf", output_norm="l1").upper >= 1.0


def test_all_includes_mip_with_a_domain():
    from certify.lipschitz.global_bounds import global_lipschitz

    net = random_relu_net((2, 6, 6, 2), seed=3)
    res = global_lipschitz(net, "all", input_norm="linf", output_norm="l1", domain=(-0.5, 0.5))
    assert [r.method for r in res.results][-1] == "mip"
    assert "mip" not in res.skipped
    # "best" is a bound for all inputs (never the domain-only mip value); best_on_domain may be
    mip = res.results[-1]
    assert mip.scope == "box" and all(r.scope == "global" for r in res.results[:-1])
    assert res.best.upper == min(r.upper for r in res.results[:-1]) == res.upper
    assert res.best_on_domain.upper == min(r.upper for r in res.results)
    assert res.to_dict()["best_on_domain"]["upper"] == res.best_on_domain.upper


def test_cli_mip(cli):
    r = cli("global", vnncomp_test_path("test_small"), "--method", "mip", "--domain", "-1,1",
            "--input-norm", "linf", "--output-norm", "l1", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["method"] == "mip" and out["certified"] is True
    assert out["lower"] <= out["upper"]
