"""Clocks that disagree (from the hunt of clocks): `arctl status` took a running run's time left, its stall and the
stop windows of a stopped job as this host's clock less times that other clocks stamped: status.json's
``first_step_at`` and ``updated_at`` (the job's node), the metrics files' modification times (the file server). A skew
of 30 s moved a time left by ~70%, one of 5 min read a live run as stalled, one of 15 min ended the stop window of a job
still saving its checkpoint. Now every age is two readings of one clock: the pace the job's own (status.json's
``first_step_at`` and ``last_step_at``), the time since a step or a write this host's (since a look here first saw the
files or status.json as they are: ``seen.json`` in the run's folder)."""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch import status_file as status_module
from arctl.launch.progress import STALL_FLOOR_S, last_step_at, stalled, step_age
from arctl.launch.refresh import STOP_TIMEOUT_S, TERM_GRACE_S, merge_state
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import SEEN_FILE, SKEW_ALLOWANCE_S, seen_since, write_status
from arctl.launch.workspace import Workspace
from arctl.track.metrics_schema import STEP_KEY, TRAIN_LOSS

SKEWS = [pytest.param(-300.0, id="5-min-behind"), pytest.param(300.0, id="5-min-ahead")]


def _running(tmp_path, *, skew: float, pace: float, last_ago: float, now: float) -> Workspace:
    """Run r0 at step 55 of 400, RUNNING, whose attempt's pace began at step 10 and went at ``pace`` seconds a step to
    its last step, logged ``last_ago`` seconds before ``now`` (this host's clock); the job's node and the file server
    stamp their times ``skew`` seconds off this host's (status.json's times, the metrics file's modification time)."""
    ws = Workspace(tmp_path / "ws")
    run_dir = ws.run_dir("r0")
    run_dir.mkdir(parents=True)
    metrics = run_dir / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({STEP_KEY: s, TRAIN_LOSS: 1 / s}) + "\n" for s in range(1, 56)))
    last = now - last_ago + skew  # the other clocks' time of the last step
    os.utime(metrics, (last, last))
    write_status(run_dir, state="running", step=55, total_steps=400, test_freq=None, metric_files={},
                 first_step=10, first_step_at=last - 45 * pace, last_step=55, last_step_at=last)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("r0", state="RUNNING", step=55, claim=None, before_claim=None, started_at=now - 3600)
    return ws


def _status_json(ws: Workspace, monkeypatch, now: float) -> dict:
    """r0's `arctl status --json` record, this host's clock at ``now``."""
    monkeypatch.setattr(time, "time", lambda: now)
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh", "--json"])
    monkeypatch.undo()
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    return doc


@pytest.mark.parametrize("skew", SKEWS)
def test_a_live_run_on_a_skewed_node_reads_neither_stalled_nor_a_wrong_time_left(tmp_path, monkeypatch, skew):
    """A step 10 s ago, 0.3 s a step: 345 steps left take 103.5 s, whatever the other clocks say."""
    now = time.time()
    ws = _running(tmp_path, skew=skew, pace=0.3, last_ago=10, now=now)
    doc = _status_json(ws, monkeypatch, now)
    assert doc["stalled"] is False
    assert doc["time_left_s"] == pytest.approx(345 * 0.3)
    assert doc["last_step_age_s"] == pytest.approx(0, abs=1)  # a first look: the files are new to this host
    # a later look, the files as they were (a step takes 0.3 s: no stall yet, 20 s on)
    doc = _status_json(ws, monkeypatch, now + 20)
    assert doc["stalled"] is False and doc["last_step_age_s"] == pytest.approx(20)
    assert doc["time_left_s"] == pytest.approx(345 * 0.3)


