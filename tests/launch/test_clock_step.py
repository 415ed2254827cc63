"""A clock step while a local job trains (from the hunt of clocks): whether the pid in a local run's job id is still its
job's process was decided by comparing the process's start (/proc/stat's boot time, which moves with every step of
the wall clock, plus its ticks since boot) with the job's submission time, 60 s of slack. An NTP step of 90 s forward
made the live job read as a later process holding its pid: the run FAILED for good while it trained. The launcher and
the local queue now name the process of each job id they record as no other (its boot and start ticks,
``job_process``), and that is compared."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.launch import refresh as refresh_mod
from arctl.launch import states
from arctl.launch.refresh import local_job_alive, refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import (
    JOB_PROCESS_FILE,
    mark_submitted,
    name_job_process,
    read_status,
    write_status,
)
from arctl.launch.workspace import Workspace

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="/proc names a process as no other")

RUN_ID = "e_a_s0_0123456789"


@pytest.fixture
def job(tmp_path):
    """A process as a local job's is (its command line names submitit and a path in its run's folder), and its run,
    RUNNING under it."""
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 300}, "wandb": {"mode": "disabled", "id": RUN_ID}}
    run_dir = prepare_run_dir(ws.run_dir(RUN_ID), config)
    mark_submitted(run_dir, (None, socket.gethostname()))
    submitted = time.time()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "submitit",
                             str(run_dir.absolute() / "job" / "x")])
    write_status(run_dir, state="running", host=socket.gethostname(), started_at=submitted, step=3)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, state=states.RUNNING, executor="local",
                   job_id=str(proc.pid), submitted_at=submitted, started_at=submitted)
    yield ws, run_dir, proc
    proc.kill()
    proc.wait()


def _stepped(monkeypatch, seconds: float) -> None:
    """What a step of the wall clock ``seconds`` forward does to a process's start computed from /proc/stat's btime."""
    real = refresh_mod._process_start
    monkeypatch.setattr(refresh_mod, "_process_start", lambda pid: real(pid) + seconds)


def test_a_live_local_job_stays_running_across_a_clock_step(job, monkeypatch):
    ws, run_dir, proc = job
    name_job_process(run_dir, str(proc.pid), proc.pid)  # as the local queue does when it starts the job
    _stepped(monkeypatch, 90.0)
    with Registry(ws.registry_path) as reg:
        assert local_job_alive(reg.get(RUN_ID), read_status(run_dir), ws) is True
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    assert after.state == states.RUNNING, after


def test_a_pid_held_by_another_process_than_the_one_named_is_not_the_job(job, monkeypatch):
    ws, run_dir, proc = job
    name_job_process(run_dir, str(proc.pid), proc.pid)
    named = (run_dir / JOB_PROCESS_FILE).read_text()
    (run_dir / JOB_PROCESS_FILE).write_text(named.rsplit(":", 1)[0] + ":1")  # started at tick 1: not this process
    with Registry(ws.registry_path) as reg:
        assert local_job_alive(reg.get(RUN_ID), read_status(run_dir), ws) is False


def test_a_name_for_another_job_id_is_not_read_and_times_decide_as_before(job, monkeypatch):
    ws, run_dir, proc = job
    name_job_process(run_dir, f"queue:{proc.pid}", proc.pid)  # the queue's, before it started the job
    with Registry(ws.registry_path) as reg:
        assert local_job_alive(reg.get(RUN_ID), read_status(run_dir), ws) is True  # no step: the times agree
        _stepped(monkeypatch, 90.0)
        assert local_job_alive(reg.get(RUN_ID), read_status(run_dir), ws) is False  # (the hunt's case, unnamed)


def test_the_next_attempts_submission_forgets_the_named_process(job):
    _ws, run_dir, proc = job
    name_job_process(run_dir, str(proc.pid), proc.pid)
    mark_submitted(run_dir, (None, socket.gethostname()))
    assert not (run_dir / JOB_PROCESS_FILE).exists()
