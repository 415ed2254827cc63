"""What the hunt of the registry, `arctl repair` and `arctl export` left (fixer repair2):

- `arctl repair` keeps `arctl cancel`'s request of a run that ended (``cancel_requested``): `arctl status --json`
  shows after a repair what it showed before the damage;
- a registry damaged while a local queue waits for its launch to record it (its first look at the registry) is
  handled as in its later passes: let go while it waits, opened again, no traceback;
- a copy of a workspace (``cp -a ws ws2``): the hints stored in its registry name the copy, not the original.
"""

from __future__ import annotations

import os
import shutil
import socket

import yaml
from ended_jobs import EndedExecutor as _Executor  # tests/support/ended_jobs.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.control import cancel_runs
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token
from arctl.launch.status_file import mark_submitted, name_job_process
from arctl.launch.workspace import Workspace


def _folder(ws: Workspace, run_id: str) -> None:
    run_dir = ws.run_dir(run_id)
    (run_dir / "job").mkdir(parents=True)
    config = {"experiment": "exp", "arm": "a", "seed": 0, "run_id": run_id, "backend": "tiny",
              "scale": {"name": "tiny"}, "cluster": {"executor": "local"},
              "wandb": {"group": "exp", "mode": "offline", "id": run_id}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))


def _queued_local(ws: Workspace, run_id: str, queue_pid: int) -> None:
    """Run ``run_id`` as the launcher leaves one it gave the local queue of process ``queue_pid``."""
    _folder(ws, run_id)
    queue = f"queue:{queue_pid}"
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=run_id, experiment="exp", arm="a", seed=0)], new_claim_token())
        reg.update(run_id, state=states.PENDING, executor="local", job_id=queue, attempts=1, wandb_id=run_id,
                   claim=None, before_claim=None)
    mark_submitted(ws.run_dir(run_id), (None, socket.gethostname()))
    name_job_process(ws.run_dir(run_id), queue, queue_pid)


def _repair(ws: Workspace) -> str:
    res = CliRunner().invoke(app, ["repair", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    return res.output


# ---- 1. a cancelled run keeps its cancel request through a repair -----------------------------------------------


def test_status_shows_a_cancelled_runs_request_after_a_repair_as_before(tmp_path, statuses):
    ws = Workspace(tmp_path / "ws")
    run_id = "exp_a_s0_aaaa"
    _queued_local(ws, run_id, os.getpid())  # (a live process: the queue the launch named)
    with Registry(ws.registry_path) as reg:
        ((rec, _),) = cancel_runs(reg, ws, [reg.get(run_id)])
    assert rec.state == states.CANCELLED and rec.cancel_requested is not None
    (before,) = statuses(ws.root)

    _repair(ws)  # (a healthy registry: what a damaged one gives too, rebuilt from the same folders)
    (after,) = statuses(ws.root)
    keys = ("state", "job_id", "wandb_id", "attempts", "ended_at", "cancel_requested", "error")
    assert {k: after[k] for k in keys} == {k: before[k] for k in keys}  # cancel_requested: None before the fix
    assert after["cancel_requested"] == rec.cancel_requested


# ---- 2. the local queue's first look at the registry -----------------------------------------------------------




def _quick(monkeypatch, executor: _Executor):
    import arctl.launch.local_queue as local_queue

    monkeypatch.setattr(local_queue, "local_executor", lambda folder, cluster: executor)
    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "POLL_S", 0.01)
    return local_queue


def test_a_registry_damaged_while_the_queue_waits_for_its_launch_is_tried_again(tmp_path, monkeypatch, capsys):
    """The first wait (WAIT_FOR_REGISTRY_S, for the launcher to record the queue's pid) reads the registry too: a
    damaged read there is handled as in the later passes (before the fix: a RegistryError out of the queue, a
    traceback in its log, its runs left waiting in the registry for a queue that had died)."""
    ws = Workspace(tmp_path / "ws")
    run_id = "exp_a_s0_aaaa"
    _queued_local(ws, run_id, os.getpid())  # recorded under this process's queue
    executor = _Executor()
    local_queue = _quick(monkeypatch, executor)
    real_get, left, closed = Registry.get, {"n": 1}, []

    def damaged_once(self, rid):
        if left["n"]:
            left["n"] -= 1
            raise RegistryError(f"{ws.registry_path} is damaged (database disk image is malformed)")
        return real_get(self, rid)

    real_close = Registry.close
    monkeypatch.setattr(Registry, "get", damaged_once)
    monkeypatch.setattr(Registry, "close", lambda self: (closed.append(self), real_close(self))[1])
    local_queue.run_queue(ws.root, [run_id], parallelism=1)

    assert left["n"] == 0 and closed  # damaged on the first read, and let go of while it waited
    assert "registry or disk problem" in capsys.readouterr().out
    assert len(executor.started) == 1
    with Registry(ws.registry_path) as reg:
        assert reg.get(run_id).state == states.COMPLETED


def test_a_queue_whose_registry_is_damaged_as_it_starts_carries_on_with_the_repaired_one(tmp_path, monkeypatch):
    """A registry damaged on the disk before the queue could open it (truncated): the queue waits, and a repair
    replaces the file meanwhile (before the fix: the queue's first open raised, a traceback)."""
    import arctl.launch.repair as repair

    ws = Workspace(tmp_path / "ws")
    run_id = "exp_a_s0_aaaa"
    _queued_local(ws, run_id, os.getpid())
    with open(ws.registry_path, "r+b") as f:  # (closed: nothing of it is in a -wal file)
        f.truncate(1024)
    executor = _Executor()
    local_queue = _quick(monkeypatch, executor)
    repaired, real_wait = [], local_queue.Trouble.wait

    def repair_meanwhile(self, err):  # the user runs `arctl repair` while the queue waits
        assert "damaged" in str(err) or "not a database" in str(err), err
        if not repaired:
            repaired.append(repair.rebuild_registry(ws))
        return real_wait(self, err)

    monkeypatch.setattr(local_queue.Trouble, "wait", repair_meanwhile)
    local_queue.run_queue(ws.root, [run_id], parallelism=1)

    assert len(repaired) == 1 and repaired[0].kept is not None
    assert executor.started == []  # the new registry names no queue for it: the queue starts nothing
    with Registry(ws.registry_path) as reg:
        rec = reg.get(run_id)
    assert rec.state == states.FAILED and "never started" in rec.error  # (repair.NOT_STARTED)


# ---- 3. a copied workspace's stored hints name the copy ---------------------------------------------------------


def test_the_hints_a_copied_workspace_stored_name_the_copy(tmp_path, statuses):
    ws = Workspace(tmp_path / "orig ws")  # (a space and a quote: the stored hint quotes the path)
    run_id = "exp_a_s0_aaaa"
    _folder(ws, run_id)
    mark_submitted(ws.run_dir(run_id), (None, socket.gethostname()))  # a local run its queue never started
    _repair(ws)  # stores "... `arctl resume RUN --workdir '<tmp>/orig ws'` resumes it"
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, warning=f"checkpoints: see `arctl logs {run_id} --workdir '{ws.root}'`")
    (original,) = statuses(ws.root)
    assert f"--workdir '{ws.root}'" in original["error"], original["error"]

    copy = Workspace(tmp_path / "copy's ws")
    shutil.copytree(ws.root, copy.root, symlinks=True)  # cp -a ws ws2
    (seen,) = statuses(copy.root)
    named = f"--workdir '{str(copy.root).replace(chr(39), chr(39) + chr(34) + chr(39) + chr(34) + chr(39))}'"
    assert f"`arctl resume {run_id} {named}` resumes it" in seen["error"], seen["error"]
    assert str(ws.root) not in seen["error"] and str(ws.root) not in seen["warning"]  # before the fix: the original
    assert f"`arctl logs {run_id} {named}`" in seen["warning"], seen["warning"]
    res = CliRunner().invoke(app, ["status", "--workdir", str(copy.root)])
    assert res.exit_code == 0 and str(ws.root) not in res.output, res.output
    (still,) = statuses(ws.root)  # the original's as it was
    assert still["error"] == original["error"]


