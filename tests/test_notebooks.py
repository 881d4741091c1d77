"""The executed notebooks: they run from a clean kernel without errors (their cells assert what they
show, e.g. rho <= rho_hat on certified boxes), and the committed copy is the builder's, executed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _builder(name: str):
    spec = importlib.util.spec_from_file_location(name, NOTEBOOKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # builds the cell list only; execution is `build()`
    return mod


def test_ldp_utility_notebook_runs_and_its_committed_copy_is_current(tmp_path):
    mod = _builder("build_ldp_utility")
    committed = nbformat.read(NOTEBOOKS / "ldp_utility.ipynb", as_version=4)
    assert [c.source for c in committed.cells] == [c.source for c in mod.nb.cells], \
        "notebooks/ldp_utility.ipynb is stale: run python notebooks/build_ldp_utility.py"
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.outputs or c.source.startswith("import sys") for c in code), "the committed notebook is not executed"
    out = mod.build(tmp_path / "ldp_utility.ipynb")  # raises CellExecutionError on any failing cell
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    images = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert images, "the rho vs rho_hat figure is missing"

