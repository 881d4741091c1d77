"""One entry point for the box of a classifier at a point: certified when certify can, labelled otherwise.

`robustness_box(model, point, features=, domain=)` returns
- for scikit-learn linear classifiers (or a `LinearModel`): `linear.robustness_hyperrectangle`
  (exact, certified);
- for tree ensembles (or a `TreeEnsemble`): `trees.tree_robustness_hyperrectangle` (exact, certified);
- for ReLU networks (a `models.ir.Network`, e.g. from `certify.load_onnx`):
  `certify.robustness.robustness_hyperrectangle` (sound MILP proofs, certified);
- for anything else with a `predict` (or a callable batch -> labels): a *probabilistic* box
  (`ProbabilisticBox`, status "probabilistic", `certified` False): the largest uniform half-width
  (by bisection) at which n = ceil(ln(2/omega) / (2 (tau/2)^2)) uniform samples show no class
  change, re-tested on fresh samples (Zheng & Hu Sec. 4.2: with confidence 1 - omega, at most a
  fraction tau of the box changes the class).

What the sampling shows, exactly: the samples are uniform on the box (the features not moved are
fixed at x, a_i = b_i = x_i), so the statement is about the uniform measure on the moved features.
A box whose bad fraction exceeds tau passes one fresh test of n samples with probability
< (1 - tau)^n <= (omega / 2)^(2 / tau); the reported box is the first of the candidates r, r/2,
r/4, ... to pass, so the chance that it is bad is at most (tests run) x (1 - tau)^n, kept <= omega
by stopping at the point box {x} (which has no bad point) once that many tests have failed.
`utility` turns the box into a lower bound of P(class kept) holding with confidence 1 - omega
(not Zheng & Hu's rho (1 - omega)(1 - tau), which is not a bound: docs/ldp.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from models.box import Box, parse_domain

from ..certificate import Certificate, Status
from ..errors import BadInput


@dataclass
class ProbabilisticBox(Certificate):
    """A box found by sampling: with confidence 1 - omega at most a fraction tau of it changes the class."""

    KIND: ClassVar[str] = "probabilistic_box"

    omega: float = 0.05
    tau: float = 0.05
    samples: int = 0
    model: str = ""
    predicted_class: Any = None
    point: np.ndarray | None = None
    features: list[int] | None = None


def sample_size(omega: float, tau: float) -> int:
    """n = ceil(ln(2/omega) / (2 (tau/2)^2)) (Hoeffding, as in the utility paper)."""
    return int(math.ceil(math.log(2.0 / omega) / (2.0 * (tau / 2.0) ** 2)))


def _kind(model: Any) -> str:
    from .linear import LinearModel
    from .tree_model import is_tree_model

    from models.ir import Network

    if isinstance(model, LinearModel):
        return "linear"
    if isinstance(model, Network):
        return "network"
    if is_tree_model(model):
        return "tree"
    clf = model
    if type(model).__name__ == "Pipeline":
        clf = model.steps[-1][1]
    if hasattr(clf, "coef_") and hasattr(clf, "intercept_") and hasattr(clf, "classes_"):
        return "linear"
    return "other"


def robustness_box(model: Any, point: Any, *, features: Any = None, domain: Any = (0.0, 1.0), omega: float = 0.05,
                   tau: float = 0.05, seed: int | None = None, **kw: Any) -> Certificate:
    """The best box certify can give for `model` at `point` (see the module docstring)."""
    kind = _kind(model)
    if kind == "linear":
        from .linear import robustness_hyperrectangle

        return robustness_hyperrectangle(model, point, features=features, domain=domain)
    if kind == "tree":
        from .trees import tree_robustness_hyperrectangle

        return tree_robustness_hyperrectangle(model, point, features=features, domain=domain, **kw)
    if kind == "network":
        from ..robustness import robustness_hyperrectangle as network_hyperrectangle

        return network_hyperrectangle(model, point, features=features, domain=domain, **kw)
    return probabilistic_box(model, point, features=features, domain=domain, omega=omega, tau=tau, seed=seed)


def probabilistic_box(model: Any, point: Any, *, features: Any = None, domain: Any = (0.0, 1.0), omega: float = 0.05,
                      tau: float = 0.05, seed: int | None = None, steps: int = 20) -> ProbabilisticBox:
    """A sampled (not certified) box: see the module docstring."""
    from .empirical import as_classifier
    from .utility import _features

    t0 = time.perf_counter()
    if not (0 < omega < 1 and 0 < tau < 1):
        raise BadInput("omega and tau must lie in (0, 1)")
    if domain is None:
        raise BadInput("the probabilistic box needs the input domain (lo, hi)")
    predict = as_classifier(model)
    x0 = np.asarray(point, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(x0)):
        raise BadInput("the point contains NaN or inf")
    lo, hi = parse_domain(domain, x0.size)
    if np.any(x0 < lo) or np.any(x0 > hi):
        raise BadInput("the point lies outside the domain")
    feats = _features(features, x0.size)
    try:
        c = np.asarray(predict(x0[None, :])).reshape(-1)[0]
    except Exception as exc:  # a model that cannot take this point
        raise BadInput(f"the model cannot predict the point ({type(exc).__name__}: {str(exc)[:100]})") from None
    n = sample_size(omega, tau)
    rng = np.random.default_rng(seed)

    def box(r: float) -> tuple[np.ndarray, np.ndarray]:
        blo, bhi = x0.copy(), x0.copy()
        blo[feats] = np.maximum(lo[feats], x0[feats] - r)
        bhi[feats] = np.minimum(hi[feats], x0[feats] + r)
        return blo, bhi

    def clean(r: float) -> bool:
        blo, bhi = box(r)
        X = rng.uniform(blo, bhi, size=(n, x0.size))
        return bool(np.all(np.asarray(predict(X)).reshape(-1) == c))

    a, b = 0.0, float(np.max(np.maximum(x0 - lo, hi - x0)[feats]))
    if clean(b):
        a = b
    else:
        for _ in range(steps):
            mid = 0.5 * (a + b)
            a, b = (mid, b) if clean(mid) else (a, mid)
    # fresh samples for the reported box (the search reused its tests); union bound over the re-tests
    miss = math.exp(n * math.log1p(-tau))  # a box with bad fraction > tau passes one test with prob. < miss
    tests = 0
    while a > 0:
        if (tests + 1) * miss > omega:
            a = 0.0  # the point box {x}: nothing in it changes the class
            break
        tests += 1
        if clean(a):
            break
        a *= 0.5
    blo, bhi = box(a)
    return ProbabilisticBox(
        lower=None, upper=None, status=Status.PROBABILISTIC, certified=False, box=Box.from_bounds(blo, bhi),
        input_norm="linf", seconds=time.perf_counter() - t0,
        notes=[f"probabilistic robustness (not a proof): {n} uniform samples per test show no class change; with "
               f"confidence {1 - omega:g} at most a fraction {tau:g} of the box (uniform measure on the moved "
               f"features) changes the class"],
        omega=float(omega), tau=float(tau), samples=n, model=type(model).__name__, predicted_class=c, point=x0,
        features=[int(i) for i in feats])


__all__ = ["ProbabilisticBox", "probabilistic_box", "robustness_box", "sample_size"]
