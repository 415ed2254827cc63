"""Another user's process that /proc hides (found by a hunt of a group's shared workspace): with /proc mounted
``hidepid=2`` (or ``invisible``), the usual hardening of a shared machine, a member's ``kill(pid, 0)`` answers EPERM
for another member's live job (it exists) while ``/proc/PID`` is not there. `arctl status` took the missing folder for
a process gone, and recorded the other member's training run FAILED ("died without reporting") for good; `arctl
cancel` said "not active", exited 0 and left it training; the member's local queue removed the other's
``waiting-*`` marker.

Shown here as hidepid=2 shows it: a pid that no process of this machine holds (so /proc has no folder for it),
for which ``os.kill`` answers EPERM. The user that started a job is the owner of the file naming its process
(``job_process``) or of its queue's marker: another user's (chown'ed, as root), or, run as another user, this
process's user taken for another one.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import local_queue, refresh, states
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import JOB_PROCESS_FILE, process_identity, write_status
from arctl.launch.workspace import Workspace

pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="hidepid is /proc's")

OTHER_UID = 54321  # a user that is not this process's


def _hidden_pid() -> int:
    """A pid no process of this machine holds: /proc has no folder for it, as for a process hidepid=2 hides."""
    top = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(top - 1, 300, -1):
        if not Path(f"/proc/{pid}").exists():
            return pid
    raise AssertionError("no free pid")


@pytest.fixture
def hidden(monkeypatch) -> int:
    """A pid whose process is another user's and hidden: ``os.kill`` says EPERM (it exists), /proc shows nothing."""
    pid = _hidden_pid()
    real_kill = os.kill

    def kill(target, sig):
        if target == pid:
            raise PermissionError(1, "Operation not permitted")
        return real_kill(target, sig)

    monkeypatch.setattr(os, "kill", kill)
    return pid


def _another_users(path: Path, monkeypatch) -> None:
    """``path`` made by another user: chown'ed where this process may (root), else this process taken for another
    user than the file's."""
    if os.geteuid() == 0:
        os.chown(path, OTHER_UID, -1)
    else:
        monkeypatch.setattr(os, "getuid", lambda: OTHER_UID)
        monkeypatch.setattr(os, "geteuid", lambda: OTHER_UID)


def _boot() -> str:
    return process_identity(os.getpid()).rsplit(":", 1)[0]


def _local_run(ws: Workspace, run: str, job_id: str, status_state: str = "running", named: str | None = None,
               updated_at: float | None = None) -> Path:
    """A local run whose job ``job_id`` (a controller's pid, or ``queue:PID``) trains it (or waits in that queue),
    its process named as its launch names it (``named``: ``<boot_id>:<ticks>``, this boot by default); returns
    the ``job_process`` file."""
    now = time.time()
    queued = job_id.startswith("queue:")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=run, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(run, state=states.PENDING if queued else states.RUNNING, executor="local", job_id=job_id,
                   submitted_at=now - 60, started_at=None if queued else now - 50, claim=None)
    run_dir = ws.run_dir(run)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_status(run_dir, state=status_state, executor="local", job_id=job_id, host=socket.gethostname())
    if updated_at is not None:
        path = run_dir / "status.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": updated_at}))
    marker = run_dir / JOB_PROCESS_FILE  # as the launcher or the queue wrote it, seeing its own child
    marker.write_text(f"{job_id} {named or _boot() + ':12345'}")
    return marker


def _status(root: Path) -> dict:
    res = CliRunner().invoke(app, ["status", "--json", "--workdir", str(root)])
    assert res.exit_code == 0, res.output
    return {r["run_id"]: r for r in json.loads(res.stdout)}


