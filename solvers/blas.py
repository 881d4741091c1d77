"""Run dense linear algebra single-threaded.

The certificates factor many small and medium matrices (Cholesky proofs, Gram matrices of a few
hundred rows). OpenBLAS parallelises each call over its threads; on a machine whose cores are
busy with other work a 400 x 400 Cholesky then takes 0.2 s instead of 4 ms (threads wait for one
another). One thread is never much slower at these sizes, so the bound computations run under
this limit. SCS and the MILP solvers use their own threading and are not affected.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without threadpoolctl the computation is the same, only maybe slower
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
