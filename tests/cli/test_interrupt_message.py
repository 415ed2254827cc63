"""A Ctrl-C that no command answers is one line on stderr, "interrupted" with what the interrupt says of
itself, and exit 130 (from a hunt: Ctrl-C before or during a submission, a report or an export exited 130
without a word)."""

from __future__ import annotations

import sys

import pytest

from arctl.cli import main as cli_main


def _run_interrupted(monkeypatch, capsys, interrupt: KeyboardInterrupt) -> tuple[int, str]:
    """``arctl ls experiments`` through the console script's entry point, interrupted where it lists them."""
    import arctl.compose.experiment as experiment

    def listing(*_args, **_kwargs):
        raise interrupt

    monkeypatch.setattr(experiment, "list_experiments", listing)
    monkeypatch.setattr(sys, "argv", ["arctl", "ls", "experiments"])
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    return exited.value.code, capsys.readouterr().err


def test_a_ctrl_c_says_interrupted_and_exits_130(monkeypatch, capsys):
    code, err = _run_interrupted(monkeypatch, capsys, KeyboardInterrupt())
    assert code == 130
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"], err


def test_what_the_interrupted_code_noted_is_said_on_the_line(monkeypatch, capsys):
    """The launcher's rollback adds notes to the Ctrl-C it re-raises (what it could not undo): said, not lost."""
    interrupt = KeyboardInterrupt()
    interrupt.add_note("could not undo: run x (its folder\nis read-only)")
    code, err = _run_interrupted(monkeypatch, capsys, interrupt)
    assert code == 130
    assert [line for line in err.splitlines() if line.strip()] == [
        "interrupted: could not undo: run x (its folder is read-only)"], err


def test_a_stop_signal_the_launcher_turned_into_an_interrupt_is_named(monkeypatch, capsys):
    code, err = _run_interrupted(monkeypatch, capsys, KeyboardInterrupt("signal SIGTERM"))
    assert code == 130 and "interrupted: by SIGTERM" in err, err
