"""LipSDP-Neuron and LipSDP-Layer (Fazlyab et al. 2019) in cvxpy, validated in float64.

Formulation (see `solvers.sdp.lmi` for the matrix): minimise rho over rho and multipliers
T_k = diag(lambda_k) >= 0 (Neuron: one lambda per neuron; Layer: one per layer, T_k = lambda_k I)
subject to M(rho, T) + blkdiag(0, eps I) <= 0. The small margin eps on the hidden block keeps the
solver's multipliers strictly feasible, so that the float64 validation can prove them (a boundary
solution with a singular hidden block cannot be proven by a Cholesky factorisation).

- Exact input reduction: W_0 is replaced by R = U S (thin SVD), R R^T = W_0 W_0^T, so the input
  block has rank(W_0) <= n_1 rows instead of n_0 (784 -> 100 for an MNIST MLP).
- Deep nets use a layer-wise chain of small LMIs instead of one large one: M is block tridiagonal,
  its sparsity graph is chordal with cliques {k-1, k}, so M <= 0 iff M = sum_k E_k^T N_k E_k with
  every clique matrix N_k <= 0 (Agler et al. 1988); N_k shares a diagonal block with N_{k+1}
  through a free symmetric split variable Z_k.
- The coupled "LipSDP-Network" variant (multipliers coupling pairs of neurons) is deliberately
  absent: its quadratic constraint is not valid for ReLU networks.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from models.errors import BadInput

from ..runtime import Abandoned, may_abandon, run_abandonable, stop_requested, time_left, user_interrupt
from .chain import WeightChain

VARIANTS = ("neuron", "layer")
SOLVERS = ("SCS", "CLARABEL", "MOSEK")
STRUCTURES = ("auto", "full", "chain")
CHAIN_FROM_DEPTH = 3  # "auto" uses the chain of clique LMIs from this many hidden layers


@dataclass
class SdpSolution:
    """What the solver returned: multipliers (unvalidated) and its objective rho."""

    lams: list[np.ndarray]
    rho: float
    status: str
    solver: str
    seconds: float
    iterations: int | None
    structure: str


def check_solver(solver: str) -> str:
    import cvxpy as cp

    name = str(solver).upper()
    if name not in SOLVERS:
        raise BadInput(f"unknown SDP solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if name not in cp.installed_solvers():
        raise BadInput(f"SDP solver {name} is not installed; install it or use --solver SCS")
    return name


def _solver_options(solver: str, accuracy: float, time_limit: float | None) -> dict:
    if solver == "SCS":
        opts = {"eps_abs": accuracy, "eps_rel": accuracy, "max_iters": 100_000}
        if time_limit:
            opts["time_limit_secs"] = float(time_limit)
        return opts
    if solver == "CLARABEL":
        opts = {"tol_gap_abs": accuracy * 1e-2, "tol_gap_rel": accuracy * 1e-2, "tol_feas": accuracy * 1e-2}
        if time_limit:
            opts["time_limit"] = float(time_limit)
        return opts
    return {"mosek_params": {"MSK_DPAR_OPTIMIZER_MAX_TIME": float(time_limit)}} if time_limit else {}


@contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null: SCS prints "Failure:interrupted" (and other failures)
    with C printf even when not verbose, which would break the CLI's one-JSON-object stdout."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):  # no usable fd 1 (embedded interpreters)
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _solve(prob, solver: str, accuracy: float, time_limit: float | None = None) -> str | None:
    """`prob.solve(solver)` at `accuracy`; returns None when solved, else why it stopped: "interrupted"
    or "time_limit" (then `prob` holds no solution).

    - SCS catches SIGINT itself during its iterations and returns status "interrupted", which cvxpy
      turns into a SolverError that callers would take for a failed piece (and retry): it is
      certify's stop request instead (`solvers.runtime.user_interrupt`).
    - The solver's time limit is the smaller of `time_limit` and what is left of the command's.
    - In the CLI process the canonicalisation and the solve run in a thread the command stops waiting
      for at Ctrl-C or at the deadline (`solvers.runtime.run_abandonable`): SCS's set-up (a
      factorisation that can take minutes on a large LMI) checks neither.
    """
    left = time_left()
    limit = time_limit if left is None else left if time_limit is None else min(time_limit, left)
    deadline = None if limit is None else time.perf_counter() + limit
    options = _solver_options(solver, accuracy, limit)

    def work():
        data, chain, inverse = prob.get_problem_data(solver, solver_opts=options)
        with _native_stdout_silenced():
            raw = chain.solve_via_data(prob, data, False, False, options)
        return raw, chain, inverse

    if limit is not None and limit <= 0.01:
        return "interrupted" if stop_requested() else "time_limit"
    if stop_requested():
        return "interrupted"
    try:
        raw, chain, inverse = run_abandonable(work, deadline) if may_abandon() else work()
    except Abandoned as stop:
        return stop.reason
    if isinstance(raw, dict) and str(raw.get("info", {}).get("status", "")).lower() == "interrupted":
        user_interrupt()
        return "interrupted"
    with warnings.catch_warnings():  # cvxpy's "Solution may be inaccurate": expected, and harmless here (every
        warnings.simplefilter("ignore", UserWarning)  # bound is recomputed from the multipliers and proven)
        prob.unpack_results(raw, chain, inverse)
    return None


# peak memory of building and solving one LipSDP with cvxpy + SCS, measured on 1- and 3-hidden-layer
# nets (N from 256 to 1808): about 80 MB + 400-480 bytes per entry of the LMI blocks; rounded up
SDP_BYTES_PER_ENTRY = 500
SDP_BYTES_FIXED = 100 * 2**20


def lmi_blocks(chain: WeightChain, structure: str = "auto") -> list[int]:
    """Sizes of the LMI blocks `solve_lipsdp` builds for `chain` (one block, or one per clique)."""
    if structure == "auto":
        structure = "chain" if chain.depth >= CHAIN_FROM_DEPTH else "full"
    sizes = [min(chain.input_dim, chain.hidden_sizes[0])] + chain.hidden_sizes  # after input reduction
    if structure == "full":
        return [sum(sizes)]
    return [a + b for a, b in zip(sizes[:-1], sizes[1:])]


def estimate_bytes(chain: WeightChain, structure: str = "auto") -> int:
    """Peak memory of `solve_lipsdp` on `chain` (an empirical model, on the safe side)."""
    return SDP_BYTES_FIXED + SDP_BYTES_PER_ENTRY * sum(n * n for n in lmi_blocks(chain, structure))


def solve_lipsdp(
    chain: WeightChain,
    variant: str = "neuron",
    *,
    solver: str = "SCS",
    structure: str = "auto",
    margin: float = 1e-6,
    accuracy: float = 1e-5,
    time_limit: float | None = None,
) -> SdpSolution:
    """Solve LipSDP for a (normalised) chain with at least one hidden layer; nothing is validated here."""
    import cvxpy as cp

    if variant not in VARIANTS:
        raise BadInput(f"unknown LipSDP variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if structure not in STRUCTURES:
        raise BadInput(f"unknown LMI structure {structure!r}; choose one of {', '.join(STRUCTURES)}")
    solver = check_solver(solver)
    l = chain.depth
    if l < 1:
        raise ValueError("LipSDP needs at least one hidden layer")
    if structure == "auto":
        structure = "chain" if l >= CHAIN_FROM_DEPTH else "full"
    t0 = time.perf_counter()
    R = chain.reduced_input()
    sizes = [R.shape[1]] + chain.hidden_sizes
    rho = cp.Variable(name="rho")
    if variant == "neuron":
        lams = [cp.Variable(n, nonneg=True, name=f"lambda{k}") for k, n in enumerate(chain.hidden_sizes)]
        diag = [cp.diag(v) for v in lams]
    else:
        lams = [cp.Variable(nonneg=True, name=f"lambda{k}") for k in range(l)]
        diag = [v * np.eye(n) for v, n in zip(lams, chain.hidden_sizes)]
    # D_k diagonal blocks (margin included), C_k coupling block k <- k-1 (C_1 uses R for W_0)
    D = [-rho * np.eye(sizes[0])]
    C = [None]
    for k in range(l):
        w_in = R if k == 0 else chain.weights[k]
        # T_k W as an elementwise product (lambda as a column times W), never diag(lambda) @ W:
        # cvxpy canonicalises that matrix product through kron(W^T, I), n_k^2 n_{k-1} nonzeros
        # (about 20 GB for a 784-1024 layer), where the elementwise form has n_k n_{k-1}
        lam_col = cp.reshape(lams[k], (sizes[k + 1], 1), order="F") if variant == "neuron" else lams[k]
        C.append(cp.multiply(lam_col, w_in))
        block = -2 * diag[k] + margin * np.eye(sizes[k + 1])
        if k == l - 1:
            block = block + chain.weights[-1].T @ chain.weights[-1]
        D.append(block)
    constraints = []
    if structure == "full":
        blocks = [[np.zeros((sizes[i], sizes[j])) for j in range(l + 1)] for i in range(l + 1)]
        for k in range(l + 1):
            blocks[k][k] = D[k]
        for k in range(1, l + 1):
            blocks[k][k - 1] = C[k]
            blocks[k - 1][k] = C[k].T
        M = cp.bmat(blocks)
        constraints.append(-(M + M.T) / 2 >> 0)
    else:
        Z = [None] + [cp.Variable((n, n), symmetric=True, name=f"Z{k}") for k, n in enumerate(chain.hidden_sizes[:-1], 1)]
        for k in range(1, l + 1):
            first = D[0] if k == 1 else D[k - 1] - Z[k - 1]
            second = D[k] if k == l else Z[k]
            N = cp.bmat([[first, C[k].T], [C[k], second]])
            constraints.append(-(N + N.T) / 2 >> 0)
    prob = cp.Problem(cp.Minimize(rho), constraints)
    try:
        stopped = _solve(prob, solver, accuracy, time_limit)
    except cp.error.SolverError as exc:
        return SdpSolution([], float("nan"), f"solver_error: {exc}", solver, time.perf_counter() - t0, None, structure)
    if stopped:  # Ctrl-C or the deadline: no multipliers
        return SdpSolution([], float("nan"), stopped, solver, time.perf_counter() - t0, None, structure)
    values = [np.atleast_1d(np.asarray(v.value if v.value is not None else np.nan, dtype=np.float64)) for v in lams]
    stats = prob.solver_stats
    return SdpSolution(
        lams=values,
        rho=float(rho.value) if rho.value is not None else float("nan"),
        status=str(prob.status),
        solver=solver,
        seconds=time.perf_counter() - t0,
        iterations=getattr(stats, "num_iters", None),
        structure=structure,
    )
