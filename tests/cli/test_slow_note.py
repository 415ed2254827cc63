"""A wait on another program is said where a person watches: `arctl status` waited up to 60 s for an accounting
daemon that did not answer, without a word (from a hunt). The note is a spinner on stderr after a second, gone when the
wait ends, and only on a terminal: scripts, pipes and logs get nothing."""

from __future__ import annotations

import io
import threading
import time

import pytest
from rich.console import Console

from arctl.cli.common import slow_note


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=80), out


class _Timer:
    """A ``threading.Timer`` that fires when the test says (:meth:`fire`): the threshold passing, without a race
    against a loaded machine. Fired after a cancel, it is the real timer's thread that woke just before it."""

    def __init__(self, interval: float, function):
        self.interval, self.function = interval, function
        self.daemon = self.started = self.cancelled = False

    def start(self) -> None:
        self.started = True

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.function()


@pytest.fixture
def timers(monkeypatch) -> list[_Timer]:
    """The timers slow_note makes (it waits with ``threading.Timer``), in order."""
    made: list[_Timer] = []

    def timer(interval, function):
        made.append(_Timer(interval, function))
        return made[-1]

    monkeypatch.setattr(threading, "Timer", timer)
    return made


def test_a_wait_longer_than_its_threshold_shows_the_note_and_removes_it(timers):
    con, out = _terminal()
    with slow_note("asking sacct", after_s=0.1, on=con):
        (timer,) = timers
        assert timer.interval == 0.1 and timer.started and out.getvalue() == ""  # nothing before the threshold
        timer.fire()  # the threshold passed, the wait goes on
    assert timer.cancelled and "asking sacct" in out.getvalue()
    assert out.getvalue().endswith("\x1b[2K")  # its line erased when the wait ended, the last thing written


def test_a_quick_answer_shows_nothing(timers):
    con, out = _terminal()
    with slow_note("asking sacct", after_s=2.0, on=con):
        pass
    (timer,) = timers
    assert timer.started and timer.cancelled
    timer.fire()  # a timer thread that woke just as the wait ended: too late, nothing shown
    assert out.getvalue() == ""


def test_nothing_where_stderr_is_no_terminal(timers):
    out = io.StringIO()
    con = Console(file=out, force_terminal=False)
    with slow_note("asking sacct", after_s=0.0, on=con):
        pass
    assert timers == [] and out.getvalue() == ""  # no timer at all


def test_the_note_on_the_wall_clock():
    """slow_note with its real timer: the note comes while the block still runs and is erased when it ends. The
    bound only guards a hang (a loaded machine may take seconds to run the timer's thread)."""
    con, out = _terminal()
    with slow_note("asking sacct", after_s=0.05, on=con):
        deadline = time.monotonic() + 60
        while "asking sacct" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "asking sacct" in out.getvalue()
    assert "\x1b[2K" in out.getvalue()


def test_status_says_it_waits_for_a_slow_sacct(tmp_path, monkeypatch, timers):
    """`arctl status` of a SLURM run whose sacct is slow (the note comes after 1 s), on a terminal: the note names
    what it waits for and how to see the last states at once."""
    import slurm_shims  # tests/support/slurm_shims.py

    from arctl.cli import common
    from arctl.launch import states
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="e_a_s0_0123456789", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("e_a_s0_0123456789", claim=None, before_claim=None, state=states.RUNNING, executor="slurm",
                   job_id="77", submitted_at=time.time() - 100)
    asked = tmp_path / "sacct-asked"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=f"touch {asked}\nprintf 'JobID|State\\n77|RUNNING\\n'\n",
                    squeue="exit 0\n")
    con, out = _terminal()
    monkeypatch.setattr(common, "err_console", con)
    from arctl.cli.main import main

    started_before_sacct = []
    real_start = _Timer.start

    def start(timer: _Timer) -> None:  # the wait began: sacct not asked yet; it then outlasts the threshold
        real_start(timer)
        started_before_sacct.append(not asked.exists())
        timer.fire()

    monkeypatch.setattr(_Timer, "start", start)
    monkeypatch.setattr("sys.argv", ["arctl", "status", "--workdir", str(ws.root)])
    try:
        main()
    except SystemExit as done:
        assert done.code in (0, None)
    said = out.getvalue()
    (timer,) = timers
    assert timer.interval == common.SLOW_NOTE_AFTER_S and started_before_sacct == [True]
    assert timer.cancelled and asked.exists()  # the wait, with its note, was around sacct's
    assert "--no-refresh shows the last states now; waiting for sacct (up to 60 s)" in said, said


def test_the_status_note_names_its_way_out_on_an_80_column_terminal():
    """From a review: rich crops a spinner's line to the terminal, and the ~120-character note lost --no-refresh, its
    way out, at 80 columns."""
    from arctl.cli.cmd_status import SLOW_REFRESH_NOTE
    from arctl.launch.refresh import SACCT_TIMEOUT_S

    text = SLOW_REFRESH_NOTE.format(seconds=SACCT_TIMEOUT_S)
    assert text.startswith("--no-refresh") and len(text) + 2 <= 80, text  # the spinner and a space before it
