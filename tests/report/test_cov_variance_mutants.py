"""cov_variance (paper Fig. 2), from a mutation hunt of arctl/report/cov_variance.py: the warning that eval-only
runs are left out names only those that logged this figure's diagnostics (an eval-only run that logged accuracy
alone was never going to be read here: naming it says a run was dropped from the curve that was not); the figure's
footnote names the training runs it drew from, not the eval-only ones it left out; each panel's legend names its
lines."""

from __future__ import annotations

import json
import os

from fake_policy import diag_row  # tests/support/fake_policy.py
from typer.testing import CliRunner
from wandb_workspace import _write_run  # tests/support/wandb_workspace.py

from arctl.cli.main import app

BUDGETS = [2000, 4000, 8000]


def test_an_eval_only_run_without_diagnostics_is_not_said_left_out(tmp_path):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    _write_run(ws, "main-grpo", "grpo", 0, [], extra_rows=[diag_row(BUDGETS, 0.2, 0), diag_row(BUDGETS, 0.5, 10)])
    _write_run(ws, "main-grpo", "grpo", 1, [10, 20], wandb_config={"verl": {"eval_only": True}})
    wandb.teardown()
    res = CliRunner().invoke(app, ["report", "--figure", "cov_variance", "--workdir", str(ws), "--out",
                                   str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    assert not [w for w in json.loads(res.stdout)["warnings"] if "eval-only" in w]


def test_the_footnote_names_the_training_runs_drawn_and_each_panel_has_a_legend(tmp_path):
    import wandb

    from arctl.report.render import render_figure

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    for seed in (0, 2):  # two training runs
        _write_run(ws, "main-grpo", "grpo", seed, [], extra_rows=[diag_row(BUDGETS, 0.2, 0), diag_row(BUDGETS, 0.5, 10)])
    _write_run(ws, "main-grpo", "grpo", 1, [], extra_rows=[diag_row(BUDGETS, 0.9, 630)],
               wandb_config={"verl": {"eval_only": True, "eval_checkpoint": "/ckpt/global_step_630"}})
    wandb.teardown()
    res = render_figure("cov_variance", out_dir=tmp_path / "out", workdir=ws, progress=False, processes=1)
    assert " ".join(res.figure.get_supxlabel().split()) == "Runs: GRPO ×2 (main-grpo)"
    left, right = [ax for ax in res.figure.axes if ax.get_visible()]
    for ax in (left, right):  # the legend says which line is which series
        legend = ax.get_legend()
        assert legend is not None and [t.get_text() for t in legend.get_texts()] == [
            line.get_label() for line in ax.lines]
