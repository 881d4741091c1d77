"""The neurons a batch of bound problems needs: those some problem does not have dead (inactive,
slope exactly 0). A dead neuron's row of the weights before it and column of the weights after
it only multiply zeros, so a bound's products may run on the sub-network without it: the dual
bounds' optimiser (`beta.optimise`) and the Clarke-Jacobian bound (`jacobian.clarke_functional_bounds`)
do, where it pays."""

from __future__ import annotations

import numpy as np

from .sparse import is_sparse

LIVE_SHARE = 0.85  # the sub-network is used when its neurons are at most this share of all


def live_neurons(needed: list[np.ndarray], weights: list[np.ndarray]) -> list[np.ndarray] | None:
    """Per layer t, the indices of the neurons some row of `needed[t]` (P, n_t) marks; None when
    none is dead, when they exceed LIVE_SHARE of all the layers' neurons, or when a weight is
    multiplied as a sparse matrix (its slices would lose the CSR products)."""
    if any(is_sparse(w) for w in weights):
        return None
    live = [np.flatnonzero(np.any(n, axis=0)) for n in needed]
    total, kept = sum(n.shape[1] for n in needed), sum(k.size for k in live)
    return live if kept < total and kept <= LIVE_SHARE * total else None


def sliced_weights(weights: list[np.ndarray], live: list[np.ndarray]) -> list[np.ndarray]:
    """The weights of the sub-network of the `live` neurons: each map's rows of its live outputs and
    columns of its live inputs (the network's input and output kept whole)."""
    K = len(weights) - 1
    return ([weights[0][live[0]]] + [weights[j][live[j]][:, live[j - 1]] for j in range(1, K)]
            + [weights[K][:, live[K - 1]]])


__all__ = ["LIVE_SHARE", "live_neurons", "sliced_weights"]
