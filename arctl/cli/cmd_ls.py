"""``arctl ls [experiments|sweeps|figures|tables]``: what can be run, swept and reported."""

from __future__ import annotations

from enum import Enum

import typer

from arctl.cli.common import console, esc, print_json, printable, user_errors


class Kind(str, Enum):
    experiments = "experiments"
    sweeps = "sweeps"
    figures = "figures"
    tables = "tables"


def _rows(kind: Kind) -> list[dict]:
    from arctl.compose.experiment import list_experiments, load_experiment
    from arctl.compose.paths import spec_files
    from arctl.compose.sweep import list_sweeps, load_sweep

    def source(folder: str, name: str) -> dict[str, str]:
        return spec_files(folder)[name].source()

    if kind is Kind.experiments:
        rows = []
        for name in list_experiments():
            exp = load_experiment(name)
            rows.append(
                {"name": name, "arms": list(exp.arms), "seeds": exp.seeds, "paper": exp.paper,
                 "figure": exp.figure, "description": exp.description, **source("experiments", name)}
            )
        return rows
    if kind is Kind.sweeps:
        rows = []
        for name in list_sweeps():
            sweep = load_sweep(name)
            rows.append(
                {"name": name, "experiments": sweep.experiments, "seeds": sweep.seeds,
                 "grid": sweep.grid, "description": sweep.description, **source("sweeps", name)}
            )
        return rows
    from arctl.compose.report_specs import list_report_specs

    return list_report_specs("figure" if kind is Kind.figures else "table")


def register(app: typer.Typer) -> None:
    @app.command("ls")
    def ls(
        kind: Kind = typer.Argument(Kind.experiments, help="What to list."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ) -> None:
        """List experiments, sweeps, figures or tables, and where each comes from (the spec search
        path: $ARCTL_SPECS, then the current project's folders, then the specs shipped with arctl; the
        file's absolute path is in --json)."""
        with user_errors():
            rows = _rows(kind)
        if as_json:
            print_json(rows)
            return
        from rich.table import Table

        table = Table(title=kind.value, show_lines=False)
        if not rows:
            console.print(f"no {kind.value} found")
            return
        columns = [c for c in rows[0] if c not in ("description", "path")] + ["description"]
        for column in columns:  # names and sources whole; the description takes what is left; the rest folds
            table.add_column(column, overflow="fold", no_wrap=column in ("name", "source"),
                             ratio=2 if column == "description" else None, min_width=16 if column == "description" else None)
        for row in rows:
            # a spec's text: no control sequence (its lines and tabs kept)
            table.add_row(*[esc("\n".join(printable(line.replace("\t", "    ")) for line in _cell(row.get(c)).split("\n")))
                            for c in columns])
        console.print(table)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
