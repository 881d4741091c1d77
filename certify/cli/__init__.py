"""The `certify` command line.

Every command follows the same conventions: `--json` prints exactly one JSON object on stdout,
human-readable output otherwise; exit 0 on success, 2 on bad input with a one-line message on
stderr and no traceback, 1 on an internal error, 130 when interrupted. Commands live in sibling
modules that define `register(subparsers)`; add a module to `COMMAND_MODULES` to expose a new command.

The runtime contract (`main` called as the program, i.e. without arguments; `run`):

- `--time-limit` of a single-question command (`TIME_LIMITS`) is the whole command's wall-clock
  budget counted from process start: it becomes the process-wide command deadline
  (`solvers.runtime.set_command_deadline`) before the model is loaded, which every `Budget` obeys;
  a stage that polls nothing is ended by the watchdog 1.5 s past it (partial result, exit 124).
- Ctrl-C at any moment sets the stop flag every solver polls; the result reached so far is printed
  and the exit code is 130. The watchdog (`solvers.runtime.watchdog`) exits with 130 and
  "interrupted (no result)" when the command has not produced its result a second later.
- File descriptor 1 points at stderr while the command runs, and the command's own output goes
  through a duplicate of the original stdout: C-level prints of a solver cannot corrupt `--json`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import os
import re
import sys
import time
import traceback
from typing import Iterator, Sequence

from .. import _startup
from solvers import runtime  # (stdlib only: Ctrl-C is taken over before numpy and the models load)

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
    """The CLI. Called without `argv` it is the program (the console script, `python -m
    certify.cli`): the process-level contract of the module doc applies (watchdog, stdout guard,
    time limits counted from process start). With `argv` it runs in process (tests, the demo):
    same exit codes and time limits counted from the call, without the watchdog and the stdout guard."""
    if argv is None:
        return _program(sys.argv[1:])
    return _main(list(argv), time.perf_counter())


def _main(argv: list[str], start: float) -> int:
    _RUN["limited"] = False
    with runtime.interruptible():  # from here on a Ctrl-C only sets the stop flag
        _startup.cli_started()  # (the early handler of certify/_startup.py is no longer in charge)
        try:
            from ..errors import BadInput

            parser = build_parser()
            if not argv:  # a bare `certify` asks what it can do: the help, as a usage error (argparse's exit 2)
                parser.print_help(sys.stderr)
                return 2
            args = parser.parse_args(_join_negative_values(argv))
        except KeyboardInterrupt:
            return _interrupted(_label(argv))
        if runtime.interrupted():  # Ctrl-C during start-up
            return _interrupted(args.command)
        try:
            limit = _time_limit(args)
            if limit is not None:  # every stage from model loading to output obeys it
                runtime.set_command_deadline(start + limit - min(OUTPUT_RESERVE, OUTPUT_SHARE * limit))
                _RUN["limited"] = True
            code = int(args.handler(args) or 0)
            sys.stdout.flush()  # a closed pipe shows up here, inside the handling below, not at exit
            return INTERRUPTED_EXIT if code == 0 and runtime.interrupted_before_output() else code
        except BrokenPipeError:
            return _stdout_closed()
        except BadInput as exc:
            msg = " ".join(str(exc).split())
            print(f"certify {args.command}: error: {msg}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return _interrupted(args.command)
        except Exception as exc:  # an internal error: say so on one line, trace on request
            if os.environ.get("CERTIFY_DEBUG"):
                traceback.print_exc()
            print(
                f"certify {args.command}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
                "(set CERTIFY_DEBUG=1 for a traceback and please report it)",
                file=sys.stderr,
            )
            return 1
        finally:
            runtime.set_command_deadline(None)


INTERRUPTED_EXIT = 130
# the command deadline comes this much before the time limit: room for printing the result
OUTPUT_RESERVE = 0.3
OUTPUT_SHARE = 0.05
_RUN = {"limited": False}  # did the command run under a time limit (see _program)


def _interrupted(command: str) -> int:
    print(f"certify{' ' + command if command else ''}: interrupted (no result)", file=sys.stderr)
    return INTERRUPTED_EXIT


def _label(argv: Sequence[str]) -> str:
    """The command's name before argparse has run (for messages)."""
    return next((a for a in argv if not a.startswith("-")), "")


