"""``arctl show EXP [OVERRIDES...]``: the fully resolved config of every arm (nothing runs)."""

from __future__ import annotations

from dataclasses import replace

import typer

from arctl.cli.common import (
    SCALE_HELP,
    console,
    err_console,
    esc,
    nonempty_option,
    parse_seeds,
    print_json,
    printable,
    section,
    user_errors,
)


def register(app: typer.Typer) -> None:
    @app.command("show")
    def show(
        experiment: str = typer.Argument(..., help="Experiment name (`arctl ls experiments`)."),
        overrides: list[str] = typer.Argument(None, help="Hydra overrides, e.g. prior=linear thinking.lam=0.7"),
        scale: str | None = nonempty_option("--scale", help=SCALE_HELP),
        arm: list[str] = typer.Option(None, "--arm", metavar="ARM", help="Only these arms (repeatable)."),
        seeds: str = typer.Option(None, "--seeds", help="Seeds, e.g. 0,1,2 or 0-2 (default: the spec's)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON: a list of {experiment, arm, seed, source, path, config}."),
    ) -> None:
        """Print the fully resolved config of every arm of EXPERIMENT."""
        with user_errors():
            from arctl.compose import resolve_experiment
            from arctl.compose.paths import find_spec
            from arctl.launch.launcher import items_from_resolved

            # an arm given twice is shown once, as run launches it once
            runs = resolve_experiment(experiment, list(overrides or []), scale, list(dict.fromkeys(arm or [])),
                                      parse_seeds(seeds))
            # the chain of runs each starts from is resolved as `arctl run` resolves it: a trainer.init_from naming
            # no arm (from a review), a cycle or a bad link further along (from a hunt) were shown, and refused by run
            items = items_from_resolved(runs, launching=False)
            source = find_spec("experiments", experiment).source()  # resolved, so it exists
            from arctl.compose.resolve import unread_notes
            from arctl.launch.cells import same_arms_notes

            # what `arctl run` says of the same command line (from a hunt: an override an arm does not read was
            # shown without a word, left out of its config, where run said so)
            for note in [*unread_notes(runs, overrides), *same_arms_notes(items, overrides)]:
                err_console.print(f"[yellow]note:[/] {esc(note)}", markup=True, highlight=False)
            # each run's config as launched: a run that starts from another's weights names that run's id
            # (trainer.init_run, part of its own id; from a hunt: shown null, where the dry run and config.yaml have it)
            launched = {(c.experiment, c.arm, c.seed): c.config for i in items for c in i.cells}
            runs = [replace(r, config=launched.get((r.experiment, r.arm, r.seed), r.config)) for r in runs]
        if as_json:
            print_json([{"experiment": r.experiment, "arm": r.arm, "seed": r.seed, **source, "config": r.config}
                        for r in runs])
            return
        from rich.syntax import Syntax

        from arctl.launch.rundir import dump_config  # as the dry run and the run's config.yaml write it

        console.print(esc(printable(f"{experiment}: {source['path']} ({source['source']})")))  # $ARCTL_SPECS: user text
        for run in runs:
            backend = run.config["backend"]
            # whole in a narrow terminal: a rule then the title (from a hunt: "scale=…" hid the scale and backend)
            section(f"[bold]{esc(printable(run.name))}[/]  {esc(printable(f'scale={run.scale}  backend={backend}'))}")
            console.print(Syntax(dump_config(run.config), "yaml", background_color="default"))
