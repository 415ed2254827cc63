"""A stop `arctl cancel` asked for is told from a preemption: the cancel leaves its request in the run's folder before
it signals the job (status_file.CANCEL_FILE), the job's stop then says ``cancelled: true`` beside "preempted", and
`arctl repair`, which rebuilds the registry from the folders, makes the run CANCELLED. From a hunt: a repair made
cancelled runs PREEMPTED (the job wrote "preempted" on every stop), which the next sweep relaunched."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from arctl.launch import control, states
from arctl.launch.control import NOT_CANCELLED, cancel_runs
from arctl.launch.job import PREEMPTED_EXIT_CODE
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.repair import rebuild_registry
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import (
    CANCEL_FILE,
    cancel_requested_at,
    mark_cancel_requested,
    mark_submitted,
    read_status,
    write_status,
)
from arctl.launch.workspace import Workspace


def _folder(ws: Workspace, run_id: str, **status) -> Path:
    run_dir = ws.run_dir(run_id)
    (run_dir / "job").mkdir(parents=True)
    config = {"experiment": "exp", "arm": run_id.split("_")[1], "seed": 0, "run_id": run_id, "backend": "tiny",
              "scale": {"name": "tiny"}, "cluster": {"executor": "local"},
              "wandb": {"group": "exp", "mode": "offline", "id": run_id}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    if status:
        write_status(run_dir, **status)
    return run_dir


def test_repair_makes_a_cancelled_stop_cancelled_and_a_preemption_preempted(tmp_path):
    ws = Workspace(tmp_path / "ws")
    ended = {"executor": "local", "job_id": "4242", "started_at": time.time() - 60, "ended_at": time.time() - 5}
    _folder(ws, "exp_cancel_s0_aaaa", state="preempted", cancelled=True, signal="SIGTERM", **ended)
    _folder(ws, "exp_preempt_s0_bbbb", state="preempted", signal="SIGUSR1", **ended)
    # an older job's stop ("preempted" alone) beside the request the cancel left before it signalled
    mark_cancel_requested(_folder(ws, "exp_older_s0_cccc", state="preempted", signal="SIGTERM", **ended), time.time())
    # cancelled while queued, whose status.json kept "submitted" (a job starting then rewrote the cancel's "cancelled")
    queued = _folder(ws, "exp_queued_s0_dddd")
    mark_submitted(queued, (None, socket.gethostname()))
    asked = time.time()
    mark_cancel_requested(queued, asked)
    # a job still stopping on the request: entered with it, so the refresh that sees it stopped makes it CANCELLED
    stopping = _folder(ws, "exp_stopping_s0_eeee", state="stopping", executor="local", job_id="4343",
                       started_at=time.time() - 60)
    mark_cancel_requested(stopping, asked)

    got = {r.run_id: r for r in rebuild_registry(ws).runs}
    assert got["exp_cancel_s0_aaaa"].state == states.CANCELLED  # PREEMPTED before
    assert got["exp_preempt_s0_bbbb"].state == states.PREEMPTED  # a preemption stays one
    assert got["exp_older_s0_cccc"].state == states.CANCELLED
    queued_rec = got["exp_queued_s0_dddd"]
    assert (queued_rec.state, queued_rec.error, queued_rec.ended_at) == (states.CANCELLED, None, asked), queued_rec
    assert (got["exp_stopping_s0_eeee"].state, got["exp_stopping_s0_eeee"].cancel_requested) == (states.RUNNING, asked)
    # the request each folder holds, as the registry had it (`arctl status --json` the same before and after); none
    # where the folder holds none (the job's "cancelled: true" alone, a preemption)
    assert {rid: r.cancel_requested is not None for rid, r in got.items()} == {
        "exp_cancel_s0_aaaa": False, "exp_preempt_s0_bbbb": False, "exp_older_s0_cccc": True,
        "exp_queued_s0_dddd": True, "exp_stopping_s0_eeee": True}
    assert queued_rec.cancel_requested == asked


def test_a_new_attempt_drops_the_last_ones_cancel(tmp_path):
    run_dir = _folder(Workspace(tmp_path / "ws"), "exp_a_s0_aaaa", state="preempted", cancelled=True)
    mark_cancel_requested(run_dir, time.time())
    mark_submitted(run_dir)
    assert not (run_dir / CANCEL_FILE).exists() and read_status(run_dir).get("cancelled") is None


@pytest.mark.parametrize("cancelled", [True, False])
def test_the_job_says_its_stop_was_a_cancel_where_the_cancel_asked(tmp_path, monkeypatch, waiter, cancelled):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.1")
    monkeypatch.setenv("ARCTL_TEST_GATE", str(tmp_path / "go"))  # pauses after step 2: the signal comes before its end
    monkeypatch.setenv("ARCTL_TEST_PAUSE_AFTER", "2")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": "e_a_s0_0123456789",
              "trainer": {"total_steps": 30}, "wandb": {"mode": "disabled", "id": "e_a_s0_0123456789"}}
    run_dir = prepare_run_dir(tmp_path / "runs" / config["run_id"], config)
    proc = subprocess.Popen([sys.executable, "-m", "arctl.launch.job", str(run_dir)], stderr=subprocess.PIPE, text=True)
    waiter(lambda: (run_dir / "steps.log").exists() and len((run_dir / "steps.log").read_text().splitlines()) >= 2,
           60, "2 steps")
    if cancelled:
        mark_cancel_requested(run_dir, time.time())  # what `arctl cancel` writes before its TERM
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == PREEMPTED_EXIT_CODE, err
    status = read_status(run_dir)
    assert status["state"] == "preempted" and status.get("cancelled") is (True if cancelled else None), status


def _running_local(ws: Workspace, run_id: str) -> RunRecord:
    _folder(ws, run_id, state="running", executor="local", job_id="4242", host=socket.gethostname(),
            started_at=time.time())
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=run_id, experiment="exp", arm="a", seed=0)], new_claim_token())
        reg.update(run_id, state=states.RUNNING, executor="local", job_id="4242", claim=None, before_claim=None,
                   started_at=time.time())
        return reg.get(run_id)


@pytest.mark.parametrize("kill", ["ok", "another user's"])
def test_cancel_leaves_its_request_before_it_signals_and_withdraws_it_where_it_signalled_nothing(tmp_path, monkeypatch,
                                                                                               kill):
    ws = Workspace(tmp_path / "ws")
    rec = _running_local(ws, "exp_a_s0_aaaa")
    seen = []

    def fake_kill(pid, sig):
        seen.append((pid, sig, cancel_requested_at(ws.run_dir(rec.run_id))))
        if kill != "ok":
            raise PermissionError(pid)

    monkeypatch.setattr(control, "local_job_alive", lambda *a: True)
    monkeypatch.setattr(control.os, "kill", fake_kill)
    with Registry(ws.registry_path) as reg:
        ((_, said),) = cancel_runs(reg, ws, [rec])
    assert len(seen) == 1 and seen[0][:2] == (4242, signal.SIGTERM) and seen[0][2] is not None  # there at the TERM
    if kill == "ok":
        assert not said.startswith(NOT_CANCELLED) and cancel_requested_at(ws.run_dir(rec.run_id)) == seen[0][2], said
    else:
        assert said.startswith(NOT_CANCELLED) and not (ws.run_dir(rec.run_id) / CANCEL_FILE).exists(), said
