"""``arctl run EXP [OVERRIDES...]``: launch every arm x seed of an experiment (skips completed runs)."""

from __future__ import annotations

import typer

from arctl.cli.common import (
    EXECUTOR_HELP,
    PARALLELISM_HELP,
    SCALE_HELP,
    WORKDIR_HELP,
    err_console,
    esc,
    nonempty_option,
    parse_seeds,
)
from arctl.cli.launching import launch_and_report, launch_errors


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        experiment: str = typer.Argument(..., metavar="EXPERIMENT", help="Experiment name (`arctl ls experiments`)."),
        overrides: list[str] = typer.Argument(None, metavar="OVERRIDES", help="Hydra overrides, e.g. thinking.lam=0.7 cluster=slurm-a100"),
        scale: str | None = nonempty_option("--scale", help=SCALE_HELP),
        arm: list[str] = typer.Option(None, "--arm", metavar="ARM", help="Only these arms (repeatable)."),
        seeds: str = typer.Option(None, "--seeds", help="Seeds, e.g. 0,1,2 or 0-2 (default: the spec's)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, the configs of the runs that would start (each distinct config once), the sbatch script and the counts; submit nothing."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        executor: str | None = nonempty_option("--executor", help=EXECUTOR_HELP),
        force: bool = typer.Option(False, "--force", help="Rerun completed runs from scratch."),
        wait: bool = typer.Option(None, "--wait/--no-wait", help="Wait for the runs (default: wait for local runs only)."),
        array_parallelism: int = typer.Option(None, "--array-parallelism", min=1, metavar="N", help=f"Runs at a time {PARALLELISM_HELP}"),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Launch every arm x seed of EXPERIMENT; completed runs are skipped, failed/preempted ones resumed."""
        with launch_errors():
            from arctl.compose import resolve_experiment
            from arctl.compose.paths import overlay_notes
            from arctl.compose.resolve import unread_notes
            from arctl.launch.cells import same_arms_notes
            from arctl.launch.launcher import items_from_resolved

            runs = resolve_experiment(experiment, list(overrides or []), scale, list(arm or []), parse_seeds(seeds))
            items = items_from_resolved(runs)
            for note in [*overlay_notes([("experiments", experiment)]), *unread_notes(runs, overrides),
                         *same_arms_notes(items, overrides)]:
                err_console.print(f"[yellow]note:[/] {esc(note)}", markup=True, highlight=False)
            launch_and_report(items, workdir=workdir, executor=executor, force=force, wait=wait,
                              array_parallelism=array_parallelism, as_json=as_json, members=[experiment],
                              dry_run=dry_run)
