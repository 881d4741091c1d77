"""Empirical utility rho_hat(eps): sample the mechanism, query the classifier, count kept classes.

The theory (`utility.rho`) needs no sampling; this is the practice it is compared with (Zheng &
Hu's figures): n perturbed copies of the record (each perturbed feature through its mechanism,
the others untouched), the fraction classified as the unperturbed record, and a Clopper-Pearson
interval. When the box behind rho is certified, rho <= rho_hat up to sampling error: `consistent`
says whether rho <= the interval's upper end. For a box found by sampling, rho is the lower bound
that holds with confidence 1 - omega over that sampling (`certify.ldp.utility`; omega and tau are
reported, and `rho_box` = P(perturbed record in the box), which is not a bound there).

The classifier is any callable on a batch (n, d) of float64 records returning labels (n,) (e.g.
a scikit-learn `predict`) or scores (n, k) (argmax taken: a torch module or a `models.Network`
through `certify.privacy.mechanisms.as_function`), or an object with `predict`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import BadInput
from ..privacy.audit import clopper_pearson
from ..privacy.sampling import NumpySampler, make_sampler, sampler_label
from .mechanisms import LDPMechanism
from .utility import _Problem


def as_classifier(model: Any) -> Callable[[np.ndarray], np.ndarray]:
    """A function batch -> labels for sklearn-like models, networks, torch modules or callables."""
    if hasattr(model, "predict") and callable(model.predict):
        return lambda x: np.asarray(model.predict(x))
    from ..privacy.mechanisms import as_function

    f = as_function(model)

    def labels(x: np.ndarray) -> np.ndarray:
        out = np.asarray(f(x))
        return out.argmax(axis=1) if out.ndim == 2 and out.shape[1] > 1 else out.reshape(-1)

    return labels


@dataclass
class EmpiricalUtility:
    epsilon: float
    rho_hat: float
    kept: int
    n: int
    ci: tuple[float, float]
    confidence: float
    sampler: str
    seconds: float
    rho: float | None = None
    theory_seconds: float | None = None
    rho_box: float | None = None
    omega: float | None = None
    tau: float | None = None
    statement: str = ""

    @property
    def consistent(self) -> bool | None:
        """rho <= upper end of the interval for rho_hat (None without a theoretical rho)."""
        return None if self.rho is None else bool(self.rho <= self.ci[1])

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "rho_hat": self.rho_hat, "kept": self.kept, "n": self.n,
                "ci": list(self.ci), "confidence": self.confidence, "sampler": self.sampler, "seconds": self.seconds,
                "rho": self.rho, "theory_seconds": self.theory_seconds, "consistent": self.consistent,
                "rho_box": self.rho_box, "omega": self.omega, "tau": self.tau, "statement": self.statement}


def _perturb(mechs: Sequence[LDPMechanism], features: np.ndarray, x: np.ndarray, n: int, sampler: Any,
             indicator: float | None) -> np.ndarray:
    sampler = make_sampler(sampler)  # one stream for all features (a seed per call would repeat it)
    recs = np.repeat(x[None, :].astype(np.float64), n, axis=0)
    for m, f in zip(mechs, features):
        recs[:, f] = m.sample(float(x[f]), n, sampler=sampler)
    if indicator:
        gen = sampler.rng if isinstance(sampler, NumpySampler) else np.random.default_rng()
        recs[gen.random(n) < indicator] = x
    return recs


def empirical_rho(mechanism: Any, classifier: Any, box: Any, *, point: Any = None, features: Any = None,
                  epsilon: float | None = None, n: int = 2000, sampler: Any = 0, confidence: float = 0.99,
                  omega: Any = None, tau: Any = None, indicator: Any = None) -> EmpiricalUtility:
    """rho_hat at one epsilon (default: the mechanism's) next to the theoretical rho for `box`.

    `sampler` (`certify.privacy.sampling.make_sampler`): an int seed or numpy Generator (fast numpy
    sampling, NOT secure; the default seed 0), or None / "secure" / a random.Random for the exact
    sampler (slow: ~ms per value).
    """
    if not 0 < confidence < 1:
        raise BadInput("confidence must be in (0, 1)")
    n = int(n)
    if n < 1:
        raise BadInput("n must be >= 1")
    prob = _Problem(mechanism, box, point=point, features=features, omega=omega, tau=tau, indicator=indicator)
    mechs = prob.mechs if epsilon is None else [m.with_epsilon(epsilon) for m in prob.mechs]
    predict = as_classifier(classifier)
    x = prob.box.point
    label = np.asarray(predict(x[None, :])).reshape(-1)[0]
    sampler = make_sampler(sampler)
    label_sampler = sampler_label(sampler)
    t0 = time.perf_counter()
    recs = _perturb(mechs, prob.features, x, n, sampler, prob.indicator)
    kept = int(np.sum(np.asarray(predict(recs)).reshape(-1) == label))
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    e = None if epsilon is None else epsilon
    rho = float(prob.rho(e))
    theory_seconds = time.perf_counter() - t1
    rho_box = float(np.prod(prob.masses(e), axis=-1))
    err = (1 - confidence) / 2
    ci = clopper_pearson(kept, n, err)
    sampled = prob.probabilistic
    return EmpiricalUtility(mechs[0].epsilon, kept / n, kept, n, ci, confidence, label_sampler, seconds, rho,
                            theory_seconds, rho_box, prob.omega if sampled else None, prob.tau if sampled else None,
                            prob.statement())


def theory_vs_practice(mechanism: Any, classifier: Any, box: Any, epsilons: Sequence[float], **kwargs: Any
                       ) -> list[EmpiricalUtility]:
    """`empirical_rho` over an epsilon grid (one row per epsilon)."""
    return [empirical_rho(mechanism, classifier, box, epsilon=float(e), **kwargs) for e in epsilons]
