"""A verl smoke run (verl.smoke=true) submitted to the real local SLURM through the production path.

`arctl run` -> spec (backend verl, scale paper) -> launcher -> sbatch with the verl backend's Ray
job body as setup (Ray head on the allocated node, per-job token and temp dir) -> our job entry
under the batch shell -> verl backend ``train`` -> smoke checks -> COMPLETED; then the job's EXIT
trap stops Ray. No test-only backend: the job runs the real verl backend.
"""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest
from extras import NO_VERL, verl_missing  # tests/support/extras.py

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.verl, pytest.mark.usefixtures("slurm_cluster")]

if verl_missing():
    pytest.skip(NO_VERL, allow_module_level=True)

EXPERIMENT = textwrap.dedent(
    """\
    description: verl smoke run through the real SLURM path
    groups: {model: r1-distill-qwen-1.5b}
    seeds: [0]
    overrides:
      - verl.smoke=true
      - wandb.mode=offline
      - cluster.cpus_per_task=2
      - cluster.mem_gb=4
      - cluster.time_min=10
      - "verl.ray_start_args=['--object-store-memory=100000000','--include-dashboard=false']"
    arms:
      ar: [algo=anytime, prior=uniform]
    """
)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED")


def _status(statuses, ws: Path) -> dict:
    (record,) = statuses(ws)  # in-process: a waiting test's polls (tests/launch/conftest.py)
    return record


def _ps() -> list[tuple[int, str]]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [(int(pid), args) for pid, _, args in (line.strip().partition(" ") for line in out.splitlines())]


def test_a_verl_smoke_run_completes_on_slurm_through_the_ray_job_body(tmp_path, monkeypatch, cli, waiter, statuses):
    specs = tmp_path / "specs"
    (specs / "experiments").mkdir(parents=True)
    (specs / "experiments" / "vsmoke.yaml").write_text(EXPERIMENT)
    key = "planted" + "0123456789abcdef" * 2
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)  # the real verl backend runs
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", key)
    monkeypatch.setenv("ARCTL_RAY_HEAD_WAIT_S", "1")  # the smoke waits for the head's port itself
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path / "no-data"))
    ws = tmp_path / "ws"

    out = cli("run", "vsmoke", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r, 240, "the smoke job to end")
    if record["state"] != "COMPLETED":
        logs = cli("logs", run["run_id"], "--workdir", str(ws)).stdout
        pytest.fail(f"smoke job {record['state']}: {record['error']}\n{logs[-3000:]}")

    # the production sbatch script: Ray body as setup, our job entry under the batch shell
    sbatch = (run_dir / "job" / "sbatch.sh").read_text()
    assert "ray.scripts.scripts start --head" in sbatch and "arctl_run_job " in sbatch
    assert "-m arctl.backends.verl.trainer" not in sbatch and "export RAY_AUTH_MODE=token" in sbatch

    summary = json.loads((run_dir / "smoke.json").read_text())
    assert summary["ok"] is True and summary["status"] == "ok with warnings"
    assert summary["job"]["slurm_job_id"] == record["job_id"] == run["job_id"]  # it ran as that SLURM job
    assert summary["plugin"]["registered"] == {"agent_loop": True, "trainer": True, "policy_loss": True}
    assert summary["plugin"]["loaded_by_import_verl"] is True
    assert summary["config"]["overrides"] > 50 and summary["config"]["trainer_mode"] == "arctl"
    ray = summary["ray"]
    port = 6379 + int(record["job_id"]) % 1000  # per-job port: jobs sharing a node do not collide
    assert ray["started_by"] == "job body" and ray["address"].endswith(f":{port}") and ray["auth_mode"] == "token"
    assert not ray["address"].startswith("127.")  # a routable head address, as workers on other nodes need
    assert ray["nodes"] == ray["nodes_expected"] == 1 and ray["resources"]["CPU"] == 2  # = cluster.cpus_per_task
    assert ray["temp_dir"] == f"/tmp/arctl-ray-{record['job_id']}"
    (task,) = ray["tasks"]
    assert task["host"] == socket.gethostname() and task["plugin_loaded_by_import_verl"] is True
    # the Ray worker lives inside the job's Ray head step (srun), not in the batch step
    assert task["slurm_job_id"] == record["job_id"] and task["slurm_step_id"] not in (None, "batch")
    assert task["wandb_dir"] == str(run_dir / "wandb")
    assert any("arctl data prepare" in w for w in summary["warnings"])  # no data prepared: a warning only

    # the job is over for SLURM too, and its EXIT trap stopped Ray: nothing of this Ray is left
    def job_ended():
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "State", "-j", record["job_id"]],
                             capture_output=True, text=True).stdout
        return out.strip() == "COMPLETED"

    waiter(job_ended, 60, "sacct: the job COMPLETED")
    waiter(lambda: not [p for p, args in _ps() if ray["temp_dir"] in args or p == task["pid"]], 60,
           f"no process of the job's Ray ({ray['temp_dir']}) left")
    assert not Path(ray["temp_dir"]).exists()  # removed after the successful job

    hits = subprocess.run(["grep", "-rl", key, str(ws)], capture_output=True, text=True).stdout
    assert hits == "", f"the API key leaked into {hits}"
