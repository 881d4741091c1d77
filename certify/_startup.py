"""Ctrl-C before the CLI takes it over (issue 27: "Ctrl-C at any moment").

The CLI installs its SIGINT handler (`solvers.runtime.interruptible`) once its own code runs, about
0.1 s after the process starts. A Ctrl-C before that got Python's default handler: a
`KeyboardInterrupt` traceback, or, when it landed in an import lock's weakref callback (an
"exception ignored" context), nothing at all, and the command then ran to its end (minutes).

`certify/__init__.py` runs first on both ways into the CLI (`python -m certify.cli` and the
`certify` script), so it calls `take_over_early`: when this process *is* the CLI (read from
`sys.orig_argv`, so a library import never touches SIGINT) a Ctrl-C before the CLI's own handler
prints the CLI's one line and exits 130 at once (there is no result yet, nothing to flush).
`cli_started` turns the handler back into Python's default once the CLI's handler has been in charge.
Stdlib modules the interpreter has loaded anyway (os, signal) only: this runs before anything else.
"""

from __future__ import annotations

import os
import signal

INTERRUPTED_EXIT = 130
_STATE = {"installed": False, "started": False, "label": ""}


def cli_arguments(orig_argv: list[str]) -> list[str] | None:
    """The CLI's own arguments when `orig_argv` (the interpreter's command line) runs the certify
    CLI (`python -m certify.cli ...` or the `certify` script), else None."""
    argv = list(orig_argv)
    for i, tok in enumerate(argv[1:], start=1):
        if tok == "-m":
            return argv[i + 2:] if argv[i + 1:i + 2] == ["certify.cli"] else None
        if tok.startswith("-m"):
            return argv[i + 1:] if tok == "-mcertify.cli" else None
        if not tok.startswith("-"):  # the script the interpreter runs
            return argv[i + 1:] if os.path.basename(tok) == "certify" else None
    return None


def take_over_early(orig_argv: list[str]) -> bool:
    """Install the early handler when this process is the CLI (module doc); True when installed."""
    args = cli_arguments(orig_argv)
    if args is None or _STATE["installed"]:
        return False
    _STATE["label"] = next((a for a in args if not a.startswith("-")), "")
    try:
        signal.signal(signal.SIGINT, _early_handler)
    except (ValueError, OSError):  # not the main thread, or no signals here: nothing to take over
        return False
    _STATE["installed"] = True
    return True


def cli_started() -> None:
    """The CLI's handler is in charge: a later return to this handler behaves as Python's default."""
    _STATE["started"] = True


def _early_handler(signum, frame) -> None:  # noqa: ARG001
    if _STATE["started"]:
        raise KeyboardInterrupt
    label = _STATE["label"]
    os.write(2, f"certify{' ' + label if label else ''}: interrupted (no result)\n".encode())
    os._exit(INTERRUPTED_EXIT)
