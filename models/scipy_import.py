"""scipy modules imported without the start-up cost of scipy's copy of numpy's namespace.

Every scipy module reaches `scipy._lib._array_api`, which (scipy >= 1.15, vendored
`array_api_compat.numpy`) clones numpy's namespace with `from numpy import *` and a `getattr` of
every name in `dir(numpy)`. numpy lists its lazily loaded submodules in both, so the first scipy
import also imports numpy.f2py, numpy.testing, numpy.ma, numpy.polynomial, ... : about 0.1 s of
CPU, a tenth of a whole `certify lipschitz` call on a small net, for modules the clone only needs
in scipy's own tests (cupy/torch assertion helpers).

`import_scipy(name)` imports `name` while numpy's `__all__` and `__dir__` name only what numpy has
loaded so far, then restores both. Nothing numerical changes: the clone keeps every numpy function
and the submodules it imports explicitly (linalg, fft), and a skipped submodule stays one
attribute access away (`numpy.testing` still loads through numpy's own `__getattr__`). Only the
first scipy import of a process matters (later ones find `scipy._lib._array_api` loaded): the
modules that are first to import scipy on the small-question paths (LP expressions, matrices of
loaded models) use this; the rest import scipy as usual.

During the import (milliseconds, at start-up) another thread's `from numpy import *` would see the
short list as well; certify imports these modules before it starts threads.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from types import ModuleType
from typing import Iterator

import numpy as np


@contextlib.contextmanager
def numpy_namespace_as_loaded() -> Iterator[None]:
    """numpy's `__all__` and `dir(numpy)` restricted to the names numpy has already loaded."""
    ns = vars(np)
    missing = object()
    saved_all, saved_dir = ns.get("__all__", missing), ns.get("__dir__", missing)
    loaded = sorted(ns)
    try:
        if isinstance(saved_all, list):
            ns["__all__"] = [name for name in saved_all if name in ns]
        ns["__dir__"] = lambda: list(loaded)
        yield
    finally:
        for key, value in (("__all__", saved_all), ("__dir__", saved_dir)):
            if value is missing:
                ns.pop(key, None)
            else:
                ns[key] = value


def import_scipy(name: str) -> ModuleType:
    """`importlib.import_module(name)` for a scipy module, numpy's lazy submodules left unloaded
    when this is the process's first scipy import (module doc)."""
    if "scipy._lib._array_api" in sys.modules:
        return importlib.import_module(name)
    with numpy_namespace_as_loaded():
        return importlib.import_module(name)


#: scipy.sparse, imported so: the modules first to import scipy on the small-question paths (LP
#: expressions and models, matrices of loaded models) take it from here
sparse = import_scipy("scipy.sparse")

__all__ = ["import_scipy", "numpy_namespace_as_loaded", "sparse"]
