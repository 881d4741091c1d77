"""Lazy package exports: a name is imported from its submodule on first use (fast start-up)."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `exports[name]` (a submodule of `package`) on demand."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__


__all__ = ["lazy_getattr"]