@pytest.mark.parametrize("skew", SKEWS)
def test_a_run_that_logs_nothing_for_longer_than_the_floor_on_this_hosts_clock_reads_stalled(tmp_path, monkeypatch,
                                                                                             skew):
    now = time.time()
    ws = _running(tmp_path, skew=skew, pace=0.3, last_ago=10, now=now)
    assert _status_json(ws, monkeypatch, now)["stalled"] is False  # first seen now
    doc = _status_json(ws, monkeypatch, now + STALL_FLOOR_S + 60)  # no new row since, on this host's clock
    assert doc["stalled"] is True and doc["last_step_age_s"] == pytest.approx(STALL_FLOOR_S + 60)
    assert doc["time_left_s"] is None and doc["state"] == "RUNNING"
    # a new row: a step again
    with open(ws.run_dir("r0") / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({STEP_KEY: 56, TRAIN_LOSS: 0.1}) + "\n")
    doc = _status_json(ws, monkeypatch, now + STALL_FLOOR_S + 70)
    assert doc["stalled"] is False and doc["last_step_age_s"] == pytest.approx(0)


def test_a_first_look_after_a_long_absence_sees_an_old_stall_less_the_skew_allowance(tmp_path, monkeypatch):
    """No look here saw the run before: the files' own time counts, less :data:`SKEW_ALLOWANCE_S` (the clocks may be
    that far apart). A stall that long is said at once; a shorter one from a later look."""
    now = time.time()
    old = _running(tmp_path / "old", skew=0.0, pace=0.3, last_ago=SKEW_ALLOWANCE_S + STALL_FLOOR_S + 120, now=now)
    doc = _status_json(old, monkeypatch, now)
    assert doc["stalled"] is True and doc["last_step_age_s"] == pytest.approx(STALL_FLOOR_S + 120)
    recent = _running(tmp_path / "recent", skew=0.0, pace=0.3, last_ago=STALL_FLOOR_S + 120, now=now)
    assert _status_json(recent, monkeypatch, now)["stalled"] is False
    assert _status_json(recent, monkeypatch, now + STALL_FLOOR_S + 1)["stalled"] is True


def test_the_stall_and_its_pace_are_each_one_clocks(tmp_path):
    """:func:`last_step_at` is this host's clock (when a look here first saw the files as they are), the pace the
    job's (status.json's first_step_at to last_step_at), whatever the file server's clock says."""
    run_dir = tmp_path
    (run_dir / "metrics.jsonl").write_text(json.dumps({STEP_KEY: 55}) + "\n")
    now = 2e9
    os.utime(run_dir / "metrics.jsonl", (now - 600, now - 600))  # the file server's clock 10 min behind
    assert last_step_at(run_dir, {}, now=now) == now  # first seen now
    assert last_step_at(run_dir, {}, now=now + 100) == now  # the same files: seen since then
    status = {"step": 55, "first_step": 10, "first_step_at": 5e9, "last_step": 55, "last_step_at": 5e9 + 45 * 60}
    age = step_age(status, last_step_at(run_dir, {}, now=now + 100), now + 100)
    assert age == (100.0, 60.0) and not stalled(*age)
    # a job of an earlier arctl, which wrote no last_step_at: no pace, so no stall and no time left said
    assert step_age({k: v for k, v in status.items() if k != "last_step_at"}, now, now + 1e6) is None


def test_what_a_host_saw_is_its_own(tmp_path, monkeypatch):
    """Another login host sharing the workspace keeps its own record (its clock may be off this one's)."""
    monkeypatch.setattr(status_module, "_observer", lambda: "login1")
    assert seen_since(tmp_path, "metrics", [1, 2], None, 1000.0) == 1000.0
    assert seen_since(tmp_path, "metrics", (1, 2), None, 1500.0) == 1000.0  # the same mark (a tuple as the list)
    monkeypatch.setattr(status_module, "_observer", lambda: "login2")
    assert seen_since(tmp_path, "metrics", [1, 2], None, 9000.0) == 9000.0  # login2 never saw it: first look
    assert set(json.loads((tmp_path / SEEN_FILE).read_text())) == {"login1", "login2"}
    monkeypatch.setattr(status_module, "_observer", lambda: "login1")
    assert seen_since(tmp_path, "metrics", [1, 3], None, 2000.0) == 2000.0  # a new mark
    assert seen_since(tmp_path, "metrics", [1, 3], 1900.0 - SKEW_ALLOWANCE_S, 2100.0) == 1900.0  # stamped long ago
    assert seen_since(tmp_path, "other", [1, 3], None, 2100.0, record=False) == 2100.0
    assert seen_since(tmp_path, "other", [1, 3], None, 2200.0) == 2200.0  # (not recorded above)


