"""cov_variance (paper Fig. 2) of runs that logged every diagnostic as NaN (undefined: the return is the same on
every sample, as with accuracy 0 everywhere, docs/metrics.md) says so, not "no run logged" them with the advice to
run an experiment that logs them (from a hunt: a micro run at accuracy 0 logged all 20 keys, all NaN)."""

from __future__ import annotations

import os

from fake_policy import diag_row  # tests/support/fake_policy.py
from typer.testing import CliRunner
from wandb_workspace import _write_run, run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app

BUDGETS = [2000, 4000, 8000]


def _report(ws, out):
    return CliRunner().invoke(app, ["report", "--figure", "cov_variance", "--workdir", str(ws), "--out", str(out)])


def test_diagnostics_logged_as_nan_everywhere_are_said_as_undefined(tmp_path):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    nan = {k: (float("nan") if k.startswith("eval/") else v) for k, v in diag_row(BUDGETS, 0.2, 0).items()}
    _write_run(ws, "main-grpo", "grpo", 0, [], extra_rows=[nan])
    wandb.teardown()

    res = _report(ws, tmp_path / "out")
    line = " ".join(res.output.split())
    assert res.exit_code == 2 and not (tmp_path / "out" / "cov_variance.csv").exists()
    assert "no run in" not in line, line
    assert "1 run(s) in" in line and "every value of their first evaluation is undefined (NaN" in line, line
    assert run_id("main-grpo", "grpo", 0) in line and "tiny.diag_problems" in line, line


def test_no_diagnostic_logged_is_still_said_as_none(tmp_path):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    _write_run(ws, "main-grpo", "grpo", 0, [], extra_rows=[{"trainer/global_step": 0, "eval/aime24/acc@2000": 0.5}])
    wandb.teardown()

    res = _report(ws, tmp_path / "out")
    assert res.exit_code == 2 and "undefined" not in res.output and "logged none" in " ".join(res.output.split()), \
        res.output
