"""An export made mid-sweep keeps the runs it skipped in its index, and a report of it names them (from a hunt: the
export held only its runs, and a table of it could not say that others existed); a run its user cancelled is
"cancelled" in a report and an export, as in `arctl status`, not "preempted"."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch.status_file import CANCEL_FILE
from arctl.report.export import INDEX_FILE, NOT_LOGGED_PENDING, SKIPPED

runner = CliRunner()

RUNNING = ("main-grpo", "grpo", 1)  # W&B files, not completed: skipped without --unfinished
PENDING = ("main-grpo", "grpo", 4)  # submitted, nothing logged yet
ELSEWHERE = ("main-ar-base", "ar-base", 4)  # pending, of an experiment the export does not take


def _pending(ws: Path, cell) -> str:
    rid = run_id(*cell)
    (ws / "runs" / rid).mkdir()
    (ws / "runs" / rid / "config.yaml").write_text(yaml.safe_dump({"experiment": cell[0], "arm": cell[1],
                                                                   "seed": cell[2], "scale": "tiny"}))
    (ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "submitted"}))
    return rid


@pytest.fixture
def ws(completed_ws) -> Path:
    (completed_ws / "runs" / run_id(*RUNNING) / "status.json").write_text(json.dumps({"state": "running"}))
    _pending(completed_ws, PENDING)
    _pending(completed_ws, ELSEWHERE)
    return completed_ws


def _export(ws: Path, out: Path, *args: str) -> dict:
    res = runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo",
                              "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _table(workdir: Path, out: Path) -> dict:
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(workdir),
                              "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_an_export_made_mid_sweep_keeps_the_runs_it_skipped_and_a_report_of_it_names_them(ws, tmp_path):
    out = tmp_path / "exp"
    done = _export(ws, out)
    why = {s["run_id"]: s["why"] for s in done["skipped"]}
    assert why == {run_id(*RUNNING): "not completed (state running); --unfinished exports it as it is",
                   run_id(*PENDING): "pending, nothing logged yet"}
    index = json.loads((out / INDEX_FILE).read_text())
    assert index[SKIPPED] == {
        run_id(*RUNNING): {"experiment": "main-grpo", "arm": "grpo", "seed": 1, "scale": "tiny",
                           "state": "running, not exported", "serves": []},
        run_id(*PENDING): {"experiment": "main-grpo", "arm": "grpo", "seed": 4, "scale": "tiny",
                           "state": NOT_LOGGED_PENDING, "serves": []}}
    doc = _table(out, tmp_path / "t")
    assert {r["run_id"] for r in doc["runs"]} == {run_id("main-grpo", "grpo", 0)}
    said = [w for w in doc["warnings"] if w.startswith("not read: ")]
    assert said == [f"not read: 2 run(s) of this table's cells are not in this export: {run_id(*RUNNING)} (running, "
                    f"not exported), {run_id(*PENDING)} (pending) (in their workspace: wait for them, then `arctl "
                    f"export --out {shlex.quote(str(out))} --workdir WORKSPACE` from a workspace that has them (an "
                    "export launches no runs))"], doc["warnings"]
    # they end (one completed, one failed before it logged anything): the next export lists no run as skipped
    (ws / "runs" / run_id(*RUNNING) / "status.json").write_text(json.dumps({"state": "completed"}))
    (ws / "runs" / run_id(*PENDING) / "status.json").write_text(json.dumps({"state": "failed"}))
    done = _export(ws, out)
    assert done["skipped"] == [] and SKIPPED not in json.loads((out / INDEX_FILE).read_text())
    assert not [w for w in _table(out, tmp_path / "t2")["warnings"] if w.startswith("not read: ")]


def test_an_export_of_other_runs_keeps_what_an_earlier_one_skipped(ws, tmp_path):
    """A later export of another experiment did not look at main-grpo's runs: their entries stay."""
    out = tmp_path / "exp"
    _export(ws, out)
    res = runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out), "--experiment", "main-ar-base",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert sorted(json.loads((out / INDEX_FILE).read_text())[SKIPPED]) == sorted(
        [run_id(*RUNNING), run_id(*PENDING), run_id(*ELSEWHERE)])


@pytest.mark.parametrize("how", ["status", "request"])
def test_a_cancelled_run_is_cancelled_in_a_report_and_an_export(completed_ws, tmp_path, how):
    """A job that stopped on `arctl cancel`'s request says "preempted" in status.json, with ``cancelled`` (or the
    request beside it, an older job's): `arctl status` and arctl repair read CANCELLED, and so do reports and
    exports (from a hunt: "its job says preempted at step 28 of 40")."""
    run_dir = completed_ws / "runs" / run_id(*RUNNING)
    if how == "status":
        (run_dir / "status.json").write_text(json.dumps({"state": "preempted", "cancelled": True}))
    else:
        (run_dir / "status.json").write_text(json.dumps({"state": "preempted"}))
        (run_dir / CANCEL_FILE).write_text("1796536849.0\n")
    doc = _table(completed_ws, tmp_path / "t")
    (said,) = [w for w in doc["warnings"] if w.startswith("left out ")]
    assert f"{run_id(*RUNNING)} (its job says cancelled at step" in said and "preempted" not in said, said
    out = tmp_path / "exp"
    done = _export(completed_ws, out, "--unfinished")
    assert {r["run_id"]: r["state"] for r in done["runs"]}[run_id(*RUNNING)] == "cancelled"
    assert json.loads((out / INDEX_FILE).read_text())["runs"][run_id(*RUNNING)]["state"] == "cancelled"
    assert "its job says cancelled" in " ".join(_table(out, tmp_path / "t2")["warnings"])


def test_a_run_that_failed_is_skipped_but_not_waited_for(completed_ws, tmp_path):
    """From a review: a finished sweep with one failed seed (W&B files, status failed) was kept in the index's
    ``skipped``, and a table of the export said to wait for it."""
    failed = run_id(*RUNNING)
    (completed_ws / "runs" / failed / "status.json").write_text(json.dumps({"state": "failed"}))
    out = tmp_path / "exp"
    done = _export(completed_ws, out)
    assert [s["run_id"] for s in done["skipped"]] == [failed]  # still said: not exported
    assert SKIPPED not in json.loads((out / INDEX_FILE).read_text())
    assert not [w for w in _table(out, tmp_path / "t")["warnings"] if w.startswith("not read: ")]
