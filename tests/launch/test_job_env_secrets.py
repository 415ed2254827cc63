"""W&B records every ``SLURM_*`` variable of a job's environment in the run's .wandb file (wandb-core's
environment record), which an online run uploads and ``arctl export`` copies. From a hunt: a local or debug job
(which gets the launching shell's whole environment) put the shell's ``SLURM_JWT`` (``export $(scontrol token)``,
for slurmrestd) there. The job now removes such a secret before W&B starts, unless its ``cluster.secrets`` names it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arctl.launch.job import hide_recorded_secrets

JWT = "slurmJWTplantedVALUE0123456789abcdef"
MY_TOKEN = "slurmMYtokenPLANTED0123456789"  # a site's own SLURM_* secret: any is_secret_name one
CLUSTER = "plantedclusterNAME42"  # SLURM_CLUSTER_NAME, no secret: W&B records it (the grep below can see them)


def _wandb_bytes(run_dir: Path) -> bytes:
    files = list((run_dir / "wandb").rglob("*.wandb"))
    assert files, f"no .wandb file under {run_dir}"
    return b"".join(f.read_bytes() for f in files)


@pytest.mark.parametrize("executor", ["debug", "local"])
def test_a_jobs_wandb_file_holds_no_slurm_secret_of_the_shell(specs, tmp_path, cli, monkeypatch, executor):
    monkeypatch.setenv("SLURM_JWT", JWT)
    monkeypatch.setenv("SLURM_MY_TOKEN", MY_TOKEN)
    monkeypatch.setenv("SLURM_CLUSTER_NAME", CLUSTER)
    ws = tmp_path / "ws"
    res = cli("run", "lt", "--arm", "a", "trainer.total_steps=2", "wandb.mode=offline", "--executor", executor,
              "--workdir", str(ws), "--json")  # (a local launch waits for its runs)
    assert res.returncode == 0, res.stdout + res.stderr
    (run,) = json.loads(res.stdout)["submitted"]
    assert run["state"] == "COMPLETED", run
    recorded = _wandb_bytes(Path(run["run_dir"]))
    assert CLUSTER.encode() in recorded  # W&B did record the job's SLURM_* variables
    assert JWT.encode() not in recorded, "SLURM_JWT's value is in the run's .wandb file"
    assert MY_TOKEN.encode() not in recorded, "SLURM_MY_TOKEN's value is in the run's .wandb file"
    everything = b"".join(p.read_bytes() for p in ws.rglob("*") if p.is_file())
    assert JWT.encode() not in everything and MY_TOKEN.encode() not in everything, "a SLURM secret in the workspace"


def test_a_slurm_secret_the_run_names_in_cluster_secrets_stays_for_its_job(specs, tmp_path, cli, monkeypatch):
    """The run's job needs it (cluster.secrets=[SLURM_JWT]): it keeps it, and W&B records it as it records any
    SLURM_* variable of the job; the one it does not name is still removed."""
    monkeypatch.setenv("SLURM_JWT", JWT)
    monkeypatch.setenv("SLURM_MY_TOKEN", MY_TOKEN)
    ws = tmp_path / "ws"
    res = cli("run", "lt", "--arm", "a", "trainer.total_steps=2", "wandb.mode=offline", "cluster.secrets=[SLURM_JWT]",
              "--executor", "debug", "--workdir", str(ws), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    (run,) = json.loads(res.stdout)["submitted"]
    recorded = _wandb_bytes(Path(run["run_dir"]))
    assert JWT.encode() in recorded, "the named SLURM_JWT did not reach the job"
    assert MY_TOKEN.encode() not in recorded, "SLURM_MY_TOKEN's value is in the run's .wandb file"


def test_hiding_takes_only_the_slurm_secrets_the_run_does_not_name(monkeypatch):
    """The other secrets stay in the job (W&B records none of them; a local job may need HF_TOKEN for a gated
    model without naming it), and so do SLURM's own variables; the caller puts the removed ones back."""
    for name, value in {"SLURM_JWT": JWT, "SLURM_MY_TOKEN": MY_TOKEN, "SLURM_CLUSTER_NAME": CLUSTER,
                        "HF_TOKEN": "hf_plantedTOKEN0123456789", "SLURM_PASSWORD": "short"}.items():
        monkeypatch.setenv(name, value)
    hidden = hide_recorded_secrets({"cluster": {"secrets": ["SLURM_MY_TOKEN"]}})
    assert hidden == {"SLURM_JWT": JWT, "SLURM_PASSWORD": "short"}
    assert "SLURM_JWT" not in os.environ and "SLURM_PASSWORD" not in os.environ
    assert (os.environ["SLURM_MY_TOKEN"], os.environ["SLURM_CLUSTER_NAME"]) == (MY_TOKEN, CLUSTER)
    assert os.environ["HF_TOKEN"] == "hf_plantedTOKEN0123456789"
    assert hide_recorded_secrets({}) == {"SLURM_MY_TOKEN": MY_TOKEN}
