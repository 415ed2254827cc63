"""``arctl ls [experiments|sweeps|figures|tables]``: what can be run, swept and reported."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from arctl.cli.common import (
    console,
    esc,
    fit_columns,
    is_terminal,
    plain_columns,
    print_json,
    printable,
    user_errors,
)


class Kind(str, Enum):
    experiments = "experiments"
    sweeps = "sweeps"
    figures = "figures"
    tables = "tables"


def _rows(kind: Kind) -> list[dict]:
    from arctl.compose.experiment import list_experiments, load_experiment
    from arctl.compose.paths import spec_files
    from arctl.compose.sweep import list_sweeps, load_sweep

    def source(folder: str, name: str) -> dict:
        """Where the spec comes from, and ``shadows``: the files of that name it overlays (never read)."""
        found = spec_files(folder)[name]
        return {**found.source(), "shadows": [str(s.path) for s in found.shadows]}

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
        kind: Kind = typer.Argument(Kind.experiments, metavar="KIND", show_choices=False,
                                    help=f"What to list: {', '.join(k.value for k in Kind)}."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ) -> None:
        """List experiments, sweeps, figures or tables, and where each comes from (the spec search
        path: $ARCTL_SPECS, then the current project's folders, then the specs shipped with arctl; the
        file's absolute path is in --json), and where the files of that name further down the path come
        from, which each one overlays (shadows; their paths in --json)."""
        with user_errors():
            rows = _rows(kind)
        if as_json:
            print_json(rows)
            return
        if not rows:
            console.print(f"no {kind.value} found")
            return
        columns = [c for c in rows[0] if c not in ("description", "path")] + ["description"]
        rows = [{**row, "shadows": _origins(row["shadows"])} if "shadows" in row else row for row in rows]
        # a spec's text: no control sequence (its lines and tabs kept in the table, a line each in plain columns)
        cells = [["\n".join(printable(line.replace("\t", "    ")) for line in _cell(row.get(c)).split("\n"))
                  for c in columns] for row in rows]
        table = _table(kind, columns, cells) if is_terminal(console) else None
        if table is not None:
            console.print(table)
        else:  # a pipe, or a terminal too narrow for the table: a line per spec, never cut or folded
            plain_columns(columns, [[" ".join(cell.split()) for cell in row] for row in cells])


# the columns that give way when the table is too wide, in turn, and how far (None: to its longest word): the
# description first, and furthest, then the paper, folding between words (a paper's "arXiv:2505.05315", a doc's
# path, each whole: from a hunt, the paper was folded mid-word at 200 columns beside a description with ~100 blank
# ones), then a list of names (arms, experiments, a grid), folding between its names only, each whole. The others
# are names a user types (`arctl run NAME`, `--figure F`): never folded (from a hunt: `ablation_decouple` was
# printed as "ablatio", "n_decou", "ple" on three lines, in a pipe too)
_GIVE_WAY = {"description": 16, "paper": None, "arms": None, "experiments": None, "grid": None, "shadows": None,
             "seeds": 5}


def _table(kind: Kind, columns: list[str], cells: list[list[str]]):
    """The rows as a rich table that fits the terminal, or None where it cannot without folding a name."""
    from rich.cells import cell_len
    from rich.table import Table

    def longest(i: int, split=str.splitlines) -> int:
        return max(cell_len(part) for text in (columns[i], *(row[i] for row in cells)) for part in split(text) or [""])

    table = Table(title=kind.value, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column not in _GIVE_WAY)
    natural = [longest(i) for i in range(len(columns))]
    give_way = [columns.index(c) for c in _GIVE_WAY if c in columns]
    least = [min(n, _GIVE_WAY[c] or longest(i, str.split)) if c in _GIVE_WAY else n
             for i, (c, n) in enumerate(zip(columns, natural))]
    if not fit_columns(table, natural, give_way, least, console.width):
        return None
    for row in cells:
        table.add_row(*map(esc, row))
    return table


def _origins(paths: list[str]) -> list[str]:
    """Where each of the files a spec overlays comes from (``shipped``, ``project``, ``$ARCTL_SPECS``), as the table
    says where a spec comes from: the paths are in --json."""
    from arctl.compose.paths import spec_roots

    roots = spec_roots()
    return list(dict.fromkeys(next((r.origin for r in roots if Path(p).parent.parent == r.path), p) for p in paths))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
