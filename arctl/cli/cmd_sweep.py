"""``arctl sweep SWEEP [OVERRIDES...]``: launch every cell of a sweep as ONE job array (idempotent)."""

from __future__ import annotations

from pathlib import Path

import typer

from arctl.cli.cmd_run import launch_and_report, launch_errors
from arctl.cli.common import parse_seeds


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep(
        name: str = typer.Argument(..., metavar="SWEEP", help="Sweep name (`arctl ls sweeps`)."),
        overrides: list[str] = typer.Argument(None, metavar="OVERRIDES", help="Hydra overrides applied to every cell."),
        scale: str = typer.Option(None, "--scale", help="tiny (CPU toy, default) or paper (GPU clusters)."),
        seeds: str = typer.Option(None, "--seeds", help="Seeds, e.g. 0,1,2 or 0-2 (default: the sweep's)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print cells, configs and the sbatch script; submit nothing."),
        workdir: Path = typer.Option(None, "--workdir", help="Workspace (default $ARCTL_HOME or ./arctl-runs)."),
        executor: str = typer.Option(None, "--executor", help="slurm | local | debug (default: cluster.executor)."),
        force: bool = typer.Option(False, "--force", help="Rerun completed cells from scratch."),
        wait: bool = typer.Option(None, "--wait/--no-wait", help="Wait for the runs (default: wait for local runs only)."),
        array_parallelism: int = typer.Option(None, "--array-parallelism", min=1, help="Cells running at a time."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Launch the cells of SWEEP that are missing, failed, preempted or cancelled (one job array)."""
        with launch_errors():
            from arctl.launch.launcher import items_from_resolved
            from arctl.spec import resolve_sweep

            runs = resolve_sweep(name, list(overrides or []), scale, parse_seeds(seeds))
            items = items_from_resolved(runs)
            launch_and_report(items, workdir=workdir, executor=executor, force=force, wait=wait,
                              array_parallelism=array_parallelism, as_json=as_json, members=[name],
                              dry_run=dry_run)
