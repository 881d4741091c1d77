"""Sound bounds of linear functions of a network's output, C f(x), over the box of `NetworkBounds`.

Class margins f_c - f_j are such rows. Bounding a row as a row (CROWN back-substitution of C
itself down to the input) keeps the correlation between f_c and f_j that per-output bounds lose;
the interval bound from the output box is intersected with it (both are sound).
"""

from __future__ import annotations

import numpy as np

from models.ir import Affine

from .interval import affine_interval, magnitudes
from .symbolic import backsubstitute_upper, relu_relaxation
from .types import NetworkBounds


def output_row_bounds(blocks: list[Affine], nb: NetworkBounds, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of every row of `rows` @ f(x) over nb's box; `blocks` = `relu_blocks(net)`."""
    C = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    k, last = C.shape[0], len(blocks) - 1
    from_outputs = affine_interval(C, 0.0, nb.out_lo, nb.out_hi)
    relax = [relu_relaxation(l, u) for l, u in zip(nb.pre_lo, nb.pre_hi)]
    mag = magnitudes([b.weight for b in blocks], [b.bias for b in blocks], nb.lo, nb.hi)[last]
    both = backsubstitute_upper(blocks, relax, last, np.vstack([C, -C]), nb.lo, nb.hi, mag)
    return np.maximum(from_outputs[0], -both[k:]), np.minimum(from_outputs[1], both[:k])


__all__ = ["output_row_bounds"]
