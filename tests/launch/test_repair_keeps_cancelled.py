"""`arctl repair` rebuilds the registry from the run folders: a run cancelled before its job started stays
CANCELLED, a local run's message is the local executor's, and every run keeps the sweep that launched it.

From a hunt: a run waiting in the local queue, cancelled, kept "submitted" in its status.json (the cancel
wrote the registry only); a repair made it FAILED with squeue/scancel advice for a local run, executor null,
and lost its sweep ("lambda"), which the registry's ``sweep`` column and its membership held.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arctl.launch import states
from arctl.launch.control import NOT_CANCELLED, cancel_runs, select_one, select_runs
from arctl.launch.executors import LaunchError
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.repair import QUEUED, rebuild_registry
from arctl.launch.status_file import mark_submitted, read_status
from arctl.launch.workspace import Workspace


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _folder(ws: Workspace, run_id: str, arm: str, group: str) -> Path:
    """A run folder as a launch leaves it: the frozen config.yaml (its sweep as the W&B group, as
    arctl.compose.resolve writes it) and nothing a job made."""
    run_dir = ws.run_dir(run_id)
    (run_dir / "job").mkdir(parents=True)
    config = {"experiment": "exp", "arm": arm, "seed": 0, "run_id": run_id, "backend": "tiny",
              "scale": {"name": "tiny"}, "cluster": {"executor": "local"},
              "wandb": {"group": group, "mode": "offline", "id": run_id}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return run_dir


def _queued_locally(ws: Workspace, arms: dict[str, str], sweep: str | None) -> dict[str, Path]:
    """Runs waiting in a local queue (a dead one: nothing starts them), registered as a launch of ``sweep``
    registers them; ``arms``: run id -> arm."""
    queue = f"queue:{_dead_pid()}"
    folders = {rid: _folder(ws, rid, arm, sweep or "exp") for rid, arm in arms.items()}
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=rid, experiment="exp", arm=arm, seed=0, sweep=sweep) for rid, arm in arms.items()],
                  new_claim_token(), members=[sweep] if sweep else [])
        reg.update_many([(rid, {"state": states.PENDING, "executor": "local", "job_id": queue, "claim": None,
                                "before_claim": None}) for rid in arms])
    for run_dir in folders.values():
        mark_submitted(run_dir, (None, socket.gethostname()))  # what the launcher writes for a local run
    return folders


def test_a_run_cancelled_before_it_started_stays_cancelled_through_a_repair_with_its_sweep(tmp_path):
    ws = Workspace(tmp_path / "ws")
    folders = _queued_locally(ws, {"exp_a_s0_aaaa": "a", "exp_b_s0_bbbb": "b"}, sweep="lambda")
    with Registry(ws.registry_path) as reg:
        ((rec, said),) = cancel_runs(reg, ws, [reg.get("exp_a_s0_aaaa")])
        assert not said.startswith(NOT_CANCELLED) and rec.state == states.CANCELLED, said
    status = read_status(folders["exp_a_s0_aaaa"])
    assert status["state"] == "cancelled" and status["executor"] == "local", status  # was "submitted"
    assert status["ended_at"] == rec.ended_at
    assert read_status(folders["exp_b_s0_bbbb"])["state"] == "submitted"  # the run not cancelled: untouched

    done = rebuild_registry(ws)
    got = {r.run_id: r for r in done.runs}
    cancelled = got["exp_a_s0_aaaa"]
    assert (cancelled.state, cancelled.executor, cancelled.error, cancelled.sweep) == (
        states.CANCELLED, "local", None, "lambda"), cancelled  # FAILED, None, QUEUED's scancel advice, None
    with Registry(ws.registry_path) as reg:
        assert {r.run_id for r in reg.list("lambda")} == set(got)  # still the sweep's, both
        assert reg.get("exp_a_s0_aaaa").sweep == "lambda" and reg.get("exp_a_s0_aaaa").state == states.CANCELLED


def test_a_local_run_that_never_started_gets_the_local_executors_message_not_slurms(tmp_path):
    """Not cancelled (or cancelled by an arctl that left "submitted"): its local queue has ended (a repair waits
    for every process that has the workspace open), and no queue starts a run the new registry names under none:
    FAILED, resumable, with no squeue/scancel to run for a local run. A debug run's likewise."""
    ws = Workspace(tmp_path / "ws")
    _queued_locally(ws, {"exp_a_s0_aaaa": "a"}, sweep=None)
    debug = _folder(ws, "exp_b_s0_bbbb", "b", "exp")
    mark_submitted(debug, (_dead_pid(), socket.gethostname()))  # the debug executor's launch, which died

    got = {r.run_id: r for r in rebuild_registry(ws).runs}
    local, dbg = got["exp_a_s0_aaaa"], got["exp_b_s0_bbbb"]
    assert (local.state, local.executor, local.sweep) == (states.FAILED, "local", None), local
    assert "local queue" in local.error and f"`arctl resume {local.run_id} --workdir {ws.root}`" in local.error, local.error
    assert (dbg.state, dbg.executor) == (states.FAILED, "debug"), dbg
    assert "debug executor" in dbg.error, dbg.error
    for rec in (local, dbg):
        assert "squeue" not in rec.error and "scancel" not in rec.error and "job id was only there" not in rec.error, rec.error


