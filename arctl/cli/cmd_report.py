"""``arctl report --figure NAME | --table NAME``: rebuild a paper figure or table from runs.

Runs come from a workspace (``--workdir``, default ``$ARCTL_HOME`` or ``./arctl-runs``) or a W&B
project (``--wandb-project ENTITY/PROJECT``). Imports of pandas/matplotlib/wandb happen inside the
command only, so ``arctl --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from arctl.cli.common import (
    WORKDIR_RUNS_HELP,
    console,
    err_console,
    esc,
    fail,
    is_terminal,
    nonempty_option,
    print_json,
    printable,
    progress_bars,
    user_errors,
)


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        sweeps: list[str] | None = typer.Argument(
            None, help="With --claims: the sweep(s) whose runs the claims read (default: reports/claims.yaml's).",
            show_default=False),
        figure: str | None = typer.Option(None, "--figure", help="Figure to build (see `arctl ls figures`)."),
        table: str | None = typer.Option(None, "--table", help="Table to build (`arctl ls tables` lists them)."),
        claims: bool = typer.Option(False, "--claims", help="Check the paper's claims (reports/claims.yaml): a verdict per claim "
                                    "with 95% intervals over seeds; writes claims.html, claims.md, claims.json."),
        scale: str | None = nonempty_option("--scale", help="With --claims: only runs of this scale (tiny or paper)."),
        experiment: list[str] | None = typer.Option(
            None, "--experiment", help="Use the runs of this experiment instead of the spec's (repeatable)."
        ),
        sweep: str | None = typer.Option(None, "--sweep", help="Use the runs of this sweep's experiments."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_RUNS_HELP),
        wandb_project: str | None = typer.Option(
            None, "--wandb-project", help="Read runs from this W&B project (ENTITY/PROJECT) instead."
        ),
        where: list[str] | None = typer.Option(
            None, "--where", help="Only runs whose config has this value, KEY=VALUE (repeatable), e.g. "
            "--where thinking.lam=0.5: chooses between runs of one arm and seed that differ; ARM:KEY=VALUE filters "
            "that arm's runs alone (e.g. --where grpo:optim.lr=3e-4 after an edit of grpo's learning rate)."),
        out: str | None = nonempty_option("--out", help="Output directory (default <workdir>/report)."),
        compare_paper: bool = typer.Option(False, "--compare-paper", help="Tables: add the paper's values and the difference."),
        processes: int | None = typer.Option(None, "--processes", min=1, help="Parallel readers (default: the cores this process may use, no more than the available memory holds)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Rebuild one of the paper's figures or tables from the runs of an experiment or sweep, or check
        the paper's claims (--claims)."""
        with user_errors():  # and a folder it cannot read or write: one line
            _report(sweeps, figure, table, claims, scale, experiment, sweep, workdir, wandb_project, where, out,
                    compare_paper, processes, as_json)


