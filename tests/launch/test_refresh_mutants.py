"""What a refresh (`arctl status`, `arctl logs`, and the launch and cancel that ask it) finds of runs in states no
other test had it see: the state shown, its reason, and whether `arctl resume` takes the run.

From the mutation hunt of arctl/launch/refresh.py (HEAD 825943f): each test names, in its docstring, the mutant it
kills, which every other test of the launch layer let through (a zombie job process taken for alive, a dead
launch's claim left SUBMITTING for good, a live run given a resume step, a time limit during the stop checkpoint
that said nothing, ...)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from dead_launch import dead_claim_token  # tests/support/dead_launch.py
from pids import unused_pid  # tests/support/pids.py

from arctl.launch import states
from arctl.launch.refresh import STOPPING, refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace
from arctl.track.phase import queued_phase, waiting_phase, write_phase

RUN = "r0"


def _slurm_run(tmp_path, monkeypatch, sacct: str | None, reported: str, squeue: str = "", age_s: float = 3600.0,
               cancel_requested: float | None = None, submitted_ago: float = 3600.0,
               state: str = states.RUNNING) -> Workspace:
    """Run r0 ``state`` (RUNNING) as SLURM job 7_0, submitted ``submitted_ago`` seconds ago, its status.json ``reported``
    (written ``age_s`` ago); sacct says the job is ``sacct`` (None: there is no accounting, sacct fails), squeue
    lists ``squeue`` (its lines: "7_0|STATE|REASON"); ``cancel_requested``: when `arctl cancel` asked it to stop."""
    accounting = {} if sacct is None else {"sacct": f"printf 'JobID|State\\n7_0|{sacct}\\n'\n"}
    slurm_shims.use(tmp_path / "bin", monkeypatch, squeue=f"printf '{squeue}'\n", **accounting)
    ws = Workspace(tmp_path / "ws")
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN, state=state, executor="slurm", job_id="7_0", submitted_at=now - submitted_ago,
                   started_at=now - min(submitted_ago, 3500), claim=None, before_claim=None,
                   cancel_requested=cancel_requested)
    ws.run_dir(RUN).mkdir(parents=True)
    write_status(ws.run_dir(RUN), state=reported, started_at=now - 3500)
    path = ws.run_dir(RUN) / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": now - age_s}))
    return ws


def _shown(ws: Workspace) -> RunRecord:
    """The run as one refresh (`arctl status`) shows it, and as it kept it (`arctl status --no-refresh`)."""
    with Registry(ws.registry_path) as reg:
        [row] = refresh(reg, ws)
    with Registry(ws.registry_path) as again:
        kept = again.get(RUN)
    assert (kept.state, kept.error) == (row.state, row.error)
    return row


def test_a_time_limit_that_ended_the_stop_checkpoint_says_so(tmp_path, monkeypatch):
    """SLURM's time limit (TIMEOUT) ended a job whose status.json said "stopping" (it had started its stop checkpoint
    at SLURM's warning and did not finish): the run is PREEMPTED (resumable) and its reason says the warning was too
    short and which setting gives it longer. Mutant: only a "running" job's TIMEOUT said so; this one showed no
    reason."""
    ws = _slurm_run(tmp_path, monkeypatch, sacct="TIMEOUT", reported="stopping")
    row = _shown(ws)
    assert row.state == states.PREEMPTED
    assert (row.error or "").startswith("SLURM's time limit ended job 7_0 before it saved its stop checkpoint (TIMEOUT)")
    assert "cluster.preempt_warning_s" in row.error


def test_without_accounting_a_job_just_submitted_is_not_failed_before_squeue_lists_it(tmp_path, monkeypatch):
    """No accounting: a job submitted a moment ago may not be in squeue's answer yet (GRACE_S). `arctl status` right
    after `arctl sweep` shows the run as it was submitted, not FAILED (mutant: no grace, FAILED "died without
    reporting", and the sweep's next launch submits a second job for it)."""
    ws = _slurm_run(tmp_path, monkeypatch, sacct=None, reported="submitted", submitted_ago=1.0)
    row = _shown(ws)
    assert (row.state, row.error) == (states.RUNNING, None)


def _local_run(tmp_path, job_id: str, reported: str, cancel_requested: float | None = None, **status) -> Workspace:
    """Run r0 RUNNING as local job ``job_id`` (a pid, or "queue:<pid>"), submitted 5 s ago, its status.json
    ``reported`` (with ``status``'s other fields)."""
    ws = Workspace(tmp_path / "ws")
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN, state=states.RUNNING, executor="local", job_id=job_id, submitted_at=now - 5,
                   claim=None, before_claim=None, cancel_requested=cancel_requested)
    ws.run_dir(RUN).mkdir(parents=True)
    write_status(ws.run_dir(RUN), state=reported, executor="local", job_id=job_id, host=socket.gethostname(),
                 **status)
    return ws


