"""cov_variance (paper Fig. 2) reads each run's first evaluation as the model before RL; an eval-only run
(``verl.eval_only=true verl.eval_checkpoint=.../global_step_630``) has one evaluation, of a trained checkpoint, and
is left out with a warning naming it. From a hunt: its step-630 values were averaged into the "before RL" curve
with the training runs' step 0."""

from __future__ import annotations

import csv
import json
import os

import pytest
from fake_policy import diag_row  # tests/support/fake_policy.py
from typer.testing import CliRunner
from wandb_workspace import _write_run, run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app

BUDGETS = [2000, 4000, 8000]


def _diag_row(step: int, base: float) -> dict:
    return diag_row(BUDGETS, base, step)


def _report(ws, out) -> tuple[int, dict | str]:
    res = CliRunner().invoke(app, ["report", "--figure", "cov_variance", "--workdir", str(ws), "--out", str(out),
                                   "--json"])
    return res.exit_code, json.loads(res.stdout) if res.exit_code == 0 else res.output


def test_an_eval_only_run_is_not_read_as_the_model_before_rl(tmp_path):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    _write_run(ws, "main-grpo", "grpo", 0, [], extra_rows=[_diag_row(0, 0.2), _diag_row(10, 0.5)])
    _write_run(ws, "main-grpo", "grpo", 1, [], extra_rows=[_diag_row(630, 0.9)],
               wandb_config={"verl": {"eval_only": True, "eval_checkpoint": "/ckpt/global_step_630"}})
    wandb.teardown()

    code, doc = _report(ws, tmp_path / "out")
    assert code == 0, doc
    with open(tmp_path / "out" / "cov_variance.csv", newline="") as f:
        rows = {(r["series"], int(r["budget"])): r for r in csv.DictReader(f)}
    for b in BUDGETS:  # the training run's step 0 alone
        assert float(rows[("corr_v1", b)]["value"]) == pytest.approx(0.2 + b / 1e5, abs=1e-9)
        assert float(rows[("nvar/brpo", b)]["value"]) == pytest.approx(0.2, abs=1e-9)
        assert int(rows[("corr_v1", b)]["n"]) == 1
    evalonly = run_id("main-grpo", "grpo", 1)
    said = [w for w in doc["warnings"] if "eval-only" in w]
    assert said == [f"left out 1 eval-only run(s) (verl.eval_only): their evaluation is of verl.eval_checkpoint, not "
                    f"the model before RL that this figure reads from each run's first evaluation: {evalonly}"], \
        doc["warnings"]


def test_eval_only_runs_alone_are_said_in_the_error(tmp_path):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    _write_run(ws, "main-grpo", "grpo", 1, [], extra_rows=[_diag_row(630, 0.9)],
               wandb_config={"verl": {"eval_only": True}})
    wandb.teardown()

    code, out = _report(ws, tmp_path / "out")
    assert code != 0 and not (tmp_path / "out" / "cov_variance.csv").exists()
    assert "no training run in" in out and "left out 1 eval-only run(s)" in out and run_id("main-grpo", "grpo", 1) in out
