"""Sound bounds of linear functions of a network's output, C f(x), over the box of `Bounds`.

Class margins f_c - f_j are such rows. Bounding a row as a row (CROWN back-substitution of C
itself down to the input) keeps the correlation between f_c and f_j that per-output bounds lose;
the interval bound from the output box is intersected with it (both are sound).
"""

from __future__ import annotations

import numpy as np

from models.ir import Affine

from .interval import affine_interval, magnitudes
from .symbolic import LiveLayers, backsubstitute_upper
from .types import Bounds


def relaxed_layers(blocks: list[Affine], nb: Bounds) -> tuple[LiveLayers, list[np.ndarray]]:
    """The relaxed ReLU layers and magnitudes of nb's boxes (a batch, or one box as a batch of one):
    those the bound engine kept, or rebuilt from the bounds."""
    if nb.relaxed is not None:
        return nb.relaxed
    one = nb.lo.ndim == 1
    lo, hi = (nb.lo[None], nb.hi[None]) if one else (nb.lo, nb.hi)
    live = LiveLayers(blocks)
    for l, u in zip(nb.pre_lo, nb.pre_hi):
        live.add(l[None] if one else l, u[None] if one else u)
    return live, magnitudes([b.weight for b in blocks], [b.bias for b in blocks], lo, hi)


def output_row_bounds(blocks: list[Affine], nb: Bounds, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of every row of `rows` @ f(x) over nb's box; `blocks` = `relu_blocks(net)`."""
    C = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    k, last = C.shape[0], len(blocks) - 1
    from_outputs = affine_interval(C, 0.0, nb.out_lo, nb.out_hi)
    live, mags = relaxed_layers(blocks, nb)
    both = backsubstitute_upper(live, last, np.vstack([C, -C]), nb.lo[None], nb.hi[None], mags[last])[0][0]
    return np.maximum(from_outputs[0], -both[k:]), np.minimum(from_outputs[1], both[:k])


__all__ = ["output_row_bounds", "relaxed_layers"]
