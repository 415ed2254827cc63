"""An arm of a report whose only runs are pending (queued, nothing logged yet) is not an arm without runs: no "produce
them with `arctl run ...`" (running it would queue the same run twice), only the "not read" line that names the run
(from a mutation hunt: the waiting runs' arms left out of the arms found survived every data test, whose waiting runs
were all of arms that also had finished runs)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner
from unlogged_runs import add_unlogged, waiting_text  # tests/support/unlogged_runs.py
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.workspace import workdir_arg
from arctl.report.export import NOT_LOGGED_PENDING

runner = CliRunner()

# reports/ablation_vr.yaml draws grpo, grpo-vr and grpo-vr-decouple; the test workspace has no run of the last
DECOUPLE_PENDING = ("ablation-vr", "grpo-vr-decouple", 0)


def _figure(ws: Path, out: Path) -> dict:
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(ws), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_an_arm_whose_only_run_is_pending_is_not_missing(completed_ws, tmp_path):
    before = _figure(completed_ws, tmp_path / "before")  # no run of the arm at all: missing, and how to produce it
    assert before["missing_arms"] == ["grpo-vr-decouple"]
    (said,) = [w for w in before["warnings"] if "arm(s) of the spec" in w]
    assert "produce them with `arctl run ablation-vr --arm grpo-vr-decouple" in said, said

    add_unlogged(completed_ws, DECOUPLE_PENDING, states.SUBMITTING)
    doc = _figure(completed_ws, tmp_path / "after")
    assert doc["missing_arms"] == [] and doc["missing_experiments"] == []
    assert not [w for w in doc["warnings"] if "arm(s) of the spec" in w or "produce them" in w], doc["warnings"]
    assert [w for w in doc["warnings"] if w.startswith("not read: ")] == [
        f"not read: 1 run(s) of this figure's cells have logged nothing yet: "
        f"{waiting_text((DECOUPLE_PENDING, NOT_LOGGED_PENDING))} (`arctl status{workdir_arg(completed_ws)}`)"]
    assert doc["waiting"] == [{"run_id": run_id(*DECOUPLE_PENDING), "experiment": "ablation-vr",
                               "arm": "grpo-vr-decouple", "seed": 0, "state": NOT_LOGGED_PENDING}]
