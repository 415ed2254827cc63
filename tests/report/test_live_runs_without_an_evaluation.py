"""A report of runs that are under way and have logged no evaluation yet says to wait for their next one, not that a
metric name may be a typo (from a hunt: `arctl report --figure main_training` of a run at step 3 said "the 1 run(s)
there logged none (did you mean train/think_len/mean?); fix reports/main_training.yaml if that is a typo, else produce
runs that log it"). "did you mean" stays for a metric no run logs, and for runs that ended."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner
from unlogged_runs import add_unlogged  # tests/support/unlogged_runs.py
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, RunRecord
from arctl.launch.workspace import Workspace, workdir_arg

runner = CliRunner()
ENV = {"COLUMNS": "400"}
CELL = ("main-grpo", "grpo", 0)
RID = run_id(*CELL)
STEPS = [1, 2, 3]  # training rows only: its evaluation at step 0 was not logged (a resume), the next is at 10


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    """A workspace of one run of main-grpo that logged training steps 1-3 and no evaluation; test_freq 10 of 20."""
    import os

    import wandb
    from wandb_workspace import _write_run

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    root = tmp_path_factory.mktemp("live")
    run_dir = _write_run(root, *CELL, STEPS, final=False)
    wandb.teardown()  # no service left for a later child process
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    (run_dir / "config.yaml").write_text(yaml.safe_dump({**config, "trainer": {"test_freq": 10, "total_steps": 20}}))
    return root


def _ws(one_run: Path, tmp_path: Path, status: str | None, registry: str | None, test_freq: int = 10) -> Path:
    """A copy of ``one_run`` with the run's status.json saying ``status`` and its registry row in ``registry``."""
    ws = tmp_path / "ws"
    shutil.copytree(one_run, ws)
    run_dir = ws / "runs" / RID
    if status:
        (run_dir / "status.json").write_text(json.dumps({"state": status}))
    if test_freq != 10:
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        config["trainer"]["test_freq"] = test_freq
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    if registry:
        shutil.move(run_dir, tmp_path / "kept")  # add_unlogged makes the folder: the run's own goes back after
        add_unlogged(ws, CELL, registry, folder=False)
        shutil.move(tmp_path / "kept", run_dir)
    return ws


def _error(*args: str) -> str:
    res = runner.invoke(app, ["report", *args], env=ENV)
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


@pytest.mark.parametrize("status, registry, said", [
    ("running", states.RUNNING, "running"),
    (None, states.RUNNING, "running"),  # the registry's row alone
    ("stopping", states.RUNNING, "stopping"),
    ("requeued", states.PENDING, "pending"),
    (None, states.PENDING, "pending"),
])
def test_a_figure_of_live_runs_without_an_evaluation_says_to_wait(one_run, tmp_path, status, registry, said):
    ws = _ws(one_run, tmp_path, status, registry)
    out = tmp_path / "out"
    line = _error("--figure", "main_training", "--experiment", "main-grpo", "--workdir", str(ws), "--out", str(out))
    assert line == (f"error: no runs of experiment(s) main-grpo with metrics eval/*/anytime_acc, eval/*/final_acc, "
                    f"eval/*/think_len in {ws} yet: the 1 run(s) there are under way and have logged no evaluation: {RID} ({said}, "
                    f"at step 3; next evaluation at step 10, trainer.test_freq=10); wait for them "
                    f"(`arctl status{workdir_arg(ws)}`)"), line
    assert not out.exists()


def test_a_run_that_evaluates_only_at_its_end_waits_for_its_last_step(one_run, tmp_path):
    ws = _ws(one_run, tmp_path, "running", states.RUNNING, test_freq=0)
    line = _error("--figure", "main_training", "--experiment", "main-grpo", "--workdir", str(ws), "--out",
                  str(tmp_path / "out"))
    assert f"{RID} (running, at step 3; next evaluation at its last step (20), trainer.test_freq=0); wait for them" \
        in line, line


@pytest.mark.parametrize("status, registry", [("completed", states.COMPLETED), ("failed", states.FAILED),
                                              ("running", states.FAILED), (None, None)])
