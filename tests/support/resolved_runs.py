"""Real offline W&B runs of resolved configs, as a launch writes them (tests/report): ``config.yaml`` frozen beside the
run's W&B files, steps 0 and ``trainer.total_steps`` logged, finished."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def write_resolved_run(ws: Path, run, *, final: Callable[[dict], dict] | None = None, every_step: dict | None = None) -> str:
    """A finished run of the resolved ``run`` (``arctl.compose`` ``ResolvedRun``) in workspace ``ws``: its config.yaml
    as the launcher writes it, and W&B rows at step 0 and the last step, each with ``every_step``, the last with
    ``final(config)`` too (the final evaluation); returns its run id."""
    import yaml

    from arctl.launch.run_id import make_run_id
    from arctl.track.writer import open_run

    cfg = dict(run.config)
    cfg["run_id"] = rid = make_run_id(cfg)
    run_dir = Path(ws) / "runs" / rid
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    wb = open_run(cfg, run_dir)
    last = int(cfg["trainer"]["total_steps"] or 1)  # the final evaluation at the last step: a finished run
    for step in (0, last):
        logged = {"trainer/global_step": step, "train/anytime_score": 0.5, **(every_step or {})}
        if step == last and final is not None:
            logged.update(final(cfg))
        wb.log(logged)
    wb.finish()
    return rid
