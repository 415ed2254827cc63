"""arctl.track.writer.close_run has a deadline: a W&B service that never answers (online over a flaky network;
here a wandb-core stopped with SIGSTOP) held a finished job RUNNING for ever, past `arctl cancel` (from a hunt)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from arctl.track import writer
from arctl.track.metrics_schema import STEP_KEY

DEADLINE_S = 2.0
MARGIN_S = 30.0  # past the deadline the test fails instead of hanging (the old close waited for ever)
ANSWERING_S = "120"  # the deadline of a close whose service answers: met however slow a loaded machine is


def _config():
    return {"experiment": "e", "arm": "a", "seed": 0, "run_id": "close-deadline",
            "wandb": {"project": "p", "mode": "offline"}}


def _row(step: int) -> dict:
    return {STEP_KEY: step, "train/loss": step / 8}


def _fragments(run_dir):
    from arctl.track.wandbfile import read_wandb_file

    return [read_wandb_file(p) for p in sorted((run_dir / "wandb").rglob("run-*.wandb"))]


def _wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "W&B never wrote the rows logged"
        time.sleep(0.1)


def test_a_close_whose_service_never_answers_ends_in_time_and_keeps_what_was_written(tmp_path, monkeypatch):
    """wandb-core stopped after writing steps 1..4 (step 5 is still in the SDK: W&B sends a row when the next
    step starts, or at finish): close_run returns False within its deadline (warning once, in the job's log
    too), the stopped wandb-core, this process's child, is killed rather than left behind, and arctl's reader
    reads steps 1..4 once each from the file. The caller's path for an incomplete history
    (complete_history) then re-logs step 5 with a new service: every step exactly once, as a W&B server
    would hold them after sync (tests/support/wandb_reference.py)."""
    import wandb
    from wandb_reference import synced_history

    from arctl.track.runs import stitch_fragments

    wandb.teardown()  # a service an earlier test of this worker left would serve open_run: no wandb-core of its own
    monkeypatch.setenv(writer.CLOSE_DEADLINE_ENV, str(DEADLINE_S))
    run_dir = tmp_path / "run"
    history = [_row(s) for s in range(1, 6)]
    before = set(_children(os.getpid()))
    run = writer.open_run(_config(), run_dir, flush_interval_s=0.2)
    cores = [pid for pid, name in _children(os.getpid()).items() if pid not in before and "wandb-core" in name]
    assert len(cores) == 1, f"expected this process's own wandb-core among {_children(os.getpid())}"
    (core,) = cores
    for row in history:
        writer.log_row(run, row)
    _wait_for(lambda: writer.last_logged_step(run_dir) == 4)

    result: list[bool] = []
    closer = threading.Thread(target=lambda: result.append(writer.close_run(run)), daemon=True)
    os.kill(core, signal.SIGSTOP)
    try:
        with pytest.warns(UserWarning, match=f"did not finish the run within {DEADLINE_S:g} s"):
            closer.start()
            closer.join(DEADLINE_S + MARGIN_S)  # a bound on a hang only: no timing is asserted (the CI has 2 cores)
            assert not closer.is_alive(), f"close_run still waits for the stopped wandb-core after {DEADLINE_S + MARGIN_S:g} s"
        assert result == [False]  # not closed cleanly: the caller checks what the files hold
        assert not _alive(core), "the stopped wandb-core was left behind"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(core, signal.SIGCONT)  # nothing of this test is left stopped

    (frag,) = _fragments(run_dir)
    assert frag.column(STEP_KEY).tolist() == [1, 2, 3, 4]
    assert frag.column("train/loss").tolist() == [s / 8 for s in (1, 2, 3, 4)]
    assert writer.last_logged_step(run_dir) == 4

    # the re-log's service answers: its close is not the one under test, and 2 s is less than a loaded machine
    # takes to close a run (the -n 2 suite beside other processes)
    monkeypatch.setenv(writer.CLOSE_DEADLINE_ENV, ANSWERING_S)
    assert writer.complete_history(_config(), run_dir, history, closed=False) is None
    ids, rows = synced_history(run_dir)
    assert ids == {"close-deadline"}
    assert [(r[STEP_KEY], r["train/loss"]) for r in rows] == [(s, s / 8) for s in range(1, 6)]
    wide, _ = stitch_fragments(_fragments(run_dir))
    assert wide.index.tolist() == [1, 2, 3, 4, 5]
    assert wide["train/loss"].tolist() == [s / 8 for s in range(1, 6)]


def _children(pid: int) -> dict[int, str]:
    """The live child processes of ``pid`` (the launch layer's process table: no psutil, which a fresh machine
    without the verl extra lacks): pid -> its name."""
    from arctl.launch.control import _children as process_table

    out = {}
    for child in process_table().get(pid, []):
        with contextlib.suppress(OSError):
            out[child] = Path(f"/proc/{child}/comm").read_text().strip()
    return out


def _closers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "arctl-wandb-close"]


def _alive(pid: int) -> bool:
    """Whether this process's child ``pid`` is still there (a zombie is not)."""
    return pid in _children(os.getpid())


@pytest.mark.parametrize(("value", "expected"), [(None, writer.CLOSE_DEADLINE_S), ("7.5", 7.5)])
def test_the_deadline_is_a_constant_or_the_environments(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(writer.CLOSE_DEADLINE_ENV, raising=False)
    else:
        monkeypatch.setenv(writer.CLOSE_DEADLINE_ENV, value)
    assert writer.close_deadline_s() == expected


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_a_deadline_that_is_no_positive_number_is_the_default_with_a_warning(monkeypatch, capsys, value):
    """Read as the run closes: an error then would lose the close, so the default is used, and said."""
    monkeypatch.setenv(writer.CLOSE_DEADLINE_ENV, value)
    with pytest.warns(UserWarning, match=f"{writer.CLOSE_DEADLINE_ENV}='{value}' is not a positive number"):
        assert writer.close_deadline_s() == writer.CLOSE_DEADLINE_S
    assert capsys.readouterr().out.startswith("arctl: WARNING ")


def test_a_close_in_time_is_complete_and_leaves_no_thread(tmp_path, monkeypatch):
    """The usual close, now in a thread of its own: complete (True), the file ends with its exit record."""
    from arctl.track import wandbfile

    monkeypatch.setenv(writer.CLOSE_DEADLINE_ENV, ANSWERING_S)
    run = writer.open_run(_config(), tmp_path)
    writer.log_row(run, _row(1))
    before = set(_closers())  # an earlier test's close past its deadline may still be ending in this process
    assert writer.close_run(run) is True
    assert not set(_closers()) - before  # this close's own thread is gone
    (path,) = {p.resolve() for p in (tmp_path / "wandb").rglob("run-*.wandb")}
    assert wandbfile.has_exit_record(path)
    assert os.environ.get("WANDB_SERVICE") is None  # this process's service is gone with the close
