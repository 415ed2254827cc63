"""A debug run trains inside the arctl process that launched it; status.json names that process (its pid). From a
hunt on macOS (no /proc): after that process died (kill -9) and an unrelated one (`sleep 1000`) took its pid, the run
stayed RUNNING, a relaunch skipped it "under way" and `arctl cancel` said to Ctrl-C the sleep. The pid is the run's
process only where its command line is arctl's and it started by the run's start, which `ps` says where /proc
cannot."""

from __future__ import annotations

import calendar
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.launch import refresh as refresh_mod
from arctl.launch import states, status_file
from arctl.launch.control import cancel_runs
from arctl.launch.refresh import debug_process_alive, refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace

RUN_ID = "e_a_s0_0123456789"
SLEEP = "import time; time.sleep(120)"


@pytest.fixture(params=["linux", "macos"])
def proc_fs(request, tmp_path, monkeypatch) -> str:
    """This machine as it is (/proc), or as a Mac is: no /proc, process facts from `ps` alone."""
    if request.param == "macos":
        real = Path

        def without_proc(*parts):
            path = real(*parts)
            return tmp_path / "no-proc" / path.relative_to("/") if str(path).startswith("/proc") else path

        monkeypatch.setattr(refresh_mod, "Path", without_proc)
        monkeypatch.setattr(status_file, "Path", without_proc)  # start_ticks, process_identity
        assert not refresh_mod.Path("/proc/self").exists()
        assert status_file.process_identity(os.getpid()) is None
    return request.param


@pytest.fixture
def processes():
    started = []

    def start(*args: str) -> subprocess.Popen:
        started.append(subprocess.Popen([sys.executable, "-c", SLEEP, *args]))
        time.sleep(0.2)  # exec'ed: its command line is its own
        return started[-1]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_process_that_started_after_the_run_holds_a_reused_pid(proc_fs, processes):
    # started after the run did: a reused pid, also where only ps can say when it started
    later = processes("-m", "arctl.cli.main", "run", "lt", "--executor", "debug")
    assert not debug_process_alive({"pid": later.pid, "started_at": time.time() - 3600})
    # the run's own process, started before the run; its command line is not asked (a notebook's, a script's)
    assert debug_process_alive({"pid": later.pid, "started_at": time.time()})
    unrelated = processes("sleep", "1000")
    assert debug_process_alive({"pid": unrelated.pid, "started_at": time.time()})
    assert debug_process_alive({"pid": os.getpid(), "started_at": time.time()})
    assert not debug_process_alive({"pid": os.getpid(), "started_at": time.time() - 10 * 86400})  # reused


def test_a_debug_run_whose_pid_an_unrelated_process_took_is_failed_not_left_to_it(proc_fs, processes, tmp_path):
    ws = Workspace(tmp_path / "ws")
    run_dir = ws.run_dir(RUN_ID)
    run_dir.mkdir(parents=True)
    started = time.time() - 30
    unrelated = processes("sleep", "1000")  # took the pid of the arctl process, killed
    write_status(run_dir, state="running", pid=unrelated.pid, host=socket.gethostname(),
                 started_at=started, executor="debug", step=7)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, state=states.RUNNING, executor="debug", job_id="debug",
                   started_at=started)
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
        assert (after.state, after.error) == (states.FAILED, "the process running it (debug executor) exited")
        reg.update(RUN_ID, state=states.RUNNING, ended_at=None, error=None)
        ((_, said),) = cancel_runs(reg, ws, [reg.get(RUN_ID)])  # not "stop it there with Ctrl-C": the sleep is not it
        assert said.startswith("cancelled") and reg.get(RUN_ID).state == states.CANCELLED, said
    assert unrelated.poll() is None  # left alone


def test_ps_says_when_a_process_started_where_there_is_no_proc(monkeypatch):
    """``ps`` is asked in UTC (from the hunt of clocks: its local time, in the hour a daylight-saving change repeats,
    named two instants, and a process's start read 1 h late), whatever the user's TZ."""
    pid, now = os.getpid(), time.time()
    said = {"lstart": (0, "Sun Nov  1 01:30:00 2026\n"), "etimes": (0, "  231\n")}
    asked = []

    def ps(args, **kwargs):
        field = args[2].rstrip("=")
        asked.append((field, kwargs["env"]["LC_ALL"], kwargs["env"]["TZ"]))
        code, out = said[field]
        return subprocess.CompletedProcess(args, code, out, "")

    monkeypatch.setattr(refresh_mod.subprocess, "run", ps)
    monkeypatch.setenv("TZ", "America/New_York")  # 01:30 on 2026-11-01 happens twice there
    time.tzset()
    try:
        assert refresh_mod._ps_start(pid) == calendar.timegm((2026, 11, 1, 1, 30, 0, 0, 0, 0))
    finally:
        monkeypatch.undo()
        time.tzset()
    monkeypatch.setattr(refresh_mod.subprocess, "run", ps)
    assert asked == [("lstart", "C", "UTC0")]
    said["lstart"] = (1, "ps: lstart: keyword not found\n")  # where ps has etimes only
    assert now - 231 - 1.5 <= refresh_mod._ps_start(pid) <= time.time() - 231 - 1.0
    said["etimes"] = (1, "")  # gone
    assert refresh_mod._ps_start(pid) is None
    asked.clear()
    assert refresh_mod._process_start(pid) is not None and asked == []  # /proc is here: ps is not asked


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="/proc names a process as no other")
def test_a_clock_step_does_not_make_a_live_debug_process_look_reused(processes, monkeypatch):
    """From the hunt of clocks: a process's start was /proc/stat's boot time (wall clock, moved by every clock step)
    plus its ticks since boot, compared with the run's ``started_at``. An NTP step forward of a few seconds made the
    live arctl process of a debug run read as one started after the run: FAILED for good while it trained. The
    process's identity (its boot and start ticks, ``pid_start``) is compared now, where status.json has it."""
    me = {"pid": os.getpid(), "started_at": time.time(), "pid_start": status_file.process_identity(os.getpid())}
    unrelated = processes("sleep", "1000")
    reused = {**me, "pid": unrelated.pid}  # the pid now held by a process that is not the one named
    real = refresh_mod._process_start
    # what a step of the clock forward does to the start that /proc/stat's btime gives: this process (a test worker
    # may have run for minutes) reads as started 90 s after the run
    step = time.time() - real(os.getpid()) + 90.0
    monkeypatch.setattr(refresh_mod, "_process_start", lambda pid: real(pid) + step)
    assert debug_process_alive(me)
    assert not debug_process_alive(reused)
    # a status.json written by an arctl before this field: the times are compared, as before
    assert not debug_process_alive({k: v for k, v in me.items() if k != "pid_start"})


def test_a_debug_launch_names_its_process_in_status_json(tmp_path):
    from arctl.launch.status_file import mark_submitted, read_status

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    mark_submitted(run_dir, (os.getpid(), socket.gethostname()))
    named = read_status(run_dir)
    assert named["pid"] == os.getpid()
    if Path("/proc/self/stat").exists():
        assert named["pid_start"] == status_file.process_identity(os.getpid()) is not None
    mark_submitted(run_dir)  # a local or SLURM attempt: no process of this machine named
    assert read_status(run_dir).get("pid_start") is None
