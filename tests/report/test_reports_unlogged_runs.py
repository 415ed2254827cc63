"""Runs of a report's cells that have logged nothing yet are named, not invisible (from a hunt: a figure and a table
read mid-sweep said nothing of a pending run, of one at its first steps, nor of a queued --force rerun; the table
said "from 1 run(s)"). A workspace's registry and run folders say which runs those are; only the runs of the
report's experiments, arms and scale count, and a run that ended is not one of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner
from unlogged_runs import add_mid_sweep, add_unlogged, waiting_text  # tests/support/unlogged_runs.py
from wandb_workspace import TRUNCATED, run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, RunRecord
from arctl.launch.workspace import Workspace, workdir_arg
from arctl.report.export import NOT_LOGGED_PENDING, NOT_LOGGED_RERUN, NOT_LOGGED_RUNNING

runner = CliRunner()

RUNNING = ("main-grpo", "grpo", 4)  # its job started, no W&B file yet
PENDING = ("main-grpo", "grpo", 5)  # submitted, waiting
RERUN = ("main-grpo", "grpo", 6)  # a --force rerun queued: its finished files moved aside
ENDED = ("main-grpo", "grpo", 7)  # failed before it logged anything: not waited for
OTHER_EXPERIMENT = ("main-ar-base", "ar-base", 5)  # pending, of an experiment the report does not read
OTHER_SCALE = ("main-grpo", "grpo", 8)  # pending, at another scale than the runs read
VR_PENDING = ("ablation-vr", "grpo-vr", 5)  # pending, beside ablation-vr's run that was killed (TRUNCATED)


@pytest.fixture
def ws(completed_ws) -> Path:
    add_mid_sweep(completed_ws, running=RUNNING, pending=PENDING, rerun=RERUN, ended=ENDED, elsewhere=OTHER_EXPERIMENT,
                  other_scale=OTHER_SCALE)
    add_unlogged(completed_ws, VR_PENDING, states.SUBMITTING)
    (completed_ws / "runs" / run_id(*TRUNCATED) / "status.json").write_text(json.dumps({"state": "running"}))
    return completed_ws


def _report(ws: Path, out: Path, *args: str):
    res = runner.invoke(app, ["report", *args, "--workdir", str(ws), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_table_names_the_runs_of_its_cells_that_logged_nothing_yet(ws, tmp_path):
    doc = _report(ws, tmp_path / "t", "--table", "final", "--experiment", "main-grpo")
    assert {r["run_id"] for r in doc["runs"]} == {run_id("main-grpo", "grpo", 0), run_id("main-grpo", "grpo", 1)}
    said = [w for w in doc["warnings"] if w.startswith("not read: ")]
    assert said == [f"not read: 3 run(s) of this table's cells have logged nothing yet: "
                    f"{waiting_text((RUNNING, NOT_LOGGED_RUNNING), (PENDING, NOT_LOGGED_PENDING), (RERUN, NOT_LOGGED_RERUN))}"
                    f" (`arctl status{workdir_arg(ws)}`)"], doc["warnings"]
    for cell in (ENDED, OTHER_EXPERIMENT, OTHER_SCALE):  # ended, of another experiment, of another scale
        assert run_id(*cell) not in " ".join(doc["warnings"])
    assert doc["missing_experiments"] == [] and doc["missing_arms"] == []


def test_they_are_named_in_the_line_of_the_runs_left_out_unfinished(ws, tmp_path):
    """Beside a run left out as not finished (with W&B files), the runs that logged nothing are in the same line."""
    doc = _report(ws, tmp_path / "t", "--table", "final", "--experiment", "ablation-vr")
    (said,) = [w for w in doc["warnings"] if w.startswith("left out ") or w.startswith("not read: ")]
    assert said.startswith("left out 1 run(s) that have not finished"), said
    assert f"{run_id(*TRUNCATED)} (" in said
    assert said.endswith(f"; not read: 1 run(s) of this table's cells have logged nothing yet: "
                         f"{waiting_text((VR_PENDING, 'pending'))}"), said


def test_a_figure_names_them_and_its_data_carries_them(ws, tmp_path):
    """A figure reads a running run's history (nothing is left out as unfinished): the runs without any are named in
    a line of their own, and the report's data carries them for runs.json."""
    from arctl.report.data import read_report_runs
    from arctl.report.render import BUILDERS
    from arctl.report.specs import load_spec

    doc = _report(ws, tmp_path / "f", "--figure", "ablation_vr")
    said = [w for w in doc["warnings"] if w.startswith("not read: ")]
    assert said == [f"not read: 1 run(s) of this figure's cells have logged nothing yet: "
                    f"{waiting_text((VR_PENDING, 'pending'))} (`arctl status{workdir_arg(ws)}`)"], doc["warnings"]
    carried = [{"run_id": run_id(*VR_PENDING), "experiment": "ablation-vr", "arm": "grpo-vr", "seed": 5,
                "state": NOT_LOGGED_PENDING}]
    assert doc["waiting"] == carried  # --json, and runs.json beside the figure
    assert json.loads((tmp_path / "f" / "ablation_vr.runs.json").read_text())["waiting"] == carried
    spec = load_spec("figure", "ablation_vr")
    data = read_report_runs(spec, metrics=list(BUILDERS["training_curves"][1](spec)), workdir=ws, progress=False)
    assert data.waiting == [{"run_id": run_id(*VR_PENDING), "experiment": "ablation-vr", "arm": "grpo-vr", "seed": 5,
                             "state": NOT_LOGGED_PENDING}]


