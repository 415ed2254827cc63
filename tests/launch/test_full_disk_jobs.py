"""A full disk is the reason a run failed, wherever it struck: the job's own failure report (status.json) that
the full disk refused, and the local queue whose registry it refused (from a hunt: "the job process died without
reporting (killed?)", "the local queue stopped before starting this run"). ENOSPC is raised in-process by
monkeypatched writes; nothing is mounted."""

from __future__ import annotations

import errno
import os
import time

import pytest
from pids import unused_pid  # tests/support/pids.py

from arctl.launch import states
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry, RegistryError
from arctl.launch.status_file import read_status
from arctl.launch.workspace import Workspace

FULL = os.strerror(errno.ENOSPC)


def _one_run(ws: Workspace, monkeypatch) -> str:
    """A run of sweep lt3 with its folder and registry row (its job never trains here)."""
    from arctl.compose import resolve_sweep
    from arctl.launch.job import RunJob

    items = items_from_resolved(resolve_sweep("lt3", []))[:1]
    monkeypatch.setattr(RunJob, "__call__", lambda self, run_dir: "not trained here")
    launch(items, ws, executor="debug", members=["lt3"])
    return items[0].run_id



def test_a_job_whose_failure_report_the_full_disk_refused_says_so_in_its_log_and_the_run_s_reason(
        specs, tmp_path, monkeypatch, capfd):
    """The checkpoint write hit a full disk, and so did status.json's "failed": the job wrote nothing, and the
    run read "the job process died without reporting (killed?)". Now the job log's last line says the disk is
    full and where, and a refresh gives that line as the run's reason."""
    import arctl.launch.job as job
    from arctl.launch.refresh import refresh

    ws = Workspace(tmp_path / "ws")
    run_id = _one_run(ws, monkeypatch)
    run_dir = ws.run_dir(run_id)
    target = run_dir / "checkpoints" / "step_000002.pt"

    def train(config, run_dir, stop_event):
        raise OSError(errno.ENOSPC, FULL, str(target))

    real_write = job.write_status

    def full_disk_status(run_dir, **fields):
        if fields.get("state") == "failed":
            raise OSError(errno.ENOSPC, FULL, str(run_dir / "status.json"))
        return real_write(run_dir, **fields)

    monkeypatch.setattr(job, "resolve_backend", lambda config: train)
    monkeypatch.setattr(job, "write_status", full_disk_status)
    monkeypatch.setattr(job, "RECORD_TRIES", (0.01,))
    capfd.readouterr()
    with pytest.raises(OSError) as raised:
        job.run_job(run_dir)
    assert raised.value.errno == errno.ENOSPC  # the job's own error, not the report's
    err = capfd.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "ERROR the disk is full at " + str(target) in last and "status.json could not be written" in last
    assert f"arctl resume {run_id}" in last
    assert read_status(run_dir)["state"] == "running"  # nothing recorded: the disk refused it

    # the job's log, where the local executor puts it; the job's process is gone
    pid = unused_pid()
    (run_dir / "job" / str(pid)).mkdir(parents=True)
    (run_dir / "job" / str(pid) / f"{pid}_0_log.err").write_text(err)
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, state=states.RUNNING, executor="local", job_id=str(pid), started_at=time.time())
        rec = refresh(reg, ws, [reg.get(run_id)])[0]
    assert rec.state == states.FAILED
    assert rec.error.startswith(f"the disk is full at {target} ({FULL}") and "could not be written" not in rec.error


def test_a_full_disk_s_error_without_a_path_is_not_read_as_one_that_has_it():
    """The line names the path the failed write named, and says so only for a full disk."""
    from pathlib import Path

    from arctl.launch.job import failure_line

    run_dir = Path("/ws/runs/r1")
    assert failure_line(ValueError("bad"), run_dir) == "ValueError: bad"
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/ws/runs/r1/x")
    line = failure_line(wrapped, run_dir)
    assert line.startswith("the disk is full at /ws/runs/r1/x (") and "`arctl resume r1 --workdir /ws`" in line


def test_the_local_queue_outlasts_a_registry_the_full_disk_refuses(specs, tmp_path, monkeypatch):
    """A RegistryError (database or disk is full) in the refresh of a finished run killed the local queue, and
    every run it had not started yet ended FAILED "the local queue stopped before starting this run". Now the
    queue waits and tries again: both runs start, and each ends recorded."""
    import arctl.launch.local_queue as local_queue
    import arctl.launch.refresh as refresh_module
    from arctl.compose import resolve_sweep
    from arctl.launch.job import RunJob

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))[:2]
    monkeypatch.setattr(RunJob, "__call__", lambda self, run_dir: "not trained here")
    launch(items, ws, executor="debug", members=["lt3"])
    ids, me = [i.run_id for i in items], f"queue:{os.getpid()}"
    with Registry(ws.registry_path) as reg:
        for run_id in ids:
            reg.update(run_id, state=states.PENDING, executor="local", job_id=me)

    class Job:
        def __init__(self, n):
            self.job_id = str(unused_pid() - n)

        def done(self):
            return True

    started = []

    class Executor:
        def submit(self, fn, run_dir):
            started.append(run_dir)
            from arctl.launch.status_file import write_status

            write_status(run_dir, state="completed")  # what the job reports as it ends
            return Job(len(started))

    failures = {"left": 2}
    real_refresh = refresh_module.refresh

    def full_registry(reg, workspace, records=None):
        if failures["left"]:
            failures["left"] -= 1
            raise RegistryError(f"{ws.registry_path}: database or disk is full (0.0 MiB free there): free some "
                                "space and run the command again", "full")
        return real_refresh(reg, workspace, records)

    monkeypatch.setattr(local_queue, "local_executor", lambda folder, cluster: Executor())
    monkeypatch.setattr(refresh_module, "refresh", full_registry)
    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "POLL_S", 0.01)
    local_queue.run_queue(ws.root, ids, parallelism=1)
    assert len(started) == 2 and failures["left"] == 0
    with Registry(ws.registry_path) as reg:
        assert [reg.get(r).state for r in ids] == [states.COMPLETED, states.COMPLETED]


def test_a_local_queue_that_gives_up_says_why_in_the_runs_it_never_started(specs, tmp_path, monkeypatch):
    """A registry that stays unwritable: the queue gives up, and the runs it never started say why (the full
    disk), not "the local queue stopped before starting this run"."""
    import arctl.launch.local_queue as local_queue
    from arctl.launch.refresh import refresh

    ws = Workspace(tmp_path / "ws")
    run_id = _one_run(ws, monkeypatch)
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, state=states.PENDING, executor="local", job_id="queue:1")  # not this queue: skipped...
    message = f"{ws.registry_path}: database or disk is full (0.0 MiB free there)"

    real_get = Registry.get

    def full_get(self, run_id):
        raise RegistryError(message, "full")

    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "GIVE_UP_S", 0.05)
    monkeypatch.setattr(local_queue, "WAIT_FOR_REGISTRY_S", 0.0)
    monkeypatch.setattr(Registry, "get", full_get)
    with pytest.raises(RegistryError):
        local_queue.run_queue(ws.root, [run_id], parallelism=1)
    monkeypatch.setattr(Registry, "get", real_get)
    assert "database or disk is full" in read_status(ws.run_dir(run_id))["error"]
    pid = unused_pid()
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, job_id=f"queue:{pid}")  # ...and the queue is gone
        rec = refresh(reg, ws, [reg.get(run_id)])[0]
    assert rec.state == states.FAILED
    assert rec.error.startswith("the local queue gave up after") and "database or disk is full" in rec.error