def test_a_local_run_cancelled_before_its_job_started_says_nothing_ran(tmp_path):
    """`arctl cancel` of a local run whose job had not started (status.json still "submitted", the process gone): the
    run is CANCELLED with no reason, since nothing trained. Mutant (that case dropped): its reason said "stopped
    before its checkpoint was saved; `arctl resume` resumes from the last one", of a run that never started."""
    ws = _local_run(tmp_path, str(unused_pid()), "submitted", cancel_requested=time.time() - 5)
    row = _shown(ws)
    assert (row.state, row.error) == (states.CANCELLED, None)


def test_a_run_the_local_queue_gave_up_without_saying_why_says_the_queue_stopped(tmp_path):
    """A local run waiting in the local queue, whose queue process is gone and whose status.json says "failed" with no
    error: FAILED, and the reason says the local queue stopped before starting it. Mutant (the queue's own word
    taken without an error): the reason shown was "None"."""
    ws = _local_run(tmp_path, f"queue:{unused_pid()}", "failed")
    row = _shown(ws)
    assert (row.state, row.error) == (states.FAILED, "the local queue stopped before starting this run")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_local_job_whose_process_is_a_zombie_has_died(tmp_path):
    """The process of local run r0's job has exited but its parent has not reaped it yet (a zombie: still in the
    process table, /proc still lists it): the job is dead, and with status.json still "running" the run is FAILED,
    "died without reporting", which `arctl resume` resumes. Mutant (``split(") ")[-2]``: the zombie check read the
    wrong field): RUNNING for as long as the parent lives, and `arctl resume` skipped it."""
    proc = subprocess.Popen(["true"])  # never waited for until the end: a zombie once it exits
    try:
        stat = Path(f"/proc/{proc.pid}/stat")
        while stat.read_text().split(") ")[-1][0] != "Z":  # (exits at once; no time is asserted)
            time.sleep(0.01)
        ws = _local_run(tmp_path, str(proc.pid), "running", started_at=time.time() - 5)
        row = _shown(ws)
    finally:
        proc.wait()
    assert row.state == states.FAILED
    assert (row.error or "").startswith("the job process died without reporting (killed?); `arctl resume r0")


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_a_live_local_job_that_requeued_itself_is_pending_until_its_next_attempt_reports(tmp_path):
    """Local run r0's job process (its submitit controller: "submitit" and the run's job folder on its command line)
    lives, and the job's status.json says "requeued" (it stopped at a preemption signal and submitit starts it
    again): `arctl status` shows PENDING, waiting for its next attempt, as for a SLURM job SLURM requeues.
    Mutant (``PENDING if reported == "requeued"`` dropped): RUNNING."""
    ws = _local_run(tmp_path, "0", "requeued", started_at=time.time() - 5)  # (the job id is set below)
    job_folder = ws.run_dir(RUN).absolute() / "job" / "%j"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "submitit.local._local",
                             str(job_folder)])
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        while b"submitit.local._local" not in cmdline.read_bytes():  # right after the fork: this process's own
            time.sleep(0.01)
        with Registry(ws.registry_path) as reg:
            reg.update(RUN, job_id=str(proc.pid))
        write_status(ws.run_dir(RUN), job_id=str(proc.pid))
        row = _shown(ws)
    finally:
        proc.kill()
        proc.wait()
    assert (row.state, row.error) == (states.PENDING, None)


