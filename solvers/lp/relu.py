"""MILP / LP encodings of a ReLU network's forward pass over an input box.

Shared by every MILP built on a network (Lipschitz constants, robustness, VNNLIB): the input box
becomes variable bounds, stable ReLUs are substituted (relu(z) = z or 0, no variable), and each
unstable ReLU (l < 0 < u) gets

- "bigm":     a in [0, u], binary d:  a >= z,  a <= z - l (1 - d),  a <= u d   (exact), or
- "triangle": a in [0, u]:            a >= z,  a <= u (z - l) / (u - l)         (LP relaxation).

Pre-activation bounds must be sound for the box (see `solvers.bounds`): they size the big-M
constants, and an optimum outside them would be an error, not a result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.ir import Affine

from ..phases import ACTIVE, UNSTABLE, phases
from .expr import Expr
from .model import MilpBuilder


@dataclass
class ForwardEncoding:
    """Handles into the builder for the encoded forward pass.

    `pre[j]` / `post[j]` are the expressions of z_j and relu(z_j); `delta[j]` holds the binary
    variable index of each unstable neuron of ReLU layer j (-1 for stable neurons); `phase[j]` the
    INACTIVE / UNSTABLE / ACTIVE classification; `output` the network output expression.
    """

    x: np.ndarray
    pre: list[Expr]
    post: list[Expr]
    delta: list[np.ndarray]
    phase: list[np.ndarray]
    output: Expr

    @property
    def num_binaries(self) -> int:
        return int(sum(np.sum(d >= 0) for d in self.delta))

    def pattern(self, v: np.ndarray) -> list[np.ndarray]:
        """ReLU slopes (0/1 per neuron and layer) selected by a solution vector v."""
        out = []
        for ph, d in zip(self.phase, self.delta):
            slope = np.where(ph == ACTIVE, 1.0, 0.0)
            unstable = d >= 0
            slope[unstable] = np.round(v[d[unstable]])
            out.append(slope)
        return out


def encode_relu_network(
    builder: MilpBuilder,
    blocks: list[Affine],
    lo: np.ndarray,
    hi: np.ndarray,
    pre_lo: list[np.ndarray],
    pre_hi: list[np.ndarray],
    relaxation: Literal["bigm", "triangle"] = "bigm",
    layers: int | None = None,
    weights: list | None = None,
) -> ForwardEncoding:
    """Encode x in [lo, hi] and the first `layers` ReLU layers (default: all, plus the output map).
    `weights[j]`, when given, stands for blocks[j].weight (the same matrix, e.g. a cached scipy
    sparse copy: `Expr.affine`)."""
    x = builder.add_vars(lo.size, lo, hi, group="x")
    enc = ForwardEncoding(x, [], [], [], [], builder.var_expr(x))
    n_relu = len(blocks) - 1 if layers is None else layers
    extend_relu_network(builder, enc, blocks, pre_lo, pre_hi, n_relu, relaxation, weights)
    if layers is None:
        weight = blocks[n_relu].weight if weights is None else weights[n_relu]
        enc.output = enc.output.affine(weight, blocks[n_relu].bias)
    return enc


def extend_relu_network(
    builder: MilpBuilder,
    enc: ForwardEncoding,
    blocks: list[Affine],
    pre_lo: list[np.ndarray],
    pre_hi: list[np.ndarray],
    layers: int,
    relaxation: Literal["bigm", "triangle"] = "bigm",
    weights: list | None = None,
) -> None:
    """Encode, in place, the ReLU layers len(enc.pre) .. layers - 1 on top of `enc`, an encoding
    of the layers before them (its `output` their last post-activation; the encoding then ends
    at layer `layers` - 1's)."""
    weights = [b.weight for b in blocks] if weights is None else weights
    h = enc.output
    for j in range(len(enc.pre), layers):
        z = h.affine(weights[j], blocks[j].bias)
        l, u = pre_lo[j], pre_hi[j]
        ph = phases(l, u)
        delta = np.full(ph.size, -1, dtype=np.int64)
        unstable = np.flatnonzero(ph == UNSTABLE)
        # stable neurons: relu(z) is z or 0; unstable ones get a variable a
        keep = np.where(ph == ACTIVE, 1.0, 0.0)
        a_expr = z.scale(keep)
        if unstable.size:
            zu, lu, uu = z[unstable], l[unstable], u[unstable]
            a = builder.add_vars(unstable.size, 0.0, uu, group=f"relu{j}")
            a_e = builder.var_expr(a)
            builder.constrain(a_e - zu, lo=0.0, group=f"relu{j}/a>=z")
            if relaxation == "bigm":
                d = builder.add_binaries(unstable.size, group=f"delta{j}")
                d_e = builder.var_expr(d)
                # a <= z - l (1 - d)   <=>   a - z - l d <= -l
                builder.constrain(a_e - zu - d_e.scale(lu), hi=-lu, group=f"relu{j}/a<=z-l(1-d)")
                builder.constrain(a_e - d_e.scale(uu), hi=0.0, group=f"relu{j}/a<=ud")
                delta[unstable] = d
            else:
                # slope rounded up (over a width rounded down) and intercept rounded up: the row
                # a <= s (z - l) stays valid for every z in [l, u] despite rounding
                s = np.nextafter(uu / np.nextafter(uu - lu, -np.inf), np.inf)
                builder.constrain(a_e - zu.scale(s), hi=np.nextafter(-s * lu, np.inf), group=f"relu{j}/triangle")
            # relu(z): stable rows from the expression above, unstable rows from the new variables
            stable = np.flatnonzero(ph != UNSTABLE)
            a_expr = Expr.scatter(ph.size, [(stable, a_expr[stable]), (unstable, a_e)])
        enc.pre.append(z)
        enc.post.append(a_expr)
        enc.delta.append(delta)
        enc.phase.append(ph)
        h = a_expr
    enc.output = h


def constrain_phases(builder: MilpBuilder, enc: ForwardEncoding, split: list[np.ndarray], first: int = 0) -> None:
    """Rows z >= 0 for the neurons `split` marks active (+1) and z <= 0 for those it marks inactive
    (-1), per ReLU layer of the encoding `enc` (the layers given, from `first` on): a
    branch-and-bound node's phases, widened like every row (`MilpBuilder.constrain`)."""
    for t, s in enumerate(split[first:], start=first):
        on, off = np.flatnonzero(s > 0), np.flatnonzero(s < 0)
        if on.size:
            builder.constrain(enc.pre[t][on], lo=0.0)
        if off.size:
            builder.constrain(enc.pre[t][off], hi=0.0)
