"""A launch that died, for the tests of what the next command makes of its claims: a dead process's claim
token, and a run of sweep ``lt3`` (tests/launch's ``specs`` fixture) claimed again by a launch that died."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket


def dead_claim_token() -> str:
    """The claim token of a process of this host that has exited."""
    dead = mp.get_context("fork").Process(target=os._exit, args=(0,))
    dead.start()
    dead.join()
    return f"{socket.gethostname()}:{dead.pid}:x"


def dead_launch_run(tmp_path, job: str | None):
    """(workspace, run id): run b of sweep lt3, FAILED under job 40, claimed again by a launch that died after
    linking its new job ``job`` (status "submitted", the link newer than it); ``job`` None: before linking one."""
    from arctl.compose import resolve_sweep
    from arctl.launch import states
    from arctl.launch.launcher import items_from_resolved, launch
    from arctl.launch.registry import Registry
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="debug", members=["lt3"])
    b = items[1].run_id
    with Registry(ws.registry_path) as reg:
        reg.update_many([(b, {"state": states.FAILED, "error": "OOM", "executor": "slurm", "job_id": "40"})])
        reg.claim([i.record() for i in items if i.run_id == b], dead_claim_token())
    write_status(ws.run_dir(b), state="submitted", error=None)
    if job is not None:
        (ws.run_dir(b) / "job").mkdir(exist_ok=True)
        (ws.run_dir(b) / "job" / job).symlink_to(tmp_path)
    return ws, b
