"""Propose-Test-Release for neural-network queries, with proposals of D_p from data.

- `grid`       the radius grid and the noisy test in exact integer units (`TestGrid`)
- `bounds`     cheap sound bounds (interval Jacobian, layer product, sampled witnesses)
- `decide`     "is L(f, box) <= D_p?" by the MILP proof with a target, or a replayed witness
- `search`     R* by bisection over the grid with caches (`StabilitySearch`, `Step`)
- `shared`     bounds and witnesses reused across queries on one network (`SharedBounds`)
- `mechanism`  `ptr(...)`: the search, the noisy test and the Laplace release (`PtrResult`)
- `proposal`   D_p from certified constants on data (mean + n std, quantiles) and release rates

>>> from certify.ptr import TestGrid
>>> g = TestGrid.make(0.5, epsilon=1.0, delta=1e-5)
>>> g.threshold_units, round(g.threshold, 3)
(92, 5.75)
"""

from __future__ import annotations

from ..lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "PtrResult": "result",
    "SearchResult": "search",
    "StabilitySearch": "search",
    "Step": "search",
    "SharedBounds": "shared",
    "TestGrid": "grid",
    "ptr": "mechanism",
    "ptr_guarantee": "mechanism",
    "Proposal": "proposal",
    "propose": "proposal",
    "parse_rules": "proposal",
    "release_rate": "proposal",
}


__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = sorted(_LAZY)
