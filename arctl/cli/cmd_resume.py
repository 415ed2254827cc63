"""``arctl resume RUN...``: relaunch stopped runs from their frozen config and last checkpoint."""

from __future__ import annotations

import typer

from arctl.cli.common import PARALLELISM_HELP, WORKDIR_HELP, nonempty_option
from arctl.cli.launching import launch_and_report, launch_errors


def register(app: typer.Typer) -> None:
    @app.command("resume")
    def resume(
        runs: list[str] = typer.Argument(..., metavar="RUN", help="Run ids (or prefixes), sweep or experiment names."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        executor: str | None = nonempty_option("--executor", help="slurm | local | debug (default: the executor the runs used before)."),
        force: bool = typer.Option(False, "--force", help="Also rerun completed runs (from scratch)."),
        wait: bool = typer.Option(None, "--wait/--no-wait", help="Wait for the runs (default: wait for local runs only)."),
        array_parallelism: int = typer.Option(None, "--array-parallelism", min=1, metavar="N",
                                              help=f"Runs at a time {PARALLELISM_HELP}"),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print what each run would do, its frozen config and "
                                     "the sbatch script; write and submit nothing."),
    ) -> None:
        """Resume failed, preempted or cancelled runs with the same run id and W&B run id."""
        if typed := next((r for r in runs if "=" in r), None):  # no run id, sweep or experiment name has one
            import shlex

            from arctl.cli.common import fail

            fail(f"arctl resume takes runs, not overrides: {typed!r} — a resume keeps each run's frozen config; for "
                 f"another config, launch a new run: `arctl run EXPERIMENT {shlex.quote(typed)}`")
        with launch_errors():
            from arctl.compose.run import ResolvedRun
            from arctl.launch.control import open_existing, select_runs
            from arctl.launch.launcher import LaunchItem, in_chain_order
            from arctl.launch.rundir import PATH_KEYS, read_frozen_run

            workspace, reg = open_existing(workdir)
            with reg:
                records = select_runs(reg, list(runs))
            items = []
            for rec in records:
                config = read_frozen_run(workspace.run_dir(rec.run_id), rec.run_id, rec.experiment, rec.arm, rec.seed)
                for key in PATH_KEYS:  # this machine's folders: the launcher adds them again
                    config.pop(key, None)
                run = ResolvedRun(experiment=rec.experiment, arm=rec.arm, seed=rec.seed, config=config, sweep=rec.sweep)
                after = (config.get("trainer") or {}).get("init_run")  # the run it starts from
                items.append(LaunchItem(run_id=rec.run_id, run=run, after=after or None))
            items = in_chain_order(items)  # a run after the one it starts from, in the dry run as in the launch
            used = sorted({r.executor for r in records if r.executor})
            executor_by = "--executor" if executor else "where the run ran before"
            executor = executor or (used[0] if len(used) == 1 else None)  # default: where it ran before
            launch_and_report(items, workdir=workdir, executor=executor, force=force, wait=wait,
                              array_parallelism=array_parallelism, as_json=as_json, members=[], dry_run=dry_run,
                              executor_by=executor_by)
