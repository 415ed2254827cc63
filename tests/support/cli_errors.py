"""The contract of a user mistake through the CLI, in-process: one ``error:`` line and exit code 2."""

from __future__ import annotations

from typer.testing import CliRunner

from arctl.cli.main import app


def error_line(*args: str) -> str:
    """``arctl ARGS``'s one error line (asserted: exit 2, one line, ``error: ``)."""
    res = CliRunner().invoke(app, list(args))
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]
