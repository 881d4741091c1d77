"""Anytime stages of a local Lipschitz question: the fast Jacobian bound and the branch-and-bound.

`fast_upper`: milliseconds, sound, used by every method (the certificate's upper bound is never
worse): the Clarke-Jacobian bound over the box's sound pre-activation bounds
(`solvers.bounds.jacobian.clarke_norm_bound`) and, for operator norms, the global product of layer
norms (a global bound holds on every box). `bab_certificate` runs `certify.lipschitz.bab` under
the question's budget and turns its result into the certificate.
"""

from __future__ import annotations

from solvers.bab import BabProgress
from solvers.bounds.jacobian import clarke_norm_bound
from solvers.bounds.types import Bounds, relu_blocks
from solvers.bounds.jacobian_interval import phase_slopes
from solvers.runtime import Budget, Progress, interrupted, past

from .bab import lipschitz_bab
from .certificate import LipschitzCertificate
from .options import LocalOptions, NormQuestion
from .witness import WitnessSearch, closed


def fast_upper(net, nb: Bounds, question: NormQuestion, deadline: float | None = None) -> tuple[float, str]:
    """(bound, what gave it): the smaller of the Clarke-Jacobian and global product bounds (the
    Clarke bound alone once Ctrl-C or the deadline stopped the run: the product costs a second on
    784-512-512 layers). `deadline`: the Clarke bound's linear parts not started by then are skipped."""
    weights = [b.weight for b in relu_blocks(net)]
    jac = clarke_norm_bound(weights, *phase_slopes(nb.phases()), question.p, question.q, question.target,
                            deadline=deadline)
    if question.target is None and not past():
        from .norm_product import naive_bound

        glob = naive_bound(net, question.p, str(question.q)).upper
        if glob < jac:
            return glob, "global product of layer norms"
    return jac, "Clarke-Jacobian bound"


def bab_certificate(net, box, question: NormQuestion, opts: LocalOptions, nb: Bounds, search: WitnessSearch,
                    budget: Budget, fast: tuple[float, str], live, method: str) -> LipschitzCertificate:
    """The certificate of the branch-and-bound ("bab") or of the fast bound alone ("bounds")."""
    upper, source = fast
    notes = [f"upper bound: {source}"]
    nodes, stop = 0, "closed"
    if method == "bab" and not closed(search.lower, upper, 1e-6):
        def report(ev: BabProgress) -> None:
            live.emit(Progress(budget.elapsed(), max(ev.lower, search.lower), min(ev.upper, upper, live.upper), "bab", ev.nodes))

        out = lipschitz_bab(net, box, question, search, budget, progress=report if live.active else None,
                            milp_finish=opts.milp_finish, root_bounds=nb, cores=opts.threads)
        nodes, stop = out.nodes, out.stop
        if out.upper < upper:
            upper = out.upper
            notes = [f"upper bound: branch-and-bound over input splits and ReLU phases ({'closed tree' if stop in ('closed', 'gap') else 'open nodes at ' + stop})"]
        if out.worker_nodes:
            # (strong branching bounds trial halves the tree does not count as nodes)
            notes.append(f"{out.worker_nodes} node bounds computed on a second core")
        if out.worker_failure:
            notes.append(f"the second core's bound worker stopped ({out.worker_failure}); its nodes were bounded here")
    lower = search.lower
    upper = max(upper, lower)
    status = {"time_limit": "time_limit", "interrupted": "interrupted", "node_limit": "open_gap"}.get(stop, "optimal")
    if status == "optimal" and not closed(lower, upper, 1e-6):
        # open: because Ctrl-C or the time limit cut the bounds or the witness search short?
        status = "interrupted" if interrupted() else "time_limit" if budget.expired() else "open_gap"
    live.proven(upper)
    return LipschitzCertificate(
        lower=float(lower), upper=float(upper), status=status, certified=True, box=box, input_norm=question.p,
        output_norm=question.q, seconds=budget.elapsed(), notes=notes, backend="none",
        witness=None if search.point is None else search.point.x, target=question.target, margin=question.margin,
        method=method, nodes=nodes, mip_gap=opts.mip_gap, time_limit=opts.time_limit, bounds=opts.bounds,
        pass_bounds=opts.pass_bounds, formulation=opts.formulation, unstable=nb.num_unstable, binaries=0,
        bound_seconds=nb.seconds, proof={"tree": stop, "nodes": nodes, "complete": stop in ("closed", "gap")},
        witness_direction=search.direction)


__all__ = ["bab_certificate", "fast_upper"]
