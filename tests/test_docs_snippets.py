"""Every snippet of the README and docs/ runs as written (issue 27: docs that are true).

- Python blocks (```python) of one file run in order in one namespace, after the file's invisible
  set-up blocks (`<!-- invisible-code-block: python ... -->`, Sybil's convention), which define
  the names a reader is assumed to have (a network `net`, a point `x`, ...).
- Command lines (`$ certify ...`, continued with a trailing backslash) run through the real CLI
  in a scratch directory that links the repository's folders (so relative paths such as
  `models/zoo/...` work and outputs such as `--out bench-results` land in the scratch directory);
  the expected exit code is the one the snippet prints as `(exit code N)` next to its output,
  else 0. Lines that show a synopsis (upper-case placeholders such as MODEL or MODEL.onnx) are not
  commands.
- The block after a `<!-- slow -->` line (long benchmarks, SDPs on ACAS Xu, ...) runs only with
  `-m slow` (its command tests and the `[FILE-slow]` variant of a file's Python test are marked
  slow) or, for Python blocks, when CERTIFY_SLOW_DOCS=1 is set.
- The example files the commands use (a digits net, points, skops models) are in docs/examples/,
  written by docs/examples/make_examples.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CERTIFY = str(Path(sys.executable).with_name("certify"))
_FENCE = re.compile(r"^```(\w*)\s*$")
_INVISIBLE = re.compile(r"^<!--\s*invisible-code-block:\s*python\s*$")
_EXIT = re.compile(r"\(exit code (\d+)\)")
_PLACEHOLDER = re.compile(r"(MODEL|FILE|PROPERTY|DIR|CSV|SUITE|MECHANISM|V|R|S|E|D|P|N|G|K)(\.[a-z]+)?")  # MODEL.onnx too


@dataclass
class Block:
    kind: str          # "python", "invisible", "shell"
    text: str
    line: int
    slow: bool = False


def blocks(path: Path) -> list[Block]:
    """The fenced and invisible blocks of a markdown file, in order."""
    out: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    slow_next = False
    while i < len(lines):
        line = lines[i]
        if line.strip() == "<!-- slow -->":
            slow_next = True
        elif _INVISIBLE.match(line.strip()):
            j = i + 1
            while lines[j].strip() != "-->":
                j += 1
            out.append(Block("invisible", "\n".join(lines[i + 1:j]), i + 1))
            i = j
        elif (m := _FENCE.match(line)) is not None:
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            body = "\n".join(lines[i + 1:j])
            kind = "python" if m.group(1) == "python" else "shell" if "$ certify" in body else "text"
            out.append(Block(kind, body, i + 1, slow_next))
            slow_next = False
            i = j
        i += 1
    return out


@dataclass
class Command:
    argv: list[str]
    exit_code: int
    line: int
    slow: bool
    pipe: str | None = None


def commands(block: Block) -> list[Command]:
    """`$ certify ...` lines of a shell block (continuations joined), each with its expected exit code."""
    out: list[Command] = []
    rows = block.text.splitlines()
    k = 0
    while k < len(rows):
        row = rows[k]
        if not row.startswith("$ certify"):
            k += 1
            continue
        start = k
        text = row[2:]
        while text.rstrip().endswith("\\"):
            k += 1
            text = text.rstrip()[:-1] + " " + rows[k].strip()
        k += 1
        output = []
        while k < len(rows) and not rows[k].startswith("$ "):
            output.append(rows[k])
            k += 1
        text = text.split("  #")[0].strip()  # a trailing comment
        code = _EXIT.search(text + "\n" + "\n".join(output))
        text = _EXIT.sub("", text).strip()
        pipe = None
        if "|" in text:
            text, pipe = (part.strip() for part in text.split("|", 1))
        argv = shlex.split(text)
        if any(_PLACEHOLDER.fullmatch(a) for a in argv) or "..." in argv:
            continue  # a synopsis, not a command
        out.append(Command(argv[1:], int(code.group(1)) if code else 0, block.line + start + 1, block.slow, pipe))
    return out


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _python_params() -> list:
    """One test per file with Python blocks; a second one, marked slow, that runs its slow blocks too."""
    out = []
    for p in DOCS:
        python = [b for b in blocks(p) if b.kind == "python"]
        if python:
            out.append(pytest.param(p, False, id=_doc_id(p)))
        if any(b.slow for b in python):
            out.append(pytest.param(p, True, id=f"{_doc_id(p)}-slow", marks=[pytest.mark.slow]))
    return out


@pytest.mark.parametrize("path,slow", _python_params())
def test_python_snippets_run(path, slow, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__docs__", "TMP": tmp_path}
    slow = slow or bool(os.environ.get("CERTIFY_SLOW_DOCS"))
    for block in blocks(path):
        if block.kind not in ("python", "invisible"):
            continue
        if block.slow and not slow:
            continue
        code = compile(block.text, f"{path.name}:{block.line}", "exec")
        exec(code, namespace)  # noqa: S102 - the repository's own documentation


def _all_commands() -> list[tuple[str, Command]]:
    return [(f"{_doc_id(p)}:{c.line}", c) for p in DOCS for b in blocks(p) if b.kind == "shell" for c in commands(b)]


@pytest.mark.parametrize("where,command", [pytest.param(w, c, marks=[pytest.mark.slow] if c.slow else [], id=w)
                                           for w, c in _all_commands()])
def test_command_snippets_run(where, command, tmp_path):
    for entry in ROOT.iterdir():  # the repository's folders and files, read-only by convention
        if not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    p = subprocess.run([CERTIFY, *command.argv], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == command.exit_code, (where, command.argv, p.returncode, p.stderr[-2000:])
    if command.exit_code == 2:
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