def test_in_workspace_renames_every_form_a_stored_hint_gives_the_workspace(tmp_path):
    import shlex

    from arctl.launch.registry import in_workspace
    from arctl.launch.workspace import workdir_arg

    here = tmp_path / "now here"
    for old in ("/data/ws", "/data/my ws", "/data/it's ws", "/data/wé", "/data/a\"b"):
        text = (f"failed; `arctl resume r_a_s0_x{workdir_arg(old, stored=True)}` resumes it, or "
                f"`arctl run r --seeds 0{workdir_arg(old, stored=True)} cluster.mem_gb=<GB>` (with more)")
        assert in_workspace(text, here) == (f"failed; `arctl resume r_a_s0_x --workdir {shlex.quote(str(here))}` "
                                            f"resumes it, or `arctl run r --seeds 0 --workdir {shlex.quote(str(here))}"
                                            " cluster.mem_gb=<GB>` (with more)"), old
    assert in_workspace("no command here", here) == "no command here"


def test_a_jobs_own_error_names_the_copy_it_is_read_in(tmp_path):
    """`arctl logs` gives a failed job's own report (status.json's error: a full disk, a hung run), whose command
    names the workspace it was written in; read in a copy (`cp -a ws ws2`), it named the original."""
    from arctl.launch.control import error_summary
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import workdir_arg

    ws, copy = Workspace(tmp_path / "ws"), Workspace(tmp_path / "ws 2")
    run_id = "exp_a_s0_aaaa"
    ws.run_dir(run_id).mkdir(parents=True)
    write_status(ws.run_dir(run_id), error=f"the disk is full: free some, then `arctl resume {run_id}"
                                           f"{workdir_arg(ws.root, stored=True)}`")
    shutil.copytree(ws.root, copy.root, symlinks=True)
    record = RunRecord(run_id=run_id, experiment="exp", arm="a", seed=0, state=states.FAILED)
    assert error_summary(ws, record).endswith(f"`arctl resume {run_id} --workdir {ws.root}`")
    said = error_summary(copy, record)
    assert said.endswith(f"`arctl resume {run_id} --workdir '{copy.root}'`") and f"{ws.root}`" not in said, said
