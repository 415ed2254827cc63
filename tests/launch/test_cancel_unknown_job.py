"""`arctl cancel` of a SLURM run whose job this SLURM does not know ("Invalid job id specified"), and what
`arctl cancel --now` says of the step a killed run resumes from.

From the third mutation hunt of the launch layer: no test reached the branch that leaves such a run as it is
while its folder still changes (it may train on another cluster). Swapping the arguments of its outcome
(an AttributeError: `arctl cancel` stopped working) or taking its silence for noise (the run recorded
CANCELLED, and a sweep relaunched it beside the job that still trained) passed every cancel test. Nor did any
test kill a run before its first checkpoint: "resumes from step 0" passed where "starts it over" is said."""

from __future__ import annotations

import os
import socket
import time

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.backends.verl.rehearsal import save_checkpoint as verl_save
from arctl.launch import states
from arctl.launch.control import NOT_CANCELLED, STOPPED_AT_ONCE, cancel_runs
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import CANCEL_FILE, read_status, write_status
from arctl.launch.workspace import Workspace, workdir_arg

RUN = "e_a_s0_0123456789"
JOB = "7_0"
UNKNOWN = f"scancel: error: Kill job error on job id {JOB}: Invalid job id specified"
TWO_HOURS = 2 * 3600.0


def _slurm_run(tmp_path, reported: str = "running", saved: int | None = None) -> tuple[Workspace, Registry]:
    """Run RUN (a verl run, whose backend reads its checkpoints) RUNNING as SLURM job JOB, its status.json
    ``reported`` as its job wrote it just now; a checkpoint of step ``saved`` where given."""
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "verl", "run_id": RUN, "scale": "tiny",
              "trainer": {"total_steps": 12}, "wandb": {"mode": "disabled", "id": RUN},
              "cluster": {"mem_gb": 4, "time_min": 60}}
    run_dir = prepare_run_dir(ws.run_dir(RUN), config)
    if saved is not None:
        verl_save(run_dir / "checkpoints", saved)
    write_status(run_dir, state=reported, job_id=JOB, executor="slurm", host=socket.gethostname(),
                 started_at=time.time() - 600, step=3, attempt=1)
    reg = Registry(ws.registry_path)
    reg.claim([RunRecord(run_id=RUN, experiment="e", arm="a", seed=0, scale="tiny")], new_claim_token())
    reg.update(RUN, claim=None, before_claim=None, state=states.RUNNING, executor="slurm", job_id=JOB,
               submitted_at=time.time() - 900, started_at=time.time() - 600, step=3)
    return ws, reg


def _age_folder(ws: Workspace, seconds: float) -> None:
    """Every file and folder of the run's folder last changed ``seconds`` ago (a job killed without a word)."""
    then = time.time() - seconds
    for root, dirs, files in os.walk(ws.run_dir(RUN)):
        for name in [*files, *dirs]:
            os.utime(os.path.join(root, name), (then, then), follow_symlinks=False)


def _cancel(ws: Workspace, reg: Registry, **how) -> str:
    with reg:
        [(_, said)] = cancel_runs(reg, ws, [reg.get(RUN)], **how)
    return said


@pytest.fixture
def unknown_job(tmp_path, monkeypatch):
    """SLURM here does not have job JOB: scancel says so, squeue and sacct know nothing of it."""
    slurm_shims.use(tmp_path / "bin", monkeypatch, scancel=f"echo '{UNKNOWN}' >&2\nexit 1\n",
                    squeue="exit 0\n", sacct="printf 'JobID|State\\n'\n")


def test_a_run_whose_unknown_job_wrote_lately_is_not_cancelled_and_says_why(tmp_path, unknown_job):
    ws, reg = _slurm_run(tmp_path)
    said = _cancel(ws, reg)
    assert said.startswith(f"{NOT_CANCELLED}: SLURM here does not have its job {JOB}, and its folder or logs "
                           "changed within the last 60 min"), said
    assert "or now with --force" in said
    with Registry(ws.registry_path) as again:
        row = again.get(RUN)
    assert (row.state, row.job_id, row.cancel_requested, row.ended_at) == (states.RUNNING, JOB, None, None)
    assert not (ws.run_dir(RUN) / CANCEL_FILE).exists()  # the request withdrawn: its job is not told to stop
    assert read_status(ws.run_dir(RUN))["state"] == "running"


@pytest.mark.parametrize("how", ["silent for two hours", "--force", "never started"])
def test_a_run_whose_unknown_job_is_long_silent_or_forced_or_never_started_is_cancelled(tmp_path, unknown_job, how):
    ws, reg = _slurm_run(tmp_path, reported="submitted" if how == "never started" else "running")
    if how == "silent for two hours":
        _age_folder(ws, TWO_HOURS)
    said = _cancel(ws, reg, force=how == "--force")
    assert said == f"cancelled (job {JOB})"
    with Registry(ws.registry_path) as again:
        row = again.get(RUN)
    assert row.state == states.CANCELLED and row.ended_at is not None
    assert read_status(ws.run_dir(RUN))["state"] == "cancelled"  # the folder says what the registry does


def test_the_cancels_own_request_is_no_sign_of_life(tmp_path, unknown_job):
    """A folder silent for an hour and a minute but for the request this cancel wrote into it before its scancel."""
    ws, reg = _slurm_run(tmp_path)
    _age_folder(ws, 3660)
    assert _cancel(ws, reg) == f"cancelled (job {JOB})"


@pytest.mark.parametrize(("saved", "resumes"), [
    (None, "starts it over (it has no checkpoint yet)"),
    (8, "resumes from step 8"),
])
def test_cancel_now_says_from_where_the_killed_run_resumes(tmp_path, monkeypatch, saved, resumes):
    calls = tmp_path / "calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, scancel=f'echo scancel "$@" >> {calls}\nexit 0\n')
    ws, reg = _slurm_run(tmp_path, saved=saved)
    said = _cancel(ws, reg, now=True)
    assert calls.read_text().splitlines() == [f"scancel {JOB}", f"scancel --signal=KILL --full {JOB}"]
    assert said == (f"{STOPPED_AT_ONCE} (job {JOB} killed): its checkpoint was not saved; "
                    f"`arctl resume {RUN}{workdir_arg(ws.root)}` {resumes}")
