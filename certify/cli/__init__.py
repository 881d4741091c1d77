"""The `certify` command line.

Every command follows the same conventions: `--json` prints exactly one JSON object on stdout,
human-readable output otherwise; exit 0 on success, 2 on bad input with a one-line message on
stderr and no traceback, 1 on an internal error. Commands live in sibling modules that define
`register(subparsers)`; add a module to `COMMAND_MODULES` to expose a new command.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
from typing import Sequence

from ..errors import BadInput

COMMAND_MODULES: tuple[str, ...] = (
    "certify.cli.model_cmds",
    "certify.cli.privacy_cmds",
    "certify.cli.global_cmd",
    "certify.cli.lipschitz_cmd",
    "certify.cli.utility_cmd",
    "certify.cli.verify_cmd",
    "certify.cli.robustness_cmds",
    "certify.cli.ptr_cmd",
    "certify.cli.report_cmd",
    "certify.cli.bench_cmd",
)

_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="certify", description="Formal certificates for neural networks.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"certify {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _join_negative_values(argv: Sequence[str]) -> list[str]:
    """Let `--center -0.2,0.3` mean `--center=-0.2,0.3` (a leading minus starts a value)."""
    out: list[str] = []
    for tok in argv:
        if out and _NEGATIVE_VALUE.match(tok) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:  # a bare `certify` asks what it can do: the help, as a usage error (argparse's exit 2)
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(_join_negative_values(argv))
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handling below, not at exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except BadInput as exc:
        msg = " ".join(str(exc).split())
        print(f"certify {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"certify {args.command}: interrupted (no result)", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal error: say so on one line, trace on request
        if os.environ.get("CERTIFY_DEBUG"):
            traceback.print_exc()
        print(
            f"certify {args.command}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
            "(set CERTIFY_DEBUG=1 for a traceback and please report it)",
            file=sys.stderr,
        )
        return 1


def _stdout_closed() -> int:
    """The reader of stdout went away (`certify inspect M --json | head -c 150`): stop quietly with
    the status of a process killed by SIGPIPE (128 + 13), as Unix tools do."""
    try:  # later flushes of the dead pipe (at interpreter exit) must not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return 128 + 13


def run() -> None:
    sys.exit(main())
