"""Extended Propose-Test-Release for one query point (posthoc-privacy paper, corrected).

    k      = StabilitySearch(...).search(D_p)           largest grid index with L(box(x, r_k)) <= D_p
    phi    = max(k, 0) h                                 (h = R / m; the paper's R*/2 is an erratum)
    test   : release iff max(k, 0) + Z >= z0,  Z ~ discrete Laplace(m / eps)   (`grid`)
    release: f(x) + Lap(D_p R / eps) per coordinate      (the l1 sensitivity of f over d(x, x') <= R)

The guarantee is (2 eps, delta / 2) for inputs within R in the input norm (docs/ptr.md has the
proof and its assumption). The noise scale depends on D_p, R and eps only, never on x.

Undecided queries: the proof needs k to be the exact grid index, which only a search whose every
step was decided (a proof or a replayed witness) provides. A step left undecided by its time
limit makes k depend on solver time, which can differ without bound between neighbouring inputs,
so no guarantee holds for that query. Such a query is *refused before any noise is drawn*:
nothing is released, no test is run, `guarantee` is None and `refusal` says why (the refusal
itself reveals that the search did not finish in time, which no guarantee covers: raise the
step limit until queries are decided).
Noise: `sampler=None` (default) draws both noises exactly from the OS CSPRNG (the test's integer
Z by CKS20's discrete Laplace, the release by `SecureSampler`); an int seed switches to numpy
(`NumpySampler`): reproducible, clearly labelled NOT secure.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from models.ir import Network
from solvers.runtime import interrupted, interruptible

from ..certificate import issue
from ..errors import BadInput
from ..privacy.accounting import compose
from ..privacy.discrete import discrete_laplace
from ..privacy.guarantee import Guarantee
from ..privacy.mechanisms import NoisyQuery
from ..privacy.params import as_number, check_metric, mul_up
from ..privacy.provenance import LipschitzSource
from ..privacy.sampling import NumpySampler, SecureSampler, make_sampler, sampler_label
from .claims import GlobalBound, resolve_global_bound
from .decide import UNDECIDED
from .grid import TestGrid
from .result import PtrResult, radius_interval
from .search import DEFAULT_SAMPLES, DEFAULT_STEP_TIME_LIMIT, SearchResult, StabilitySearch, outward_box
from .shared import SharedBounds

OUTPUT_NORM = "l1"  # Laplace noise per coordinate needs the l1 sensitivity


def check_proposal(value: Any, name: str = "proposal") -> float:
    """D_p > 0 and finite (a proposed bound of the local Lipschitz constant)."""
    v = as_number(value, name)
    if not (v > 0 and math.isfinite(v)):
        raise BadInput(f"{name} must be a positive finite number (a proposed local Lipschitz bound), got {value}")
    return v


def check_point(net: Network, point: Any, domain: Any) -> np.ndarray:
    from ..boundary.vectors import parse_vector

    x = parse_vector(point, "point", net.input_dim)
    if domain is not None:
        from models.box import parse_domain

        lo, hi = parse_domain(domain, net.input_dim)
        if np.any(x < lo) or np.any(x > hi):
            raise BadInput("the point lies outside the input domain")
    return x


def ptr_sampler(seed: Any) -> SecureSampler | NumpySampler:
    """None / "secure": the hardened sampler; an int seed (or "numpy"): seeded numpy, not secure."""
    if isinstance(seed, bool) or (isinstance(seed, int) and seed < 0):
        raise BadInput(f"the seed must be a non-negative integer, got {seed!r}")
    sampler = make_sampler(seed)
    if not isinstance(sampler, (SecureSampler, NumpySampler)):
        raise BadInput("PTR draws its test noise from the secure sampler or a seeded numpy generator; give None or a seed")
    return sampler


def test_noise(sampler: SecureSampler | NumpySampler, units: Fraction) -> int:
    """Z with Pr[Z = z] proportional to exp(-|z| / units): exact (CKS20) from the secure sampler's
    source, or the difference of two numpy geometric variables (the same law, float parameters)."""
    if isinstance(sampler, SecureSampler):
        return discrete_laplace(units, sampler.source)
    p = -math.expm1(-1.0 / float(units))
    return int(sampler.rng.geometric(p)) - int(sampler.rng.geometric(p))


def ptr_guarantee(epsilon: float, delta: float, radius: float, metric: str, proposal: float,
                  claims: tuple[str, ...] = ()) -> Guarantee:
    """(2 eps, delta / 2) for inputs within `radius`: the test (eps) composed with the release (eps,
    and the delta / 2 chance that the test passes where the proposal fails). The proposal needs no
    proof (the test checks it privately); `claims` are what the search took on the user's word."""
    source = LipschitzSource(proposal, metric, OUTPUT_NORM, "user", "PTR proposal, tested privately")
    test = Guarantee(epsilon, 0.0, radius, metric, mechanism="PTR test: discrete Laplace on phi", claims=claims)
    release = Guarantee(epsilon, delta / 2, radius, metric, mechanism="PTR release: Laplace(D_p R / eps)",
                        lipschitz=source)
    return compose(test, release).with_(mechanism="propose-test-release", lipschitz=source)


