"""What one attempt of a run shows is its own (found by a review of the launch layer): a resumed run's
elapsed time, a --force rerun's step and metrics, a queued debug run's process."""

from __future__ import annotations

import os
import time

from arctl.launch import refresh as refresh_module
from arctl.launch import rundir, states
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import mark_submitted, read_status, write_status
from arctl.launch.workspace import Workspace


def _one_run(tmp_path, **row) -> tuple[Workspace, Registry]:
    ws = Workspace(tmp_path / "ws")
    ws.run_dir("r1").mkdir(parents=True)
    (ws.run_dir("r1") / "config.yaml").write_text("run_id: r1\n")
    reg = Registry(ws.registry_path)
    reg.claim([RunRecord(run_id="r1", experiment="e", arm="a", seed=0)], new_claim_token())
    reg.update("r1", claim=None, before_claim=None, **row)
    return ws, reg


def test_a_resumed_run_shows_the_elapsed_time_of_its_attempt(tmp_path, monkeypatch):
    """The launcher kept the previous attempt's ended_at in status.json and a refresh copied it into the row
    while the new job waited; the job's ended_at None never replaced it: `arctl status` showed 0:00:00
    for the whole attempt, `--json` a negative elapsed_s."""
    t0 = time.time() - 7200
    ws, reg = _one_run(tmp_path, state=states.PREEMPTED, executor="slurm", job_id="100", started_at=t0,
                       ended_at=t0 + 3600)
    run_dir = ws.run_dir("r1")
    write_status(run_dir, state="preempted", started_at=t0, ended_at=t0 + 3600, pid=4242)
    # `arctl resume`: the launcher's status write (mark_submitted), then its row (as _record_submitted writes it)
    mark_submitted(run_dir)
    reg.update("r1", state=states.PENDING, job_id="200", attempts=2, ended_at=None)
    assert [read_status(run_dir).get(k) for k in ("started_at", "ended_at", "pid")] == [None, None, None]
    reg.update("r1", started_at=None)  # as _record_submitted writes the row (review: a queued resume showed 72 h)
    monkeypatch.setattr(refresh_module, "controller_jobs", lambda ids: None)  # squeue: no answer
    monkeypatch.setattr(refresh_module, "scheduler_states", lambda ids: ({"200": states.PENDING}, "sacct"))
    with reg:
        rec = refresh_module.refresh(reg, ws)[0]
        assert rec.ended_at is None and rec.started_at is None  # queued: no elapsed time yet
        write_status(run_dir, state="running", started_at=time.time() - 600, ended_at=None)  # job 200 starts
        monkeypatch.setattr(refresh_module, "scheduler_states", lambda ids: ({"200": states.RUNNING}, "sacct"))
        rec = refresh_module.refresh(reg, ws)[0]
        assert rec.state == states.RUNNING and rec.ended_at is None and 590 < time.time() - rec.started_at < 700
        # a requeued job (submitit's USR1 path): its end was recorded, then it runs again
        write_status(run_dir, state="preempted", ended_at=time.time() - 60)
        reg.update("r1", ended_at=time.time() - 60)
        write_status(run_dir, state="running", started_at=time.time(), ended_at=None)
        assert refresh_module.refresh(reg, ws)[0].ended_at is None
        # killed without a word: ended when a refresh first saw it, not still running in the elapsed column
        monkeypatch.setattr(refresh_module, "scheduler_states", lambda ids: ({"200": states.FAILED}, "sacct"))
        rec = refresh_module.refresh(reg, ws)[0]
        assert rec.state == states.FAILED and abs(rec.ended_at - time.time()) < 60


def test_a_forced_rerun_does_not_start_from_the_replaced_runs_metrics(tmp_path):
    """A --force rerun moved checkpoints, W&B files and status aside but not metrics.jsonl: the tiny trainer
    kept its step-0 row (the initial evaluation, not redone: under new code, the old code's numbers, relogged
    into the new W&B run) and `arctl status` showed the replaced run's step and metric for the rerun."""
    ws, reg = _one_run(tmp_path, state=states.COMPLETED)
    reg.close()
    run_dir = ws.run_dir("r1")
    for name in ("metrics.jsonl", "verl_metrics.jsonl"):
        (run_dir / name).write_text('{"trainer/global_step": 0, "train/loss": 1.0}\n')
    archive = rundir.archive_previous(run_dir)
    assert not (run_dir / "metrics.jsonl").exists() and not (run_dir / "verl_metrics.jsonl").exists()
    assert (archive / "metrics.jsonl").is_file() and (archive / "verl_metrics.jsonl").is_file()
    rundir.restore_previous(run_dir, archive)  # a refused rerun: the run is the one it was
    assert (run_dir / "metrics.jsonl").read_text().startswith('{"trainer/global_step": 0')
    # an archive of an arctl that left the metrics files in the run folder: a restore keeps them (review)
    archive = rundir.archive_previous(run_dir)
    for name in ("metrics.jsonl", "verl_metrics.jsonl"):
        (archive / name).rename(run_dir / name)
    manifest = archive / rundir.MANIFEST
    manifest.write_text("".join(line + "\n" for line in manifest.read_text().splitlines()
                                if line not in ("metrics", "verl_metrics") and not line.startswith(rundir.KNOWN_MARK)))
    rundir.restore_previous(run_dir, archive)
    assert (run_dir / "metrics.jsonl").is_file() and (run_dir / "verl_metrics.jsonl").is_file()


