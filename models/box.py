"""`Box`: the input region of every local question (validated once, used everywhere).

A box is [lo, hi] in the model's flattened input space. It is built from a center and an l_inf
radius (a number or one per input) or from explicit bounds, optionally intersected with a domain
(e.g. [0, 1] for pixels). The requested center and radius are kept, so a certificate can say both
what was asked and what was certified (the intersection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import BadInput

VectorLike = float | Sequence[float] | np.ndarray


def _vector(value: Any, name: str, dim: int | None, *, scalar_ok: bool = True) -> np.ndarray:
    if isinstance(value, (bool, np.bool_)):
        raise BadInput(f"{name} must be a number or a vector of numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a number or a vector of numbers, got {type(value).__name__}") from None
    if arr.ndim == 0:
        if not scalar_ok:
            raise BadInput(f"{name} must be a vector" + (f" of {dim} values" if dim else ""))
        if dim is None:
            raise BadInput(f"{name}: a single number needs the input dimension to be known")
        arr = np.full(dim, float(arr))
    arr = arr.reshape(-1)
    if dim is not None and arr.size == 1 and scalar_ok:
        arr = np.full(dim, float(arr[0]))
    if dim is not None and arr.size != dim:
        raise BadInput(f"{name} has {arr.size} values but the model takes {dim} inputs")
    if not np.all(np.isfinite(arr)):
        raise BadInput(f"{name} contains NaN or inf")
    return arr


def parse_domain(domain: Any, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(lo, hi) vectors of length `dim` from a pair of numbers or vectors (None stays None)."""
    if domain is None:
        return None
    if isinstance(domain, Box):
        return domain.lo.copy(), domain.hi.copy()
    try:
        lo, hi = domain
    except (TypeError, ValueError):
        raise BadInput("domain must be a pair (lo, hi) of numbers or vectors, e.g. (0, 1)") from None
    lo = _vector(lo, "domain lower bound", dim)
    hi = _vector(hi, "domain upper bound", dim)
    bad = np.flatnonzero(lo >= hi)
    if bad.size:
        k = int(bad[0])
        raise BadInput(f"domain must have lo < hi in every input; input {k} has lo={lo[k]:g}, hi={hi[k]:g}")
    return lo, hi