def ptr(
    net: Network,
    point: Any,
    radius: float,
    *,
    epsilon: float,
    delta: float,
    proposal: float,
    input_norm: str = "linf",
    domain: Any = None,
    tolerance: float | None = None,
    max_radius: float | None = None,
    sampler: Any = None,
    time_limit: float | None = None,
    step_time_limit: float = DEFAULT_STEP_TIME_LIMIT,
    global_bound: Any = None,
    trust_global_bound: bool = False,
    backend: str = "auto",
    threads: int = 1,
    samples: int = DEFAULT_SAMPLES,
    shared: SharedBounds | None = None,
) -> PtrResult:
    """Run extended PTR at `point` for neighbourhood radius R (see the module doc and docs/ptr.md).

    - `proposal`: D_p, a bound on the local Lipschitz constant (input norm -> l1) proposed
      independently of `point` (e.g. `certify.ptr.propose` on public data);
    - `input_norm`: the neighbourhood metric (linf, l1 or l2; boxes are always l_inf, which
      contain the l1 and l2 balls of the same radius); `domain`: (lo, hi) of valid inputs;
    - `tolerance`: grid step h (rounded down to R / m; default R / 8), `max_radius`: cap of R*;
    - `sampler`: None (secure, default) or an int seed (numpy, reproducible, not secure);
    - `time_limit` (whole query), `step_time_limit` (each bisection step), `backend`, `threads`,
      `samples`;
    - `global_bound`: a global upper bound in input_norm -> l1: a certificate certify issued for
      this net, or a number, which is used only when certify proves it, and otherwise refused
      unless `trust_global_bound=True` (the guarantee is then conditional on it; `ptr.claims`);
    - `shared`: a `SharedBounds` of this network to reuse (and extend) the bounds and witnesses of
      earlier queries (a stream of queries with one proposal; see `certify.ptr.shared`).
    """
    if not isinstance(net, Network):
        raise BadInput("net must be a certify Network (load it with certify.load_onnx or certify.from_torch)")
    p = check_metric(input_norm, "input norm")
    grid = TestGrid.make(radius, epsilon, delta, tolerance=tolerance, max_radius=max_radius)
    proposal = check_proposal(proposal)
    x = check_point(net, point, domain)
    rng = ptr_sampler(sampler)
    widest = outward_box(x, grid.max_radius, domain)
    bound = resolve_global_bound(net, global_bound, trust=bool(trust_global_bound), p=p, q=OUTPUT_NORM, point=x,
                                 lo=np.array(widest.lo), hi=np.array(widest.hi))
    search = StabilitySearch(net, x, grid, input_norm=p, output_norm=OUTPUT_NORM, domain=domain,
                             global_bound=None if bound is None else bound.value, step_time_limit=step_time_limit,
                             time_limit=time_limit, backend=backend, threads=threads, samples=samples, shared=shared)
    if bound is not None and bound.claim is not None:
        search.claimed_global = bound.value
    with interruptible():
        found = search.search(proposal)
        if interrupted():  # a stopped search is not the search the guarantee is about: release nothing
            raise KeyboardInterrupt("PTR interrupted before its test: nothing released")
    result = release(net, x, grid, found, proposal, p, rng, domain=domain, seconds=search.budget.elapsed(),
                     global_bound=bound)
    return issue(result, net)


def release(net: Network, x: np.ndarray, grid: TestGrid, found: SearchResult, proposal: float, metric: str,
            sampler: SecureSampler | NumpySampler, *, domain: Any = None, seconds: float = 0.0,
            global_bound: GlobalBound | None = None) -> PtrResult:
    """The noisy test and the release for a finished search (noise scales fixed before any draw).
    An undecided search is refused before any draw (module doc): no test, no output, no guarantee."""
    lower, upper, status = radius_interval(grid, found)
    claims = () if global_bound is None or global_bound.claim is None else (global_bound.claim,)
    notes = [] if global_bound is None or global_bound.note is None else [global_bound.note]
    common = dict(lower=lower, upper=upper, status=status, certified=True, box=outward_box(x, grid.radius, domain),
                  input_norm=metric, output_norm=OUTPUT_NORM, seconds=seconds, phi=grid.phi(found.index),
                  threshold=grid.threshold, r_star=lower, steps=found.steps, proposal=proposal, radius=grid.radius,
                  epsilon=grid.epsilon, delta=grid.delta, decided=found.decided, sampler=sampler_label(sampler),
                  point=x)
    if not found.decided:
        bad = next(s for s in found.steps if s.decision == UNDECIDED)
        reason = (f"the search left the step at radius {bad.radius:.6g} undecided ({bad.status}), so phi is not the "
                  "exact stability distance the privacy proof needs; refused before any noise was drawn: nothing "
                  "released, no guarantee. Raise --step-time-limit (and --time-limit) until queries are decided")
        return PtrResult(**common, notes=notes + [reason], released=False, output=None, phi_noisy=None,
                         noise_scale=0.0, guarantee=None, refusal=reason, test=grid.to_dict())
    mech = NoisyQuery("laplace", sensitivity=mul_up(proposal, grid.radius), epsilon=grid.epsilon, sampler=sampler,
                      metric=metric, alpha=grid.radius)
    k = max(found.index, 0)
    z = test_noise(sampler, grid.noise_units)
    released = k + z >= grid.threshold_units
    output = mech.release(net.forward(x[None, :]))[0] if released else None
    if claims:
        notes.append("the guarantee is conditional on a claim certify did not verify: " + "; ".join(claims))
    # the grid's description first: its noise scale (in grid units) must not overwrite the drawn noise
    test = {**grid.to_dict(), "index": found.index, "phi_units": k, "noise_draw_units": z,
            "noisy_phi_units": k + z, "threshold_units": grid.threshold_units}
    return PtrResult(**common, notes=notes, released=bool(released), output=output,
                     phi_noisy=float((k + z) * grid.step), noise_scale=mech.scale,
                     guarantee=ptr_guarantee(grid.epsilon, grid.delta, grid.radius, metric, proposal, claims),
                     test=test)


__all__ = ["OUTPUT_NORM", "check_point", "check_proposal", "ptr", "ptr_guarantee", "ptr_sampler", "release",
           "test_noise"]
