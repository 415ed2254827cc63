"""`arctl cancel` that lands as a job starts (from a hunt of concurrent commands): the cancel read status.json's
"submitted" of a local job whose process was alive, signalled it, and recorded the run CANCELLED at once; the job,
whose TERM handler was already there, caught the TERM as a graceful stop, wrote "running" over the cancel's
"cancelled", trained to its first checkpoint and wrote "preempted", while a relaunch the CANCELLED row allowed ran a
second job of the same run beside it (one checkpoints/ folder, status.json, metrics and W&B id). Now such a run stays
active (RUNNING, "cancelling") until its job has ended, SLURM's too (a job scancel'ed while RUNNING whose
status.json still says "submitted"), and a job that finds the cancel's request as it starts trains nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.launch import states
from arctl.launch.control import cancel_runs
from arctl.launch.job import PREEMPTED_EXIT_CODE
from arctl.launch.refresh import CANCELLING, TERM_GRACE_S, merge_state, refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import CANCEL_FILE, mark_cancel_requested, mark_submitted, read_status
from arctl.launch.workspace import Workspace

RUN_ID = "e_a_s0_0123456789"

# A local job held where the hunt's job was when the cancel came: its stop handler is installed (run_job installs it
# first), status.json still says "submitted" (_start_attempt writes "running"). Its command line names submitit and a
# path in its run folder, as a local job's does (`python -u -m submitit.local._local <run>/job/<id>`), so that the
# cancel takes it for the run's job (refresh.local_job_alive), as it took the hunt's.
HELD_JOB = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from arctl.launch import job  # run as submitit's local job runs it
    run_dir, held, gate = Path(sys.argv[1]).parents[1], Path(sys.argv[2]), Path(sys.argv[3])
    real = job._start_attempt
    def start(run_dir):
        held.touch()
        while not gate.exists():
            time.sleep(0.02)
        return real(run_dir)
    job._start_attempt = start
    sys.exit(job.main([str(run_dir)]))
""")


def _run_dir(tmp_path: Path, ws: Workspace) -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 3}, "wandb": {"mode": "disabled", "id": RUN_ID}}
    run_dir = prepare_run_dir(ws.run_dir(RUN_ID), config)
    mark_submitted(run_dir, (None, socket.gethostname()))  # as the launch leaves a local run
    return run_dir


def _row(ws: Workspace, **values) -> RunRecord:
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, **values)
        return reg.get(RUN_ID)


