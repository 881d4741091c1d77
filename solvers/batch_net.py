"""A ReLU network as fused affine/ReLU blocks on batches of points, with exact backprop (float64).

The attacks of verification (`certify.verify.attack`) and of robustness (`certify.robustness.attack`)
push batches of points through it; the batch size is bounded by the memory budget.
"""

from __future__ import annotations

import numpy as np

from models.ir import Network
from models.memory import batch_rows, require_work

from .bounds import relu_blocks


class BatchNet:
    """Fused affine/ReLU blocks evaluated on batches with exact backprop (float64)."""

    def __init__(self, net: Network) -> None:
        self.blocks = relu_blocks(net)

    def row_bytes(self) -> float:
        """Working bytes per point of a forward + backward pass: the input, about four vectors of
        the widest layer (pre-activation, output, gradient, products) and the kept masks."""
        widest = max(max(b.in_dim, b.out_dim) for b in self.blocks)
        return 8.0 * (self.blocks[0].in_dim + 4 * widest) + sum(b.out_dim for b in self.blocks)

    def rows(self, wanted: int) -> int:
        """How many of `wanted` points to push through the network at once within the memory
        budget (`models.memory.batch_rows`); refused (`TooLarge`) when not even one fits."""
        rows = batch_rows(wanted, self.row_bytes())
        if rows < 1:
            require_work(self.row_bytes(), "one point of the attack's batch")
        return max(rows, 1)

    def forward(self, X: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        masks = []
        h = X
        for blk in self.blocks[:-1]:
            z = h @ blk.weight.T + blk.bias
            m = z > 0
            masks.append(m)
            h = np.where(m, z, 0.0)
        last = self.blocks[-1]
        return h @ last.weight.T + last.bias, masks

    def backward(self, masks: list[np.ndarray], gY: np.ndarray) -> np.ndarray:
        """d(sum gY * y)/dx for each row of the batch."""
        g = gY @ self.blocks[-1].weight
        for blk, m in zip(reversed(self.blocks[:-1]), reversed(masks)):
            g = np.where(m, g, 0.0) @ blk.weight
        return g


__all__ = ["BatchNet"]