def test_a_slurm_run_submitted_without_a_job_link_keeps_the_advice_to_check_squeue(tmp_path):
    """The SLURM case is unchanged: its job id was only in the lost registry, and its job may still be queued."""
    ws = Workspace(tmp_path / "ws")
    run_dir = _folder(ws, "exp_a_s0_aaaa", "a", "lambda")
    mark_submitted(run_dir)  # a SLURM submission: no process, no host
    (rec,) = rebuild_registry(ws).runs
    resume = f"`arctl resume exp_a_s0_aaaa --workdir {ws.root}`"  # in its workspace (it said a bare `arctl resume`)
    assert (rec.state, rec.error, rec.sweep) == (states.FAILED, QUEUED.format(resume=resume), "lambda"), rec


def test_the_hints_of_a_run_not_found_name_the_workspace(tmp_path, monkeypatch):
    """From the hunt of workspace messages: "no run ... in <ws> — `arctl status` lists them" after --workdir ws
    sent the user to ./arctl-runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    ws = Workspace(tmp_path / "ws")
    _queued_locally(ws, {"exp_a_s0_aaaa": "a"}, sweep=None)
    with Registry(ws.registry_path) as reg:
        for call in (lambda: select_one(reg, "nope"), lambda: select_runs(reg, ["nope"]),
                     lambda: select_runs(reg, [])):
            with pytest.raises(LaunchError) as err:
                call()
            assert f"`arctl status --workdir {ws.root}`" in str(err.value), err.value


def test_a_hand_set_wandb_group_is_not_taken_for_a_sweep(tmp_path, monkeypatch):
    """From a review: a run launched with ``wandb.group=mygroup``, repaired, was entered as sweep "mygroup", and
    the hints then said ``arctl sweep mygroup ...`` ("unknown sweep 'mygroup'"). Only a group that names a sweep
    spec on the search path is a sweep: a shipped one ("lambda") or the project's own ("mine")."""
    project = tmp_path / "proj"
    (project / "sweeps").mkdir(parents=True)
    (project / "sweeps" / "mine.yaml").write_text("experiments: [main-grpo]\n")
    monkeypatch.chdir(project)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    ws = Workspace(tmp_path / "ws")
    for rid, group in (("exp_a_s0_aaaa", "mygroup"), ("exp_b_s0_bbbb", "lambda"), ("exp_c_s0_cccc", "mine"),
                       ("exp_d_s0_dddd", "exp")):
        mark_submitted(_folder(ws, rid, rid.split("_")[1], group))
    got = {r.run_id: r.sweep for r in rebuild_registry(ws).runs}
    assert got == {"exp_a_s0_aaaa": None, "exp_b_s0_bbbb": "lambda", "exp_c_s0_cccc": "mine",
                   "exp_d_s0_dddd": None}, got  # "mygroup" was a sweep
    with Registry(ws.registry_path) as reg:
        assert reg.get("exp_a_s0_aaaa").sweep is None and not reg.list("mygroup")


def test_the_errors_a_repair_stores_name_the_workspace_even_the_default_one(tmp_path, monkeypatch):
    """From a review: in the workspace a bare command means, the stored "`arctl resume RUN` resumes it" named none;
    read later from `arctl status --workdir WS` in another folder, it acted on that folder's ./arctl-runs."""
    ws = Workspace(tmp_path / "ws")
    monkeypatch.setenv("ARCTL_HOME", str(ws.root))
    run_dir = _folder(ws, "exp_a_s0_aaaa", "a", "lambda")
    mark_submitted(run_dir)
    (rec,) = rebuild_registry(ws).runs
    assert f"`arctl resume exp_a_s0_aaaa --workdir {ws.root}`" in rec.error, rec.error