@pytest.fixture
def count_backend(monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.05")


def test_a_local_job_cancelled_as_it_starts_keeps_its_run_active_until_it_ended_and_trains_nothing(
        tmp_path, count_backend, waiter):
    ws = Workspace(tmp_path / "ws")
    run_dir = _run_dir(tmp_path, ws)
    held, gate = tmp_path / "held", tmp_path / "gate"
    submitted = time.time()
    proc = subprocess.Popen([sys.executable, "-c", HELD_JOB, str(run_dir / "job" / "4242"), str(held), str(gate)],
                            stderr=subprocess.PIPE, text=True)
    try:
        # the local queue recorded the job (its process) RUNNING; the job holds before its "running"
        rec = _row(ws, state=states.RUNNING, executor="local", job_id=str(proc.pid), submitted_at=submitted,
                   started_at=submitted)
        waiter(lambda: held.exists() or proc.poll() is not None, 60, "the job to install its handler")
        assert proc.poll() is None and read_status(run_dir)["state"] == "submitted"
        with Registry(ws.registry_path) as reg:
            ((_, said),) = cancel_runs(reg, ws, [rec])
            row = reg.get(RUN_ID)
            # not CANCELLED (a relaunch would train beside the job the TERM did not stop): active until it ended
            assert said == f"cancelling (job {proc.pid}): it was starting; CANCELLED once it has stopped"
            assert (row.state, row.phase, row.cancel_requested is not None) == (states.RUNNING, CANCELLING, True)
            assert [r.state for r in refresh(reg, ws, [row])] == [states.RUNNING]  # its process lives
        gate.touch()
        _, err = proc.communicate(timeout=60)
    finally:
        gate.touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == PREEMPTED_EXIT_CODE, err
    status = read_status(run_dir)
    # it found the cancel's request as it started: nothing trained, nothing checkpointed, no attempt counted
    assert (status["state"], status.get("attempt")) == ("cancelled", None), status
    assert not any((run_dir / "checkpoints").iterdir()) and not (run_dir / "steps.log").exists()
    assert "not started" in err and "arctl cancel" in err
    with Registry(ws.registry_path) as reg:
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    assert (after.state, after.error, after.step, after.phase) == (states.CANCELLED, None, None, None), after


def test_a_job_that_starts_after_its_run_was_cancelled_trains_nothing(tmp_path, count_backend):
    """The second safeguard, without the cancel's TERM (a job started by the local queue or SLURM right as the
    cancel recorded the run): the request the cancel left in the run's folder, after this attempt's submission."""
    ws = Workspace(tmp_path / "ws")
    run_dir = _run_dir(tmp_path, ws)
    asked = time.time()
    mark_cancel_requested(run_dir, asked)
    proc = subprocess.run([sys.executable, "-m", "arctl.launch.job", str(run_dir)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == PREEMPTED_EXIT_CODE, proc.stderr
    status = read_status(run_dir)
    assert status["state"] == "cancelled" and status["ended_at"] >= asked and status.get("attempt") is None, status
    assert not any((run_dir / "checkpoints").iterdir()) and not (run_dir / "steps.log").exists()
    assert (run_dir / CANCEL_FILE).exists()  # the request stays: `arctl repair` reads it
    # its row (a local run the cancel left cancelling; its process is gone): CANCELLED, without an error or a step
    _row(ws, state=states.RUNNING, executor="local", job_id="999999999", cancel_requested=asked, phase=CANCELLING)
    with Registry(ws.registry_path) as reg:
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    assert (after.state, after.error, after.step, after.phase) == (states.CANCELLED, None, None, None), after
    # a new attempt's submission takes the request away: that attempt trains
    mark_submitted(run_dir, (None, socket.gethostname()))
    proc = subprocess.run([sys.executable, "-m", "arctl.launch.job", str(run_dir)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and read_status(run_dir)["state"] == "completed", proc.stderr


def test_a_slurm_job_scancelled_while_running_but_not_yet_reported_stays_active_until_it_ended(tmp_path, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    calls = tmp_path / "scancel-calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, scancel=f'echo "$*" >> {calls}\n')
    with Registry(ws.registry_path) as reg:
        ids = {"e_a_s0_0000000001": ("101_0", states.RUNNING), "e_b_s0_0000000002": ("101_1", states.PENDING)}
        reg.claim([RunRecord(run_id=r, experiment="e", arm=r.split("_")[1], seed=0) for r in ids], new_claim_token())
        for run_id, (job, state) in ids.items():
            ws.run_dir(run_id).mkdir(parents=True)
            mark_submitted(ws.run_dir(run_id))  # neither job has written "running" yet
            reg.update(run_id, state=state, executor="slurm", job_id=job, claim=None, before_claim=None)
        said = {r.run_id: why for r, why in cancel_runs(reg, ws, reg.list())}
        rows = {r.run_id: r for r in reg.list()}
    assert calls.read_text().split() == ["101_0", "101_1"]
    running, pending = rows["e_a_s0_0000000001"], rows["e_b_s0_0000000002"]
    # SLURM runs the first (the refresh before the cancel said so): its job may have caught the TERM as it started
    assert said[running.run_id] == "cancelling (job 101_0): it was starting; CANCELLED once it has stopped"
    assert (running.state, running.phase) == (states.RUNNING, CANCELLING)
    # a job SLURM still queued has nothing to save: CANCELLED at once, as before
    assert said[pending.run_id] == "cancelled (job 101_1)" and pending.state == states.CANCELLED
    assert read_status(ws.run_dir(pending.run_id))["state"] == "cancelled"
    asked = running.cancel_requested
    # SLURM says CANCELLED at once; the job may still be starting (submitit ignores a TERM until the job's handler)
    submitted = {"state": "submitted"}
    assert merge_state(running, submitted, states.CANCELLED, asked + 5) == (states.RUNNING, None)
    assert merge_state(running, submitted, states.CANCELLED, asked + TERM_GRACE_S + 1) == (states.CANCELLED, None)
    # the job found the request as it started: ended, nothing ran, whatever SLURM calls its end
    for scheduler in (states.CANCELLED, states.COMPLETED):
        assert merge_state(running, {"state": "cancelled"}, scheduler, asked + 5) == (states.CANCELLED, None)
    assert merge_state(running, {"state": "cancelled"}, states.RUNNING, asked + 5)[0] == states.RUNNING  # exiting


def test_a_debug_run_whose_job_found_the_cancel_as_it_started_is_cancelled_though_its_launch_lives(tmp_path):
    from arctl.launch.status_file import write_status

    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN_ID).mkdir(parents=True)
    mark_submitted(ws.run_dir(RUN_ID), (os.getpid(), socket.gethostname()))  # this process runs it (debug)
    write_status(ws.run_dir(RUN_ID), state="cancelled", executor="debug", ended_at=time.time())
    _row(ws, state=states.RUNNING, executor="debug", job_id="debug", cancel_requested=time.time())
    with Registry(ws.registry_path) as reg:
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    assert (after.state, after.error) == (states.CANCELLED, None), after


def test_a_cancel_that_signals_a_job_it_read_as_running_still_says_it_saves_a_checkpoint(tmp_path, monkeypatch):
    """The started run's path, unchanged: cancelling, with its stop checkpoint."""
    import arctl.launch.control as control

    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN_ID).mkdir(parents=True)
    mark_submitted(ws.run_dir(RUN_ID))
    from arctl.launch.status_file import write_status

    write_status(ws.run_dir(RUN_ID), state="running", executor="local", job_id="4242", host=socket.gethostname())
    rec = _row(ws, state=states.RUNNING, executor="local", job_id="4242")
    sent = []
    monkeypatch.setattr(control, "local_job_alive", lambda *a: True)
    monkeypatch.setattr(control.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    with Registry(ws.registry_path) as reg:
        ((_, said),) = cancel_runs(reg, ws, [rec])
        row = reg.get(RUN_ID)
    assert sent == [(4242, signal.SIGTERM)] and said == "cancelling (job 4242): it saves a checkpoint and stops"
    assert (row.state, row.phase) == (states.RUNNING, CANCELLING)
    assert os.path.exists(ws.run_dir(RUN_ID) / CANCEL_FILE)


@pytest.mark.parametrize("scancel", ["missing", "fails"])
def test_a_cancel_that_reached_no_job_leaves_no_request_behind(tmp_path, monkeypatch, scancel):
    """From a review: `arctl cancel` whose scancel failed (a controller that does not answer) left its request in the
    run's folder; the job trained on, and its requeued attempt (no mark_submitted) found it and trained nothing."""
    from arctl.launch.executors import LaunchError

    ws = Workspace(tmp_path / "ws")
    if scancel == "missing":
        slurm_shims.use(tmp_path / "bin", monkeypatch)
        (tmp_path / "bin" / "scancel").unlink(missing_ok=True)
        monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    else:
        slurm_shims.use(tmp_path / "bin", monkeypatch, scancel="echo 'scancel: error: Unable to contact slurm "
                        "controller (connect failure)' >&2\nexit 1\n")
    with Registry(ws.registry_path) as reg:
        run_id = "e_a_s0_0000000001"
        reg.claim([RunRecord(run_id=run_id, experiment="e", arm="a", seed=0)], new_claim_token())
        ws.run_dir(run_id).mkdir(parents=True)
        mark_submitted(ws.run_dir(run_id))
        reg.update(run_id, state=states.RUNNING, executor="slurm", job_id="4242", claim=None, before_claim=None)
        with pytest.raises(LaunchError, match="scancel"):
            cancel_runs(reg, ws, reg.list())
        assert reg.get(run_id).state == states.RUNNING and reg.get(run_id).cancel_requested is None
    assert not (ws.run_dir(run_id) / CANCEL_FILE).exists()


def test_a_slurm_job_killed_while_it_saved_its_checkpoint_is_cancelled_once_slurm_says_it_ended(tmp_path, monkeypatch):
    """From a hunt: `arctl cancel --now` of a SLURM job that said "stopping" (a TERM had reached it) killed it, and the
    run read RUNNING, "cancelling: saving its checkpoint", for up to 15 minutes (STOP_TIMEOUT_S since its last write):
    nothing saves a checkpoint after a KILL. Now it reads killed, and CANCELLED once SLURM says the job ended and
    KILL_GRACE_S have passed (its processes die at once)."""
    from arctl.launch import refresh as refresh_module
    from arctl.launch.refresh import KILL_GRACE_S, KILLED
    from arctl.launch.status_file import KILLED_FILE, killed_at, write_status

    calls = tmp_path / "calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, scancel=f'echo "scancel $*" >> {calls}\n',
                    sacct="printf 'JobID|State\\n77|CANCELLED by 0\\n'\n", squeue="exit 0\n")
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN_ID).mkdir(parents=True)
    write_status(ws.run_dir(RUN_ID), state="stopping", executor="slurm", job_id="77", started_at=time.time() - 600)
    rec = _row(ws, state=states.RUNNING, executor="slurm", job_id="77", submitted_at=time.time() - 700)
    with Registry(ws.registry_path) as reg:
        ((_, said),) = cancel_runs(reg, ws, [rec], now=True)
        row = reg.get(RUN_ID)
    assert calls.read_text().splitlines() == ["scancel 77", "scancel --signal=KILL --full 77"], said
    assert (row.state, row.phase) == (states.RUNNING, KILLED) and "killed" in said, (row, said)
    at = killed_at(ws.run_dir(RUN_ID))
    assert at is not None
    with Registry(ws.registry_path) as reg:  # SLURM's word came before the grace ended: still active
        monkeypatch.setattr(refresh_module.time, "time", lambda: at + KILL_GRACE_S / 2)
        [during] = refresh(reg, ws, [reg.get(RUN_ID)])
        monkeypatch.setattr(refresh_module.time, "time", lambda: at + KILL_GRACE_S + 1)  # not STOP_TIMEOUT_S later
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    assert (during.state, during.phase) == (states.RUNNING, KILLED)
    assert (after.state, after.phase) == (states.CANCELLED, None) and "checkpoint was saved" in after.error, after
    mark_submitted(ws.run_dir(RUN_ID))  # the next attempt: the kill was the last one's
    assert not (ws.run_dir(RUN_ID) / KILLED_FILE).exists()


def test_a_second_cancel_that_reaches_nothing_keeps_the_first_ones_request_and_kill(tmp_path, monkeypatch):
    """From a review: a plain `arctl cancel` after `--now`, whose scancel SLURM answered "already completing", took away
    the first cancel's request and its kill from the run's folder: the run read "saving its checkpoint" for 15 minutes,
    and a stop it then reported read as a preemption."""
    from arctl.launch import refresh as refresh_module
    from arctl.launch.refresh import KILL_GRACE_S, KILLED
    from arctl.launch.status_file import KILLED_FILE, cancel_requested_at, killed_at, write_status

    calls = tmp_path / "calls"
    scancel = tmp_path / "scancel-answers"
    scancel.write_text("")
    slurm_shims.use(tmp_path / "bin", monkeypatch, squeue="exit 0\n",
                    scancel=f'echo "scancel $*" >> {calls}\nif [ -s {scancel} ]; then cat {scancel} >&2; exit 1; fi\n',
                    sacct="printf 'JobID|State\\n77|CANCELLED by 0\\n'\n")
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN_ID).mkdir(parents=True)
    write_status(ws.run_dir(RUN_ID), state="stopping", executor="slurm", job_id="77", started_at=time.time() - 600)
    rec = _row(ws, state=states.RUNNING, executor="slurm", job_id="77", submitted_at=time.time() - 700)
    with Registry(ws.registry_path) as reg:
        cancel_runs(reg, ws, [rec], now=True)
        asked, killed = cancel_requested_at(ws.run_dir(RUN_ID)), killed_at(ws.run_dir(RUN_ID))
        assert asked is not None and killed is not None
        scancel.write_text("scancel: error: Kill job error on job id 77: Job/step already completing or completed\n")
        ((_, said),) = cancel_runs(reg, ws, [reg.get(RUN_ID)])
        assert "already ending" in said, said
        assert (cancel_requested_at(ws.run_dir(RUN_ID)), killed_at(ws.run_dir(RUN_ID))) == (asked, killed)
        monkeypatch.setattr(refresh_module.time, "time", lambda: killed + KILL_GRACE_S + 1)
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    assert after.state == states.CANCELLED and after.phase != KILLED, after
    assert (ws.run_dir(RUN_ID) / KILLED_FILE).exists()  # until the next attempt's "submitted"
