"""Preemption of a verl run on the real local SLURM, through the production job body (Ray head,
batch-shell job runner, job entry, verl backend ``train``), with the CPU rehearsal trainer
(``verl.rehearsal_steps``) standing in for verl's ``run_ppo``: USR1 arrives in the middle of a long
step whose grace (half of ``cluster.preempt_warning_s``) is shorter than the step -> the step is
abandoned, the last checkpoint kept, the job requeued by SLURM, and the next attempt resumes at the
last saved step with the same W&B run id."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
import rehearsal_progress  # tests/support/rehearsal_progress.py
from extras import NO_VERL, verl_missing  # tests/support/extras.py

from arctl.launch.status_file import read_status

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.verl, pytest.mark.usefixtures("slurm_cluster")]

if verl_missing():
    pytest.skip(NO_VERL, allow_module_level=True)

EXPERIMENT = textwrap.dedent(
    """\
    description: verl rehearsal preempted on SLURM
    groups: {model: r1-distill-qwen-1.5b}
    seeds: [0]
    overrides:
      - verl.rehearsal_steps=4
      - verl.rehearsal_step_s=6
      - trainer.save_freq=2
      - wandb.mode=offline
      - cluster.cpus_per_task=2
      - cluster.mem_gb=4
      - cluster.time_min=10
      - cluster.preempt_warning_s=2
      - "verl.ray_start_args=['--object-store-memory=100000000','--include-dashboard=false']"
    arms:
      ar: [algo=anytime, prior=uniform]
    """
)


def test_usr1_mid_step_abandons_it_requeues_and_resumes_at_the_last_checkpoint(tmp_path, monkeypatch, cli, waiter, statuses):
    specs = tmp_path / "specs"
    (specs / "experiments").mkdir(parents=True)
    (specs / "experiments" / "vpre.yaml").write_text(EXPERIMENT)
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)  # the real verl backend runs
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("ARCTL_RAY_HEAD_WAIT_S", "1")
    ws = tmp_path / "ws"

    out = cli("run", "vpre", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])
    assert "#SBATCH --signal=B:USR1@2" in (run_dir / "job" / "sbatch.sh").read_text()

    # step 3 has just started (steps 1-2 done, checkpoint at 2): warn the job now
    waiter(lambda: rehearsal_progress.running(run_dir, 3), 180, "rehearsal step 3 to start")
    subprocess.run(["scancel", "--signal=USR1", "--batch", run["job_id"]], check=True)
    waiter(lambda: read_status(run_dir).get("attempt") == 2, 120, "the requeued attempt to start")

    def done():
        (record,) = statuses(ws)
        return record["state"] in ("COMPLETED", "FAILED") and record

    record = waiter(done, 180, "the requeued job to finish")
    if record["state"] != "COMPLETED":
        pytest.fail(f"{record['state']}: {record['error']}\n{cli('logs', run['run_id'], '--workdir', str(ws)).stdout[-3000:]}")
    assert record["job_id"] == run["job_id"]  # requeued by SLURM, not resubmitted
    progress = rehearsal_progress.progress(run_dir)
    assert progress["resumed_from"] == 2  # step 3 was abandoned: the attempt resumed at the last checkpoint
    ckpt = run_dir / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "4"
    logs = cli("logs", run["run_id"], "--workdir", str(ws), "--tail", "0").stdout
    assert "abandoning it" in logs and "resumes from its last checkpoint" in logs
    # the requeue's TERM stopped the job's Ray at once: Ray 2.60 logs this line when it drains its node
    # on SIGTERM instead (up to 30 s, until SLURM's KillWait sent SIGKILL)
    assert "Draining for up to" not in logs

    from arctl.track.wandbfile import read_wandb_file

    files = sorted({p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")}, key=lambda p: p.stat().st_mtime)
    assert len(files) == 2  # one fragment per attempt
    fragments = [read_wandb_file(f) for f in files]
    assert {f.wandb_id for f in fragments} == {record["wandb_id"]}
    assert [[int(s) for s in f.column("trainer/global_step")] for f in fragments] == [[1, 2], [3, 4]]
