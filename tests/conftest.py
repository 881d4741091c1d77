"""Shared fixtures: run the CLI in-process and capture its streams."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    """cli("inspect", path, "--json") -> CliResult(code, stdout, stderr)."""
    from certify.cli import main

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def assert_bad_input(result: CliResult, *fragments: str) -> None:
    """Exit code 2, a one-line message on stderr containing the fragments, no traceback."""
    assert result.code == 2, (result.code, result.err)
    lines = [l for l in result.err.strip().splitlines() if l.strip()]
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    for f in fragments:
        assert f.lower() in result.err.lower(), (f, result.err)


# property tests draw the same examples on every run (CI must not flake); `--hypothesis-seed`
# or HYPOTHESIS_PROFILE=explore searches afresh
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("ci", derandomize=True, deadline=None)
_hyp_settings.register_profile("explore", deadline=None)
_hyp_settings.load_profile(__import__("os").environ.get("HYPOTHESIS_PROFILE", "ci"))
