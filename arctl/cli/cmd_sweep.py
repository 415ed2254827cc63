"""``arctl sweep SWEEP [OVERRIDES...]``: launch every cell of a sweep as ONE job array (idempotent).

With ``share_arms: true`` in the sweep, a cell that is the same run as another cell, or as a run
the workspace already has (the same resolved config but for the names of the run, experiment and
arm among them, see ``arctl.launch.shared``), is not launched: it is
listed as shared (``--dry-run``: action "shared"; text: a ``skip ... shared: same run as ...``
line; ``--json``: also a ``shared`` list with the run id each cell shares).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

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
    print_json,
)
from arctl.cli.launching import launch_and_report, launch_errors, sweep_items


def shared_cells(items) -> list[dict]:
    return [{"experiment": i.experiment, "arm": i.arm, "seed": i.seed, "action": "shared", "run_id": i.shares,
             "reason": i.reason} for i in items if i.shares]


@contextlib.contextmanager
def json_with_shared(items, as_json: bool):
    """Add ``"shared": [...]`` to the one JSON document the block prints (``--json``): the cells shared as the block
    ends (the launch marks more: :func:`arctl.launch.shared.mark_same_computation`; from a review, those were
    missing)."""
    if not as_json:
        yield
        return
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            yield
    finally:
        text = captured.getvalue()
        try:
            doc = json.loads(text) if text.strip() else None
        except ValueError:
            doc = None
        cells = shared_cells(items)
        if isinstance(doc, dict) and cells:
            doc["shared"] = cells
            print_json(doc)
        elif text:
            sys.stdout.write(text)
            sys.stdout.flush()


def grid_overridden(name: str, overrides: list[str]) -> dict[str, str]:
    """The keys the sweep's grid varies that a command-line override sets -> a note for each: the override
    wins (as for any key), so the grid's values of that key collapse into one."""
    from arctl.compose.overrides import override_key
    from arctl.compose.sweep import load_sweep

    grid = {override_key(key): values for key, values in load_sweep(name).grid.items()}
    notes = {}
    for text in overrides:  # KEY=VALUE or +KEY=VALUE (composing the cells has refused any other form)
        key = override_key(text)
        if key in grid:
            notes[key] = (f"{text} replaces the sweep's grid over {key} ({len(grid[key])} values: "
                          f"{', '.join(map(str, grid[key]))}): every cell takes this value")
    return notes


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep(
        name: str = typer.Argument(..., metavar="SWEEP", help="Sweep name (`arctl ls sweeps`)."),
        overrides: list[str] = typer.Argument(None, metavar="OVERRIDES", help="Hydra overrides applied to every cell."),
        scale: str | None = nonempty_option("--scale", help=SCALE_HELP),
        seeds: str = typer.Option(None, "--seeds", help="Seeds, e.g. 0,1,2 or 0-2 (default: the sweep's)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, the configs of the cells that would start (each distinct config once), the sbatch script and the counts; submit nothing."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        executor: str | None = nonempty_option("--executor", help=EXECUTOR_HELP),
        force: bool = typer.Option(False, "--force", help="Rerun completed cells from scratch."),
        wait: bool = typer.Option(None, "--wait/--no-wait", help="Wait for the runs (default: wait for local runs only)."),
        array_parallelism: int = typer.Option(None, "--array-parallelism", min=1, metavar="N",
                                               help=f"Cells running at a time {PARALLELISM_HELP}"),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Launch the cells of SWEEP that are missing, failed, preempted or cancelled (one job array);
        with `share_arms: true`, a cell that is the same run as an earlier one runs once."""
        with launch_errors():
            items = sweep_items(name, list(overrides or []), scale, parse_seeds(seeds), workdir, force)
            from arctl.compose.paths import overlay_notes
            from arctl.compose.resolve import sweep_unread_notes, unread_notes
            from arctl.compose.sweep import load_sweep
            from arctl.launch.cells import replaced_arm_values_notes, same_arms_notes, same_run_notes

            spec = load_sweep(name)
            noted = grid_overridden(name, list(overrides or []))
            cells = [cell for item in items for cell in (item.cells or [item.run])]
            for note in [*overlay_notes([("sweeps", name), *(("experiments", e) for e in spec.experiments)]),
                         *unread_notes(cells, overrides), *sweep_unread_notes(cells), *noted.values(),
                         *same_run_notes(items, set(noted)), *replaced_arm_values_notes(items, spec, overrides),
                         *same_arms_notes(items, overrides, spec)]:
                err_console.print(f"[yellow]note:[/] {esc(note)}", markup=True, highlight=False)
            with json_with_shared(items, as_json):
                launch_and_report(items, workdir=workdir, executor=executor, force=force, wait=wait,
                                  array_parallelism=array_parallelism, as_json=as_json, members=[name],
                                  dry_run=dry_run)
