"""One run of ``ablation-vr`` registered by hand in a fresh workspace, for the tests of `arctl logs` and the
terminal: a registry row in ``state`` with job ``job_id`` of ``executor`` and the run's folder with its
status.json; the tests write the job's submitit log files themselves."""

from __future__ import annotations

import time

from arctl.launch import states
from arctl.launch.registry import Registry, new_claim_token
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace


def registered_run(tmp_path, state: str, job_id: str, host: str | None = None, executor: str = "local"):
    """(workspace, run id, run folder): ``tmp_path/ws`` with one run of ablation-vr; its status.json names
    ``host`` (another host's job: a refresh keeps the registry's state)."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved

    ws = Workspace(tmp_path / "ws")
    item = items_from_resolved(resolve_experiment("ablation-vr", [], "tiny", None, None))[0]
    now = time.time()
    with Registry(ws.registry_path) as reg:
        reg.claim([item.record()], new_claim_token(), members=["ablation-vr"])
        reg.update(item.run_id, state=state, executor=executor, job_id=job_id, claim=None, before_claim=None,
                   submitted_at=now - 5, ended_at=None if state in states.ACTIVE else now)
    run_dir = ws.run_dir(item.run_id)
    run_dir.mkdir(parents=True)
    write_status(run_dir, state="submitted" if state in states.ACTIVE else "completed", host=host)
    return ws, item.run_id, run_dir
