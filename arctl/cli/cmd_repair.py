"""``arctl repair``: rebuild the registry of a workspace from its run folders."""

from __future__ import annotations

import typer

from arctl.cli.common import WORKDIR_HELP, console, esc, nonempty_option, print_json
from arctl.cli.launching import launch_errors


def register(app: typer.Typer) -> None:
    @app.command("repair")
    def repair(
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Rebuild registry.sqlite from runs/*/ (config.yaml, status.json, shared.json) when it is damaged
        or was edited; the old file is kept beside it as registry.sqlite.damaged-<time>."""
        with launch_errors():
            from arctl.launch.executors import LaunchError
            from arctl.launch.repair import rebuild_registry
            from arctl.launch.workspace import Workspace, workdir_arg

            workspace = Workspace.open(workdir)  # refuses a registry.sqlite that is a folder (and a runs/ file)
            if not workspace.runs_dir.is_dir():
                raise LaunchError(f"no run folders at {workspace.runs_dir}: {workspace.named} is not an arctl workspace "
                                  "(`arctl run` makes one)")
            if workspace.is_export():
                raise LaunchError(f"{workspace.root} is an arctl export, which has no registry to repair: reports "
                                  f"read it as it is (`arctl report{workdir_arg(workspace.root, stored=True)}`)")
            done = rebuild_registry(workspace)
        if as_json:
            print_json({"workspace": str(workspace.root), "kept": done.kept,
                        "runs": [r.as_dict() for r in done.runs],
                        "skipped": [{"folder": f, "why": why} for f, why in done.skipped]})
            return
        if done.kept:
            console.print(esc(f"the old registry is kept as {done.kept}"))
        counts: dict[str, int] = {}
        for r in done.runs:
            counts[r.state] = counts.get(r.state, 0) + 1
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())) or "none"
        console.print(esc(f"rebuilt {workspace.registry_path}: {len(done.runs)} run(s) ({summary})"))
        for folder, why in done.skipped:
            console.print(f"[yellow]skipped[/] {esc(folder)}: {esc(why)}")
