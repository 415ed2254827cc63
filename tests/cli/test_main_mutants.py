"""The console script's entry point on an error that a Ctrl-C caused (from the hunt "cli", 2026-12-07: a mutant of
arctl/cli/main.py's root handler that the suite let through gave such an error its traceback and exit 1): an error
raised from (or while handling) a KeyboardInterrupt in a command that does not answer it itself, as an import
interrupted half-way raises one, is said as the interrupt, "interrupted", exit 130."""

from __future__ import annotations

import sys

import pytest

from arctl.cli import main as cli_main


def test_an_error_a_ctrl_c_caused_is_said_as_the_interrupt(monkeypatch, capsys):
    import arctl.compose.experiment as experiment

    def listing(*_args, **_kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise ImportError("initialization failed") from stop

    monkeypatch.setattr(experiment, "list_experiments", listing)
    monkeypatch.setattr(sys, "argv", ["arctl", "ls", "experiments"])
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    err = capsys.readouterr().err
    assert exited.value.code == 130
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"], err


def test_an_error_of_its_own_is_no_interrupt(monkeypatch):
    """An error no Ctrl-C caused keeps its traceback (a bug is not hidden as an interrupt)."""
    import arctl.compose.experiment as experiment

    def listing(*_args, **_kwargs):
        raise ImportError("a real bug")

    monkeypatch.setattr(experiment, "list_experiments", listing)
    monkeypatch.setattr(sys, "argv", ["arctl", "ls", "experiments"])
    with pytest.raises(ImportError, match="a real bug"):
        cli_main.main()