def _report(sweeps, figure, table, claims, scale, experiment, sweep, workdir, wandb_project, where, out,
            compare_paper, processes, as_json) -> None:
    """``arctl report``'s body (the options as given)."""
    if claims:
        if figure is not None or table is not None or experiment or sweep or compare_paper or wandb_project:
            fail("--claims takes sweep names as arguments (`arctl report --claims priors ablations`), "
                 "not --figure/--table/--experiment/--sweep/--compare-paper/--wandb-project")
        _claims(list(sweeps or []), scale, workdir, out, processes, as_json, list(where or []))
        return
    if sweeps:
        fail(f"unexpected argument {sweeps[0]!r}: sweep names go with --claims; a figure or table takes --sweep NAME")
    if scale is not None:
        fail("--scale goes with --claims")
    if (figure is None) == (table is None):
        fail("give exactly one of --figure NAME or --table NAME (see `arctl ls figures` / `arctl ls tables`), or --claims")
    if experiment and sweep:
        fail("give --experiment or --sweep, not both")
    if workdir is not None and wandb_project:
        fail("give --workdir (a workspace's W&B files) or --wandb-project (a W&B project), not both")
    if compare_paper and figure is not None:
        fail("--compare-paper applies to tables only (use it with --table final or --table anytime)")
    import warnings

    from arctl.compose.errors import SpecError
    from arctl.report.errors import ReportError
    from arctl.report.render import render_figure, render_table
    from arctl.report.style import Outputs
    from arctl.track.runs import RunReadWarning

    base, out_dir = _places(workdir, out, where, runs_in_workdir=not wandb_project)
    held = _holds_files(out_dir)
    common = dict(
        out_dir=out_dir, experiments=experiment or None, sweep=sweep,
        workdir=None if wandb_project else base, wandb_project=wandb_project,
        progress=progress_bars(), processes=processes, where=list(where or []), outputs=Outputs(),
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RunReadWarning)  # shown below, once, in yellow
            if figure is not None:
                result = render_figure(figure, **common)
            else:
                result = render_table(table, compare_paper=compare_paper, **common)
    except (ReportError, SpecError) as err:
        fail(str(err))
    except ValueError as err:  # e.g. a malformed --wandb-project
        fail(str(err))
    except KeyboardInterrupt:
        _interrupted(common["outputs"], out_dir, held)
    except Exception as err:  # an error a Ctrl-C caused (an import it stopped): as the Ctrl-C
        _interrupted_by(err, common["outputs"], out_dir, held)
    if as_json:
        print_json(result.to_json())
        return
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/] {esc(printable(w))}", markup=True, highlight=False)  # names read from runs
    if result.missing_experiments:
        err_console.print(
            "[yellow]note:[/] no runs yet of " + esc(", ".join(result.missing_experiments))
            + " (they are left out)", markup=True, highlight=False)
    console.print(f"{result.kind} [bold]{esc(result.name)}[/] from {len(result.runs)} run(s):")
    for p in result.outputs:
        console.print(f"  {esc(p)}")
    if result.kind == "table":
        md = next((p for p in result.outputs if p.suffix == ".md"), None)
        if md is not None:
            # a benchmark's name comes from the runs' metric keys: no control sequence of it reaches the terminal
            console.print("\n".join(printable(line) for line in md.read_text(encoding="utf-8").splitlines()), markup=False,
                          highlight=False)


