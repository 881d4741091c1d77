"""Post-training weight perturbation (Yang, Gohari & Topcu, Algorithms 1-2).

`perturb_weights` adds logistic (the additive logistic mechanism, pure eps-DP with s = Delta_1/eps),
Laplace or Gaussian noise to the weights of one layer of a torch model (by default its last
`nn.Linear`, the fine-tuned head), for a given sensitivity of the training algorithm's output.

`sensitivity_sampler` estimates that sensitivity as in Algorithm 2 (Rubinstein & Alda 2017):
retrain on pairs of neighbouring datasets d \\ {d_i}, d \\ {d_j} and take the largest l1 (and l2)
distance of the trained weights. The maximum over sampled pairs is an EMPIRICAL sensitivity,
not a worst-case bound: guarantees calibrated from it are labelled `empirical` everywhere.

`utility_loss` is Definition 6.1: 1 - M(noisy) / M(clean) for a quality metric M.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import BadInput
from .guarantee import Guarantee
from .mechanisms import NoisyQuery
from .params import check_count, check_sensitivity


@dataclass(frozen=True)
class EmpiricalSensitivity:
    """Largest l1 / l2 distance of trained weights over sampled neighbouring dataset pairs.

    Empirical (a sample maximum): NOT a worst-case sensitivity.
    """

    l1: float
    l2: float
    pairs: int
    per_pair_l1: tuple[float, ...]
    per_pair_l2: tuple[float, ...]
    pair_indices: tuple[tuple[int, int], ...] = ()

    basis = "empirical"

    def for_norm(self, norm: str) -> float:
        return self.l1 if norm == "l1" else self.l2

    def to_dict(self) -> dict:
        return {"l1": self.l1, "l2": self.l2, "pairs": self.pairs, "basis": self.basis,
                "note": "maximum over sampled leave-one-out pairs; not a worst-case bound"}


def flatten_weights(obj: Any) -> np.ndarray:
    """Weights as one float64 vector: an array, a torch module (its parameters in order) or tensors."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(obj, torch.nn.Module):
        obj = list(obj.parameters())
    if torch is not None and isinstance(obj, (list, tuple)) and obj and all(isinstance(t, torch.Tensor) for t in obj):
        return np.concatenate([t.detach().double().reshape(-1).numpy() for t in obj])
    arr = np.asarray(obj, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise BadInput("trained weights contain NaN or inf")
    return arr


def sensitivity_sampler(train: Callable[[np.ndarray, np.ndarray], Any], x: np.ndarray, y: np.ndarray, *,
                        pairs: int = 20, seed: int = 0) -> EmpiricalSensitivity:
    """Algorithm 2: for `pairs` random i != j, train on d \\ {d_i} and d \\ {d_j}; max weight distance.

    `train(x, y)` must be deterministic (fixed initialisation and order) so that distances reflect
    the change of one record only; it returns the weights (array, torch module or tensors) in the
    same order as `flatten_weights` of the layer that will be perturbed.
    """
    pairs = check_count(pairs, "pairs")
    x = np.asarray(x)
    y = np.asarray(y)
    n = len(x)
    if n < 2 or len(y) != n:
        raise BadInput(f"the sensitivity sampler needs >= 2 records with one label each, got {n} inputs and {len(y)} labels")
    rng = np.random.default_rng(seed)
    d1, d2, chosen = [], [], []
    for _ in range(pairs):
        i, j = (int(v) for v in rng.choice(n, size=2, replace=False))
        chosen.append((i, j))
        keep_i = np.arange(n) != i
        keep_j = np.arange(n) != j
        w1 = flatten_weights(train(x[keep_i], y[keep_i]))
        w2 = flatten_weights(train(x[keep_j], y[keep_j]))
        if w1.shape != w2.shape:
            raise BadInput("train returned weight vectors of different sizes for neighbouring datasets")
        diff = w1 - w2
        d1.append(float(np.sum(np.abs(diff))))
        d2.append(float(np.linalg.norm(diff)))
    return EmpiricalSensitivity(max(d1), max(d2), pairs, tuple(d1), tuple(d2), tuple(chosen))


@dataclass
class WeightRelease:
    """A noisy copy of the model, the perturbed layer and the guarantee (DP of the training data)."""

    module: Any
    layer: str
    guarantee: Guarantee
    mechanism: NoisyQuery
    weights: int

    def to_dict(self) -> dict:
        out = self.mechanism.to_dict()
        out.update(layer=self.layer, weights=self.weights, guarantee=self.guarantee.to_dict())
        return out


def _find_layer(module: Any, layer: str | None) -> tuple[str, Any]:
    import torch

    named = dict(module.named_modules())
    if layer is not None:
        if layer not in named:
            raise BadInput(f"layer {layer!r} not found; the model has {', '.join(n for n in named if n) or 'no named layers'}")
        return layer, named[layer]
    linears = [(n, m) for n, m in named.items() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise BadInput("the model has no nn.Linear layer to perturb; name the layer with layer=...")
    return linears[-1]


def perturb_weights(module: Any, *, epsilon: float, sensitivity: float | EmpiricalSensitivity, delta: float | None = None,
                    family: str = "logistic", layer: str | None = None, calibration: str | None = None,
                    sampler: Any = None) -> WeightRelease:
    """Algorithm 1: a copy of `module` whose `layer` (default: last nn.Linear) weights carry noise.

    `sensitivity` is the sensitivity of the training algorithm's output for that layer (l1 for
    logistic/laplace, l2 for gaussian): a number you can justify as a worst-case bound, or an
    `EmpiricalSensitivity` from `sensitivity_sampler` (the guarantee is then labelled empirical;
    a sampled sensitivity of 0 is refused, since it would mean no noise).
    The guarantee is (epsilon, delta)-DP for training datasets differing in one record.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise BadInput(f"perturb_weights takes a torch module, got {type(module).__name__}")
    family = str(family).lower()
    empirical = isinstance(sensitivity, EmpiricalSensitivity)
    norm = "l2" if family == "gaussian" else "l1"
    sens = sensitivity.for_norm(norm) if empirical else check_sensitivity(sensitivity)
    mech = NoisyQuery(family, sensitivity=sens, epsilon=epsilon, delta=delta, calibration=calibration,
                      sampler=sampler, empirical=empirical)
    noisy = copy.deepcopy(module)
    name, target = _find_layer(noisy, layer)
    params = [p for p in target.parameters(recurse=False)]
    if not params:
        raise BadInput(f"layer {name!r} has no parameters to perturb")
    flat = flatten_weights(params)
    released = mech.release(flat)
    with torch.no_grad():
        offset = 0
        for p in params:
            size = p.numel()
            p.copy_(torch.as_tensor(released[offset:offset + size].reshape(tuple(p.shape)), dtype=p.dtype))
            offset += size
    return WeightRelease(noisy, name, mech.guarantee, mech, int(flat.size))


def utility_loss(noisy: float, clean: float) -> float:
    """1 - M(noisy) / M(clean) (Definition 6.1); M is a quality metric such as accuracy."""
    clean = float(clean)
    if not clean > 0:
        raise BadInput(f"the clean model's metric must be positive to define a utility loss, got {clean}")
    return 1.0 - float(noisy) / clean
