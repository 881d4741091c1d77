"""VNNLIB verification: parse a property, look for a counterexample, prove the rest.

- `load_vnnlib(path)` / `parse_vnnlib(text)` -> `Spec` (the unsafe set as a DNF of linear clauses);
- `verify(model, spec, timeout=...)` -> `VerificationResult` (sat / unsat / timeout / unknown);
- `check_counterexample`, `format_witness`: replay a point in the IR and onnxruntime, VNN-COMP
  witness text; `run_instances`: an instance list (CSV) with resumable VNN-COMP results.

See docs/verify.md.
"""

import sys
import types

from models.onnx_reference import OnnxReference

from .counterexample import Counterexample, check_counterexample, format_witness
from .node_bounds import NodeBounder, NodeBounds, SymbolicRowBounds
from .result import VerificationResult
from .spec import Disjunct, LinearRows, Region, Spec
from .verifier import verify
from .vnnlib import VnnlibError, load_vnnlib, parse_vnnlib

__all__ = [
    "Counterexample",
    "Disjunct",
    "LinearRows",
    "NodeBounder",
    "NodeBounds",
    "OnnxReference",
    "Region",
    "Spec",
    "SymbolicRowBounds",
    "VerificationResult",
    "VnnlibError",
    "check_counterexample",
    "format_witness",
    "load_vnnlib",
    "parse_vnnlib",
    "verify",
]


class _CallableModule(types.ModuleType):
    """`certify.verify` is both this package and the function: importing a submodule rebinds the
    package attribute to the module, so the module itself forwards calls to `verify`."""

    def __call__(self, *args, **kwargs):
        return verify(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
