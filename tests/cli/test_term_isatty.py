"""Tables, widths, progress bars and spinners are decided on whether the stream really is a terminal (``os.isatty`` of
its descriptor, :func:`arctl.cli.common.is_terminal`); FORCE_COLOR and TTY_COMPATIBLE choose colour only, and a
``TERM=dumb`` terminal gets no bar. From a hunt (2026-12-06): under ``FORCE_COLOR=1``, which CI users export for
coloured logs, `arctl report --claims > file` wrote 838 lines of box table for 38 plain ones, and a dry run's stderr
got 29 bar frames and 985 escape codes. The terminal here is a pseudo-terminal the test opens, never the real one."""

from __future__ import annotations

import contextlib
import io
import os
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app


@pytest.fixture(autouse=True)
def terminal_env(shipped_specs, monkeypatch):
    """The shipped specs (tests/cli/conftest.py) in an xterm-256color terminal, no colour variable set."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


@contextlib.contextmanager
def _pty():
    """A writable file on a pseudo-terminal (a terminal as ``os.isatty`` sees one)."""
    primary, secondary = os.openpty()
    screen = os.fdopen(secondary, "w")
    try:
        yield screen
    finally:
        screen.close()
        os.close(primary)


FORCING = [{"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1"}, {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}]


@pytest.mark.parametrize("env", FORCING)
def test_forced_colour_makes_no_file_a_terminal(monkeypatch, tmp_path, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with open(tmp_path / "log", "w") as log:
        on = Console(file=log)
        assert on.is_terminal  # rich's answer, which the CLI used
        assert not common.is_terminal(on) and not common.progress_bars(on)
    assert not common.is_terminal(Console(file=io.StringIO()))
    with _pty() as screen:
        assert common.is_terminal(Console(file=screen)) and common.progress_bars(Console(file=screen))


def test_a_dumb_terminal_gets_no_bar(monkeypatch):
    with _pty() as screen:
        on = Console(file=screen)
        assert common.is_terminal(on) and common.progress_bars(on)
        monkeypatch.setenv("TERM", "dumb")
        assert common.is_terminal(on) and not common.progress_bars(on)


@pytest.mark.parametrize("env", FORCING)
def test_the_readers_progress_bar_is_not_drawn_into_a_file_under_forced_colour(monkeypatch, tmp_path, env):
    from rich.progress import Progress

    from arctl.track.runs import pool

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with open(tmp_path / "err", "w") as log:
        monkeypatch.setattr(sys, "stderr", log)
        assert not isinstance(pool._progress(True, 5, "reading"), Progress)  # a nullcontext
    with _pty() as screen:
        monkeypatch.setattr(sys, "stderr", screen)
        assert isinstance(pool._progress(True, 5, "reading"), Progress)
        monkeypatch.setenv("TERM", "dumb")
        assert not isinstance(pool._progress(True, 5, "reading"), Progress)


@pytest.mark.parametrize("env", FORCING)
@pytest.mark.parametrize("args", [["ls"], ["ls", "sweeps"]])
def test_ls_in_a_file_is_plain_lines_under_forced_colour(monkeypatch, env, args):
    """`arctl ls > file` with FORCE_COLOR: the plain lines a pipe gets (in colour if it asks), not a box table."""
    piped = CliRunner().invoke(app, args, catch_exceptions=False).stdout
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COLUMNS", "300")  # wide enough for the table, were it one
    monkeypatch.setattr(common.console, "forced_terminal", None)
    forced = CliRunner().invoke(app, args, catch_exceptions=False).stdout
    assert "┃" not in forced and "│" not in forced, forced
    assert forced == piped


def test_what_rich_13_records_from_force_color_is_not_taken_for_a_terminal(tmp_path):
    """rich 13.x (pyproject allows it) sets a console's ``_force_terminal`` from FORCE_COLOR as it builds it; is_terminal
    read that field, so on rich 13 a file under FORCE_COLOR was a terminal again (from a review). Only what the code
    that made the console asked counts."""
    with open(tmp_path / "out.txt", "w") as file:
        made = common._Console(file=file)
        made._force_terminal = True  # what rich 13 does under FORCE_COLOR=1
        assert made.forced_terminal is None and not common.is_terminal(made)
        assert common.is_terminal(common._Console(file=file, force_terminal=True))
    with _pty() as screen:
        made = common._Console(file=screen)
        made._force_terminal = False
        assert common.is_terminal(made)


def test_follow_draws_no_frame_on_a_dumb_terminal(monkeypatch):
    """`arctl logs --follow` redraws a bar's newest frame only where a line can be redrawn: not on TERM=dumb (an Emacs
    shell), where progress bars are not drawn either (from a review)."""
    from arctl.cli import cmd_logs

    monkeypatch.setattr(common.console, "forced_terminal", True)
    assert cmd_logs._frame("\rLoading 10%\rLoading 20") == "Loading 10%"
    monkeypatch.setenv("TERM", "dumb")
    assert cmd_logs._frame("\rLoading 10%\rLoading 20") == ""
    assert not common.progress_bars(common._Console(stderr=True, force_terminal=True))
