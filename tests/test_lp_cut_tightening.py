"""LP tightening of pre-activation bounds with ideal cuts (`lp_tighten_layer(cut_rounds=)`, the
`lp_cuts` option of `bound_boxes`, the ReLU-split search's refined root).

Oracles: the exact maximum and minimum of each neuron over the box (scipy's MILP on the
independent encoding of `tests.test_relu_split.milp_max`, on the network cut at that layer),
true network points (box corners and samples), and the triangle LP (cuts only tighten it)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from models.ir import Affine, sequential
from solvers.bounds import BoundOptions, bound_boxes
from solvers.bounds.lp import lp_tighten_layer
from tests.test_relu_cuts import _encoded
from tests.test_relu_split import milp_max


def _case(seed, sizes=(4, 10, 10, 10, 2)):
    rng, net, blocks, lo, hi, pl, ph, _, _ = _encoded(seed, sizes)
    return rng, net, blocks, lo, hi, list(pl), list(ph)


def _exact_range(net, lo, hi, j, i):
    """min and max of neuron i of ReLU layer j over the box, by an independent MILP."""
    layers = [(L.weight, L.bias) for L in net.layers if isinstance(L, Affine)]
    cut = sequential(layers[:j] + [(layers[j][0][[i]], layers[j][1][[i]])])
    split = [np.zeros(W.shape[0]) for W, _ in layers[:j]]
    e = np.zeros(lo.size)
    return -milp_max(cut, lo, hi, split, np.array([-1.0]), e), milp_max(cut, lo, hi, split, np.array([1.0]), e)


@pytest.mark.parametrize("seed", range(5))
def test_cut_bounds_contain_the_exact_range_and_sit_inside_the_triangle_lp(seed):
    rng, net, blocks, lo, hi, pl, ph = _case(seed)
    for j in (1, 2):
        tl, tu, _ = lp_tighten_layer(blocks, pl, ph, j, lo, hi)
        cl, cu, _ = lp_tighten_layer(blocks, pl, ph, j, lo, hi, cut_rounds=4)
        for i in np.flatnonzero((pl[j] < 0) & (ph[j] > 0)):
            low, high = _exact_range(net, lo, hi, j, i)
            assert cl[i] <= low + 1e-7 * (1 + abs(low)) and cu[i] >= high - 1e-7 * (1 + abs(high)), (j, i)
            assert cu[i] <= tu[i] + 1e-9 * (1 + abs(tu[i]))
            if cu[i] > 0:  # (a neuron proven inactive keeps its lower bound: it is not optimised)
                assert cl[i] >= tl[i] - 1e-9 * (1 + abs(tl[i]))
        # (the later layers get bounds computed from these, as the pipeline does)
        pl[j], ph[j] = np.maximum(pl[j], tl), np.minimum(ph[j], tu)


def test_cuts_tighten_some_neuron():
    gains = []
    for seed in range(5):
        _, _, blocks, lo, hi, pl, ph = _case(seed)
        tl, tu, _ = lp_tighten_layer(blocks, pl, ph, 1, lo, hi)
        cl, cu, _ = lp_tighten_layer(blocks, pl, ph, 1, lo, hi, cut_rounds=4)
        gains.append(float(np.max(np.r_[tu - cu, cl - tl, 0.0])))
    assert max(gains) > 1e-3, gains


@pytest.mark.parametrize("seed", range(4))
def test_bound_boxes_with_lp_cuts_holds_at_network_points(seed):
    rng, net, blocks, lo, hi, _, _ = _case(seed)
    plain = bound_boxes(blocks, lo[None], hi[None], BoundOptions(method="lp"))
    cut = bound_boxes(blocks, lo[None], hi[None], BoundOptions(method="lp", lp_cuts=3, rows="per-box",
                                                               lower_slopes="alpha"))
    X = np.vstack([np.array(list(itertools.product(*zip(lo, hi)))), rng.uniform(lo, hi, (5000, lo.size))])
    a = X
    for j, blk in enumerate(blocks[:-1]):
        z = a @ blk.weight.T + blk.bias
        assert np.all(z >= cut.pre_lo[j][0] - 1e-12) and np.all(z <= cut.pre_hi[j][0] + 1e-12)
        a = np.maximum(z, 0.0)
    width = lambda nb: sum(float(np.sum(u - l)) for l, u in zip(nb.pre_lo, nb.pre_hi))
    assert width(cut) <= width(plain) + 1e-9


def test_the_deadline_stops_the_cut_tightening():
    import time

    _, _, blocks, lo, hi, pl, ph = _case(0)
    l, u, lps = lp_tighten_layer(blocks, pl, ph, 2, lo, hi, deadline=time.perf_counter() - 1.0, cut_rounds=4)
    assert lps == 0 and np.array_equal(l, pl[2]) and np.array_equal(u, ph[2])


def test_a_layer_whose_first_neurons_gain_nothing_stops_after_the_probe():
    from solvers.bounds.lp import PROBE

    _, _, blocks, lo, hi, pl, ph = _case(1, sizes=(4, 30, 30, 2))
    unstable = int(np.sum((pl[1] < 0) & (ph[1] > 0)))
    assert unstable > PROBE
    full_lo, full_hi, full = lp_tighten_layer(blocks, pl, ph, 1, lo, hi, cut_rounds=1)
    # a share above 1 can never be reached: the layer stops right after its probe
    cut_lo, cut_hi, probed = lp_tighten_layer(blocks, pl, ph, 1, lo, hi, cut_rounds=1, min_gain=1.1)
    changed = int(np.sum((cut_lo != pl[1]) | (cut_hi != ph[1])))
    assert changed <= PROBE < int(np.sum((full_lo != pl[1]) | (full_hi != ph[1])))
    assert probed <= PROBE * 2 * 2 < full
