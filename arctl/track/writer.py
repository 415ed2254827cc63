"""Open the W&B run of one arctl run with the project's conventions (trainers call this).

Conventions (docs/metrics.md): ``dir = run_dir/wandb``, project from ``config.wandb.project``,
group = experiment (or ``config.wandb.group``, e.g. a sweep name), name = ``{arm}-s{seed}``, the
resolved config as W&B config, every metric stepped by ``trainer/global_step``, offline by default,
and the .wandb file flushed every ``flush_interval_s`` seconds instead of wandb's 15 s so a killed
job loses at most that much history.
"""

from __future__ import annotations

import re
from pathlib import Path

from arctl.track.metrics_schema import STEP_KEY

DEFAULT_FLUSH_INTERVAL_S = 2.0


def run_name(config: dict) -> str:
    """W&B run name ``{arm}-s{seed}``."""
    return f"{config.get('arm', 'run')}-s{config.get('seed', 0)}"


def wandb_init_kwargs(config: dict, run_dir: str | Path, *, mode: str | None = None,
                      flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S) -> dict:
    """The ``wandb.init`` keyword arguments for ``config`` (without importing wandb)."""
    wb = dict(config.get("wandb") or {})
    mode = mode or wb.get("mode") or "offline"
    if mode not in ("offline", "online", "disabled"):
        raise ValueError(f"wandb.mode must be offline, online or disabled, got {mode!r}")
    wdir = Path(run_dir) / "wandb"
    kwargs = {
        "project": wb.get("project") or "arctl",
        "entity": wb.get("entity") or None,
        "group": wb.get("group") or config.get("experiment") or None,
        "name": wb.get("name") or run_name(config),
        "tags": list(wb.get("tags") or []) or None,
        "config": config,
        "dir": str(wdir),
        "mode": mode,
        "job_type": "train",
    }
    # the launcher's W&B id (wandb.id: the run id, suffixed after a --force rerun), else one derived
    # from the arctl run id: resuming writes a new fragment of the same id, which the reader
    # stitches on trainer/global_step
    run_id = wb.get("id") or config.get("run_id")
    if run_id:
        kwargs["id"] = re.sub(r"[^A-Za-z0-9_.-]", "-", str(run_id))[:64]
        kwargs["resume"] = "allow"
    return kwargs


def open_run(config: dict, run_dir: str | Path, *, mode: str | None = None,
             flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S):
    """Start the W&B run for ``config`` and declare ``trainer/global_step`` as the step of every
    metric. Returns the ``wandb`` Run; log with ``run.log({STEP_KEY: step, ...})``."""
    import wandb

    kwargs = wandb_init_kwargs(config, run_dir, mode=mode, flush_interval_s=flush_interval_s)
    Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(
        x_transaction_log_flush_interval=float(flush_interval_s),
        silent=True,
        console="off",
    )
    run = wandb.init(settings=settings, **kwargs)
    run.define_metric(STEP_KEY)
    run.define_metric("*", step_metric=STEP_KEY)
    return run
