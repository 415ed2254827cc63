"""Launch layer: submitit executors (slurm, local, debug), the run registry, the job entry point.

    items = items_from_resolved(resolve_sweep("priors"))
    result = launch(items, Workspace.open(), executor=None)   # one job array per sweep
    refresh(registry, workspace)                              # one sacct call for all job ids

Jobs run ``arctl.launch.job.RunJob()(run_dir)`` (or ``python -m arctl.launch.job RUN_DIR``), which
reads ``run_dir/config.yaml`` and calls the backend's ``train(config, run_dir, stop_event)``.
"""

from arctl.launch.executors import LaunchError
from arctl.launch.launcher import LaunchItem, LaunchResult, items_from_resolved, launch, plan, wait_for
from arctl.launch.registry import Registry, RunRecord
from arctl.launch.run_id import make_run_id
from arctl.launch.workspace import Workspace, workspace_path

__all__ = [
    "LaunchError",
    "LaunchItem",
    "LaunchResult",
    "Registry",
    "RunRecord",
    "Workspace",
    "items_from_resolved",
    "launch",
    "make_run_id",
    "plan",
    "wait_for",
    "workspace_path",
]
