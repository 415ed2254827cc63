"""A Mac whose host name changed with its network (macOS names itself by DHCP, reverse DNS or LocalHostName.local
unless HostName is set): from a hunt, arctl compared status.json's `host` with the host's name now, took the Mac's
own local jobs for another host's, kept a dead one RUNNING for ever, refused to cancel a live one ("runs on
Janes-MacBook-Pro.local, not this host") and relaunched it beside itself after `--force`. A Mac records its
IOPlatformUUID beside the name (`host_id`); a record of the same identity is this host's whatever the name. Linux,
whose containers share a kernel and often /etc/machine-id but not their pids, records none: unchanged."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.config import files
from arctl.launch import local_queue, states
from arctl.launch.control import FORCE_LEAVES_IT, cancel_runs
from arctl.launch.refresh import local_job_alive, refresh
from arctl.launch.registry import Registry, RunRecord, claim_is_stale, new_claim_token
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import mark_submitted, read_status, write_status
from arctl.launch.workspace import Workspace

RUN_ID = "e_a_s0_0123456789"
OLD, NEW = "Janes-MacBook-Pro.local", "dhcp-10-20-30-40.home"
MAC = "8F3E2A10-6C4B-5D7E-9A1B-2C3D4E5F6A7B"
IOREG = f'''+-o J316sAP  <class IOPlatformExpertDevice, id 0x100000220, registered, matched, active, busy 0>
    {{
      "IOPlatformSerialNumber" = "C02XXXXXXXXX"
      "IOPlatformUUID" = "{MAC}"
      "manufacturer" = <"Apple Inc.">
    }}
'''


def _machine(monkeypatch, name: str, identity: str | None) -> None:
    """This process on a host named ``name`` whose machine identity is ``identity`` (None: Linux's)."""
    monkeypatch.setattr(socket, "gethostname", lambda: name)
    monkeypatch.setattr(files, "_IDENTITY", [identity])


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def _local_run(tmp_path: Path, job_id: str, submitted: float) -> tuple[Workspace, Path, RunRecord]:
    """A local run RUNNING under job ``job_id``, whose launch and job wrote status.json on this host as named now."""
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 300}, "wandb": {"mode": "disabled", "id": RUN_ID}}
    run_dir = prepare_run_dir(ws.run_dir(RUN_ID), config)
    mark_submitted(run_dir, (None, socket.gethostname()))  # the launch's
    write_status(run_dir, state="running", job_id=job_id, host=socket.gethostname(), pid=int(job_id),
                 started_at=submitted, step=3)  # the job's (arctl.launch.job._start_attempt)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, state=states.RUNNING, executor="local", job_id=job_id,
                   submitted_at=submitted, started_at=submitted)
        return ws, run_dir, reg.get(RUN_ID)


def test_a_renamed_macs_dead_local_job_is_found_dead(tmp_path, monkeypatch):
    _machine(monkeypatch, OLD, MAC)
    ws, run_dir, rec = _local_run(tmp_path, str(_dead_pid()), time.time())
    assert read_status(run_dir)["host_id"] == MAC
    _machine(monkeypatch, NEW, MAC)  # the Mac joined another network
    with Registry(ws.registry_path) as reg:
        [after] = refresh(reg, ws, [rec])
    assert after.state == states.FAILED and "the job process died without reporting" in after.error, after


def test_a_renamed_macs_live_local_job_is_cancelled_not_refused(tmp_path, monkeypatch):
    _machine(monkeypatch, OLD, MAC)
    submitted = time.time()
    ws = Workspace(tmp_path / "ws")
    # a process as a local job's is: its command line names submitit and a path in its run's folder
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "submitit",
                            str(ws.run_dir(RUN_ID).absolute() / "job" / "x")])
    try:
        ws, run_dir, rec = _local_run(tmp_path, str(job.pid), submitted)
        _machine(monkeypatch, NEW, MAC)
        assert local_job_alive(rec, read_status(run_dir), ws) is True
        with Registry(ws.registry_path) as reg:
            ((_, said),) = cancel_runs(reg, ws, [rec])
        assert said.startswith(f"cancelling (job {job.pid})"), said
        assert job.wait(timeout=30) == -15  # signalled here: it stops, no job is left training beside a relaunch
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


@pytest.mark.parametrize("recorded, here", [(None, MAC), (MAC, None), (None, None), ("another Mac's", MAC)],
                         ids=["record-without-identity", "host-without-identity", "linux", "another-mac"])
