"""HiGHS plumbing shared by the safe LP layer and the HiGHS MILP back-end: a silent instance
holding a neutral model."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from .model import MilpModel


@contextlib.contextmanager
def _quiet_stdout():
    """HiGHS prints a banner on stdout (file descriptor 1, from C++) when the first instance is
    created; keep it off stdout and stderr (the CLI points fd 1 at stderr while a command runs)."""
    fd = 1
    try:
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):  # replaced stdout: fd 1 is still HiGHS's
        pass
    try:
        saved = os.dup(fd)
    except OSError:  # no fd 1: nothing to guard
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


_BANNER_SHOWN = False


def new_highs():
    """A silent `highspy.Highs` instance."""
    global _BANNER_SHOWN
    import highspy

    if _BANNER_SHOWN:
        h = highspy.Highs()
    else:
        with _quiet_stdout():
            h = highspy.Highs()
        _BANNER_SHOWN = True
    h.setOptionValue("output_flag", False)
    return h


class HighsRejected(RuntimeError):
    """HiGHS refused the model at passModel."""


def highs_instance(model: MilpModel, *, integer: bool = True, verbose: bool = False):
    """A `highspy.Highs` holding the linear part of `model` (integrality kept when `integer`)."""
    import highspy as hp

    h = new_highs()
    h.setOptionValue("output_flag", bool(verbose))
    lp = hp.HighsLp()
    lp.num_col_ = model.num_vars
    lp.num_row_ = model.num_rows
    inf = hp.kHighsInf
    lp.col_cost_ = model.obj
    lp.col_lower_ = np.where(np.isfinite(model.col_lo), model.col_lo, -inf)
    lp.col_upper_ = np.where(np.isfinite(model.col_hi), model.col_hi, inf)
    lp.row_lower_ = np.where(np.isfinite(model.row_lo), model.row_lo, -inf)
    lp.row_upper_ = np.where(np.isfinite(model.row_hi), model.row_hi, inf)
    lp.offset_ = model.obj_offset
    lp.sense_ = hp.ObjSense.kMaximize if model.sense == "max" else hp.ObjSense.kMinimize
    csc = model.A.tocsc()
    lp.a_matrix_.format_ = hp.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr
    lp.a_matrix_.index_ = csc.indices
    lp.a_matrix_.value_ = csc.data
    lp.a_matrix_.num_col_ = model.num_vars
    lp.a_matrix_.num_row_ = model.num_rows
    if h.passModel(lp) == hp.HighsStatus.kError:
        # e.g. a coefficient >= 1e15: HiGHS would otherwise solve an empty model
        raise HighsRejected("HiGHS rejected the model (a coefficient or bound out of its range)")
    if integer and model.num_integers:
        idx = np.flatnonzero(model.integer).astype(np.int32)
        h.changeColsIntegrality(idx.size, idx, np.full(idx.size, int(hp.HighsVarType.kInteger), dtype=np.uint8))
    return h


__all__ = ["HighsRejected", "highs_instance", "new_highs"]
