"""One workspace under two names (found by a read-only hunt): `arctl status --workdir` through a bind mount of a
workspace (an Apptainer --bind, an automounter's second name, a collaborator's read-only mount), a symlinked or
relative path in the job's command line. The job's command line names the workspace by the other name: it was
taken for another workspace's job, its run recorded FAILED for good while it trained, and `arctl cancel`
exited 0 having cancelled nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import refresh, states
from arctl.launch.registry import Registry
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace


def _completed_run(root: Path) -> tuple[Workspace, str]:
    """A workspace with one completed run of sweep lt3 (debug executor)."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved, launch

    ws = Workspace(root)
    items = items_from_resolved(resolve_sweep("lt3", []))[:1]
    assert not launch(items, ws, executor="debug", members=["lt3"]).failed
    return ws, items[0].run_id


def _fake_job(cwd: Path, *args: str) -> subprocess.Popen:
    """A live process (cwd ``cwd``) whose command line ends with ``args``, as a local job's controller's does."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args], cwd=cwd)
    end = time.monotonic() + 60
    while time.monotonic() < end:  # right after the fork its command line is this process's, or empty
        if b"time.sleep(120)" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            break
        time.sleep(0.05)
    return proc


def _running(ws: Workspace, run: str, pid: int, updated_at: float | None = None) -> None:
    """The run's registry row and status.json as while local job ``pid`` trains it."""
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.update(run, state=states.RUNNING, executor="local", job_id=str(pid), submitted_at=now - 5,
                   started_at=now - 5, ended_at=None)
    write_status(ws.run_dir(run), state="running", executor="local", job_id=str(pid), host=socket.gethostname(),
                 ended_at=None)
    if updated_at is not None:
        path = ws.run_dir(run) / "status.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": updated_at}))


def _status(root: Path) -> dict:
    res = CliRunner().invoke(app, ["status", "--json", "--workdir", str(root)])
    assert res.exit_code == 0, res.output
    return {r["run_id"]: r for r in json.loads(res.stdout)}


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc")
@pytest.mark.parametrize("spelling", ["symlink", "relative", "bind"])
def test_a_job_that_names_the_workspace_by_another_path_is_its_own(specs, tmp_path, spelling):
    """The job's command line names the run folder through a symlink, relative to its working folder, or through
    a bind mount: the same folder (device and inode), so the run stays RUNNING, nothing is recorded FAILED, and
    the job is the workspace's own (a cancel signals it)."""
    ws, run = _completed_run(tmp_path / "ws")
    other = tmp_path / "alias"
    if spelling == "symlink":
        other.symlink_to(ws.root)
        arg, cwd = f"{other}/runs/{run}/job/%j", tmp_path
    elif spelling == "relative":
        arg, cwd = f"ws/runs/{run}/job/%j", tmp_path
    else:
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("a bind mount needs root")
        other.mkdir()
        if subprocess.run(["mount", "--bind", str(ws.root), str(other)], capture_output=True).returncode != 0:
            pytest.skip("mount --bind is not allowed here")
        arg, cwd = f"{other}/runs/{run}/job/%j", tmp_path
    proc = _fake_job(cwd, "submitit.local._local", arg)
    try:
        _running(ws, run, proc.pid)
        for root in (ws.root, *([other] if spelling == "bind" else [])):  # the workspace by either name
            row = _status(root)[run]
            assert row["state"] == states.RUNNING, row  # FAILED: "its job ... is another workspace's"
        with Registry(ws.registry_path) as reg:
            assert reg.get(run).state == states.RUNNING and not reg.get(run).error
    finally:
        proc.kill()
        proc.wait()
        if spelling == "bind":
            subprocess.run(["umount", str(other)], check=True)


def test_a_job_whose_folder_cannot_be_looked_at_is_judged_by_its_status_file(specs, tmp_path, monkeypatch):
    """Another user's job whose folder argument is a path this process cannot find (a path inside its container;
    its /proc view closed to us): a status.json that says it trains, written lately, keeps it RUNNING; one that
    stopped changing long ago leaves it another workspace's (a copy's), as before."""
    ws, run = _completed_run(tmp_path / "ws")
    proc = _fake_job(tmp_path, "submitit.local._local", f"/container-only/ws/runs/{run}/job/%j")
    real_stat = os.stat

    def closed(path, *args, **kwargs):  # another user's process: /proc/PID/root cannot be followed
        if str(path).startswith(f"/proc/{proc.pid}/"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(refresh.os, "stat", closed)
    try:
        _running(ws, run, proc.pid)
        assert _status(ws.root)[run]["state"] == states.RUNNING
        _running(ws, run, proc.pid, updated_at=time.time() - 2 * refresh.FRESH_S)
        row = _status(ws.root)[run]
        assert row["state"] == states.FAILED and "another workspace" in row["error"], row
    finally:
        proc.kill()
        proc.wait()


def test_a_copys_job_is_still_another_workspaces(specs, tmp_path):
    """A `cp -r` copy's run folder is another inode: the original's job, named by the original's path, is not the
    copy's even through an alias of the copy (the inode comparison does not undo the copies' fix)."""
    ws, run = _completed_run(tmp_path / "ws")
    proc = _fake_job(tmp_path, "submitit.local._local", f"{ws.run_dir(run)}/job/%j")
    try:
        _running(ws, run, proc.pid)
        copy = tmp_path / "copy"
        shutil.copytree(ws.root, copy)
        (tmp_path / "copy_link").symlink_to(copy)
        row = _status(tmp_path / "copy_link")[run]
        assert row["state"] == states.FAILED and "another workspace" in row["error"], row
        assert _status(ws.root)[run]["state"] == states.RUNNING
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("as_json", [False, True])
def test_cancel_exits_1_when_a_run_it_names_was_not_cancelled(specs, tmp_path, as_json):
    """"0 run(s) cancelled; 1 not cancelled" exited 0: `arctl cancel X && next` went on as if the job had stopped.
    A run whose job may still run (here: another host's) exits 1; one that was not active exits 0."""
    ws, run = _completed_run(tmp_path / "ws")
    flags = ["--json"] if as_json else []
    res = CliRunner().invoke(app, ["cancel", run, "--workdir", str(ws.root), *flags])
    assert res.exit_code == 0 and "not active" in res.stdout, res.output  # nothing to stop: no failure
    with Registry(ws.registry_path) as reg:
        reg.update(run, state=states.RUNNING, executor="local", job_id="4242", submitted_at=time.time(),
                   ended_at=None)
    write_status(ws.run_dir(run), state="running", executor="local", host="another-host.invalid", ended_at=None)
    res = CliRunner().invoke(app, ["cancel", run, "--workdir", str(ws.root), *flags])
    assert res.exit_code == 1, res.output
    if as_json:
        (row,) = json.loads(res.stdout)
        assert row["cancelled"] is False and "another-host.invalid" in row["outcome"], row
    else:
        assert "0 run(s) cancelled; 1 not cancelled" in res.stdout, res.output
    with Registry(ws.registry_path) as reg:
        assert reg.get(run).state == states.RUNNING
