"""Runs of the tests' sweep ``lt3`` waiting in this process's local queue, as a launch leaves them before the queue
takes them (tests/launch: a damaged registry, a queue that gives up)."""

from __future__ import annotations

import os


def queued_runs(ws, monkeypatch, n: int) -> list[str]:
    """The ids of ``n`` runs of sweep lt3 launched into workspace ``ws`` (nothing trained) and recorded PENDING in
    this process's local queue (``queue:<pid>``)."""
    from arctl.compose import resolve_sweep
    from arctl.launch import states
    from arctl.launch.job import RunJob
    from arctl.launch.launcher import items_from_resolved, launch
    from arctl.launch.registry import Registry

    items = items_from_resolved(resolve_sweep("lt3", []))[:n]
    monkeypatch.setattr(RunJob, "__call__", lambda self, run_dir: "not trained here")
    launch(items, ws, executor="debug", members=["lt3"])
    ids = [i.run_id for i in items]
    with Registry(ws.registry_path) as reg:
        for run_id in ids:
            reg.update(run_id, state=states.PENDING, executor="local", job_id=f"queue:{os.getpid()}")
    return ids
