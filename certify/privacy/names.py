"""Names of the mechanisms and Gaussian calibrations (no imports: the CLI reads them at start-up)."""

from __future__ import annotations

CALIBRATIONS: tuple[str, ...] = ("analytic", "classic", "pac", "zcdp")

#: name -> (noise family, kind); kind is "plain", "output" or "input"
MECHANISMS: dict[str, tuple[str, str]] = {
    "laplace": ("laplace", "plain"),
    "gaussian": ("gaussian", "plain"),
    "logistic": ("logistic", "plain"),
    "lap-output": ("laplace", "output"),
    "gauss-output": ("gaussian", "output"),
    "gauss-input": ("gaussian", "input"),
    "logistic-output": ("logistic", "output"),
}
