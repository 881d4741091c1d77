"""ReLU phases over a box: the classification every encoding and bound shares."""

from __future__ import annotations

import numpy as np

INACTIVE, UNSTABLE, ACTIVE = -1, 0, 1


def phases(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """INACTIVE where hi <= 0, ACTIVE where lo >= 0 (and hi > 0), UNSTABLE otherwise.

    Bounds exactly 0 are stable (a neuron with hi == 0 is 0 on the whole box), so no neuron
    with a zero bound gets a binary (LipMIP crashes on those).
    """
    return np.where(hi <= 0, INACTIVE, np.where(lo >= 0, ACTIVE, UNSTABLE)).astype(np.int8)


__all__ = ["ACTIVE", "INACTIVE", "UNSTABLE", "phases"]