def test_another_hosts_job_is_still_another_hosts(tmp_path, monkeypatch, recorded, here):
    """Linux (no identity), a record written before the identity was (none in it), another Mac: a host of another
    name is another host, as before: its job is left RUNNING, and `arctl cancel` refuses, saying --force leaves the
    job running."""
    _machine(monkeypatch, "node-a", recorded)
    ws, run_dir, rec = _local_run(tmp_path, str(_dead_pid()), time.time())
    if recorded is None:  # as written before the field was
        status = read_status(run_dir)
        status.pop("host_id")
        (run_dir / "status.json").write_text(json.dumps(status))
    _machine(monkeypatch, "node-b", here)
    assert local_job_alive(rec, read_status(run_dir), ws) is None
    with Registry(ws.registry_path) as reg:
        [after] = refresh(reg, ws, [rec])
        assert after.state == states.RUNNING
        ((_, said),) = cancel_runs(reg, ws, [after])
        assert reg.get(RUN_ID).state == states.RUNNING
    assert said == (f"not cancelled: its job (process {rec.job_id}) runs on node-a, not this host: cancel it there "
                    f"({FORCE_LEAVES_IT})")
    assert "but leaves it running" in said


def test_status_json_records_the_identity_of_the_host_it_names(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _machine(monkeypatch, OLD, MAC)
    assert write_status(run_dir, host=OLD, pid=7)["host_id"] == MAC
    assert write_status(run_dir, host="another-node", pid=8)["host_id"] is None  # (another host's, restored)
    assert write_status(run_dir, host=None, pid=None)["host_id"] is None
    assert write_status(run_dir, host=OLD, host_id="given")["host_id"] == "given"
    _machine(monkeypatch, "node-a", None)  # Linux
    assert write_status(run_dir, host="node-a")["host_id"] is None
    assert read_status(run_dir)["host"] == "node-a"


def _claimed(token: str) -> RunRecord:
    return RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0, state=states.SUBMITTING, claim=token,
                     updated_at=time.time())


def test_a_renamed_macs_dead_launch_leaves_a_stale_claim(monkeypatch):
    dead = _dead_pid()
    _machine(monkeypatch, OLD, MAC)
    token = new_claim_token()
    assert token.startswith(f"{OLD}@{MAC}:{os.getpid()}:")
    mine, its = _claimed(f"{token.split(':')[0]}:{os.getpid()}:x"), _claimed(f"{token.split(':')[0]}:{dead}:x")
    _machine(monkeypatch, NEW, MAC)
    assert claim_is_stale(its, time.time()) and not claim_is_stale(mine, time.time())
    assert not claim_is_stale(_claimed(f"{OLD}@another:{dead}:x"), time.time())  # another Mac's: its own to judge
    assert not claim_is_stale(_claimed(f"{OLD}:{dead}:x"), time.time())  # a claim of before the identity: its name
    _machine(monkeypatch, "node-a", None)  # Linux: the token and its judgement as before
    token = new_claim_token()
    assert token.startswith(f"node-a:{os.getpid()}:") and "@" not in token
    assert claim_is_stale(_claimed(f"node-a:{dead}:x"), time.time())
    assert not claim_is_stale(_claimed(f"node-b:{dead}:x"), time.time())


def test_a_macs_local_slots_and_temp_file_owner_outlast_its_rename(tmp_path, monkeypatch):
    _machine(monkeypatch, OLD, MAC)
    monkeypatch.setattr(files, "_PLACE", None)
    slots, place = local_queue.slots_folder(tmp_path), files._writer_place()
    _machine(monkeypatch, NEW, MAC)
    monkeypatch.setattr(files, "_PLACE", None)
    assert (local_queue.slots_folder(tmp_path), files._writer_place()) == (slots, place)
    _machine(monkeypatch, "node-a", None)  # Linux: by the host's name, as before
    monkeypatch.setattr(files, "_PLACE", None)
    assert local_queue.slots_folder(tmp_path) == tmp_path / local_queue.SLOTS_DIR / "node-a"
    place_a = files._writer_place()
    _machine(monkeypatch, "node-b", None)
    monkeypatch.setattr(files, "_PLACE", None)
    assert files._writer_place() != place_a


def test_the_machine_identity_is_a_macs_platform_uuid_and_none_elsewhere(monkeypatch):
    calls = []

    def ioreg(args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=IOREG, stderr="")

    monkeypatch.setattr(files.subprocess, "run", ioreg)
    monkeypatch.setattr(files, "_IDENTITY", [])
    monkeypatch.setattr(files.sys, "platform", "darwin")
    assert files.machine_identity() == MAC and files.machine_identity() == MAC
    assert calls == [["ioreg", "-rd1", "-c", "IOPlatformExpertDevice"]]  # asked once per process
    monkeypatch.setattr(files, "_IDENTITY", [])
    monkeypatch.setattr(files.subprocess, "run", lambda args, **kwargs: subprocess.CompletedProcess(args, 0, "", ""))
    assert files.machine_identity() is None  # ioreg said nothing of it
    monkeypatch.setattr(files, "_IDENTITY", [])

    def missing(args, **kwargs):
        raise FileNotFoundError(args[0])

    monkeypatch.setattr(files.subprocess, "run", missing)
    assert files.machine_identity() is None
    monkeypatch.setattr(files, "_IDENTITY", [])
    monkeypatch.setattr(files.sys, "platform", "linux")
    monkeypatch.setattr(files.subprocess, "run", ioreg)
    calls.clear()
    assert files.machine_identity() is None and calls == []  # never asked on Linux