def _rec(cancel: bool = False) -> RunRecord:
    return RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.RUNNING,
                     cancel_requested=1.0 if cancel else None)


@pytest.mark.parametrize("skew", [pytest.param(-STOP_TIMEOUT_S + 60, id="node-14-min-behind"),
                                  pytest.param(STOP_TIMEOUT_S + 300, id="node-20-min-ahead")])
def test_a_stopping_job_is_active_for_the_stop_window_on_this_hosts_clock(tmp_path, skew):
    """The job wrote "stopping" at ``now`` (its clock ``skew`` off): active until :data:`STOP_TIMEOUT_S` on this host's
    clock since a refresh first saw that write, not since its node's stamp."""
    now = 2e9
    stopping = {"state": "stopping", "step": 40, "updated_at": now + skew}
    assert merge_state(_rec(), stopping, states.CANCELLED, now, run_dir=tmp_path)[0] == states.RUNNING
    assert merge_state(_rec(), stopping, states.CANCELLED, now + STOP_TIMEOUT_S - 1, run_dir=tmp_path)[0] == \
        states.RUNNING
    assert merge_state(_rec(), stopping, states.CANCELLED, now + STOP_TIMEOUT_S + 1, run_dir=tmp_path)[0] == \
        states.CANCELLED


def test_a_job_the_term_has_not_reached_yet_is_active_for_the_grace_on_this_hosts_clock(tmp_path):
    """SLURM says CANCELLED; the job, its node a minute behind, wrote "running" just now: it may still save."""
    now = 2e9
    running = {"state": "running", "step": 40, "updated_at": now - 60}
    assert merge_state(_rec(), running, states.CANCELLED, now, run_dir=tmp_path)[0] == states.RUNNING
    assert merge_state(_rec(), running, states.CANCELLED, now + TERM_GRACE_S + 1, run_dir=tmp_path)[0] == \
        states.CANCELLED
    # a write long before the allowance allows for: ended at the first look
    long_ago = {**running, "updated_at": now - SKEW_ALLOWANCE_S - TERM_GRACE_S - 1}
    assert merge_state(_rec(), long_ago, states.CANCELLED, now, run_dir=tmp_path / "x")[0] == states.CANCELLED


def _claimed(claim: str, updated_at: float) -> RunRecord:
    return RunRecord(run_id="r", experiment="e", arm="a", seed=0, state=states.SUBMITTING, claim=claim,
                     updated_at=updated_at)


def test_another_login_hosts_claim_is_stale_after_the_window_on_this_hosts_clock(tmp_path):
    """A launch on login2, whose clock is 11 min behind this host's, renewed its claim just now: live, though its
    ``updated_at`` reads 11 min old here. Left as it is, the same claim is stale :data:`STALE_CLAIM_S` after a look here
    first saw it."""
    from arctl.launch.registry import STALE_CLAIM_S, claim_is_stale

    now = 2e9
    live = _claimed(f"login2-{os.getpid()}:{os.getpid()}:x", now - 660)
    assert not claim_is_stale(live, now, tmp_path)
    assert not claim_is_stale(live, now + STALE_CLAIM_S - 1, tmp_path)
    assert claim_is_stale(live, now + STALE_CLAIM_S + 1, tmp_path)  # not renewed since: its launch died
    # renewed meanwhile (a new updated_at): live again
    assert not claim_is_stale(_claimed(live.claim, now + 500), now + STALE_CLAIM_S + 1, tmp_path)
    # a claim no look here saw, much older than the allowance: stale at once
    assert claim_is_stale(_claimed(live.claim, now - SKEW_ALLOWANCE_S - STALE_CLAIM_S - 1), now, tmp_path / "new")
    # this host's own claim: its updated_at is this host's clock (a live process of its own holds it)
    import socket

    mine = _claimed(f"{socket.gethostname()}:{os.getpid()}:x", now - STALE_CLAIM_S - 1)
    assert claim_is_stale(mine, now, tmp_path / "mine")
    assert not claim_is_stale(_claimed(mine.claim, now - 60), now, tmp_path / "mine")
