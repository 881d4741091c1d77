"""Empirical privacy audit: a statistical lower bound on epsilon from samples of two neighbours.

For an (epsilon, delta) mechanism and any event S, Pr[M(a) in S] <= e^eps Pr[M(b) in S] + delta.
With Clopper-Pearson bounds p_a >= lo_a and p_b <= hi_b (both holding with high probability),
eps >= log((lo_a - delta) / hi_b). `audit_epsilon` maximises this over threshold events
{y >= t} and {y < t} (both directions a/b, b/a) for thresholds fixed in advance, and splits the
false-alarm probability over all bounds it uses (Bonferroni): if the mechanism really is
(epsilon, delta)-private, the returned lower bound exceeds epsilon with probability at most
`false_alarm`. A lower bound above the claimed epsilon is evidence of a broken sampler or
calibration; a lower bound below it proves nothing (audits are one-sided).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.stats import beta as beta_dist

from ..errors import BadInput


def clopper_pearson(successes: int, trials: int, error: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds: Pr[p < lower] <= error and Pr[p > upper] <= error."""
    k, n = int(successes), int(trials)
    if not 0 <= k <= n or n == 0:
        raise BadInput(f"need 0 <= successes <= trials and trials > 0, got {k}/{n}")
    lower = 0.0 if k == 0 else float(beta_dist.ppf(error, k, n - k + 1))
    upper = 1.0 if k == n else float(beta_dist.ppf(1 - error, k + 1, n - k))
    return lower, upper


@dataclass(frozen=True)
class AuditResult:
    epsilon_lower: float
    event: str
    false_alarm: float
    samples: int

    def to_dict(self) -> dict:
        return {"epsilon_lower": self.epsilon_lower, "event": self.event, "false_alarm": self.false_alarm,
                "samples": self.samples}


def audit_epsilon(samples_a: Sequence[float], samples_b: Sequence[float], thresholds: Sequence[float], *,
                  delta: float = 0.0, false_alarm: float = 1e-3) -> AuditResult:
    """Lower bound on epsilon from scalar outputs of M(a) and M(b) (see the module docstring).

    `thresholds` must not be chosen from these samples (that would void the false-alarm rate).
    """
    a = np.asarray(samples_a, dtype=np.float64).reshape(-1)
    b = np.asarray(samples_b, dtype=np.float64).reshape(-1)
    ts = [float(t) for t in thresholds]
    if not ts or a.size == 0 or b.size == 0:
        raise BadInput("the audit needs samples of both inputs and at least one threshold")
    # per threshold: 2 events x 2 samples x (lower, upper) bounds
    error = false_alarm / (8 * len(ts))
    best, best_event = 0.0, "none"
    for t in ts:
        for label, in_a, in_b in ((f"y >= {t:g}", int(np.sum(a >= t)), int(np.sum(b >= t))),
                                  (f"y < {t:g}", int(np.sum(a < t)), int(np.sum(b < t)))):
            lo_a, hi_a = clopper_pearson(in_a, a.size, error)
            lo_b, hi_b = clopper_pearson(in_b, b.size, error)
            for num, den, direction in ((lo_a, hi_b, "a/b"), (lo_b, hi_a, "b/a")):
                if num - delta > 0 and den > 0:
                    value = math.log((num - delta) / den)
                    if value > best:
                        best, best_event = value, f"{label} ({direction})"
    return AuditResult(best, best_event, false_alarm, int(min(a.size, b.size)))