@dataclass(frozen=True, eq=False)
class Box:
    """The box lo <= x <= hi (float64 vectors of the model's input size).

    Build it with `Box.around(center, radius, domain=...)` or `Box.from_bounds(lo, hi, domain=...)`.
    `center` and `radius` record a request around a point (None for explicit bounds); `lo`/`hi`
    are what is certified (the request intersected with the domain).
    """

    lo: np.ndarray
    hi: np.ndarray
    center: np.ndarray | None = None
    radius: np.ndarray | None = None
    domain: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def around(cls, center: VectorLike, radius: VectorLike, *, domain: Any = None, dim: int | None = None,
               allow_zero: bool = False) -> "Box":
        """The l_inf ball center +/- radius (radius a number or one per input), within `domain`.

        `allow_zero` admits zero radii (a coordinate held fixed, as in hyperrectangles)."""
        c = _vector(center, "center", dim, scalar_ok=False)
        r_arr = np.asarray(radius, dtype=np.float64) if not isinstance(radius, (bool, np.bool_)) else None
        if r_arr is None:
            raise BadInput(f"radius must be a positive number or one per input, got {radius!r}")
        r = _vector(radius, "radius", c.size)
        if np.any(r < 0) or (not allow_zero and np.any(r == 0)):
            k = int(np.flatnonzero(r <= 0 if not allow_zero else r < 0)[0])
            raise BadInput(f"radius must be {'non-negative' if allow_zero else 'positive'}, "
                           f"got {r[k]:g}" + (f" for input {k}" if r.size > 1 else ""))
        return cls._make(c - r, c + r, c, r, domain)

    @classmethod
    def from_bounds(cls, lo: VectorLike, hi: VectorLike, *, domain: Any = None, dim: int | None = None) -> "Box":
        """The box [lo, hi] (lo <= hi elementwise; equal bounds fix an input), within `domain`."""
        lo_v = _vector(lo, "box lower bound", dim)
        hi_v = _vector(hi, "box upper bound", lo_v.size if dim is None else dim)
        bad = np.flatnonzero(lo_v > hi_v)
        if bad.size:
            k = int(bad[0])
            raise BadInput(f"box bounds cross in input {k}: lo={lo_v[k]:g} > hi={hi_v[k]:g}")
        return cls._make(lo_v, hi_v, None, None, domain)

    @classmethod
    def _make(cls, lo, hi, center, radius, domain) -> "Box":
        dom = parse_domain(domain, lo.size)
        if dom is not None:
            lo, hi = np.maximum(lo, dom[0]), np.minimum(hi, dom[1])
            bad = np.flatnonzero(hi < lo)
            if bad.size:
                k = int(bad[0])
                raise BadInput(f"the box does not meet the domain in input {k} ([{lo[k]:g}, {hi[k]:g}] is empty); "
                               "move the center inside the domain or enlarge the radius")
        if center is not None and radius is not None and np.any((hi <= lo) & (radius > 0)):
            k = int(np.flatnonzero((hi <= lo) & (radius > 0))[0])
            raise BadInput(f"the box only touches the domain in input {k} (a single point); "
                           "move the center inside the domain or enlarge the radius")
        for v in (lo, hi):
            v.setflags(write=False)
        return cls(lo, hi, center, radius, dom)

    # ------------------------------------------------------------------ queries
    @property
    def dim(self) -> int:
        return int(self.lo.size)

    @property
    def mid(self) -> np.ndarray:
        return 0.5 * (self.lo + self.hi)

    @property
    def half_width(self) -> np.ndarray:
        return 0.5 * (self.hi - self.lo)

    @property
    def free(self) -> np.ndarray:
        """Inputs that vary over the box (lo < hi)."""
        return self.hi > self.lo

    def contains(self, x: VectorLike, tol: float = 0.0) -> bool:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        return bool(x.size == self.dim and np.all(x >= self.lo - tol) and np.all(x <= self.hi + tol))

    def clip(self, x: VectorLike) -> np.ndarray:
        return np.clip(np.asarray(x, dtype=np.float64).reshape(-1), self.lo, self.hi)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.lo, self.hi, size=(n, self.dim))

    def with_bounds(self, lo: VectorLike, hi: VectorLike) -> "Box":
        """A sub-box (same domain record; no center/radius)."""
        return Box.from_bounds(lo, hi, domain=None if self.domain is None else self.domain)

    def check_dim(self, dim: int, what: str = "model") -> "Box":
        if self.dim != dim:
            raise BadInput(f"the box has {self.dim} inputs but the {what} takes {dim}")
        return self

    def to_dict(self, max_values: int = 4096) -> dict[str, Any]:
        """JSON-ready: lo/hi (and the request), or summaries for very large inputs."""
        def vec(v: np.ndarray | None):
            if v is None:
                return None
            if v.size <= max_values:
                return v.tolist()
            return {"size": int(v.size), "min": float(v.min()), "max": float(v.max())}

        out: dict[str, Any] = {"lo": vec(self.lo), "hi": vec(self.hi)}
        if self.center is not None:
            out["center"] = vec(self.center)
            r = self.radius
            out["radius"] = float(r[0]) if r is not None and np.all(r == r[0]) else vec(r)
        if self.domain is not None:
            dlo, dhi = self.domain
            out["domain"] = ([float(dlo[0]), float(dhi[0])] if np.all(dlo == dlo[0]) and np.all(dhi == dhi[0])
                             else {"lo": vec(dlo), "hi": vec(dhi)})
        return out

    def __repr__(self) -> str:
        if self.dim <= 6:
            return f"Box(lo={self.lo.tolist()}, hi={self.hi.tolist()})"
        return f"Box({self.dim} inputs, widths {float((self.hi - self.lo).min()):.3g}..{float((self.hi - self.lo).max()):.3g})"


__all__ = ["Box", "parse_domain"]
