"""Real tiny training on the real local SLURM: a job stopped by TERM (what ``scancel`` and most
clusters send; SLURM signals every process of the job step, the W&B service included) or killed
with SIGKILL resumes with the same run and W&B ids, and the synced W&B history (read by the
independent reader, tests/support/wandb_reference.py) holds every step exactly once. An offline run's job
sees no WANDB_API_KEY (nor HF_TOKEN, a secret no run names in cluster.secrets), and neither is in any file of
the workspace or of SLURM's state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from micro import MICRO
from wandb_reference import synced_history

from arctl.launch.status_file import read_status

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("slurm_cluster")]

TOTAL = 24
ARGS = [o for o in MICRO if not o.startswith(("trainer.total_steps", "trainer.save_freq", "trainer.test_freq"))] + [
    f"trainer.total_steps={TOTAL}", "trainer.save_freq=5", "trainer.test_freq=8", "wandb.mode=offline",
    "cluster.cpus_per_task=1", "cluster.mem_gb=2", "cluster.time_min=15", "tiny.threads=1",
]


@pytest.fixture
def project(monkeypatch):
    """The project's own experiments and the real tiny backend."""
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    monkeypatch.delenv("ARCTL_HOME", raising=False)


def _steps(run_dir: Path) -> list[int]:
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line)["trainer/global_step"])
        except (ValueError, KeyError):
            pass
    return out


def _record(statuses, ws: Path, run_id: str) -> dict:
    (record,) = statuses(ws, run_id)  # in-process: a waiting test's polls (tests/launch/conftest.py)
    return record


def _state_dir() -> Path:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("StateSaveLocation"):
            return Path(line.split("=", 1)[1].strip())
    raise AssertionError("scontrol show config has no StateSaveLocation")


def _launch(cli, ws: Path) -> tuple[dict, Path]:
    out = cli("run", "main-ar-uniform", *ARGS, "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    return run, Path(run["run_dir"])


def _finish_and_check_history(cli, ws: Path, run: dict, run_dir: Path, waiter, statuses) -> None:
    out = cli("resume", run["run_id"], "--workdir", str(ws), "--json", check=True)
    assert [r["run_id"] for r in json.loads(out.stdout)["submitted"]] == [run["run_id"]]
    record = waiter(lambda: (r := _record(statuses, ws, run["run_id"]))["state"] in ("COMPLETED", "FAILED") and r,
                    300, "the resumed run to finish")
    assert record["state"] == "COMPLETED", cli("logs", run["run_id"], "--workdir", str(ws)).stdout[-3000:]
    assert _steps(run_dir) == list(range(TOTAL + 1))
    ids, rows = synced_history(run_dir)
    assert ids == {record["wandb_id"]}  # one W&B run across the attempts
    assert [r["trainer/global_step"] for r in rows] == list(range(TOTAL + 1))  # every step exactly once
    assert len({p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")}) >= 2


def test_term_mid_run_checkpoints_marks_preempted_and_the_resume_keeps_every_step_once(project, tmp_path, cli,
                                                                                    waiter, monkeypatch, statuses):
    key = "planted" + "0123456789abcdef" * 2 + "term"
    hf = "hf_planted" + "fedcba9876543210" * 2  # another secret of the shell: no run names it in cluster.secrets
    monkeypatch.setenv("WANDB_API_KEY", key)
    monkeypatch.setenv("HF_TOKEN", hf)
    ws = tmp_path / "ws"
    run, run_dir = _launch(cli, ws)
    waiter(lambda: len(_steps(run_dir)) >= 4, 300, "step 3")
    pid = read_status(run_dir)["pid"]
    environ = Path(f"/proc/{pid}/environ").read_bytes()  # the job's own environment, while it runs
    assert b"WANDB_API_KEY" not in environ and key.encode() not in environ
    assert b"HF_TOKEN" not in environ and hf.encode() not in environ
    subprocess.run(["scancel", "--signal=TERM", run["job_id"]], check=True)
    record = waiter(lambda: (r := _record(statuses, ws, run["run_id"]))["state"] in ("PREEMPTED", "FAILED", "COMPLETED")
                    and r, 120, "the job to stop")
    assert record["state"] == "PREEMPTED", cli("logs", run["run_id"], "--workdir", str(ws)).stdout[-3000:]
    stopped_at = _steps(run_dir)[-1]
    assert 3 <= stopped_at < TOTAL
    assert (run_dir / "checkpoints" / f"step_{stopped_at:06d}.pt").exists()  # the stop checkpoint
    _finish_and_check_history(cli, ws, run, run_dir, waiter, statuses)
    for where in (ws, _state_dir()):
        for secret in (key, hf):
            hits = subprocess.run(["grep", "-rl", secret, str(where)], capture_output=True, text=True).stdout
            assert hits == "", f"a secret reached {hits}"


def test_kill_9_past_a_checkpoint_resumes_with_every_step_once(project, tmp_path, cli, waiter, statuses):
    ws = tmp_path / "ws"
    run, run_dir = _launch(cli, ws)
    waiter(lambda: len(_steps(run_dir)) >= 8, 300, "step 7 (checkpoint at 5)")
    os.kill(read_status(run_dir)["pid"], signal.SIGKILL)
    record = waiter(lambda: (r := _record(statuses, ws, run["run_id"]))["state"] in ("FAILED", "COMPLETED") and r,
                    120, "the killed job to be FAILED")
    assert record["state"] == "FAILED"
    assert _steps(run_dir)[-1] > 5  # steps past the checkpoint were logged, and are redone
    _finish_and_check_history(cli, ws, run, run_dir, waiter, statuses)
