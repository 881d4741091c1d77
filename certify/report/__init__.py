"""PTR-ready sensitivity reports: certified local constants on data, D_p proposals, release rates.

`sensitivity_report(net, data, radius, ...)` (`build`), its per-point batch tasks (`tasks`) and
the self-contained HTML page (`html`). `certify report` is the command-line front end.
"""

from __future__ import annotations

from typing import Any

_LAZY = {"sensitivity_report": "build", "comparable": "build", "load_report_schema": "build", "SCHEMA": "build",
         "network_sha256": "build", "render_html": "html"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'certify.report' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = sorted(_LAZY)
