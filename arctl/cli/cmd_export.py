"""``arctl export --out DIR``: the runs' report files (W&B files, config, provenance), no checkpoints."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from arctl.cli.common import (
    WORKDIR_RUNS_HELP,
    console,
    err_console,
    esc,
    fail,
    nonempty_option,
    parse_seeds,
    print_json,
    printable,
    progress_bars,
    user_errors,
)
from arctl.cli.launching import launch_errors, sweep_items


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        out: str = nonempty_option("--out", help="Folder to export into: new, empty, or an earlier export to add runs to."),
        experiment: list[str] | None = typer.Option(
            None, "--experiment", help="Only the runs of this experiment (repeatable; default: every run)."),
        sweep: str | None = typer.Option(None, "--sweep", help="Only the runs of this sweep's experiments (with --seeds: its cells)."),
        seeds: str | None = typer.Option(None, "--seeds", help="With --sweep: only the runs `arctl sweep SWEEP --seeds SEEDS [--scale S]` launches (e.g. 0-1)."),
        scale: str | None = nonempty_option("--scale", help="With --seeds: the scale the sweep ran at (default: the sweep's)."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_RUNS_HELP),
        unfinished: bool = typer.Option(False, "--unfinished", help="Also export runs that have not completed, as they are."),
        force: bool = typer.Option(False, "--force", help="Replace a run the export holds with other files (a changed shared.json alone updates it without)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Copy what reports read of each run (its W&B files, config.yaml, shared.json, provenance.json;
        no checkpoints, no logs) into OUT, indexed in OUT/export.json. `arctl report --workdir OUT`
        then rebuilds every figure, table and claim from it, on any machine. Completed runs only, unless
        --unfinished: a run without status.json is completed when its W&B files end with a clean finish
        at its config's trainer.total_steps (a run that counts epochs, null total_steps: the paper scale's,
        needs status.json or --unfinished)."""
        if out is None:
            fail("give --out DIR: the folder to export into")
        if experiment and sweep:
            fail("give --experiment or --sweep, not both")
        if (seeds is not None or scale is not None) and not sweep:
            fail("--seeds and --scale choose the runs of a sweep's cells: give --sweep NAME too")
        if scale is not None and seeds is None:
            fail("--scale chooses a sweep's cells with --seeds: give --seeds too (e.g. --seeds 0-2)")
        from arctl.compose.errors import SpecError
        from arctl.config.files import workdir_path
        from arctl.report.data import resolve_experiments
        from arctl.report.errors import ReportError
        from arctl.report.export import export_runs

        base = workdir_path(workdir)
        from arctl.launch.workspace import Workspace

        with launch_errors():  # a workspace that is a file (or has a file for runs/): named as the user set it
            Workspace.open(workdir)
        run_ids = None
        if seeds is not None:  # the cells as `arctl sweep` launches them (a shared cell: the run that serves it)
            with launch_errors():
                run_ids = [item.run_id for item in sweep_items(sweep, [], scale, parse_seeds(seeds), base, False,
                                                                 launching=False)]
        with user_errors():  # and a folder it cannot read or write: one line
            try:
                names = None if run_ids is not None else resolve_experiments({}, list(experiment or []), sweep)
                result = export_runs(base, Path(out).expanduser(), names, unfinished=unfinished, force=force, run_ids=run_ids,
                                     progress=progress_bars())
            except (ReportError, SpecError) as err:
                fail(str(err))
            except KeyboardInterrupt:
                _interrupted(Path(out).expanduser())
            except Exception as err:  # an error a Ctrl-C caused: as the Ctrl-C
                from arctl.cli.main import interrupt_in

                if interrupt_in(err) is None:
                    raise
                _interrupted(Path(out).expanduser())
        if as_json:
            print_json(result.as_json())
            return
        counts = {a: sum(r.action == a for r in result.runs) for a in ("added", "updated", "replaced", "unchanged")}
        size = sum(r.bytes for r in result.runs if r.action != "unchanged")
        # printable: a folder name or --out with control characters cannot drive the terminal (from a hunt)
        console.print(f"exported {len(result.runs)} run(s) to {esc(printable(str(result.out)))}: "
                      + ", ".join(f"{n} {a}" for a, n in counts.items() if n) + f" ({size / 1e6:.1f} MB copied)")
        for run_id, what in result.warnings:
            err_console.print(f"[yellow]warning[/] {esc(printable(run_id))}: {esc(printable(what))}", markup=True,
                              highlight=False)
        for run_id, why in result.skipped:
            err_console.print(f"[yellow]skipped[/] {esc(printable(run_id))}: {esc(printable(why))}", markup=True,
                              highlight=False)
        console.print(f"rebuild a report from it: arctl report --workdir {esc(printable(shlex.quote(str(result.out))))} ...")


def _interrupted(out: Path) -> None:
    """A Ctrl-C during an export: what it left in ``out`` (:func:`arctl.report.export.interrupted_export`: an
    export part-way, which the same command completes; else nothing half done)."""
    from arctl.cli.main import interrupted
    from arctl.report.export import interrupted_export

    interrupted(f"the export in {out} is unfinished; the same command completes it" if interrupted_export(out)
                else f"{out} holds no unfinished export")