def test_a_run_the_user_cancelled_is_not_made_active_again_by_its_job_still_listed(tmp_path, monkeypatch):
    """`arctl cancel` of a pending SLURM run records it CANCELLED at once; squeue may still list its job as pending
    (the controller has not processed the scancel yet). A launch or a cancel right after (`arctl resume r0`) asks
    squeue whether an ended run's job came back (a requeue): a run the user cancelled stays CANCELLED, so the resume
    submits it. Mutant (``not r.cancel_requested`` dropped): made PENDING again, and the resume skipped it as
    active."""
    import getpass

    from arctl.launch.refresh import revive_requeued

    slurm_shims.use(tmp_path / "bin", monkeypatch, squeue=f"printf '101_0|PENDING|{getpass.getuser()}|e\\n'\n",
                    sacct="printf 'JobID|State\\n101_0|PENDING\\n'\n")
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN).mkdir(parents=True)
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN, state=states.CANCELLED, executor="slurm", job_id="101_0", claim=None, before_claim=None,
                   cancel_requested=now - 1, ended_at=now - 1)
        (row,) = revive_requeued(reg, [reg.get(RUN)])
        assert row.state == states.CANCELLED
        assert reg.get(RUN).state == states.CANCELLED


def test_a_killed_job_whose_node_clock_ran_ahead_did_not_end_in_the_future(tmp_path, monkeypatch):
    """The node of run r0's job is an hour ahead of this host's clock: its status.json's last write says an hour from
    now. The node failed (NODE_FAIL) and the job wrote no end: the end the refresh records is its last sign of life,
    never later than now (`arctl status` would show an elapsed time an hour too long, and an end still to come).
    Mutant (``min(now, ...)`` dropped): the end was an hour from now."""
    ws = _slurm_run(tmp_path, monkeypatch, sacct="NODE_FAIL", reported="running", age_s=-3600.0)
    row = _shown(ws)
    assert row.state == states.FAILED
    assert row.ended_at is not None and row.ended_at <= time.time()


def test_a_failed_runs_resume_whose_launch_died_before_sbatch_shows_it_failed_again(tmp_path):
    """`arctl resume r0` of a FAILED run died (killed) after it claimed the run and before it submitted anything: the
    next `arctl status` undoes the dead launch's claim, and shows the run FAILED with its error, as before the resume
    (which a resume then takes again). Mutant (the take-over's ``unclaim`` dropped): the run stayed SUBMITTING, under
    the status command's own claim, for good."""
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN).mkdir(parents=True)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN, state=states.FAILED, executor="slurm", job_id="40", error="OOM", claim=None, before_claim=None,
                   ended_at=time.time() - 600)
        reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0)], dead_claim_token())
        assert reg.get(RUN).state == states.SUBMITTING
    write_status(ws.run_dir(RUN), state="submitted", error=None)
    with Registry(ws.registry_path) as reg:
        [row] = refresh(reg, ws)
    with Registry(ws.registry_path) as again:
        kept = again.get(RUN)
    assert (row.state, row.error, row.claim) == (states.FAILED, "OOM", None)
    assert (kept.state, kept.error, kept.claim) == (states.FAILED, "OOM", None)


def test_a_job_saving_its_stop_checkpoint_for_minutes_stays_active_after_slurm_says_cancelled(tmp_path, monkeypatch):
    """SLURM says CANCELLED (its word comes as scancel signals the job) of a job whose status.json said "stopping"
    two minutes ago. SLURM lets a signalled job run until KillWait (a site's setting; a preemption's GraceTime), and a
    refresh takes a job that says it saves its stop checkpoint for alive up to STOP_TIMEOUT_S (15 min) since it last
    wrote: the run stays RUNNING, "stopping: saving its checkpoint", so `arctl resume` and a sweep start no second
    attempt beside it. Mutant (STOP_TIMEOUT_S 900 -> 90): CANCELLED "stopped before its checkpoint was saved"."""
    ws = _slurm_run(tmp_path, monkeypatch, sacct="CANCELLED by 1000", reported="stopping", age_s=120.0)
    row = _shown(ws)
    assert (row.state, row.phase, row.error) == (states.RUNNING, STOPPING, None)