# ----------------------------------------------------------------------------- time limits
def _whole(option: str):
    return lambda args: getattr(args, option, None)


# --time-limit (verify: --timeout) is the whole command's budget for these single-question
# commands; batch forms (radius --points, verify --instances, report, bench) keep it per item
TIME_LIMITS = {
    "lipschitz": _whole("time_limit"),
    "global": _whole("time_limit"),
    "hyperrectangle": _whole("time_limit"),
    "ptr": _whole("time_limit"),
    "radius": lambda args: None if getattr(args, "points", None) is not None else args.time_limit,
    "calibrate": lambda args: args.time_limit if getattr(args, "model", None) is not None else None,
    "utility": lambda args: getattr(args, "time_limit", None),
    "verify": lambda args: None if getattr(args, "instances", None) else args.timeout,
}


def _time_limit(args: argparse.Namespace) -> float | None:
    """The command's wall-clock budget in seconds (None: unlimited); a bad value is refused."""
    from ..errors import BadInput

    for option in ("time_limit", "timeout"):
        value = getattr(args, option, None)
        if value is not None and not (math.isfinite(value) and value > 0):
            name = "--timeout" if option == "timeout" else "--time-limit"
            raise BadInput(f"the time limit {name} must be a positive number of seconds, got {value:g}")
    get = TIME_LIMITS.get(args.command)
    limit = None if get is None else get(args)
    if args.command == "verify" and limit is None and not getattr(args, "instances", None):
        limit = VERIFY_DEFAULT_TIMEOUT
    return limit


VERIFY_DEFAULT_TIMEOUT = 60.0  # `certify verify --timeout` (certify/cli/verify_cmd.py)


# ----------------------------------------------------------------------------- the program
def _program(argv: list[str]) -> int:
    """`main` as the process: watchdog, stdout guard, time limits from process start (module doc)."""
    start = _process_start()
    with runtime.watchdog(_label(argv)), _stdout_guard():
        code = _main(argv, start)
        if runtime.abandoned() or runtime.interrupted() or _RUN["limited"]:
            # a solver thread may still run (SCS), or the user waits: the interpreter's own shutdown
            # (half a second with onnxruntime loaded) does not count against Ctrl-C or the time limit
            _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """Flush the streams, stop solver processes and leave without the interpreter's shutdown."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    runtime.kill_children()  # (and worker processes, which would outlive an os._exit)
    os._exit(code)


def _process_start() -> float:
    """The `time.perf_counter()` value at which this process started (start-up counts in time limits)."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - age if 0.0 <= age < 60.0 else now


class _Output(io.TextIOWrapper):
    """The command's stdout (a duplicate of the original): tells the watchdog that printing began."""

    def write(self, s: str) -> int:
        if s:
            runtime.output_started()
        return super().write(s)


@contextlib.contextmanager
def _stdout_guard() -> Iterator[None]:
    """Point file descriptor 1 at stderr while the command runs and give `sys.stdout` a duplicate of
    the original stdout (module doc); restored afterwards."""
    try:
        sys.stdout.flush()
        if sys.stdout.fileno() != 1:
            raise ValueError
        real = os.dup(1)
        os.dup2(2, 1)
    except (AttributeError, OSError, ValueError):  # no usable fd 1: nothing to guard
        yield
        return
    old = sys.stdout
    # (buffered: a raw FileIO under a TextIOWrapper drops the rest of a partial write to a full pipe)
    out = _Output(io.BufferedWriter(io.FileIO(real, "w")), encoding=old.encoding, errors=old.errors,
                  line_buffering=old.line_buffering)
    sys.stdout = out
    runtime.set_result_fd(real)  # where the watchdog prints a partial result
    try:
        yield
    finally:
        runtime.set_result_fd(None)
        with contextlib.suppress(Exception):
            out.flush()
        sys.stdout = old
        with contextlib.suppress(OSError):
            os.dup2(real, 1)
        with contextlib.suppress(Exception):
            out.close()


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
