"""A wait on another program is said where a person watches: `arctl status` waited up to 60 s for an accounting
daemon that did not answer, without a word (from a hunt). The note is a spinner on stderr after a second, gone when the
wait ends, and only on a terminal: scripts, pipes and logs get nothing."""

from __future__ import annotations

import io
import time

from rich.console import Console

from arctl.cli.common import slow_note


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=80), out


def test_a_wait_longer_than_its_threshold_shows_the_note_and_removes_it():
    con, out = _terminal()
    with slow_note("asking sacct", after_s=0.1, on=con):
        time.sleep(0.6)
    assert "asking sacct" in out.getvalue()
    assert "\x1b[2K" in out.getvalue()  # its line erased when the wait ended


def test_a_quick_answer_shows_nothing():
    con, out = _terminal()
    with slow_note("asking sacct", after_s=2.0, on=con):
        pass
    time.sleep(2.5)  # past the threshold: the timer was cancelled
    assert out.getvalue() == ""


def test_nothing_where_stderr_is_no_terminal():
    out = io.StringIO()
    con = Console(file=out, force_terminal=False)
    with slow_note("asking sacct", after_s=0.0, on=con):
        time.sleep(0.3)
    assert out.getvalue() == ""


def test_status_says_it_waits_for_a_slow_sacct(tmp_path, monkeypatch):
    """`arctl status` of a SLURM run whose sacct takes 3 s (the note comes after 1), on a terminal: the note names what it waits for and how
    to see the last states at once."""
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
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct="sleep 3\nprintf 'JobID|State\\n77|RUNNING\\n'\n",
                    squeue="exit 0\n")
    con, out = _terminal()
    monkeypatch.setattr(common, "err_console", con)
    from arctl.cli.main import main

    monkeypatch.setattr("sys.argv", ["arctl", "status", "--workdir", str(ws.root)])
    try:
        main()
    except SystemExit as done:
        assert done.code in (0, None)
    said = out.getvalue()
    assert "--no-refresh shows the last states now; waiting for sacct (up to 60 s)" in said, said


def test_the_status_note_names_its_way_out_on_an_80_column_terminal():
    """From a review: rich crops a spinner's line to the terminal, and the ~120-character note lost --no-refresh, its
    way out, at 80 columns."""
    from arctl.cli.cmd_status import SLOW_REFRESH_NOTE
    from arctl.launch.refresh import SACCT_TIMEOUT_S

    text = SLOW_REFRESH_NOTE.format(seconds=SACCT_TIMEOUT_S)
    assert text.startswith("--no-refresh") and len(text) + 2 <= 80, text  # the spinner and a space before it
