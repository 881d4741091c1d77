"""The weight chain of a ReLU network in the form the Lipschitz SDPs work on.

A fused ReLU network f(x) = W_l phi(W_{l-1} ... phi(W_0 x + b_0) ...) + b_l has the same global
Lipschitz bounds for every choice of biases (the slope-restriction constraints of LipSDP are
incremental), so only the weights matter. Each W_k is divided by a power of two 2^{e_k} close to
its spectral norm: the division is exact in floating point and, because ReLU is positively
homogeneous, Lip(f) = 2^{sum e_k} Lip(f_normalised) exactly. This keeps the SDPs well scaled for
deep nets whose norm product spans many orders of magnitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..rounding import U, gamma, ldexp_up


@dataclass
class WeightChain:
    """Normalised weights W_0..W_l (W_k of shape (n_{k+1}, n_k)) and their power-of-two scales.

    `sources` optionally holds, per weight, the IR `Affine` layer it came from (None for products
    of several layers), so that `norm_upper` can use a convolution's structured norm bound.
    """

    weights: list[np.ndarray]
    exponents: list[int]
    sources: list | None = None
    _reduced: np.ndarray | None = field(default=None, repr=False)
    _gram: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def from_weights(cls, weights: list[np.ndarray], sources: list | None = None) -> "WeightChain":
        ws, exps = [], []
        for w in weights:
            w = np.asarray(w, dtype=np.float64)
            e = 0 if not np.any(w) else int(round(math.log2(_spectral_estimate(w))))
            scaled = np.ldexp(w, -e)
            if not np.array_equal(np.ldexp(scaled, e), w):  # subnormal results would round
                e, scaled = 0, w
            ws.append(scaled)
            exps.append(e)
        return cls(ws, exps, sources)

    @property
    def depth(self) -> int:
        """Number of hidden (ReLU) layers l."""
        return len(self.weights) - 1

    @property
    def hidden_sizes(self) -> list[int]:
        return [w.shape[0] for w in self.weights[:-1]]

    @property
    def input_dim(self) -> int:
        return self.weights[0].shape[1]

    @property
    def scale_log2(self) -> int:
        return int(sum(self.exponents))

    @property
    def is_zero(self) -> bool:
        return any(not np.any(w) for w in self.weights)

    def reduced_input(self) -> np.ndarray:
        """R with R R^T = W_0 W_0^T and min(n_0, n_1) columns (R = U S of the thin SVD
        W_0 = U S V^T, computed from the eigendecomposition of the smaller Gram matrix). R can
        replace W_0 in every LipSDP constraint, which see W_0 only through W_0 W_0^T after a Schur
        complement on the input block: exact input reduction to rank <= n_1. Only the solver sees
        R; the validation uses W_0 W_0^T itself."""
        if self._reduced is None:
            w = self.weights[0]
            if w.shape[1] <= w.shape[0]:
                self._reduced = w
            else:
                s, V = np.linalg.eigh(self.input_gram()[0])
                self._reduced = V * np.sqrt(np.maximum(s, 0.0))
        return self._reduced

    def input_gram(self) -> tuple[np.ndarray, np.ndarray]:
        """G = W_0 W_0^T in float64 and an entrywise bound on its rounding error."""
        if self._gram is None:
            w = self.weights[0]
            a = np.abs(w)
            err = gamma(w.shape[1] + 2) * (a @ a.T) * (1.0 + 4.0 * U * w.shape[1])
            self._gram = (w @ w.T, err)
        return self._gram

    def sub_chain(self, start: int, stop: int) -> "WeightChain":
        """The chain of weights start..stop-1 (a sub-network; the ReLUs at the cut are 1-Lipschitz)."""
        sources = self.sources[start:stop] if self.sources is not None else None
        return WeightChain(self.weights[start:stop], self.exponents[start:stop], sources)

    def norm_upper(self, k: int) -> float:
        """Certified upper bound on ||W_k||_2 of the normalised weight (structured for convolutions)."""
        from ..norms import affine_norm_upper, spectral_norm_upper

        source = self.sources[k] if self.sources is not None else None
        if source is not None and getattr(source, "conv", None) is not None:
            # ||W / 2^e|| = ||W|| / 2^e exactly (scaling by a power of two)
            return ldexp_up(affine_norm_upper(source, "l2", "l2"), -self.exponents[k])
        return spectral_norm_upper(self.weights[k])


def _spectral_estimate(w: np.ndarray) -> float:
    """A cheap estimate of ||w||_2 (only chooses the power-of-two scale; no soundness role)."""
    top = float(np.max(np.abs(w), initial=0.0))
    if top == 0.0 or not np.isfinite(top):
        return top
    if not 1e-100 < top < 1e100:  # keep the Gram matrix finite
        return top * _spectral_estimate(w / top)
    if min(w.shape) <= 512:
        g = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        return float(np.sqrt(max(np.linalg.eigvalsh(g)[-1], np.finfo(float).tiny)))
    v = np.random.default_rng(0).standard_normal(w.shape[1])
    for _ in range(50):
        v = w.T @ (w @ v)
        v /= np.linalg.norm(v)
    return float(np.linalg.norm(w @ v))
