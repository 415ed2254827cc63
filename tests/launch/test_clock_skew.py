"""Clocks that disagree (from the hunt of clocks): `arctl status` took a running run's time left and its stall as
this host's clock less times that other clocks stamped: status.json's ``first_step_at`` (the job's node) and the
metrics files' modification times (the file server). A skew of 30 s moved a time left by ~70%, one of 5 min read a
live run as stalled. Now the pace is the job's own clock (status.json's ``first_step_at`` and ``last_step_at``) and
the time since the last step is the files' time less the file server's measured offset from this host's clock
(:func:`arctl.launch.progress.file_clock_offset`: a probe file's modification time)."""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import progress
from arctl.launch.progress import STALL_FLOOR_S, file_clock_offset, last_step_at, stalled, step_age, time_left
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace
from arctl.track.metrics_schema import STEP_KEY, TRAIN_LOSS

SKEWS = [pytest.param(-300.0, id="5-min-behind"), pytest.param(300.0, id="5-min-ahead")]
REAL_TIME = time.time


def _running(tmp_path, *, host: float, pace: float, last_ago: float, node_skew: float) -> Workspace:
    """Run r0 at step 55 of 400, RUNNING, whose attempt's pace began at step 10 and went at ``pace`` seconds a step to
    its last step, logged ``last_ago`` seconds before ``host`` (this host's clock now). The file server is this
    machine's disk (the real clock: its stamps); the job's node stamps status.json's times ``node_skew`` off this
    host's clock."""
    ws = Workspace(tmp_path / "ws")
    run_dir = ws.run_dir("r0")
    run_dir.mkdir(parents=True)
    metrics = run_dir / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({STEP_KEY: s, TRAIN_LOSS: 1 / s}) + "\n" for s in range(1, 56)))
    disk = REAL_TIME() - last_ago  # the file server's time of the last step
    os.utime(metrics, (disk, disk))
    node = host - last_ago + node_skew  # the node's time of the last step
    write_status(run_dir, state="running", step=55, total_steps=400, test_freq=None, metric_files={},
                 first_step=10, first_step_at=node - 45 * pace, last_step=55, last_step_at=node)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("r0", state="RUNNING", step=55, claim=None, before_claim=None, started_at=host - 3600)
    return ws


def _host_clock(monkeypatch, skew: float) -> float:
    """This host's clock ``skew`` seconds behind the disk's (the file server's, here the real clock): its time now."""
    monkeypatch.setattr(progress, "_host_time", lambda: REAL_TIME() - skew)
    monkeypatch.setattr(progress, "_FILE_CLOCKS", {})
    return REAL_TIME() - skew


def _status_json(ws: Workspace, monkeypatch, now: float) -> dict:
    """r0's `arctl status --json` record, this host's clock at ``now``."""
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: now)
        res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh", "--json"])
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    return doc


@pytest.mark.parametrize("skew", SKEWS)
def test_a_live_run_with_skewed_clocks_reads_neither_stalled_nor_a_wrong_time_left(tmp_path, monkeypatch, skew):
    """A step 10 s ago, 0.3 s a step: 345 steps left take 103.5 s, whatever the file server's and the node's clocks
    say (the node here 7 min off, the file server ``skew``)."""
    now = _host_clock(monkeypatch, skew)
    ws = _running(tmp_path, host=now, pace=0.3, last_ago=10, node_skew=420.0)
    doc = _status_json(ws, monkeypatch, now)
    assert doc["stalled"] is False
    assert doc["last_step_age_s"] == pytest.approx(10, abs=2)
    assert doc["time_left_s"] == pytest.approx(345 * 0.3, abs=0.31)  # less the time since its last step: a step's at most


@pytest.mark.parametrize("skew", SKEWS)
def test_a_run_that_logs_nothing_for_longer_than_the_floor_reads_stalled_with_skewed_clocks(tmp_path, monkeypatch,
                                                                                             skew):
    now = _host_clock(monkeypatch, skew)
    ws = _running(tmp_path, host=now, pace=0.3, last_ago=STALL_FLOOR_S + 60, node_skew=-420.0)
    doc = _status_json(ws, monkeypatch, now)
    assert doc["stalled"] is True and doc["last_step_age_s"] == pytest.approx(STALL_FLOOR_S + 60, abs=2)
    assert doc["time_left_s"] is None and doc["state"] == "RUNNING"


def test_the_file_clocks_offset_is_measured_once_per_folder_and_none_where_nothing_can_be_written(tmp_path,
                                                                                               monkeypatch):
    monkeypatch.setattr(progress, "_FILE_CLOCKS", {})
    assert file_clock_offset(tmp_path) == 0.0  # this host's own disk: the clocks agree (within the stamps' grain)
    monkeypatch.setattr(progress, "_host_time", lambda: REAL_TIME() - 100.0)
    assert file_clock_offset(tmp_path) == 0.0  # measured once per folder and process
    (tmp_path / "b").mkdir()
    assert file_clock_offset(tmp_path / "b") == pytest.approx(100.0, abs=1.0)  # the disk 100 s ahead of this host
    assert file_clock_offset(tmp_path / "missing") == 0.0  # nothing can be written there: taken to agree
    assert not [p for p in tmp_path.rglob(".arctl-clock-*")]  # the probes are gone


def test_the_stall_and_its_pace_are_each_one_clocks(tmp_path, monkeypatch):
    """:func:`last_step_at` is this host's clock (the file's stamp less the file server's offset), the pace the job's
    (status.json's first_step_at to last_step_at)."""
    monkeypatch.setattr(progress, "_FILE_CLOCKS", {str(tmp_path): -600.0})  # the file server 10 min behind
    run_dir = tmp_path / "runs" / "r0"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text(json.dumps({STEP_KEY: 55}) + "\n")
    now = 2e9
    os.utime(run_dir / "metrics.jsonl", (now - 700, now - 700))  # its stamp, 10 min behind: 100 s ago here
    assert last_step_at(run_dir, {}) == now - 100
    status = {"step": 55, "first_step": 10, "first_step_at": 5e9, "last_step": 55, "last_step_at": 5e9 + 45 * 60,
              "total_steps": 400}
    age = step_age(status, last_step_at(run_dir, {}), now)
    assert age == (100.0, 60.0) and not stalled(*age)
    assert time_left(status, now, now - 100) == 345 * 60.0 - 60.0
    # a job of an earlier arctl, which wrote no last_step_at: its first step's time to the files' (two clocks), as
    # before
    older = {k: v for k, v in status.items() if k not in ("last_step", "last_step_at")}
    older["first_step_at"] = now - 100 - 45 * 60
    assert step_age(older, now - 100, now) == (100.0, 60.0)
    assert time_left(older, now) == pytest.approx(345 * (45 * 60 + 100) / 45)
