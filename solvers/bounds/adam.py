"""One projected Adam step, for the slope and multiplier optimisers of the bound engine (`alpha`,
`beta`): heuristics choosing relaxation parameters, never a bound themselves."""

from __future__ import annotations

import numpy as np


def projected_adam_step(p: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, k: int, rate: float,
                        upper: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step k (from 1) of Adam (beta1 0.9, beta2 0.999, eps 1e-8) descending `grad` from `p`, the
    result clipped to [0, upper] (upper None: >= 0 only); returns (p, m, v), the moments updated
    (new arrays, in the arguments' common dtype: float32 here, Python scalars do not promote under
    NumPy 2)."""
    dtype = np.result_type(p, grad, m, v)
    p, grad, m, v = (np.array(x, dtype=dtype) for x in (p, grad, m, v))
    adam_step_inplace(p, grad, m, v, k, rate, upper)
    return p, m, v


def adam_step_inplace(p: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, k: int, rate: float,
                      upper: float | None = None) -> None:
    """`projected_adam_step` writing p, m and v in place (views of one array stay valid); `grad`
    is overwritten (it holds the step)."""
    m *= 0.9
    m += 0.1 * grad               # 0.9 m + 0.1 g
    sq = 0.001 * grad
    sq *= grad
    v *= 0.999
    v += sq                       # 0.999 v + 0.001 g g
    np.divide(v, 1 - 0.999**k, out=sq)
    np.sqrt(sq, out=sq)
    sq += 1e-8
    np.divide(m, 1 - 0.9**k, out=grad)
    np.multiply(rate, grad, out=grad)
    grad /= sq                    # rate (m / (1 - 0.9^k)) / (sqrt(v / (1 - 0.999^k)) + eps)
    p -= grad
    # (maximum / minimum rather than np.clip: the same floats, several times faster on small arrays)
    np.maximum(p, 0.0, out=p)
    if upper is not None:
        np.minimum(p, upper, out=p)


__all__ = ["adam_step_inplace", "projected_adam_step"]