def test_a_queued_run_cancelled_before_its_slot_came_shows_no_queued_phase(tmp_path, monkeypatch):
    """A sweep's run waiting for a slot (phase "queued behind <run>'s job (cluster.array_parallelism)") whose job
    SLURM says CANCELLED (a `scancel` by hand) before it started: CANCELLED, and `arctl status` no longer says it is
    queued behind another job (`--json`'s phase None). Mutant (that phase kept): a CANCELLED run "queued behind
    ...", as if it would still start."""
    ws = _slurm_run(tmp_path, monkeypatch, sacct="CANCELLED by 1000", reported="submitted", state=states.PENDING)
    write_phase(ws.run_dir(RUN), queued_phase("r9"))
    row = _shown(ws)
    assert (row.state, row.phase) == (states.CANCELLED, None)
    with Registry(ws.registry_path) as again:
        assert again.get(RUN).phase is None


def test_a_live_run_is_not_told_the_step_it_would_resume_from(tmp_path, monkeypatch):
    """Run r0's SLURM job trains (sacct and squeue: RUNNING), at step 9 with its newest checkpoint at 8. A refresh
    records the step a run resumes from only for a job it found dead (its next attempt's start); `arctl status` of the
    live run shows step 9, not "9 (resumes from 8)", and its status.json (the job's own file) is not written. Mutant
    (``and`` -> ``or`` in the dead-job test): every refreshed run's status.json got a resume step."""
    from arctl.backends.verl.rehearsal import save_checkpoint
    from arctl.launch.rundir import prepare_run_dir
    from arctl.launch.status_file import read_status

    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct="printf 'JobID|State\\n101|RUNNING\\n'\n",
                    squeue="printf '101|RUNNING|None\\n'\n")
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "verl", "run_id": RUN, "scale": "tiny",
              "trainer": {"total_steps": 12}, "wandb": {"mode": "disabled", "id": RUN}, "cluster": {"mem_gb": 4}}
    run_dir = prepare_run_dir(ws.run_dir(RUN), config)
    save_checkpoint(run_dir / "checkpoints", 8)
    now = time.time()
    write_status(run_dir, state="running", job_id="101", executor="slurm", host=socket.gethostname(),
                 started_at=now - 600, step=9, attempt=1)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0, scale="tiny")], new_claim_token())
        reg.update(RUN, claim=None, before_claim=None, state=states.RUNNING, executor="slurm", job_id="101",
                   submitted_at=now - 700, started_at=now - 600, step=9)
    before = (run_dir / "status.json").read_text()
    row = _shown(ws)
    assert (row.state, row.step) == (states.RUNNING, 9)
    assert read_status(run_dir).get("resume_step") is None
    assert (run_dir / "status.json").read_text() == before


