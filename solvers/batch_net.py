"""A ReLU network as fused affine/ReLU blocks on batches of points, with exact backprop.

In float64 (the default) it evaluates the fused network exactly as the IR does (up to rounding);
`dtype=np.float32` makes a float32 copy of the weights for the gradient search of the falsifier
(`solvers.pgd`), whose points are then re-evaluated in float64. The attacks of verification
(`certify.verify.attack`) and of robustness (`certify.robustness.attack`) push batches of points
through it; the batch size is bounded by the memory budget.
"""

from __future__ import annotations

import numpy as np

from models.ir import Network
from models.memory import batch_rows, fits, require_work, track, working

from .bounds import relu_blocks
from .bounds.sparse import mostly_zeros  # (the bounds' rule: unrolled convolutions kept sparse)


class _Block:
    """An affine block (weight, bias) in another dtype (`BatchNet(dtype=np.float32)`), its weight
    a CSR matrix when it is mostly zeros."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, dtype: np.dtype, sparse: bool) -> None:
        self.out_dim, self.in_dim = weight.shape
        self.bias = np.ascontiguousarray(bias, dtype=dtype)
        self.sparse = sparse
        if sparse:
            from scipy.sparse import csr_matrix

            self.weight = csr_matrix(weight, dtype=dtype)
            self.weight_t = self.weight.T.tocsr()
        else:
            self.weight = np.ascontiguousarray(weight, dtype=dtype)


def _forward(h: np.ndarray, blk) -> np.ndarray:
    """h @ W.T (rows of h through the block's weight)."""
    if getattr(blk, "sparse", False):
        return np.asarray((blk.weight @ h.T).T)
    return h @ blk.weight.T


def _backward(g: np.ndarray, blk) -> np.ndarray:
    """g @ W (gradients back through the block's weight)."""
    if getattr(blk, "sparse", False):
        return np.asarray((blk.weight_t @ g.T).T)
    return g @ blk.weight


class BatchNet:
    """Fused affine/ReLU blocks evaluated on batches with exact backprop (float64)."""

    def __init__(self, net: Network, dtype: type = np.float64) -> None:
        blocks = relu_blocks(net)
        self.dtype = np.dtype(dtype)
        self.itemsize = self.dtype.itemsize
        if self.dtype != np.float64:
            nonzeros = [int(np.count_nonzero(b.weight)) for b in blocks]
            sparse = [mostly_zeros(b.weight.size, k) for b, k in zip(blocks, nonzeros)]
            # a sparse weight is held twice (W and its transpose), with an int32 index per value
            copy = float(sum((2 * k * (self.itemsize + 4) if sp else b.weight.size * self.itemsize) + b.bias.nbytes
                             for b, k, sp in zip(blocks, nonzeros, sparse)))
            if fits(copy):
                with working(copy, f"a {self.dtype.name} copy of the network for the attack"):
                    blocks = [_Block(b.weight, b.bias, self.dtype, sp) for b, sp in zip(blocks, sparse)]
                self.layers = blocks  # the copy's dense arrays count as held while it lives
                track(self)
            else:  # no room for a copy: the search runs on the network's own float64 arrays
                self.dtype = np.dtype(np.float64)
                self.itemsize = 8
        self.blocks = blocks

    def row_bytes(self) -> float:
        """Working bytes per point of a forward + backward pass: the input, about four vectors of
        the widest layer (pre-activation, output, gradient, products) and the kept masks."""
        widest = max(max(b.in_dim, b.out_dim) for b in self.blocks)
        return self.itemsize * (self.blocks[0].in_dim + 4 * widest) + sum(b.out_dim for b in self.blocks)

    def rows(self, wanted: int) -> int:
        """How many of `wanted` points to push through the network at once within the memory
        budget (`models.memory.batch_rows`); refused (`TooLarge`) when not even one fits."""
        rows = batch_rows(wanted, self.row_bytes())
        if rows < 1:
            require_work(self.row_bytes(), "one point of the attack's batch")
        return max(rows, 1)

    def forward(self, X: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        masks = []
        h = np.asarray(X, dtype=self.dtype)
        for blk in self.blocks[:-1]:
            z = _forward(h, blk) + blk.bias
            m = z > 0
            masks.append(m)
            h = np.where(m, z, 0.0)
        last = self.blocks[-1]
        return _forward(h, last) + last.bias, masks

    def backward(self, masks: list[np.ndarray], gY: np.ndarray, leak: np.ndarray | None = None) -> np.ndarray:
        """d(sum gY * y)/dx for each row of the batch; with `leak` (one slope per row) the gradient
        of the leaky-ReLU network instead (inactive ReLUs pass `leak` times the gradient: a
        search direction that sees neurons the exact gradient cannot)."""
        g = _backward(np.asarray(gY, dtype=self.dtype), self.blocks[-1])
        slope = None if leak is None else np.asarray(leak, dtype=self.dtype).reshape(-1, 1)
        for blk, m in zip(reversed(self.blocks[:-1]), reversed(masks)):
            g = _backward(np.where(m, g, 0.0 if slope is None else slope * g), blk)
        return g


__all__ = ["BatchNet"]
