"""The local Lipschitz question's pre-activation LPs with ideal ReLU cuts (`options.LP_CUTS`, on
boxes with more than AUTO_BAB_INPUTS free inputs). Oracles: the brute-force region enumeration
(`tests.lipschitz_oracles.exact_lipschitz`) and sign changes seen on sampled points (a lower bound
on any sound count of unstable ReLUs)."""

from __future__ import annotations

import numpy as np
import pytest

import certify
from certify.lipschitz.options import AUTO_BAB_INPUTS, LP_CUTS
from models.ir import sequential
from solvers.bounds import network_bounds
from tests.lipschitz_oracles import exact_lipschitz, random_weights, sampled_unstable

SEED, N = 4, 9  # (a net on which the cuts make neurons stable: checked below, not assumed)


def _case():
    w = random_weights([N, 6, 6, 6, 2], SEED)
    center = np.random.default_rng(SEED).uniform(-0.5, 0.5, N)
    return w, center, 0.3


@pytest.mark.parametrize("method", ["milp", "bab"])
def test_cut_root_bounds_are_sound_and_tighter(method):
    assert N > AUTO_BAB_INPUTS and LP_CUTS > 0
    w, center, radius = _case()
    lo, hi = center - radius, center + radius
    net = sequential(w)
    plain = network_bounds(net, lo, hi, "lp")
    cert = certify.local_lipschitz(net, center, radius, method=method, time_limit=120)
    # never fewer unstable ReLUs than sampling shows, and fewer than the LPs without cuts leave
    assert sampled_unstable(w, lo, hi, samples=20000, seed=1) <= cert.unstable < plain.num_unstable
    exact = exact_lipschitz(w, lo, hi, "linf", "l1")
    assert cert.lower <= exact * (1 + 1e-9) and exact <= cert.upper * (1 + 1e-9)
    assert cert.status == "optimal", cert.notes


def test_few_inputs_keep_the_plain_lps(monkeypatch):
    """Boxes whose inputs the tree splits (at most AUTO_BAB_INPUTS free) get no cut rounds."""
    import certify.lipschitz.local as local

    seen = []
    bounds = local.network_bounds
    monkeypatch.setattr(local, "network_bounds", lambda *a, **k: seen.append(k.get("lp_cuts")) or bounds(*a, **k))
    w = random_weights([AUTO_BAB_INPUTS, 8, 2], 2)
    certify.local_lipschitz(sequential(w), np.zeros(AUTO_BAB_INPUTS), 0.3, time_limit=30)
    w = random_weights([AUTO_BAB_INPUTS + 1, 8, 2], 2)
    certify.local_lipschitz(sequential(w), np.zeros(AUTO_BAB_INPUTS + 1), 0.3, time_limit=30)
    assert seen == [0, LP_CUTS]