def test_a_dependent_cancelled_as_its_source_was_scancelled_by_hand_never_started(tmp_path, monkeypatch):
    """`scancel 101` by hand of source run s0's job: SLURM says CANCELLED at once and cancels run d0, which waited for
    s0 (kill-on-invalid-dep). s0's status.json still says "running" (written a moment ago: the TERM has not reached
    it), so it stays RUNNING for TERM_GRACE_S; d0 never started because s0 will not complete, and its reason says
    to relaunch both. Mutant (``rec.executor != "slurm"``: SLURM's word for the source not asked): d0 said it was
    cancelled while s0 went on and that `arctl resume d0` submits it again, which would wait on a cancelled job."""
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sacct="printf 'JobID|State\\n101|CANCELLED by 1000\\n102|CANCELLED by 0\\n'\n",
                    squeue="printf ''\n")
    ws = Workspace(tmp_path / "ws")
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="s0", experiment="e", arm="a", seed=0),
                   RunRecord(run_id="d0", experiment="e", arm="b", seed=0)], new_claim_token())
        for run, job, state in (("s0", "101", states.RUNNING), ("d0", "102", states.PENDING)):
            ws.run_dir(run).mkdir(parents=True)
            reg.update(run, claim=None, before_claim=None, state=state, executor="slurm", job_id=job,
                       submitted_at=now - 600)
    write_status(ws.run_dir("s0"), state="running", executor="slurm", job_id="101", started_at=now - 500)
    write_status(ws.run_dir("d0"), state="submitted", executor="slurm", job_id="102")
    write_phase(ws.run_dir("d0"), waiting_phase("s0"))
    with Registry(ws.registry_path) as reg:
        rows = {r.run_id: r for r in refresh(reg, ws)}
    assert rows["s0"].state == states.RUNNING
    assert rows["d0"].state == states.CANCELLED
    assert (rows["d0"].error or "").startswith("never started: the run it starts from did not complete (waiting for "
                                               "s0, which was stopped before it completed); `arctl run e --arm b")


def test_status_while_another_process_holds_the_registry_shows_the_states_found_unsaved(tmp_path, monkeypatch):
    """Another process holds the registry's write lock (a long launch transaction) while `arctl status` refreshes a
    run whose job has ended: the reading refresh waits a few seconds (READ_WRITE_WAIT_S), then shows the state it
    found, unsaved, and says why (``registry.unsaved``), as for a full disk. Mutant (only "full" and "readonly"
    fall back): `arctl status` failed with the lock's error and showed nothing."""
    import sqlite3

    from arctl.launch import registry as registry_module

    monkeypatch.setattr(registry_module, "READ_WRITE_WAIT_S", 0.2)
    ws = _slurm_run(tmp_path, monkeypatch, sacct="NODE_FAIL", reported="running")
    holder = sqlite3.connect(ws.registry_path, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Registry(ws.registry_path) as reg:
            [row] = refresh(reg, ws, reading=True)
            assert reg.unsaved
    finally:
        holder.rollback()
        holder.close()
    assert row.state == states.FAILED
    with Registry(ws.registry_path) as again:
        assert again.get(RUN).state == states.RUNNING  # found, not saved


@pytest.mark.parametrize(("word", "state", "error"), [
    ("NODE_FAIL", states.FAILED, "the node running job 7_0 failed (NODE_FAIL)"),
    ("BOOT_FAIL", states.FAILED, "the node given job 7_0 failed to boot (BOOT_FAIL)"),
    ("CANCELLED by 0", states.RUNNING, None),
    ("PREEMPTED", states.RUNNING, None),
    ("TIMEOUT", states.RUNNING, None),
])
def test_a_job_that_ended_while_it_saved_its_stop_checkpoint(tmp_path, monkeypatch, word, state, error):
    """Run r0's job, whose status.json said "stopping" a minute ago, as SLURM says it ended. NODE_FAIL, BOOT_FAIL: the
    node, and the checkpoint being saved there, are gone: FAILED, which `arctl resume` resumes from the last complete
    checkpoint (before: RUNNING, "stopping: saving its checkpoint", and resume refused, for 15 min). A job SLURM
    signalled and lets run until KillWait (scancel, a preemption, the time limit) is still saving it: RUNNING."""
    slurm_shims.use(tmp_path / "bin", monkeypatch, sacct=f"printf 'JobID|State\\n7_0|{word}\\n'\n", squeue="printf ''\n")
    ws = Workspace(tmp_path / "ws")
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("r0", state=states.RUNNING, executor="slurm", job_id="7_0", submitted_at=now - 3600,
                   started_at=now - 3500, claim=None, before_claim=None)
    ws.run_dir("r0").mkdir(parents=True)
    write_status(ws.run_dir("r0"), state="stopping", started_at=now - 3500)
    path = ws.run_dir("r0") / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": now - 60}))
    with Registry(ws.registry_path) as reg:
        [row] = refresh(reg, ws)
    assert row.state == state
    if error:
        assert (row.error or "").startswith(error), row.error
