"""``arctl cp NAME [DEST]``: copy a shipped experiment, sweep or report spec to edit."""

from __future__ import annotations

import typer

from arctl.cli.common import console, err_console, esc, print_json, printable, user_errors


def register(app: typer.Typer) -> None:
    @app.command("cp")
    def cp(
        name: str = typer.Argument(..., help="An experiment, sweep or report name (`arctl ls ...` lists them)."),
        dest: str | None = typer.Argument(None, help="File or folder (a path ending in / is a folder, made if new; "
                                                      "default: ./experiments, ./sweeps or ./reports, or the first "
                                                      "$ARCTL_SPECS directory).", show_default=False),
        kind: str | None = typer.Option(None, "--kind", help="experiment, sweep or report, when the name is several."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Copy a spec shipped with arctl into your folder to edit; your copy then wins over the
        shipped one of the same name (see `arctl ls`). DEST's file name is the spec's name; a DEST where
        arctl does not look for specs (not <folder>/experiments/NAME.yaml of the current folder or of
        $ARCTL_SPECS) is written with a warning saying so."""
        from arctl.compose.copy import copy_spec

        with user_errors():
            done = copy_spec(name, dest, kind, force)
        if as_json:
            print_json({"kind": done.kind, "name": done.name, "source": str(done.source.path),
                        "source_origin": done.source.origin, "dest": str(done.dest), "warnings": done.warnings})
            return
        # printable: a DEST or spec path with control characters cannot drive the terminal (from a hunt)
        text = f"copied {done.kind} {done.name} ({done.source.origin}: {done.source.path}) to {done.dest}"
        console.print(esc(printable(text)))
        for warning in done.warnings:  # on stderr, the copy done: arctl will not read it where it is
            err_console.print(f"[yellow]warning:[/] {esc(printable(warning))}", markup=True, highlight=False)
