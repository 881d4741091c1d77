"""Small ReLU nets trained at call time on scikit-learn's bundled 8x8 digits (no downloads).

Training is deterministic (fixed seed, one thread) and takes about a second on a laptop core.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..ir import Network


@dataclass(frozen=True)
class DigitsData:
    """Pixels scaled to [0, 1] (64 features); a fixed stratified 75/25 split."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


@lru_cache(maxsize=1)
def digits_data(seed: int = 0) -> DigitsData:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = x.astype(np.float64) / 16.0
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    return DigitsData(xtr, ytr, xte, yte)


def train_digits_mlp(hidden: tuple[int, ...] = (32,), seed: int = 0, epochs: int = 60):
    """Train a torch MLP 64 -> hidden... -> 10 with Adam; returns the torch module (eval mode)."""
    import torch

    data = digits_data()
    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sizes = (64,) + tuple(hidden) + (10,)
        layers: list[torch.nn.Module] = []
        for k, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers.append(torch.nn.Linear(a, b))
            if k < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        x = torch.as_tensor(data.x_train, dtype=torch.float32)
        y = torch.as_tensor(data.y_train, dtype=torch.long)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(epochs):
            perm = torch.randperm(len(x), generator=gen)
            for idx in perm.split(64):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
                opt.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def accuracy(net: Network, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(net.forward(x), axis=1) == y))


@lru_cache(maxsize=8)
def digits_net(hidden: tuple[int, ...] = (32,), seed: int = 0) -> Network:
    """IR of a digits MLP (64 inputs in [0, 1], 10 logits); cached per (hidden, seed)."""
    from ..torch_import import from_torch

    net = from_torch(train_digits_mlp(tuple(hidden), seed), name=f"digits_{'-'.join(map(str, hidden))}_s{seed}")
    return net
