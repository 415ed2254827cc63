"""Copies made by hand: a `cp -r` copy of a live workspace, and a run folder copied inside a workspace (found by a
read-only hunt). A copy has the same registry rows (the same job pids) and the same config.yaml (the same run id):
neither may be taken for the original."""

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
from arctl.launch import states
from arctl.launch.registry import Registry
from arctl.launch.status_file import read_status, write_status
from arctl.launch.workspace import Workspace

# a process that leaves the file argv[1] when it gets TERM (what `arctl cancel` sends a local job's controller)
FAKE_JOB = ("import pathlib, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path(sys.argv[1]).touch(), sys.exit(0)))\n"
            "time.sleep(120)\n")


def _cli(ws: Workspace, *args: str):
    res = CliRunner().invoke(app, [*args, "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    return res.output


def _completed_runs(root: Path, arms: int = 1) -> tuple[Workspace, list[str]]:
    """(workspace, run ids): the first ``arms`` runs of sweep lt3, completed (debug executor)."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved, launch

    ws = Workspace(root)
    items = items_from_resolved(resolve_sweep("lt3", []))[:arms]
    result = launch(items, ws, executor="debug", members=["lt3"])
    assert not result.failed
    return ws, [i.run_id for i in items]


def _fake_job(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """A live process whose command line ends with ``args`` (a local job's), and the file it leaves when TERMed."""
    termed = tmp_path / "termed"
    proc = subprocess.Popen([sys.executable, "-c", FAKE_JOB, str(termed), *args])
    end = time.monotonic() + 60
    while time.monotonic() < end:  # right after the fork its command line is this process's, or empty
        try:
            if b"time.sleep(120)" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                break
        except OSError:
            break  # no /proc here: ps answers for it
        time.sleep(0.05)
    return proc, termed


@pytest.mark.parametrize("copy_name", ["ws_copy", "w"])  # the original's folder name starts the copy's, and back
@pytest.mark.parametrize("queued", [False, True])
def test_a_copy_of_a_live_workspace_neither_shows_nor_cancels_the_originals_local_job(specs, tmp_path, copy_name,
                                                                                      queued):
    """`cp -r ws ws_copy` while a local job runs (or waits in the local queue): the copy's registry has the job's
    pid, whose process (a submitit controller or the local queue) was taken for the copy's. Status there showed
    the run RUNNING for as long as the original ran, and `arctl cancel` there stopped the ORIGINAL's job. The
    process is this workspace's only where its command line names this workspace's folders: in the copy the run
    is what its files say, and a cancel there signals nothing; the original still sees and cancels its job."""
    from arctl.launch.control import cancel_runs

    ws, (run,) = _completed_runs(tmp_path / "ws")
    run_dir = ws.run_dir(run)
    if queued:  # as the launcher starts it: python -m arctl.launch.local_queue <root> --parallelism N ids...
        proc, termed = _fake_job(tmp_path, "arctl.launch.local_queue", str(ws.root), "--parallelism", "1", run)
        job, active, reported = f"queue:{proc.pid}", states.PENDING, "submitted"
    else:  # as the local queue starts it: python -m submitit.local._local <run folder>/job/%j
        proc, termed = _fake_job(tmp_path, "submitit.local._local", f"{run_dir}/job/%j")
        job, active, reported = str(proc.pid), states.RUNNING, "running"
    try:
        now = time.time()
        with Registry(ws.registry_path) as reg:
            reg.update(run, state=active, executor="local", job_id=job, submitted_at=now,
                       started_at=None if queued else now, ended_at=None)
        write_status(run_dir, state=reported, executor="local", job_id=None if queued else job,
                     host=socket.gethostname(), ended_at=None)
        copies = [Workspace(tmp_path / copy_name), Workspace(tmp_path / f"{copy_name}2")]
        for copy in copies:
            shutil.copytree(ws.root, copy.root)

        doc = {r["run_id"]: r for r in json.loads(_cli(copies[0], "status", "--json"))}
        assert doc[run]["state"] == states.FAILED, doc[run]  # RUNNING (PENDING) for as long as the original ran
        assert f"process {proc.pid}" in doc[run]["error"] and "another workspace" in doc[run]["error"], doc[run]
        out = _cli(copies[0], "cancel", run)
        assert "not active" in out, out
        with Registry(copies[1].registry_path) as reg:  # a cancel that finds the row as the copy was made
            ((_, said),) = cancel_runs(reg, copies[1], [reg.get(run)])
            assert reg.get(run).state == states.CANCELLED, said
        time.sleep(0.3)
        assert proc.poll() is None and not termed.exists(), said  # the original's job was never signalled

        with Registry(ws.registry_path) as reg:  # the original's job is still its own
            assert reg.get(run).state == active
        (line,) = [line for line in _cli(ws, "status").splitlines() if line.startswith(run)]
        assert active in line, line
        out = _cli(ws, "cancel", run)
        assert "1 run(s) cancelled" in out, out
        if not queued:  # the controller is asked to stop (a queued run is cancelled in the registry the queue reads)
            proc.wait(timeout=30)
            assert termed.exists()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow  # a real local job (the local queue and submitit's controller), held before its first step
def test_a_copy_of_a_workspace_with_a_real_local_job_leaves_that_job_to_the_original(specs, tmp_path, monkeypatch,
                                                                                      cli, waiter):
    """The same with a real local job: the command lines arctl matches are the ones its local queue and
    submitit's controller have."""
    gate = tmp_path / "go"  # the job waits before its first step until this exists
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    ws = Workspace(tmp_path / "ws")
    try:
        doc = json.loads(cli("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws.root),
                                 "--no-wait", "--json", check=True).stdout)
        run = doc["submitted"][0]["run_id"]
        waiter(lambda: read_status(ws.run_dir(run)).get("state") == "running", 60, "the job to start")
        pid = read_status(ws.run_dir(run))["pid"]
        copy = Workspace(tmp_path / "ws_copy")
        shutil.copytree(ws.root, copy.root)  # as `cp -r` does (the registry's write-ahead log too)
        out = _cli(copy, "cancel", run)
        assert "not active" in out, out  # FAILED: no process of the copy trains it
        (row,) = json.loads(_cli(copy, "status", "--json"))
        assert row["state"] == states.FAILED and "another workspace" in row["error"], row
        time.sleep(1.0)
        assert read_status(ws.run_dir(run)).get("state") == "running"  # the original's job was not stopped
        os.kill(pid, 0)
        (row,) = json.loads(_cli(ws, "status", "--json"))
        assert row["state"] == states.RUNNING, row
    finally:
        gate.touch()
    waiter(lambda: json.loads(_cli(ws, "status", "--json"))[0]["state"] == states.COMPLETED, 120,
           "the original's run to complete")
    _cli(copy, "resume", run, "--executor", "debug")  # what the copy's error says: the copy's run, in the copy
    (row,) = json.loads(_cli(copy, "status", "--json"))
    assert row["state"] == states.COMPLETED and read_status(copy.run_dir(run))["state"] == "completed", row


def test_repair_skips_a_run_folder_copied_by_hand_and_status_does_not_point_at_it(specs, tmp_path):
    """`cp -r runs/X runs/X.bak`: repair registered the copy as a run "X.bak" (its config.yaml says run X), and
    reports then found two runs of one cell; `arctl status` counted it among the run folders the registry lacks,
    for ever naming `arctl repair`. Repair skips it, saying whose copy it is; status leaves it out of that note."""
    ws, runs = _completed_runs(tmp_path / "ws", arms=2)
    copy = ws.runs_dir / f"{runs[0]}.bak"
    shutil.copytree(ws.run_dir(runs[0]), copy)
    out = _cli(ws, "status")
    assert "not in the registry" not in out and copy.name not in out, out

    doc = json.loads(_cli(ws, "repair", "--json"))
    assert sorted(r["run_id"] for r in doc["runs"]) == sorted(runs)
    (skipped,) = doc["skipped"]
    assert skipped["folder"] == copy.name and f"a copy of run {runs[0]}" in skipped["why"], skipped
    with Registry(ws.registry_path) as reg:
        assert sorted(r.run_id for r in reg.list()) == sorted(runs)
    out = _cli(ws, "repair")
    assert f"skipped {copy.name}: it is a copy of run {runs[0]}" in " ".join(out.split()), out
    assert "not in the registry" not in _cli(ws, "status")

    (ws.registry_path).write_bytes(b"")  # emptied: the runs are pointed out, the copy is not one of them
    (note,) = [line for line in _cli(ws, "status", "--no-refresh").splitlines() if "not in the registry" in line]
    assert note.startswith("note: 2 run folder(s)") and copy.name not in note, note


def test_a_copys_local_queue_does_not_wait_for_the_originals_queue(tmp_path):
    """A copy has the original's ``waiting-PID-N`` markers (a queue waiting for one of the original's slots): the
    copy's queue took that queue for one of its own, held the slots it freed for it, and kept its marker."""
    from arctl.launch.local_queue import QUEUE_MODULE, _others_wait, _still_held, slots_folder, take_slot

    ws, copy = tmp_path / "ws", tmp_path / "ws_copy"
    queue, _ = _fake_job(tmp_path, QUEUE_MODULE, str(ws), "--parallelism", "1", "some_run")
    try:
        for root in (ws, copy):
            slots_folder(root).mkdir(parents=True)
            (slots_folder(root) / f"waiting-{queue.pid}-1").touch()
        assert _others_wait(slots_folder(ws), 0, ws)
        take_slot(slots_folder(ws), 1).close()  # slot 0 there, free: held for the waiting queue
        assert _still_held(slots_folder(ws), {0}, ws)
        take_slot(slots_folder(copy), 1).close()
        assert not _still_held(slots_folder(copy), {0}, copy)
        assert not _others_wait(slots_folder(copy), 0, copy)
        assert not (slots_folder(copy) / f"waiting-{queue.pid}-1").exists()  # not a queue of the copy's
        assert (slots_folder(ws) / f"waiting-{queue.pid}-1").exists()
    finally:
        queue.kill()
        queue.wait()
