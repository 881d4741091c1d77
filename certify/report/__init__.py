"""PTR-ready sensitivity reports: certified local constants on data, D_p proposals, release rates.

`sensitivity_report(net, data, radius, ...)` (`build`), its per-point batch tasks (`tasks`) and
the self-contained HTML page (`html`). `certify report` is the command-line front end.
"""

from __future__ import annotations

from ..lazy import lazy_getattr

_LAZY = {"sensitivity_report": "build", "comparable": "build", "load_report_schema": "build", "SCHEMA": "build",
         "render_html": "html"}


__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = sorted(_LAZY)
