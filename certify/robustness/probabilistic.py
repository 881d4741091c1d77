"""Probabilistic robustness radii of black-box classifiers (Zheng & Hu, sec. 4.2, Definition 8).

The one sampling test of certify (the LDP box of a model certify cannot prove,
`certify.ldp.probabilistic_box`, runs it too). A radius theta passes when, of n points drawn
uniformly from the l_inf ball B_theta(x) (the movable features, within the domain), at most a
fraction tau/2 change the class. If the true flip fraction p exceeds tau, the observed fraction
is at most tau/2 only if it falls p - tau/2 > tau/2 below its mean: by Hoeffding's (one-sided)
inequality a bad radius passes one test with probability at most exp(-2 n (tau/2)^2)
(`false_pass`). The radius is found by a binary search over [0, max radius] to a stated
precision: k = 1 + ceil(log2(range / precision)) tests at most.

The search reports a radius *chosen* by its tests, so a per-test guarantee does not cover the
result: omega is split over the k tests (a union bound; each test draws fresh samples, so the
bound holds although the tested radii depend on earlier outcomes). With the paper's formula
n = ln(2 / omega') / (2 (tau/2)^2) at omega' = omega / k, each test passes a bad radius with
probability <= omega / (2k), and with probability at least 1 - omega (in fact 1 - omega / 2) at
most a fraction tau of B_lower(x) changes the class. The bound k * false_pass(n) <= omega is
checked before the search; if it failed (too few samples) only the point itself (lower = 0)
would be reported.

The result is labelled "probabilistic" and never certified. Ties of a network's logits count as
flips, as everywhere in certify; for a black-box label function a flip is a different label.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

import numpy as np

from models.box import Box, parse_domain
from models.ir import Network

from ..errors import BadInput
from ..boundary.vectors import parse_positive
from .certificate import ProbabilisticRadius
from .options import parse_max_radius
from ..boundary.indices import feature_mask

BATCH = 4096


def hoeffding_samples(omega: float, tau: float, tests: int = 1) -> int:
    """n with 2 exp(-2 n (tau/2)^2) <= omega / tests."""
    return int(math.ceil(math.log(2.0 * tests / omega) / (2.0 * (tau / 2.0) ** 2)))


def false_pass(n: int, tau: float) -> float:
    """An upper bound of the probability that a ball whose flip fraction exceeds tau passes one test
    of n samples (observed fraction <= tau/2): exp(-2 n (tau/2)^2) (Hoeffding, one-sided)."""
    return math.exp(-2.0 * n * (tau / 2.0) ** 2)


def _unit(value: Any, name: str) -> float:
    v = parse_positive(value, name)
    if v >= 1:
        raise BadInput(f"{name} must be in (0, 1), got {value!r}")
    return v


def _flip_function(classifier: Any, x0: np.ndarray) -> tuple[Callable[[np.ndarray], np.ndarray], Any, str]:
    """(flips(X) -> bool array, the class at x0, a name) for a Network, an ONNX path, an object with
    `predict`, or a callable returning labels (B,) or scores (B, m)."""
    if isinstance(classifier, (str, os.PathLike)):
        from models import load_onnx

        classifier = load_onnx(classifier)
    if isinstance(classifier, Network):
        if classifier.output_dim < 2:
            raise BadInput(f"robustness needs a classifier with one output per class (at least 2); this model has "
                           f"{classifier.output_dim} output")
        net = classifier
        predict: Callable = net.forward
        name = net.name
    elif hasattr(classifier, "predict") and callable(classifier.predict):
        predict, name = classifier.predict, type(classifier).__name__
    elif callable(classifier):
        predict, name = classifier, getattr(classifier, "__name__", type(classifier).__name__)
    else:
        raise BadInput("classifier must be a Network, an ONNX path, an object with predict(X) or a callable")
    out0 = np.asarray(predict(x0[None]))
    if out0.ndim == 2 and out0.shape[1] > 1:  # scores: ties with the predicted class are flips
        c = int(np.argmax(out0[0]))

        def flips(X):
            Y = np.asarray(predict(X), dtype=np.float64)
            return np.max(np.delete(Y, c, axis=1), axis=1) >= Y[:, c]
        return flips, c, name
    label = out0.reshape(-1)[0]
    return (lambda X: np.asarray(predict(X)).reshape(-1) != label), label, name


def probabilistic_radius(
    classifier: Any,
    point: Any,
    *,
    omega: float = 0.05,
    tau: float = 0.02,
    domain: Any = None,
    max_radius: float | None = None,
    features: Any = None,
    precision: float | None = None,
    seed: int = 0,
) -> ProbabilisticRadius:
    """The largest l_inf radius (to `precision`, default 1e-3 of the search range) that passes the
    Hoeffding test (see the module doc). The search range is [0, max_radius], or up to the radius
    that covers the domain: one of them is required."""
    t0 = time.perf_counter()
    x0 = np.asarray(point, dtype=np.float64).reshape(-1)
    if x0.size == 0 or not np.all(np.isfinite(x0)):
        raise BadInput("the point must be a non-empty vector of finite numbers")
    if isinstance(classifier, Network):
        classifier.check_input(x0, "the point")
    omega, tau = _unit(omega, "omega"), _unit(tau, "tau")
    dom = parse_domain(domain, x0.size)
    movable = feature_mask(features, x0.size)
    lo = np.full(x0.size, -np.inf) if dom is None else dom[0]
    hi = np.full(x0.size, np.inf) if dom is None else dom[1]
    if np.any(x0 < lo) or np.any(x0 > hi):
        raise BadInput("the point lies outside the domain")
    top = min(parse_max_radius(max_radius), float(np.max(np.maximum(x0 - lo, hi - x0)[movable])))
    if not math.isfinite(top):
        raise BadInput("give max_radius or a domain: the probabilistic search needs a bounded range of radii")
    step = top * 1e-3 if precision is None else parse_positive(precision, "precision")
    tests = 1 + max(int(math.ceil(math.log2(top / step))), 0)
    n = hoeffding_samples(omega, tau, tests)
    flips, label, name = _flip_function(classifier, x0)
    rng = np.random.default_rng(seed)

    def rate(theta: float) -> float:
        r = np.where(movable, theta, 0.0)
        blo, bhi = np.maximum(x0 - r, lo), np.minimum(x0 + r, hi)
        count = 0
        for start in range(0, n, BATCH):
            X = rng.uniform(blo, bhi, size=(min(BATCH, n - start), x0.size))
            count += int(np.sum(flips(X)))
        return count / n

    passed, failed, failed_rate = 0.0, None, None
    sound = tests * false_pass(n, tau) <= omega  # the union bound over every test the search may run
    r_top = rate(top) if sound else math.inf
    if r_top <= tau / 2:
        passed = top
    elif sound:
        failed, failed_rate = top, r_top
        for _ in range(tests - 1):  # the budget the union bound covers
            if failed - passed <= step:
                break
            mid = 0.5 * (passed + failed)
            r = rate(mid)
            if r <= tau / 2:
                passed = mid
            else:
                failed, failed_rate = mid, r
    box = Box.from_bounds(np.maximum(x0 - np.where(movable, passed, 0.0), lo),
                          np.minimum(x0 + np.where(movable, passed, 0.0), hi))
    notes = [f"Hoeffding test with {n} samples per radius, omega split over the {tests} tests: "
             f"with probability >= {1 - omega:g}, at most a fraction {tau:g} of the l_inf ball of radius `lower` changes the class"]
    if not sound:
        notes.append(f"{n} samples per test cannot bound {tests} tests by omega: only the point itself is reported")
    elif failed is None:
        notes.append("the whole search range passed: lower is the largest radius searched")
    return ProbabilisticRadius(
        lower=passed, upper=failed, status="probabilistic", certified=False, box=box, input_norm="linf",
        seconds=time.perf_counter() - t0, notes=notes, predicted_class=_plain(label), point=x0,
        features=[int(i) for i in np.flatnonzero(movable)],
        domain=None if dom is None else [dom[0].tolist(), dom[1].tolist()], model=name, omega=omega, tau=tau,
        samples=n, tests=tests, precision=step, flip_rate=failed_rate, seed=seed)


def _plain(label: Any) -> Any:
    return label.item() if isinstance(label, np.generic) else label


__all__ = ["false_pass", "hoeffding_samples", "probabilistic_radius"]
