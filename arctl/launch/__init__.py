"""Launch layer: submitit executors (slurm, local, debug), the run registry, the job entry point.

    items = items_from_resolved(resolve_sweep("priors"))
    result = launch(items, Workspace.open(), executor=None)   # one job array per sweep
    refresh(registry, workspace)                              # one sacct call for all job ids

Jobs run ``arctl.launch.job.RunJob()(run_dir)`` (or ``python -m arctl.launch.job RUN_DIR``), which
reads ``run_dir/config.yaml`` and calls the backend's ``train(config, run_dir, stop_event)``.
Names are imported lazily, so ``arctl status`` pays only for what it uses.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "LaunchError": "arctl.launch.executors",
    "LaunchItem": "arctl.launch.launcher",
    "LaunchResult": "arctl.launch.launcher",
    "items_from_resolved": "arctl.launch.launcher",
    "launch": "arctl.launch.launcher",
    "plan": "arctl.launch.launcher",
    "wait_for": "arctl.launch.launcher",
    "Registry": "arctl.launch.registry",
    "RunRecord": "arctl.launch.registry",
    "make_run_id": "arctl.launch.run_id",
    "Workspace": "arctl.launch.workspace",
    "workspace_path": "arctl.launch.workspace",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'arctl.launch' has no attribute {name!r}")
