"""`arctl status` of an ended run whose row has no ``ended_at`` (an older arctl marked a killed run FAILED and filled
``ended_at`` only for the runs it refreshed): from a hunt, its elapsed time grew on every call (``0:23:45`` for a
run that lasted 55 s; ``elapsed_s`` in --json likewise). It is the time to the row's last write, in both."""

from __future__ import annotations

import json
import time
import types

import pytest
from typer.testing import CliRunner

from arctl.cli import cmd_status
from arctl.cli.main import app
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace


def _workspace(tmp_path, state: str) -> tuple[Workspace, float]:
    """Run r0 started 55 s before its row was last written (``state``, no ``ended_at``); returns that write's time."""
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update("r0", state=state, claim=None, before_claim=None, started_at=time.time() - 55, error="killed")
        rec = reg.get("r0")
    assert rec.ended_at is None
    return ws, rec.updated_at


def _status(ws, monkeypatch, at: float, *args: str):
    monkeypatch.setattr(cmd_status, "time", types.SimpleNamespace(time=lambda: at))  # status's "now" only
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root), *args])
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize("refresh", ["--no-refresh", "--refresh"])
def test_an_ended_run_without_ended_at_shows_the_same_elapsed_time_on_every_call(tmp_path, monkeypatch, refresh):
    ws, last = _workspace(tmp_path, "FAILED")
    for later in (1, 3600):  # a second later, and an hour later: the same
        (row,) = [line for line in _status(ws, monkeypatch, last + later, refresh).output.splitlines()
                  if line.startswith("r0 ")]
        assert row.split()[-1] == "0:00:55", row
        (doc,) = json.loads(_status(ws, monkeypatch, last + later, refresh, "--json").stdout)
        assert doc["state"] == "FAILED" and doc["elapsed_s"] == pytest.approx(55, abs=1)


def test_an_active_run_still_counts_to_now(tmp_path, monkeypatch):
    ws, last = _workspace(tmp_path, "RUNNING")
    (doc,) = json.loads(_status(ws, monkeypatch, last + 3600, "--no-refresh", "--json").stdout)
    assert doc["elapsed_s"] == pytest.approx(3655, abs=1)
