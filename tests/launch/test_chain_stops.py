"""How the stopped runs of a chain (``trainer.init_from``) end on SLURM (hunt "slurmchain", F2, F3, F5).

- F2: a source stopped by a bare TERM (``scancel --signal=TERM``) exited 0, so SLURM recorded it COMPLETED, its
  dependent's ``afterok`` held, and the dependent started, took its allocation and failed ("starts from run ...,
  which is preempted"). Now a SLURM job whose attempt ends unfinished and is not requeued exits 75: SLURM records it
  FAILED and ``--kill-on-invalid-dep`` cancels the dependent; a refresh keeps status.json's PREEMPTED.
- F3: a dependent cancelled by hand while it waited was "never started: the run it starts from did not complete ...;
  `arctl run` relaunches both" while its source ran on (and once it had completed). Now that reason is only for a
  source that ended without completing, and names it and how it ended.
- F5: `arctl cancel` of a waiting dependent left its "waiting for ..." phase in `status --json`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from submitit.core.job_environment import JobEnvironment
from submitit.core.utils import DelayedSubmission, JobPaths
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.control import cancel_runs
from arctl.launch.executors import MAX_REQUEUES
from arctl.launch.job import PREEMPTED_EXIT_CODE, RunJob
from arctl.launch.refresh import refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import mark_cancel_requested, read_status, write_status
from arctl.launch.workspace import Workspace
from arctl.track.phase import waiting_phase, write_phase

SOURCE = "e_a_s0_0123456789"
DEPENDENT = "e_b_s0_9876543210"
JOB_ENV = ("SUBMITIT_LOCAL_JOB_ID", "SUBMITIT_DEBUG_JOB_ID", "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID",
           "SLURM_ARRAY_TASK_ID", "SUBMITIT_EXECUTOR")


@pytest.fixture(autouse=True)
def _count_backend(monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.02")
    for key in JOB_ENV:  # (a test run from inside an allocation: none of its variables)
        monkeypatch.delenv(key, raising=False)


def _config(run_id: str, arm: str, steps: int = 3) -> dict:
    return {"experiment": "e", "arm": arm, "seed": 0, "backend": "tiny", "run_id": run_id,
            "trainer": {"total_steps": steps}, "wandb": {"mode": "disabled", "id": run_id}}


def _steps(run_dir: Path) -> int:
    path = run_dir / "steps.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _as_job_of(monkeypatch, executor: str) -> None:
    """The environment a job of ``executor`` sees (SLURM's: submitit's marker and SLURM's job id only; a local job
    started from a shell inside an allocation has SLURM's job id too)."""
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    if executor == "slurm":
        monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    else:
        monkeypatch.setenv("SUBMITIT_EXECUTOR", "local")
        monkeypatch.setenv("SUBMITIT_LOCAL_JOB_ID", "777")


# ---- F2: the job's exit ---------------------------------------------------------------------------------------


def test_a_slurm_job_stopped_by_a_bare_term_exits_75_after_saying_preempted(tmp_path, monkeypatch, waiter):
    """The job as SLURM runs it: submitit's entry (``python -m submitit.core._submit FOLDER``) in a SLURM job's
    environment, stopped by a TERM alone. Its exit code is the job's, which ``afterok`` reads."""
    run_dir = prepare_run_dir(tmp_path / "runs" / SOURCE, _config(SOURCE, "a", steps=30))
    gate = tmp_path / "go"  # the job pauses after step 2 until the stop: it is running when the TERM comes
    folder = tmp_path / "jobs" / "4242"
    folder.mkdir(parents=True)
    DelayedSubmission(RunJob(), str(run_dir)).dump(JobPaths(folder, job_id="4242", task_id=0).submitted_pickle)
    env = {k: v for k, v in os.environ.items() if k not in JOB_ENV}
    env.update(SUBMITIT_EXECUTOR="slurm", SLURM_JOB_ID="4242", SLURM_PROCID="0", ARCTL_TEST_GATE=str(gate),
               ARCTL_TEST_PAUSE_AFTER="2")
    proc = subprocess.Popen([sys.executable, "-u", "-m", "submitit.core._submit", str(folder)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiter(lambda: _steps(run_dir) >= 2, 60, "2 steps")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        gate.touch()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == PREEMPTED_EXIT_CODE, out + err
    status = read_status(run_dir)
    assert (status["state"], status["signal"]) == ("preempted", "SIGTERM")
    assert "exit code 75, not 0: the run did not complete, so SLURM records the job FAILED" in err
    assert "Traceback" not in err + out


def _under_submitit(run_dir: Path, submitit, stop=None):
    """``RunJob()(run_dir)`` in this process with ``submitit``'s bound ``handler`` as the requeue signal's handler
    (RunJob calls it to requeue), ``stop()`` beside it in a thread."""
    usr = JobEnvironment._usr_sig()
    before = signal.signal(usr, submitit.handler)
    thread = threading.Thread(target=stop) if stop else None
    if thread:
        thread.start()
    try:
        return RunJob()(str(run_dir))
    finally:
        if thread:
            thread.join()
        signal.signal(usr, before)


class _Submitit:
    """submitit's JobEnvironment as its bound checkpoint_and_try_requeue shows it: its handler records the call
    (the real one requeues the job and exits)."""

    def __init__(self, spent: bool = False):
        self.requeued: list[int] = []
        self._delayed = type("Delayed", (), {"_timeout_countdown": 0 if spent else MAX_REQUEUES})()

    def has_timed_out(self):
        return True

    def handler(self, signum, frame):
        self.requeued.append(signum)


def _signal_after_steps(run_dir: Path, waiter, *signals: int):
    def send():
        waiter(lambda: _steps(run_dir) >= 2, 60, "2 steps")
        for sig in signals:
            os.kill(os.getpid(), sig)
    return send


@pytest.mark.parametrize("executor", ["slurm", "local"])
def test_a_term_ends_a_slurm_job_non_zero_and_a_local_one_as_before(tmp_path, monkeypatch, waiter, executor):
    _as_job_of(monkeypatch, executor)
    run_dir = prepare_run_dir(tmp_path / "runs" / SOURCE, _config(SOURCE, "a", steps=400))
    submitit = _Submitit()
    stop = _signal_after_steps(run_dir, waiter, signal.SIGTERM)
    if executor == "slurm":
        with pytest.raises(SystemExit) as ended:
            _under_submitit(run_dir, submitit, stop)
        assert ended.value.code == PREEMPTED_EXIT_CODE
    else:
        assert _under_submitit(run_dir, submitit, stop) == "preempted"
    assert read_status(run_dir)["state"] == "preempted" and submitit.requeued == []


def test_a_slurm_job_whose_requeues_are_spent_exits_non_zero(tmp_path, monkeypatch, waiter):
    """The time limit after the last requeue: not requeued, preempted; no run that starts from it may start."""
    _as_job_of(monkeypatch, "slurm")
    run_dir = prepare_run_dir(tmp_path / "runs" / SOURCE, _config(SOURCE, "a", steps=400))
    submitit = _Submitit(spent=True)
    with pytest.raises(SystemExit) as ended:
        _under_submitit(run_dir, submitit, _signal_after_steps(run_dir, waiter, JobEnvironment._usr_sig()))
    assert ended.value.code == PREEMPTED_EXIT_CODE
    assert read_status(run_dir)["state"] == "preempted" and submitit.requeued == []


def test_a_requeued_slurm_job_is_requeued_as_before(tmp_path, monkeypatch, waiter):
    """The time limit's requeue goes through submitit's handler (which requeues and exits), unchanged."""
    _as_job_of(monkeypatch, "slurm")
    run_dir = prepare_run_dir(tmp_path / "runs" / SOURCE, _config(SOURCE, "a", steps=400))
    submitit = _Submitit()
    usr = JobEnvironment._usr_sig()
    assert _under_submitit(run_dir, submitit, _signal_after_steps(run_dir, waiter, usr)) == "preempted"
    assert submitit.requeued == [usr] and read_status(run_dir)["state"] == "requeued"


@pytest.mark.parametrize("executor", ["slurm", "local"])
def test_a_slurm_job_that_finds_a_cancel_as_it_starts_exits_non_zero(tmp_path, monkeypatch, executor):
    """`arctl cancel` asked before the job started (its scancel did not reach it): the job trains nothing, and under
    SLURM it must not satisfy ``afterok`` either."""
    _as_job_of(monkeypatch, executor)
    run_dir = prepare_run_dir(tmp_path / "runs" / SOURCE, _config(SOURCE, "a"))
    mark_cancel_requested(run_dir, time.time())
    if executor == "slurm":
        with pytest.raises(SystemExit) as ended:
            RunJob()(str(run_dir))
        assert ended.value.code == PREEMPTED_EXIT_CODE
    else:
        assert RunJob()(str(run_dir)) == "cancelled"
    assert read_status(run_dir)["state"] == "cancelled" and _steps(run_dir) == 0


# ---- F2, F3: what a refresh says of the chain -------------------------------------------------------------------


def _chain(tmp_path, monkeypatch, sacct: dict[str, str], source: str = states.RUNNING,
           source_status: str = "running", **shims: str) -> tuple[Workspace, Registry]:
    """Source job 101 (registry ``source``, status.json ``source_status``) and its dependent, job 102, PENDING and
    "waiting for" it, as the launch leaves them; sacct says ``sacct`` (job id -> state); squeue and the other SLURM
    programs fail, but those ``shims`` gives a body."""
    lines = "".join(f"{job}|{state}\\n" for job, state in sacct.items())
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=f"printf 'JobID|State\\n{lines}'\n", **shims)
    ws = Workspace(tmp_path / "ws")
    src_dir = prepare_run_dir(ws.run_dir(SOURCE), _config(SOURCE, "a"))
    dep_dir = prepare_run_dir(ws.run_dir(DEPENDENT), _config(DEPENDENT, "b"))
    write_status(src_dir, state=source_status, executor="slurm", job_id="101", started_at=1.0)
    write_status(dep_dir, state="submitted", executor="slurm", job_id="102")
    write_phase(dep_dir, waiting_phase(SOURCE))
    reg = Registry(ws.registry_path)
    reg.claim([RunRecord(run_id=SOURCE, experiment="e", arm="a", seed=0),
               RunRecord(run_id=DEPENDENT, experiment="e", arm="b", seed=0)], new_claim_token())
    now = time.time()
    reg.update(SOURCE, claim=None, before_claim=None, state=source, executor="slurm", job_id="101", started_at=1.0,
               submitted_at=now - 600, ended_at=now if source in states.TERMINAL else None)
    reg.update(DEPENDENT, claim=None, before_claim=None, state=states.PENDING, executor="slurm", job_id="102",
               submitted_at=now - 600, phase=waiting_phase(SOURCE))
    return ws, reg


def _relaunch(ws: Workspace) -> str:
    return f"`arctl run e --arm b --seeds 0 --workdir {ws.root}` (with the overrides it was launched with)"


def test_a_dependent_slurm_cancelled_after_its_source_was_preempted_names_it(tmp_path, monkeypatch):
    """F2's end: the source's job exited 75 (SLURM: FAILED) after status.json said preempted; SLURM cancelled the
    dependent (kill-on-invalid-dep). The source is PREEMPTED, not FAILED; the dependent never started, and says
    which run it waited for, how that one ended, and the command that relaunches both."""
    ws, reg = _chain(tmp_path, monkeypatch, {"101": "FAILED", "102": "CANCELLED by 0"}, source_status="preempted")
    with reg:
        recs = {r.run_id: r for r in refresh(reg, ws)}
    assert (recs[SOURCE].state, recs[SOURCE].error) == (states.PREEMPTED, None)
    dep = recs[DEPENDENT]
    assert dep.state == states.CANCELLED and dep.phase is None
    assert dep.error == (f"never started: the run it starts from did not complete (waiting for {SOURCE}, which ended "
                         f"PREEMPTED); {_relaunch(ws)} relaunches both")


def test_the_dependent_alone_is_told_by_its_source_as_it_is_now(tmp_path, monkeypatch):
    """`arctl logs DEPENDENT` refreshes that run alone: its source, RUNNING in the registry, has ended meanwhile
    (its job FAILED, status.json preempted); it is asked too, in the same sacct call, and recorded."""
    ws, reg = _chain(tmp_path, monkeypatch, {"101": "FAILED", "102": "CANCELLED by 0"}, source_status="preempted")
    with reg:
        [dep] = refresh(reg, ws, [reg.get(DEPENDENT)])
        assert reg.get(SOURCE).state == states.PREEMPTED
    assert dep.error.startswith(f"never started: the run it starts from did not complete (waiting for {SOURCE}, "
                                "which ended PREEMPTED); ")


def test_a_dependent_cancelled_as_its_source_saves_its_stop_checkpoint_never_started(tmp_path, monkeypatch):
    """A plain scancel (or `arctl cancel`) of the source: SLURM says CANCELLED at once and cancels the dependent,
    while the source, still saving its checkpoint, is RUNNING ("stopping") in arctl's view."""
    ws, reg = _chain(tmp_path, monkeypatch, {"101": "CANCELLED by 1000", "102": "CANCELLED by 0"},
                     source_status="stopping")
    with reg:
        recs = {r.run_id: r for r in refresh(reg, ws)}
    assert recs[SOURCE].state == states.RUNNING
    assert recs[DEPENDENT].error == (f"never started: the run it starts from did not complete (waiting for {SOURCE}, "
                                     f"which was stopped before it completed); {_relaunch(ws)} relaunches both")


@pytest.mark.parametrize("source", [states.RUNNING, states.PENDING, states.COMPLETED])
def test_a_dependent_cancelled_by_hand_while_its_source_goes_on_says_so_and_resumes_alone(tmp_path, monkeypatch,
                                                                                          source):
    """F3: `scancel DEPENDENT` while it waited; its source runs, waits or has completed. Not "the run it starts from
    did not complete", nor a relaunch of both: the source's state, and the command that submits this run again."""
    sacct = {"102": "CANCELLED by 1000"}
    if source != states.COMPLETED:
        sacct["101"] = source
    ws, reg = _chain(tmp_path, monkeypatch, sacct, source=source,
                     source_status="completed" if source == states.COMPLETED else "running")
    with reg:
        recs = {r.run_id: r for r in refresh(reg, ws)}
        assert reg.get(DEPENDENT).error == recs[DEPENDENT].error
    dep = recs[DEPENDENT]
    assert recs[SOURCE].state == source
    assert (dep.state, dep.phase) == (states.CANCELLED, None)
    assert dep.error == (f"cancelled while it waited for {SOURCE} ({source}), before it started; "
                         f"`arctl resume {DEPENDENT} --workdir {ws.root}` submits it again")


# ---- F5: `arctl cancel` of a waiting dependent ------------------------------------------------------------------


def test_cancel_of_a_waiting_dependent_clears_its_waiting_phase(tmp_path, monkeypatch):
    """From the hunt: `status --json` of the CANCELLED run still said "waiting for <source>" (a script reading the
    phase saw a waiting run); the table hid it."""
    ws, reg = _chain(tmp_path, monkeypatch, {"101": "RUNNING", "102": "PENDING"}, scancel="exit 0\n")
    with reg:
        [(rec, said)] = cancel_runs(reg, ws, [reg.get(DEPENDENT)])
        row = reg.get(DEPENDENT)
    assert said == "cancelled (job 102)"
    assert (row.state, row.phase) == (states.CANCELLED, None) and rec.phase is None
    res = CliRunner().invoke(app, ["status", DEPENDENT, "--workdir", str(ws.root), "--json"])
    [shown] = json.loads(res.stdout)
    assert (shown["state"], shown["phase"]) == ("CANCELLED", None)


def test_without_accounting_every_waiting_run_whose_job_left_the_queue_has_ended(tmp_path, monkeypatch):
    """No sacct: squeue's view, where a job that left the queue has ended. Two runs waited for the same source, both
    jobs gone: each is judged ended, the second as the first (the reason of the first must not change how the
    next one's job is read)."""
    user = "$(id -un)"
    squeue = ('case "$*" in *"-t all"*) printf "101|RUNNING|None|%s|e\\n" "' + user + '";; '
              '*) printf "101|RUNNING\\n";; esac\n')
    ws, reg = _chain(tmp_path, monkeypatch, {}, squeue=squeue)
    (tmp_path / "bin" / "sacct").write_text("#!/bin/sh\nexit 1\n")  # no accounting
    other = "e_c_s0_5555555555"
    prepare_run_dir(ws.run_dir(other), _config(other, "c"))
    write_status(ws.run_dir(other), state="submitted", executor="slurm", job_id="103")
    write_phase(ws.run_dir(other), waiting_phase(SOURCE))
    with reg:
        reg.claim([RunRecord(run_id=other, experiment="e", arm="c", seed=0)], new_claim_token())
        reg.update(other, claim=None, before_claim=None, state=states.PENDING, executor="slurm", job_id="103",
                   submitted_at=time.time() - 600, phase=waiting_phase(SOURCE))
        recs = {r.run_id: r for r in refresh(reg, ws)}
    assert recs[SOURCE].state == states.RUNNING
    assert (recs[DEPENDENT].state, recs[other].state) == (states.FAILED, states.FAILED)