def _holds_files(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds anything (before a report: its previous outputs, if the report is stopped
    before it names its files)."""
    try:
        return any(Path(out_dir).iterdir())
    except OSError:  # not there (yet), or not a folder
        return False


def _interrupted(outputs, out_dir: Path, held: bool) -> None:
    """A Ctrl-C during a report: its files are put in place together or not at all (``outputs``, its
    :class:`arctl.report.style.Outputs`), so the folder holds the previous report's, each whole, unless the
    Ctrl-C came as they were put in place or after (then the new ones are there). Where none of its files was
    there before (a first report), it says that none was written (from a review: "rep holds the previous
    outputs" of a folder that did not exist); stopped before it named its files, by whether the folder
    ``held`` anything when the report began."""
    from arctl.cli.main import interrupted

    if outputs.in_place:
        interrupted(f"{out_dir} holds the new outputs")
    elif outputs.had_previous if outputs.named else held:
        interrupted(f"{out_dir} holds the previous outputs")
    else:
        interrupted(f"no report was written to {out_dir}")


def _interrupted_by(err: Exception, outputs, out_dir: Path, held: bool) -> None:
    """:func:`_interrupted` where ``err`` came from a Ctrl-C (:func:`arctl.cli.main.interrupt_in`), else ``err``
    raised again."""
    from arctl.cli.main import interrupt_in

    if interrupt_in(err) is None:
        raise err
    _interrupted(outputs, out_dir, held)


def _places(workdir: str | None, out: str | None, where: list[str] | None, runs_in_workdir: bool) -> tuple[Path, Path]:
    """(workspace, output folder) of a report, their mistakes refused before any run is read: an output
    folder that cannot be written or lies in the workspace's runs/ (where the runs come from the
    workspace: ``runs_in_workdir``), a malformed --where."""
    from arctl.config.files import workdir_path
    from arctl.report.cells import parse_where
    from arctl.report.errors import ReportError, out_dir_problem

    base = workdir_path(workdir)
    if runs_in_workdir:  # a workspace that is a file (or has a file for runs/): named as the user set it
        from arctl.cli.launching import launch_errors
        from arctl.launch.workspace import Workspace

        with launch_errors():
            Workspace.open(workdir)
    out_dir = Path(out).expanduser() if out is not None else base / "report"
    if problem := out_dir_problem(out_dir, base if runs_in_workdir else None, given=out is not None):
        fail(problem)
    try:
        parse_where(where)
    except ReportError as err:
        fail(str(err))
    return base, out_dir


def _claims(sweeps: list[str], scale: str | None, workdir: str | None, out: str | None, processes: int | None,
            as_json: bool, where: list[str]) -> None:
    """``arctl report --claims``: the verdict table (rich), and the files."""
    import warnings

    from arctl.compose.errors import SpecError
    from arctl.report.claims_render import build_claims_report, summary_text, test_summary
    from arctl.report.errors import ReportError
    from arctl.report.style import Outputs
    from arctl.track.runs import RunReadWarning

    if scale is not None:
        from arctl.compose.paths import group_options

        if scale not in group_options("scale"):
            fail(f"unknown scale {scale!r}: choose one of {', '.join(group_options('scale'))}")
    base, out_dir = _places(workdir, out, where, runs_in_workdir=True)
    held = _holds_files(out_dir)
    outputs = Outputs()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RunReadWarning)
            report = build_claims_report(sweeps=sweeps, scale=scale, workdir=base, out_dir=out_dir,
                                         progress=progress_bars(), processes=processes, where=where, outputs=outputs)
    except (ReportError, SpecError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        _interrupted(outputs, out_dir, held)
    except Exception as err:  # an error a Ctrl-C caused: as the Ctrl-C
        _interrupted_by(err, outputs, out_dir, held)
    if as_json:
        print_json(report.to_json())
        return
    from arctl.report.claims import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE

    colors = {HOLDS: "green", FAILS: "red", INCONCLUSIVE: "yellow", NOT_TESTABLE: "bright_black"}
    title = (f"The paper's claims: {esc(', '.join(report.meta['sweeps']))}" + (f" (scale {esc(scale)})" if scale else "")
             + f", {len(report.runs)} runs")
    if is_terminal(console):
        _claims_table(report, title, colors)
    else:  # a pipe, a log: plain lines, never cut (from a hunt: the table folded the commands for missing runs
        console.print(title)  # mid-token at 80 columns, in CI logs and `| tee`)
        for r in report.results:
            console.print(f"claim {esc(r.id)}: {esc(f'{r.title} ({r.paper})')}: [{colors[r.verdict]}]{r.verdict}[/]")
            for t in r.tests:
                console.print(f"  [{colors[t.verdict]}]{t.verdict}[/]: {esc(t.label)}: {esc(test_summary(t))}")
    console.print(esc(summary_text(report.results, len(report.runs))))
    for w in report.warnings:
        err_console.print(f"[yellow]warning:[/] {esc(printable(w))}", markup=True, highlight=False)  # names read from runs
    for p in report.outputs:
        console.print(f"  {esc(p)}")


def _claims_table(report, title: str, colors: dict) -> None:
    """The claims' verdicts as a table (a terminal), then the commands that produce the missing runs, each whole on
    a line of its own: the table folds them at its width (from a hunt)."""
    from rich.table import Table

    from arctl.report.claims_render import test_summary

    # the cells name each missing run's command by its number (# N) in the list after the table (from a hunt: each cell
    # held the whole ~600-character command, folded mid-token: 841 lines at 80 columns that buried the verdicts)
    commands = list(dict.fromkeys(c for r in report.results for t in r.tests for c in t.commands))
    numbered = {c: i for i, c in enumerate(commands, 1)}
    table = Table(title=title, show_lines=True)
    for col in ("#", "claim", "verdict", "tests (mean difference, 95% interval over seeds, p: Holm within the claim)"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        lines = [f"[{colors[t.verdict]}]{t.verdict}[/]: {esc(t.label)}: {esc(test_summary(t, numbered=numbered))}"
                 for t in r.tests]
        table.add_row(esc(r.id), esc(f"{r.title} ({r.paper})"), f"[bold {colors[r.verdict]}]{r.verdict}[/]", "\n".join(lines))
    console.print(table)
    if commands:
        console.print("commands for the missing runs:")
        for i, command in enumerate(commands, 1):
            console.print(f"  {esc(command)}  # {i}")  # a shell reads the number as a comment