def test_a_report_whose_runs_all_logged_nothing_says_to_wait_not_to_produce_them(ws, tmp_path):
    """One error line, exit 2, nothing written: not "produce them with `arctl run main-grpo`". (With no run read
    there is no scale to keep to: the paper-scale run is named too.)"""
    only = tmp_path / "only"
    (only / "runs").mkdir(parents=True)
    shutil.copy2(Workspace(ws).registry_path, Workspace(only).registry_path)
    shutil.copytree(ws / "runs" / run_id(*RUNNING), only / "runs" / run_id(*RUNNING))
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(only),
                              "--out", str(tmp_path / "t")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert lines[0].startswith("error: no runs of experiment(s) main-grpo") and " yet: 4 run(s) of this table's " \
        "cells have logged nothing yet: " in lines[0] and f"wait for them (`arctl status{workdir_arg(only)}`)" in \
        lines[0] and "produce them" not in lines[0], lines[0]
    assert not (tmp_path / "t").exists()


def test_a_run_whose_launch_died_before_it_submitted_it_is_not_pending(ws, tmp_path):
    """From a review: a dead launch's run (`arctl status`: INTERRUPTED, no job runs for it) was named "(pending)"."""
    from dead_launch import dead_claim_token  # tests/support/dead_launch.py

    from arctl.report.export import NOT_LOGGED_INTERRUPTED

    cell = ("main-grpo", "grpo", 9)
    rid = run_id(*cell)
    (ws / "runs" / rid).mkdir()
    (ws / "runs" / rid / "config.yaml").write_text(yaml.safe_dump({"experiment": cell[0], "arm": cell[1],
                                                                   "seed": cell[2], "scale": "tiny"}))
    with Registry(Workspace(ws).registry_path) as reg:  # the row its claim made (a new run), the launch dead
        reg.claim([RunRecord(run_id=rid, experiment=cell[0], arm=cell[1], seed=cell[2], scale="tiny")],
                  dead_claim_token())
    doc = _report(ws, tmp_path / "t", "--table", "final", "--experiment", "main-grpo")
    (said,) = [w for w in doc["warnings"] if w.startswith("not read: ")]
    assert f"{rid} ({NOT_LOGGED_INTERRUPTED})" in said and f"{rid} (pending)" not in said, said


def test_where_leaves_out_the_runs_of_another_config(ws, tmp_path):
    """From a review: beside `--where thinking.lam=0.5`, a pending run at lam 0.9 was named as one of the table's."""
    other, same = ("main-grpo", "grpo", 10), ("main-grpo", "grpo", 11)
    for cell, lam in ((other, 0.9), (same, 0.5)):
        rid = add_unlogged(ws, cell, states.PENDING)
        config = yaml.safe_load((ws / "runs" / rid / "config.yaml").read_text())
        (ws / "runs" / rid / "config.yaml").write_text(yaml.safe_dump({**config, "thinking": {"lam": lam}}))
    doc = _report(ws, tmp_path / "t", "--table", "final", "--experiment", "main-grpo", "--where", "thinking.lam=0.5")
    (said,) = [w for w in doc["warnings"] if w.startswith("not read: ")]
    assert run_id(*same) in said and run_id(*other) not in said, said
    doc = _report(ws, tmp_path / "t2", "--table", "final", "--experiment", "main-grpo")  # no --where: both
    (said,) = [w for w in doc["warnings"] if w.startswith("not read: ")]
    assert run_id(*same) in said and run_id(*other) in said, said


def test_the_wandb_files_of_runs_the_registry_has_ended_are_not_searched(tmp_path, monkeypatch):
    """From a review: every report looked for W&B files in every run folder of the workspace to find the runs that
    logged nothing, a cost the config cache had just taken away from reading (a workspace of thousands of ended runs).
    A run the registry has ended is never waiting: its folder is not searched."""
    from arctl.launch import states
    from arctl.report.export import unlogged_runs
    from arctl.track.runs import discover

    ws = tmp_path / "ws"
    ended = [add_unlogged(ws, ("e", "a", seed), states.COMPLETED, status="completed") for seed in range(5)]
    logging = add_unlogged(ws, ("e", "a", 5), states.RUNNING, status="running")
    waiting = add_unlogged(ws, ("e", "a", 6), states.RUNNING, status="running")
    for rid in [*ended, logging, waiting]:
        (ws / "runs" / rid / "wandb").mkdir()
    for rid in [*ended, logging]:
        folder = ws / "runs" / rid / "wandb" / f"offline-run-20261206_000000-{rid}"
        folder.mkdir()
        (folder / f"run-{rid}.wandb").write_bytes(b"")
    searched = []
    real = discover._unique_wandb_files
    monkeypatch.setattr(discover, "_unique_wandb_files", lambda root: searched.append(root.parent.name) or real(root))
    assert [r.run_id for r in unlogged_runs(ws)] == [waiting]
    assert sorted(searched) == sorted([logging, waiting])
