"""A verl training run on GPUs is launched with a warning (not refused) while the GPU check suite's part f has
not passed on a GPU (docs/gpu.md, "First GPU run", 2026-12-04): the one run there found verl's actor
log-probs 0.30 off the tree's. Runs that train no actor on GPUs (smoke, CPU rehearsal, verl on a CPU,
evaluation only) and tiny runs get none."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from arctl.backends.verl.run_config import GPU_NOT_VALIDATED, launch_warning
from arctl.cli.main import app


def _config(*overrides: str) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides])
    return run.config


def test_a_gpu_training_run_is_warned_and_the_runs_without_gpu_work_are_not():
    assert launch_warning(_config()) == GPU_NOT_VALIDATED and "docs/gpu.md" in GPU_NOT_VALIDATED
    for quiet in (["verl.smoke=true"], ["verl.rehearsal_steps=2"], ["verl.device=cpu", "verl.tree_attention=dense", "cluster.gpus_per_node=0"],
                  ["verl.eval_only=true", "verl.eval_checkpoint=/x/checkpoints/global_step_1"]):
        assert launch_warning(_config(*quiet)) is None, quiet


@pytest.mark.parametrize("scale, warned", [("paper", True), ("tiny", False)])
def test_the_dry_run_says_it_once_in_text_and_json(tmp_path, monkeypatch, scale, warned):
    monkeypatch.setenv("ARCTL_VERL_LAUNCH_CHECK", "0")  # no dataset files here: the warning is what is tested
    args = ["run", "ablation-vr", "--scale", scale, "--workdir", str(tmp_path / "ws"), "--dry-run", "--executor", "slurm"]
    res = CliRunner().invoke(app, [*args, "--json"])
    doc = json.loads(res.stdout)
    assert doc["warnings"] == ([GPU_NOT_VALIDATED] if warned else []), res.output  # several arms: one warning
    assert len(doc["runs"]) > 1 and not (tmp_path / "ws").exists()
    res = CliRunner().invoke(app, args)
    assert res.stderr.count("warning: verl's actor forward is not validated on GPUs") == (1 if warned else 0), res.output
