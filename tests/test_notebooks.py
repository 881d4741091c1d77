"""The executed notebooks: they run from a clean kernel without errors (their cells assert what they
show, e.g. rho <= rho_hat on certified boxes, sampled Lipschitz lower bounds below the certified
upper bounds), and the committed copy is the builder's, executed.

The re-execution uses each notebook's quick settings (`CERTIFY_NOTEBOOK_QUICK=1` in the kernel's
environment, read by its parameter cell); the committed copies are the full runs. The cell sources
do not depend on the mode, so the staleness check compares every cell."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _builder(name: str):
    spec = importlib.util.spec_from_file_location(name, NOTEBOOKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # builds the cell list only; execution is `build()`
    return mod


def _outputs(nb, output_type: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == output_type]


def check_notebook(name: str, tmp_path: Path, figure: str) -> None:
    mod = _builder(f"build_{name}")
    committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert [c.source for c in committed.cells] == [c.source for c in mod.nb.cells], \
        f"notebooks/{name}.ipynb is stale: run python notebooks/build_{name}.py"
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.outputs or c.source.startswith(("import", "%")) for c in code), "the committed notebook is not executed"
    assert not _outputs(committed, "error"), "the committed notebook has errors"
    out = mod.build(tmp_path / f"{name}.ipynb", quick=True)  # raises CellExecutionError on any failing cell
    executed = nbformat.read(out, as_version=4)
    assert not _outputs(executed, "error")
    images = [o for o in _outputs(executed, "display_data") if "image/png" in o.get("data", {})]
    assert images, f"the {figure} figure is missing"


@pytest.mark.notebook
@pytest.mark.parametrize("name, figure", [
    ("ldp_utility", "rho vs rho_hat"),
    ("certify_model", "anytime certified interval"),
    ("inference_privacy", "accuracy vs epsilon"),
    ("solver_benchmark", "cactus"),
])
def test_notebook_runs_and_its_committed_copy_is_current(tmp_path, name, figure):
    check_notebook(name, tmp_path, figure)
