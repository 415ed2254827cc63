"""`arctl status` and `arctl logs` on the full disk a run died of (from the hunt of jobs killed at any instant): the
registry opened, the refresh found the dead job and could not record it ("database or disk is full"), and both
commands refused with that line, so the user could not see which runs had died, or why, until space was freed. The
refresh now shows what it found without saving it, with a note, as in a read-only workspace."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import mark_submitted, write_status
from arctl.launch.workspace import Workspace

RUN_ID = "e_a_s0_0123456789"


@pytest.fixture
def full_disk(tmp_path, monkeypatch) -> Workspace:
    """A workspace whose local run RUNNING in the registry has a dead job process, on a disk where no registry
    write goes through."""
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 300}, "wandb": {"mode": "disabled", "id": RUN_ID}}
    run_dir = prepare_run_dir(ws.run_dir(RUN_ID), config)
    mark_submitted(run_dir, (None, socket.gethostname()))
    write_status(run_dir, state="running", host=socket.gethostname(), started_at=time.time() - 60, step=3)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, state=states.RUNNING, executor="local", job_id=str(dead),
                   submitted_at=time.time() - 60, started_at=time.time() - 60)
    said = f"{ws.registry_path}: database or disk is full (0.0 MiB free there): free some space and run the command again"

    def full(self, *args, **kwargs):
        raise RegistryError(said, "full")

    monkeypatch.setattr(Registry, "update_many_if", full)
    return ws


def test_status_shows_the_dead_run_unsaved_with_a_note(full_disk):
    res = CliRunner().invoke(app, ["status", "--workdir", str(full_disk.root), "--json"])
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    assert doc["state"] == states.FAILED and "died" in doc["error"], doc
    assert "not saved" in res.stderr and "disk is full" in res.stderr, res.stderr
    with Registry(full_disk.registry_path, readonly=True) as reg:  # nothing written
        assert reg.get(RUN_ID).state == states.RUNNING


def test_logs_answers_with_a_note(full_disk):
    res = CliRunner().invoke(app, ["logs", RUN_ID, "--workdir", str(full_disk.root)])
    assert res.exit_code == 0, res.output
    assert "not saved" in res.stderr and "disk is full" in res.stderr, res.stderr


def test_a_damaged_registry_still_fails_the_refresh(full_disk, monkeypatch):
    def damaged(self, *args, **kwargs):
        raise RegistryError(f"{full_disk.registry_path}: file is not a database", "damaged")

    monkeypatch.setattr(Registry, "update_many_if", damaged)
    res = CliRunner().invoke(app, ["status", "--workdir", str(full_disk.root)])
    assert res.exit_code == 2 and "file is not a database" in res.output, res.output


def test_only_a_reading_refresh_falls_back_and_only_for_that_pass(full_disk, monkeypatch):
    """From the review of this change: the fallback turned the caller's registry read-only for good, and the local
    queue, whose refresh met the full disk once, never recorded a job again (it started a run, did not say so, and a
    later launch would start it twice). A writer's refresh raises as before; a reading one shows what it found and
    writes again on its next pass."""
    from arctl.launch.refresh import refresh

    with Registry(full_disk.registry_path) as reg:
        with pytest.raises(RegistryError, match="disk is full"):
            refresh(reg, full_disk, [reg.get(RUN_ID)])  # a launch, the queue, a cancel: told, as before
        assert not reg.readonly
        [shown] = refresh(reg, full_disk, [reg.get(RUN_ID)], reading=True)
        assert shown.state == states.FAILED and reg.unsaved and not reg.readonly
        monkeypatch.undo()  # space freed
        refresh(reg, full_disk, [reg.get(RUN_ID)], reading=True)
        assert reg.get(RUN_ID).state == states.FAILED  # saved now
