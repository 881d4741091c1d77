"""Default settings of PTR searches and sensitivity reports, in a module with no heavy imports:
`certify --help` reads them while registering its commands (start-up must stay light)."""

from __future__ import annotations

#: seconds of one bisection step
DEFAULT_STEP_TIME_LIMIT = 10.0
#: uniform points (and as many vertices) sampled per box for witnesses
DEFAULT_SAMPLES = 16
#: sensitivity reports: the privacy parameters of the PTR test and release
DEFAULT_EPSILON = 1.0
DEFAULT_DELTA = 1e-5
#: sensitivity reports: seconds of each point's certificate
DEFAULT_POINT_TIME_LIMIT = 30.0
#: sensitivity reports: extra proposal values of the release-rate curve, and their most
DEFAULT_CURVE = 8
MAX_CURVE = 200

__all__ = ["DEFAULT_CURVE", "DEFAULT_DELTA", "DEFAULT_EPSILON", "DEFAULT_POINT_TIME_LIMIT", "DEFAULT_SAMPLES",
           "DEFAULT_STEP_TIME_LIMIT", "MAX_CURVE"]
