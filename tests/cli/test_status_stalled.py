"""`arctl status` of a running run that has logged no step for a long while says so instead of a time left. From a
hunt: a run whose step hung stayed RUNNING at 55/400 with "~9 min left", then 12, 24, 36 min on later calls (the
time left divided by the time since its pace began, and nothing looked at when its last step came)."""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch.progress import STALL_FLOOR_S, STALL_PACES, file_marks
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace
from arctl.track.metrics_schema import STEP_KEY, TRAIN_LOSS


def _run(tmp_path, *, last_ago: float, pace: float, paced: bool = True, state: str = "RUNNING",
         rewritten: bool = True) -> Workspace:
    """Run r0 at step 55 of 400, whose attempt's pace began at step 10 and went at ``pace`` seconds a step to its last
    step, logged ``last_ago`` seconds ago (its metrics file's modification time); ``paced``: the job saw the pace
    begin (status.json's first_step_at) and its last step (last_step_at); ``rewritten``: the attempt wrote the metrics
    file (else it is as it was when the attempt began, an earlier attempt's)."""
    ws = Workspace(tmp_path / "ws")
    run_dir = ws.run_dir("r0")
    run_dir.mkdir(parents=True)
    metrics = run_dir / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({STEP_KEY: s, TRAIN_LOSS: 1 / s}) + "\n" for s in range(1, 56)))
    last = time.time() - last_ago
    os.utime(metrics, (last, last))
    write_status(run_dir, state="running", step=55, total_steps=400, test_freq=None,
                 metric_files={} if rewritten else file_marks(run_dir),
                 first_step=10 if paced else None, first_step_at=last - 45 * pace if paced else None,
                 last_step=55 if paced else None, last_step_at=last if paced else None)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("r0", state=state, step=55, claim=None, before_claim=None, started_at=time.time() - 3600)
    return ws


def _status(ws: Workspace) -> tuple[str, dict]:
    """The table's row of r0 and its --json record."""
    runner = CliRunner()
    res = runner.invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh"])
    assert res.exit_code == 0, res.output
    (row,) = [line for line in res.output.splitlines() if line.startswith("r0 ")]
    res = runner.invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh", "--json"])
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    return row, doc


def test_a_running_run_with_no_step_for_long_says_so_instead_of_a_time_left(tmp_path):
    row, doc = _status(_run(tmp_path, last_ago=720, pace=0.3))
    assert " 55/400 (no step for 12 min; steps took ~0.3 s) " in row, row
    assert "min left" not in row
    assert doc["stalled"] is True and doc["last_step_age_s"] == pytest.approx(720, abs=30)
    assert doc["time_left_s"] is None and doc["state"] == "RUNNING"


def test_a_running_run_at_its_pace_shows_its_time_left(tmp_path):
    row, doc = _status(_run(tmp_path, last_ago=1, pace=60))
    assert " 55/400 (~" in row and " min left) " in row and "no step" not in row, row
    assert doc["stalled"] is False and doc["last_step_age_s"] == pytest.approx(1, abs=30)
    assert doc["time_left_s"] is not None


@pytest.mark.parametrize(("case", "run"), [pytest.param(case, run, id=case) for case, run in [
    # a slow step: under STALL_PACES of its steps (the floor aside), no stall
    ("slow-steps", dict(last_ago=0.9 * STALL_PACES * 60, pace=60)),
    # fast steps, but not STALL_FLOOR_S since the last one
    ("under-the-floor", dict(last_ago=0.9 * STALL_FLOOR_S, pace=0.3)),
    # the attempt's pace has not begun (its first step may still be to come: a start-up can be long)
    ("starting", dict(last_ago=3600, pace=0.3, paced=False)),
    # the metrics file is an earlier attempt's, unchanged since this one began
    ("earlier-attempt-s-file", dict(last_ago=3600, pace=0.3, rewritten=False)),
    # only a running run's
    ("preempted", dict(last_ago=3600, pace=0.3, state="PREEMPTED")),
]])
def test_no_stall_is_claimed_without_a_pace_and_a_long_wait(tmp_path, case, run):
    row, doc = _status(_run(tmp_path, **run))
    assert "no step for" not in row, row
    assert doc["stalled"] is False
    if case in ("starting", "earlier-attempt-s-file", "preempted"):
        assert doc["last_step_age_s"] is None
