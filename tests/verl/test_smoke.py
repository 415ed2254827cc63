"""Smoke mode (verl.smoke=true) without SLURM: a local Ray run end to end, the failure paths as one
line, and the knob's validation. (Through the real SLURM: tests/launch/test_slurm_verl_smoke.py.)"""

from __future__ import annotations

import copy
import json
import socket
import subprocess
from pathlib import Path

import pytest
from ports import unused_port  # tests/support/ports.py

from arctl.backends.verl import trainer as verl_trainer
from arctl.backends.verl.ray_connect import RayConnectError, split_address, wait_for_head
from arctl.backends.verl.smoke import SMOKE_FILE, SmokeError, run_smoke


@pytest.fixture
def config(paper_config, tmp_path):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["data_dir"] = str(tmp_path / "data")
    cfg["verl"]["smoke"] = True
    cfg["run_id"] = "smoke-test"
    return cfg


def _processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if text in line]


@pytest.mark.slow  # starts a local Ray
def test_a_local_smoke_run_checks_everything_and_leaves_no_ray_behind(config, tmp_path, monkeypatch):
    """No RAY_ADDRESS (e.g. --executor local): a small local Ray, one task, smoke.json, Ray stopped."""
    for key in ("RAY_ADDRESS", "RAY_AUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    # Ray 2.60's local ray.init() would otherwise write ~/.ray/auth_token (its default): keep HOME clean
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    token_file = Path.home() / ".ray" / "auth_token"
    token_before = token_file.exists()
    monkeypatch.delenv(verl_trainer.ALLOW_CPU_ENV, raising=False)  # the smoke needs no GPU
    monkeypatch.setenv("WANDB_API_KEY", "planted-" + "0123456789abcdef" * 2)
    (tmp_path / "data" / "deepscaler").mkdir(parents=True)
    (tmp_path / "data" / "deepscaler" / "train.parquet").write_bytes(b"")  # train file there, eval files not
    run_dir = tmp_path / "run"

    assert verl_trainer.train(config, run_dir) == "completed"

    summary = json.loads((run_dir / SMOKE_FILE).read_text())
    assert summary["ok"] is True and summary["status"] == "ok with warnings" and summary["error"] is None
    assert summary["config"]["overrides"] > 50 and summary["config"]["trainer_mode"] == "arctl"
    assert summary["config"]["agent_loop"] == "arctl_tree" and summary["config"]["policy_loss"] == "arctl_drgrpo"
    assert summary["plugin"]["registered"] == {"agent_loop": True, "trainer": True, "policy_loss": True}
    ray = summary["ray"]
    assert ray["started_by"] == "smoke (local Ray)" and ray["nodes"] == ray["nodes_expected"] == 1
    (task,) = ray["tasks"]
    assert task["plugin_loaded_by_import_verl"] is True  # a fresh Ray worker: `import verl` loaded the plugin
    assert task["pid"] != summary["job"]["pid"] and task["host"] == socket.gethostname()
    assert task["wandb_dir"] == str(run_dir / "wandb")  # the W&B runtime env reached the worker
    # warnings: the two missing eval files (not the train file), the model, the GPUs
    data_warning = next(w for w in summary["warnings"] if "data file" in w)
    assert data_warning.startswith("2 of 3 data file(s) missing") and "arctl data prepare" in data_warning
    assert summary["data"]["files"][str(tmp_path / "data" / "deepscaler" / "train.parquet")] is True
    assert any("GPU" in w for w in summary["warnings"]) and summary["gpus"]["ray_gpus"] == 0
    text = (run_dir / SMOKE_FILE).read_text()
    assert "planted-" not in text and summary["job"]["wandb_api_key_set"] is True
    # Ray is gone and its directory removed
    assert _processes_mentioning(ray["temp_dir"]) == [] and not Path(ray["temp_dir"]).exists()
    assert token_file.exists() == token_before


def test_nothing_at_ray_address_is_one_line_and_recorded(config, tmp_path, monkeypatch):
    port = unused_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    monkeypatch.setenv("ARCTL_RAY_HEAD_TIMEOUT_S", "1")
    with pytest.raises(SmokeError) as info:
        run_smoke(config, tmp_path / "run")
    message = str(info.value)
    assert "\n" not in message and message.startswith("verl smoke failed at ray: nothing answers at RAY_ADDRESS=")
    assert f"127.0.0.1:{port}" in message and "arctl logs" in message
    summary = json.loads((tmp_path / "run" / SMOKE_FILE).read_text())
    assert summary["ok"] is False and summary["failed_check"] == "ray" and summary["error"] in message
    assert summary["config"]["overrides"] > 50  # the checks before Ray ran and are recorded


def test_a_bad_verl_override_fails_the_smoke_at_config(config, tmp_path):
    config["verl"]["overrides"] = ["trainer.log_val_generations=often"]
    with pytest.raises(SmokeError, match=r"failed at config: verl override trainer.log_val_generations='often' has the wrong type"):
        run_smoke(config, tmp_path / "run")
    assert json.loads((tmp_path / "run" / SMOKE_FILE).read_text())["failed_check"] == "config"


def test_ray_addresses_are_checked():
    assert split_address("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert split_address("[fd00::2]:6379") == ("fd00::2", 6379)
    for bad in ("ray://head:10001", "head", "head:port", ":6379"):
        with pytest.raises(RayConnectError):
            split_address(bad)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert wait_for_head(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=5) < 5


def test_the_smoke_knob_is_validated(monkeypatch):
    from arctl.compose import SpecError, resolve_experiment

    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    (run,) = resolve_experiment("main-ar-uniform", ["verl.smoke=true"], scale="paper")
    assert run.config["verl"]["smoke"] is True and run.config["verl"]["ray_start_args"] == []
    with pytest.raises(SpecError, match="verl.smoke"):
        resolve_experiment("main-ar-uniform", ["verl.smoke=maybe"], scale="paper")
    with pytest.raises(SpecError, match="verl.ray_start_args"):
        resolve_experiment("main-ar-uniform", ["verl.ray_start_args=5"], scale="paper")
