"""`arctl export` takes a run's state from the workspace's registry where it records the run ended: from a hunt, a
killed run was skipped as "not completed (state running)", its status.json's (a killed job never rewrites it),
while `arctl status` said FAILED; with --unfinished, export.json recorded it "running"."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace

KILLED = ("main-grpo", "grpo", 1)  # status.json "running", the registry FAILED
ENDED_SINCE = ("main-ar-base", "ar-base", 0)  # status.json "completed", the registry RUNNING (no refresh since)
REQUEUED = ("main-grpo", "grpo", 0)  # status.json "completed", the registry PREEMPTED (a requeue no refresh revived)


@pytest.fixture
def ws(workspace, tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(workspace, root, ignore=shutil.ignore_patterns(".arctl-cache", "report"))
    for run in (root / "runs").iterdir():
        (run / "status.json").write_text(json.dumps({"state": "running" if run.name == run_id(*KILLED) else "completed"}))
    with Registry(Workspace(root).registry_path) as reg:
        rows = [RunRecord(run_id=run_id(*cell), experiment=cell[0], arm=cell[1], seed=cell[2])
                for cell in (KILLED, ENDED_SINCE, REQUEUED)]
        reg.claim(rows, new_claim_token())
        reg.update(run_id(*KILLED), state="FAILED", claim=None, before_claim=None, error="killed")
        reg.update(run_id(*ENDED_SINCE), state="RUNNING", claim=None, before_claim=None)
        reg.update(run_id(*REQUEUED), state="PREEMPTED", claim=None, before_claim=None)
    return root


def test_a_run_the_registry_says_failed_is_named_failed(ws, tmp_path):
    registry = Workspace(ws).registry_path.read_bytes()
    res = CliRunner().invoke(app, ["export", "--workdir", str(ws), "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    skipped = {s["run_id"]: s["why"] for s in done["skipped"]}
    assert list(skipped) == [run_id(*KILLED)], skipped
    assert skipped[run_id(*KILLED)].startswith("not completed (state failed)"), skipped
    # a row no refresh brought up to date: its job's word (completed) stands, and it is exported
    assert run_id(*ENDED_SINCE) in {r["run_id"] for r in done["runs"]}
    # from a review: a job's own end goes before the registry's (a SLURM requeue after a preemption completed, the
    # row still said PREEMPTED: a completed seed was left out of exports and tables)
    assert run_id(*REQUEUED) in {r["run_id"] for r in done["runs"]}
    assert Workspace(ws).registry_path.read_bytes() == registry  # read, never written

    res = CliRunner().invoke(app, ["export", "--workdir", str(ws), "--out", str(tmp_path / "all"), "--unfinished"])
    assert res.exit_code == 0, res.output
    index = json.loads((tmp_path / "all" / "export.json").read_text())["runs"]
    assert index[run_id(*KILLED)]["state"] == "failed"
    assert index[run_id(*ENDED_SINCE)]["state"] == "completed"
