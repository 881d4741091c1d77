"""What the notebook builders share: the notebook object and its execution (full or quick).

A builder lists its cells and calls `nb, build = builder(cells, name)`;
`build(path, quick=...)` runs a copy with nbclient in `notebooks/` (the working directory the cells
expect) and writes it to `path` (default `notebooks/<name>.ipynb`).
Quick mode is the environment variable `CERTIFY_NOTEBOOK_QUICK=1` given to the kernel: a
notebook's parameter cell reads it and picks smaller settings, so the cell sources are the same in
both modes and the staleness check of `tests/test_notebooks.py` compares every cell.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
QUICK_ENV = "CERTIFY_NOTEBOOK_QUICK"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell

# The end of the walkthroughs' setup cell (after `import json, subprocess, sys, tempfile` and `from pathlib
# import Path`): `cli(...)` runs a `certify` command as a user would and returns its JSON.
CLI_HELPER = (
    "ROOT, WORK = Path.cwd().parent, Path(tempfile.mkdtemp(prefix='certify_nb_'))  # WORK: files for the CLI\n\n"
    "def cli(*args):\n"
    "    \"\"\"Run `certify ARGS --json` as in a shell; print the command, return the parsed JSON.\"\"\"\n"
    "    args = [str(a) for a in args]\n"
    "    shown = ' '.join(a.replace(f'{WORK}/', '').replace(f'{ROOT}/', '') for a in args)\n"
    "    print(f'$ certify {shown} --json')\n"
    "    run = subprocess.run([sys.executable, '-m', 'certify.cli', *args, '--json'], capture_output=True, text=True)\n"
    "    assert run.returncode == 0, run.stderr\n"
    "    return json.loads(run.stdout)\n"
)


def notebook(cells: list) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": dict(KERNELSPEC)})


def execute(nb: nbformat.NotebookNode, path: Path, *, quick: bool = False, timeout: int = 900) -> Path:
    """Execute a copy of `nb` from `notebooks/` and write it to `path` (CellExecutionError on a failing cell)."""
    from nbclient import NotebookClient

    nb = copy.deepcopy(nb)
    env = {**os.environ, QUICK_ENV: "1" if quick else "0"}
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute(env=env)
    nbformat.write(nb, path)
    return path


def builder(cells: list, name: str):
    """(nb, build) of a builder: the notebook, and `build(path, quick)` executing it and writing it
    (default notebooks/<name>.ipynb). A notebook without a parameter cell runs the same in both modes."""
    nb = notebook(cells)

    def build(path: Path = HERE / f"{name}.ipynb", quick: bool = False) -> Path:
        return execute(nb, path, quick=quick)

    return nb, build