def test_runs_that_ended_without_it_still_ask_whether_the_metric_is_a_typo(one_run, tmp_path, status, registry):
    """A run that ended (its job's word, or its registry row's over a status.json a killed job left "running"), or
    one nothing says is under way, will log nothing more: the metric may be a typo."""
    ws = _ws(one_run, tmp_path, status, registry)
    line = _error("--figure", "main_training", "--experiment", "main-grpo", "--workdir", str(ws), "--out",
                  str(tmp_path / "out"))
    assert ": the 1 run(s) there logged none (did you mean " in line and "wait for them" not in line, line


def _specs(tmp_path: Path, monkeypatch, name: str, text: str) -> Path:
    root = tmp_path / "specs"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / f"{name}.yaml").write_text(text)
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    return root


def test_a_typo_of_an_evaluation_metric_is_still_a_typo_while_the_runs_are_live(one_run, tmp_path, monkeypatch):
    ws = _ws(one_run, tmp_path, "running", states.RUNNING)
    root = _specs(tmp_path, monkeypatch, "tt", "kind: figure\nbuilder: training_curves\nexperiments: [main-grpo]\n"
                  "panels:\n  - {key: 'eval/{dataset}/final_ac'}\n")
    line = _error("--figure", "tt", "--workdir", str(ws), "--out", str(tmp_path / "out"))
    assert ": the 1 run(s) there logged none" in line and f"fix {root / 'reports' / 'tt.yaml'} if that is a typo" \
        in line and "wait for them" not in line, line


def test_a_figure_with_a_training_panel_waits_for_the_evaluation_of_the_others(one_run, tmp_path, monkeypatch):
    """The run logged the figure's training metric, not yet its evaluation metrics: the figure said "they must run
    evaluations during training (eval.datasets, trainer.test_freq)"."""
    ws = _ws(one_run, tmp_path, "running", states.RUNNING)
    _specs(tmp_path, monkeypatch, "tc", "kind: figure\nbuilder: training_curves\nexperiments: [main-grpo]\n"
           "panels:\n  - {key: 'train/think_len/mean'}\n  - {key: 'eval/{dataset}/anytime_acc'}\n")
    line = _error("--figure", "tc", "--workdir", str(ws), "--out", str(tmp_path / "out"))
    assert line == (f"error: the runs in {ws} logged none of train/think_len/mean, eval/{{dataset}}/anytime_acc yet: "
                    f"the 1 run(s) there are under way and have logged no evaluation: {RID} (running, at step 3; next evaluation at "
                    f"step 10, trainer.test_freq=10); wait for them (`arctl status{workdir_arg(ws)}`)"), line


@pytest.mark.parametrize("status, registry, key", [("completed", states.COMPLETED, "eval/{dataset}/anytime_acc"),
                                                  ("running", states.RUNNING, "eval/{dataset}/anytime_ac")])
def test_a_training_panel_figure_of_a_run_that_ended_or_of_a_typo_says_as_before(one_run, tmp_path, monkeypatch,
                                                                                 status, registry, key):
    ws = _ws(one_run, tmp_path, status, registry)
    _specs(tmp_path, monkeypatch, "tc", "kind: figure\nbuilder: training_curves\nexperiments: [main-grpo]\n"
           f"panels:\n  - {{key: 'train/think_len/mean'}}\n  - {{key: '{key}'}}\n")
    line = _error("--figure", "tc", "--workdir", str(ws), "--out", str(tmp_path / "out"))
    assert line.endswith("they must run evaluations during training (eval.datasets, trainer.test_freq)"), line


def test_a_registry_row_of_a_dead_launch_is_not_waited_for(one_run, tmp_path):
    """A SUBMITTING row whose launch died (`arctl status`: INTERRUPTED) runs nothing: not "pending"."""
    from dead_launch import dead_claim_token  # tests/support/dead_launch.py

    ws = _ws(one_run, tmp_path, None, None)
    with Registry(Workspace(ws).registry_path) as reg:  # the row its claim made (a new run), the launch dead
        reg.claim([RunRecord(run_id=RID, experiment=CELL[0], arm=CELL[1], seed=CELL[2], scale="tiny")],
                  dead_claim_token())
    line = _error("--figure", "main_training", "--experiment", "main-grpo", "--workdir", str(ws), "--out",
                  str(tmp_path / "out"))
    assert "did you mean" in line and "wait for them" not in line, line
