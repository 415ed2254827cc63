"""A backend from outside ``arctl/``, installed through the ``arctl.backends`` entry point, brings its
own config section (typed, with ranges and choices) and scale profile, and is selected, validated,
dry-run and run end to end through the real CLI, as a third-party package would be.

The package (``tests/plugins/fake_backend/arctl_fake_backend``) is copied to a temporary site
directory with a ``.dist-info`` holding its entry point, the way ``pip install`` leaves a package;
every command runs in a subprocess with that directory on ``PYTHONPATH`` (tests/plugins/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from plugin_site import run_arctl as arctl
from wandb_reference import synced_history


def test_without_the_package_the_scale_is_unknown(tmp_path, monkeypatch):
    """The control: the fake scale exists only through the installed package."""
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    out = arctl(None, "run", "ablation-vr", "--scale", "fake", "--dry-run", cwd=tmp_path)
    assert out.returncode == 2 and "unknown scale 'fake'" in out.stderr


def test_an_installed_backend_brings_its_section_and_scale_and_is_validated(site, tmp_path):
    shown = arctl(site, "show", "ablation-vr", "--scale", "fake", "--arm", "grpo", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    config = json.loads(text)
    config = config[0]["config"] if isinstance(config, list) else config.get("config", config)
    assert config["backend"] == "fake" and config["scale"]["name"] == "fake"
    assert config["fake"] == {"width": 8, "mode": "fast", "loss_scale": 1.0}  # profile value, then schema defaults
    assert "tiny" in config and "verl" in config  # the built-in backends' sections are still there

    ws = tmp_path / "ws"
    bad = {"fake.width=0": "fake.width=0 is invalid: expected an integer >= 1 and <= 64",
           "fake.mode=warp": "fake.mode='warp' is not allowed",
           "fake.loss_scale=11": "fake.loss_scale=11.0 is invalid",
           "fake.width=wide": "fake.width",
           "fake.depth=3": "unknown config key 'fake.depth'",
           "+fake.depth=1e99": "fake.depth=1e+99 is out of range"}
    for override, message in bad.items():
        out = arctl(site, "run", "ablation-vr", "--scale", "fake", override, "--workdir", str(ws), cwd=tmp_path)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), (override, out.stderr)
        assert message in lines[0], (override, lines[0])
    assert not ws.exists()  # nothing written for a bad input

    dry = arctl(site, "run", "ablation-vr", "--scale", "fake", "+fake.extra=3", "--dry-run", "--json",
                "--workdir", str(ws), cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    runs = json.loads(dry.stdout)["runs"]
    assert len(runs) == 3 and {r["action"] for r in runs} == {"new"} and not ws.exists()


@pytest.mark.slow
def test_an_installed_backend_runs_end_to_end(site, tmp_path):
    ws = tmp_path / "ws"
    out = arctl(site, "run", "ablation-vr", "--scale", "fake", "--arm", "grpo", "fake.width=5", "+fake.extra=3",
                "--executor", "local", "--workdir", str(ws), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)["submitted"]
    assert run["state"] == "COMPLETED"
    run_dir = Path(run["run_dir"])
    assert json.loads((run_dir / "fake_seen.json").read_text()) == {"width": 5, "mode": "fast", "loss_scale": 1.0,
                                                                    "extra": 3}
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["backend"] == "fake"
    ids, rows = synced_history(run_dir)
    assert len(ids) == 1 and [r["trainer/global_step"] for r in rows] == [1, 2, 3]  # every step exactly once
    status = arctl(site, "status", "--workdir", str(ws), "--json", cwd=tmp_path)
    assert status.returncode == 0 and [r["state"] for r in json.loads(status.stdout)] == ["COMPLETED"]
