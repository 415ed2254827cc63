"""A registry damaged while a local queue runs: the queue lets go of it while it waits, so `arctl repair` can
replace it, and carries on with the new file; a queue with no run left stops; one that gives up says why in one
line, not a traceback.

From a hunt: the queue kept the damaged registry open across its failed passes, so for 15 minutes `arctl status`
said "run `arctl repair`" and `arctl repair` refused ("open in process N (a local queue)"); then the queue died
with a traceback in its log. Jobs are stand-ins that end at once; the damage is a RegistryError of kind "damaged"
from the refresh (what a truncated file gives there)."""

from __future__ import annotations

import pytest
from ended_jobs import EndedExecutor as _Executor  # tests/support/ended_jobs.py
from queued_runs import queued_runs  # tests/support/queued_runs.py

from arctl.launch import states
from arctl.launch.registry import Registry, RegistryError
from arctl.launch.workspace import Workspace


def _damaged_once(ws: Workspace, monkeypatch) -> dict:
    import arctl.launch.refresh as refresh_module

    real_refresh = refresh_module.refresh
    left = {"n": 1}

    def damaged(reg, workspace, records=None):
        if left["n"]:
            left["n"] -= 1
            raise RegistryError(f"{ws.registry_path} is damaged (database disk image is malformed): `arctl repair` "
                                "rebuilds it from the run folders")
        return real_refresh(reg, workspace, records)

    monkeypatch.setattr(refresh_module, "refresh", damaged)
    return left


def test_a_repair_can_replace_the_registry_while_the_queue_waits_and_the_queue_goes_on(specs, tmp_path, monkeypatch):
    import arctl.launch.local_queue as local_queue
    import arctl.launch.repair as repair

    ws = Workspace(tmp_path / "ws")
    ids = queued_runs(ws, monkeypatch, 2)
    executor = _Executor()
    monkeypatch.setattr(local_queue, "local_executor", lambda folder, cluster: executor)
    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "POLL_S", 0.01)
    monkeypatch.setattr(repair, "REPAIR_WAIT_S", 0.2)  # (before the fix it waited for the queue, and was refused)
    left = _damaged_once(ws, monkeypatch)
    repaired = []
    real_wait = local_queue.Trouble.wait

    def repair_meanwhile(self, err):  # the user runs `arctl repair` while the queue waits
        repaired.append(repair.rebuild_registry(ws))
        return real_wait(self, err)

    monkeypatch.setattr(local_queue.Trouble, "wait", repair_meanwhile)
    local_queue.run_queue(ws.root, ids, parallelism=1)

    assert left["n"] == 0 and len(repaired) == 1 and repaired[0].kept is not None
    assert len(executor.started) == 1  # the second: the new registry names no queue for it
    with Registry(ws.registry_path) as reg:  # the new file
        first, second = reg.get(ids[0]), reg.get(ids[1])
    assert first.state == states.COMPLETED
    assert second.state == states.FAILED and "never started" in second.error  # (repair.NOT_STARTED)


def test_a_queue_whose_runs_have_all_ended_stops_on_a_damaged_registry(specs, tmp_path, monkeypatch, capsys):
    import arctl.launch.local_queue as local_queue

    ws = Workspace(tmp_path / "ws")
    ids = queued_runs(ws, monkeypatch, 1)
    monkeypatch.setattr(local_queue, "local_executor", lambda folder, cluster: _Executor())
    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "POLL_S", 0.01)
    monkeypatch.setattr(local_queue, "GIVE_UP_S", 0.05)  # (before the fix it retried this long, then raised)
    _damaged_once(ws, monkeypatch)
    local_queue.run_queue(ws.root, ids, parallelism=1)  # returns: nothing left to start or watch
    out = capsys.readouterr().out
    assert f"not recorded in the registry: {ids[0]} ended (" in out
    assert "the local queue has no run left and stops" in out and "trying again" not in out


def test_a_queue_that_gives_up_ends_with_one_line_not_a_traceback(specs, tmp_path, monkeypatch, capsys):
    import arctl.launch.local_queue as local_queue

    ws = Workspace(tmp_path / "ws")
    ids = queued_runs(ws, monkeypatch, 1)
    with Registry(ws.registry_path) as reg:
        reg.update(ids[0], job_id="queue:1")  # another queue's: this one starts nothing, only asks

    def damaged(self, run_id):
        raise RegistryError(f"{ws.registry_path} is damaged (database disk image is malformed)")

    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "GIVE_UP_S", 0.05)
    monkeypatch.setattr(local_queue, "WAIT_FOR_REGISTRY_S", 0.0)
    monkeypatch.setattr(Registry, "get", damaged)
    assert local_queue.main([str(ws.root), ids[0]]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the local queue gave up after 0.05 s of failing to use the workspace (")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_give_up_still_raises_for_a_caller(specs, tmp_path, monkeypatch):
    """run_queue itself raises (a RegistryError) on giving up: only the queue's process turns it into its line."""
    import arctl.launch.local_queue as local_queue

    ws = Workspace(tmp_path / "ws")
    ids = queued_runs(ws, monkeypatch, 1)

    def full(self, run_id):
        raise RegistryError(f"{ws.registry_path}: database or disk is full", "full")

    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "GIVE_UP_S", 0.05)
    monkeypatch.setattr(local_queue, "WAIT_FOR_REGISTRY_S", 0.0)
    monkeypatch.setattr(Registry, "get", full)
    with pytest.raises(RegistryError, match=r"^the local queue gave up after"):
        local_queue.run_queue(ws.root, ids, parallelism=1)