def test_a_queued_debug_run_is_watched_through_its_launch(tmp_path, monkeypatch):
    """`arctl resume --executor debug` runs its runs one by one; the next one's status.json still named the
    previous attempt's (dead) process, so an `arctl status` meanwhile marked it FAILED and the launch
    skipped it. The launcher's status write (mark_submitted) names the launch's own process instead: while
    it lives the run waits, once it died (Ctrl-C) the run is FAILED, not PENDING for ever."""
    import os
    import socket
    import subprocess
    import sys

    ws, reg = _one_run(tmp_path, state=states.PENDING, executor="debug", job_id="debug")
    write_status(ws.run_dir("r1"), state="completed", pid=999_999_999, started_at=time.time() - 60)  # the last attempt
    mark_submitted(ws.run_dir("r1"), (os.getpid(), socket.gethostname()))
    with reg:
        assert refresh_module.refresh(reg, ws)[0].state == states.PENDING
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        mark_submitted(ws.run_dir("r1"), (int(dead.stdout), socket.gethostname()))  # a launch that has ended
        assert refresh_module.refresh(reg, ws)[0].state == states.FAILED


def test_a_rebuilt_run_that_never_started_has_ended(tmp_path):
    """`arctl repair` rebuilds a run whose attempt was submitted but never started FAILED; with the end of
    the previous attempt cleared at submission (mark_submitted) it had no end, and a FAILED row is never
    refreshed again: its elapsed time would grow for ever. It ends when its status was last written."""
    from arctl.launch.repair import _record

    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    write_status(run_dir, state="preempted", started_at=time.time() - 7200, ended_at=time.time() - 3600)
    status = mark_submitted(run_dir)
    rec = _record("r1", {"experiment": "e", "arm": "a", "seed": 0}, read_status(run_dir), run_dir)
    assert rec.state == states.FAILED and rec.started_at is None
    assert rec.ended_at == status["updated_at"]


def test_a_killed_attempt_seen_days_later_ends_at_its_last_sign_of_life(tmp_path, monkeypatch):
    """From the hunt of clocks: a started job that ended without saying when (SLURM killed it, its node was lost) was
    given ``ended_at`` = when a refresh first saw it: a job killed on Saturday and seen on Monday showed 2 days of
    elapsed time (and with its node's clock an hour behind, an hour too many). It ends at its last sign of life now:
    status.json's last write or its last logged step, whichever is later; one that never started, when it was seen."""
    import json

    t0 = time.time() - 2 * 86400 - 600  # started two days and ten minutes ago, last word two days ago
    ws, reg = _one_run(tmp_path, state=states.RUNNING, executor="slurm", job_id="300", started_at=t0)
    run_dir = ws.run_dir("r1")
    write_status(run_dir, state="running", started_at=t0, ended_at=None, step=40)
    doc = json.loads((run_dir / "status.json").read_text())
    (run_dir / "status.json").write_text(json.dumps({**doc, "updated_at": t0 + 500}))
    (run_dir / "metrics.jsonl").write_text('{"trainer/global_step": 41}\n')
    os.utime(run_dir / "metrics.jsonl", (t0 + 600, t0 + 600))  # its last step, after status.json's last write
    monkeypatch.setattr(refresh_module, "controller_jobs", lambda ids: None)
    monkeypatch.setattr(refresh_module, "scheduler_states", lambda ids: ({"300": states.FAILED}, "sacct"))
    with reg:
        rec = refresh_module.refresh(reg, ws)[0]
    assert rec.state == states.FAILED and abs(rec.ended_at - (t0 + 600)) < 1, (rec.ended_at - t0)
    # never started (cancelled in the queue): when a refresh saw it ended, as before
    ws2, reg2 = _one_run(tmp_path / "2", state=states.PENDING, executor="slurm", job_id="301")
    mark_submitted(ws2.run_dir("r1"))
    monkeypatch.setattr(refresh_module, "scheduler_states", lambda ids: ({"301": states.FAILED}, "sacct"))
    with reg2:
        rec = refresh_module.refresh(reg2, ws2)[0]
    assert rec.state == states.FAILED and abs(rec.ended_at - time.time()) < 60