@pytest.mark.parametrize("written", ["lately", "long ago"])
def test_another_users_hidden_job_stays_running(tmp_path, monkeypatch, hidden, written):
    """The hunt's finding: the other member's live job is RUNNING, recorded so. Also where its status.json was
    written long ago: a live job writes it only when it logs a step, and a step (a warm-up, a model's loading)
    may take longer than FRESH_S; a process that cannot be seen cannot be told from the job, and a FAILED
    recorded while it trains is for good (its job's later "completed" is not read)."""
    ws = Workspace(tmp_path / "ws")
    old = None if written == "lately" else time.time() - 10 * refresh.FRESH_S
    _another_users(_local_run(ws, "r0", str(hidden), updated_at=old), monkeypatch)
    row = _status(ws.root)["r0"]
    assert row["state"] == states.RUNNING and not row.get("error"), row
    with Registry(ws.registry_path) as reg:
        assert reg.get("r0").state == states.RUNNING and reg.get("r0").error is None


def test_another_users_hidden_queue_still_holds_its_waiting_run(tmp_path, monkeypatch, hidden):
    """A run waiting in the other member's local queue: PENDING, not FAILED "the local queue stopped"."""
    ws = Workspace(tmp_path / "ws")
    _another_users(_local_run(ws, "q0", f"queue:{hidden}", status_state="submitted"), monkeypatch)
    assert _status(ws.root)["q0"]["state"] == states.PENDING


@pytest.mark.parametrize("now", [False, True])
def test_cancel_of_another_users_hidden_job_is_refused_and_exits_1(tmp_path, monkeypatch, hidden, now):
    """`arctl cancel` said "0 run(s) cancelled; 1 were not active", exited 0, recorded the run FAILED and left its
    job training: it says the job is another user's, exits 1 (README: a cancel that left another user's job
    running), and the run stays RUNNING."""
    ws = Workspace(tmp_path / "ws")
    _another_users(_local_run(ws, "r0", str(hidden)), monkeypatch)
    res = CliRunner().invoke(app, ["cancel", "r0", "--workdir", str(ws.root), *(["--now"] if now else [])])
    assert res.exit_code == 1, res.output
    assert f"its job (process {hidden}) is another user's" in res.output and "not active" not in res.output
    with Registry(ws.registry_path) as reg:
        rec = reg.get("r0")
    assert rec.state == states.RUNNING and rec.cancel_requested is None and rec.error is None


def test_own_job_whose_pid_is_another_users_now_is_dead(tmp_path, hidden):
    """This user's job: a signal would reach it, so EPERM says its pid holds another user's process now (its job
    died): FAILED, as before, and not "another workspace's"."""
    ws = Workspace(tmp_path / "ws")
    _local_run(ws, "r0", str(hidden))  # the file is this user's
    row = _status(ws.root)["r0"]
    assert row["state"] == states.FAILED and "died without reporting" in row["error"], row
    assert not refresh.pid_alive(hidden, "submitit", owner=os.getuid())
    assert refresh.pid_alive(hidden, "submitit", owner=OTHER_UID) and refresh.pid_alive(hidden, "submitit")


def test_a_hidden_job_named_in_an_earlier_boot_is_dead(tmp_path, monkeypatch, hidden):
    """A job named (``job_process``) in an earlier boot of this machine is gone, whoever holds its pid now: the pid
    of another user's job, killed by a reboot, reused by a daemon, hidden, is not taken for it."""
    ws = Workspace(tmp_path / "ws")
    _another_users(_local_run(ws, "r0", str(hidden), named="00000000-dead-boot-0000-000000000000:12345"),
                   monkeypatch)
    row = _status(ws.root)["r0"]
    assert row["state"] == states.FAILED and "died without reporting" in row["error"], row
    assert not refresh._not_reused(hidden, time.time(), 1.0, "an-earlier-boot:12345")
    assert refresh._not_reused(hidden, time.time(), 1.0, f"{_boot()}:12345")  # this boot's: cannot tell


def test_the_local_queue_keeps_another_users_hidden_queues_marker(tmp_path, monkeypatch, hidden):
    """Another member's queue waiting for a slot (its ``waiting-PID-N`` marker): a live queue, its marker kept, so
    this queue lets it take the slot it frees (the marker was removed: the two queues no longer took turns)."""
    marker = tmp_path / f"waiting-{hidden}-4"
    marker.touch()
    _another_users(marker, monkeypatch)
    assert local_queue._others_wait(tmp_path, 1, tmp_path)
    assert marker.exists()


def test_the_local_queue_removes_its_own_users_dead_queues_marker(tmp_path, hidden):
    """A marker this user's queue left, whose pid is another user's process now (EPERM: that queue is gone):
    removed, as before."""
    marker = tmp_path / f"waiting-{hidden}-4"
    marker.touch()
    assert not local_queue._others_wait(tmp_path, 1, tmp_path)
    assert not marker.exists()


def test_a_process_seen_gone_is_still_gone(tmp_path):
    """What the fix leaves as it was: a pid no process holds (ESRCH) is dead, and so is this user's own process
    whose /proc folder is gone (it ended meanwhile)."""
    pid = _hidden_pid()
    assert not refresh.pid_alive(pid, "submitit")
    assert not refresh.pid_alive(pid, "submitit", owner=OTHER_UID)
    with pytest.raises(ProcessLookupError):
        refresh._command_line(pid)
    assert refresh._command_line(pid, theirs=True) is None


def _debug_run(ws: Workspace, run: str, pid: int) -> Path:
    """A debug run trained in process ``pid`` (named in this boot), started 2 h ago, its status.json last written
    1 h ago (a long step, or its process died then); returns status.json."""
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=run, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(run, state=states.RUNNING, executor="debug", job_id="debug", submitted_at=now - 7200,
                   started_at=now - 7200, claim=None)
    run_dir = ws.run_dir(run)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_status(run_dir, state="running", executor="debug", pid=pid, pid_start=f"{_boot()}:12345",
                 started_at=now - 7200, host=socket.gethostname())
    path = run_dir / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "updated_at": now - 3600}))
    return path


def test_own_debug_run_whose_pid_is_another_users_now_is_dead(tmp_path, hidden):
    """From a review: the owner rule was the local jobs' alone. This user's debug run (its status.json, which its
    process writes, is this user's) whose arctl process died, its pid taken by another user's hidden process, stayed
    RUNNING for ever, and `arctl cancel` took it for live: FAILED, as for a local job."""
    ws = Workspace(tmp_path / "ws")
    status = _debug_run(ws, "d0", hidden)
    row = _status(ws.root)["d0"]
    assert row["state"] == states.FAILED and row["error"] == "the process running it (debug executor) exited", row
    assert not refresh.debug_process_alive(json.loads(status.read_text()), status.parent)


def test_another_users_hidden_debug_run_stays_running(tmp_path, monkeypatch, hidden):
    """The other side of the owner rule: another member's debug run, its process hidden, is not taken for dead."""
    ws = Workspace(tmp_path / "ws")
    _another_users(_debug_run(ws, "d0", hidden), monkeypatch)
    row = _status(ws.root)["d0"]
    assert row["state"] == states.RUNNING and not row.get("error"), row
    with Registry(ws.registry_path) as reg:
        assert reg.get("d0").state == states.RUNNING


def test_the_launching_user_recorded_beside_the_pid_wins_over_the_files_owner(tmp_path, hidden):
    """status.json's ``uid`` (written with the debug run's pid) names its user, whoever wrote the file last: this
    user's dead debug run is dead even where the file is another user's now."""
    import os

    ws = Workspace(tmp_path / "ws")
    status = _debug_run(ws, "d0", hidden)
    data = {**json.loads(status.read_text()), "uid": os.getuid()}
    status.write_text(json.dumps(data))
    if os.geteuid() == 0:
        os.chown(status, 65534, 65534)  # the file's owner now says another user
    assert not refresh.debug_process_alive(data, status.parent)
    assert refresh.debug_process_alive({**data, "uid": os.getuid() + 54321}, status.parent)  # another user's: alive


def test_a_debug_launch_records_its_user_beside_its_pid(tmp_path):
    import os

    from arctl.launch.status_file import mark_submitted, read_status

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    mark_submitted(run_dir, (os.getpid(), socket.gethostname()))
    assert read_status(run_dir)["uid"] == os.getuid()
    mark_submitted(run_dir)  # a local run: no process named, no user
    assert read_status(run_dir)["uid"] is None
