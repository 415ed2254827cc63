"""``arctl cancel TARGET...``: cancel active runs (run ids, sweeps or experiments); one scancel call."""

from __future__ import annotations

import shlex

import typer

from arctl.cli.common import WORKDIR_HELP, console, esc, nonempty_option, print_json
from arctl.cli.launching import launch_errors


def register(app: typer.Typer) -> None:
    @app.command("cancel")
    def cancel(
        targets: list[str] = typer.Argument(..., metavar="TARGET", help="Run ids (or prefixes), sweep or experiment names."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        force: bool = typer.Option(False, "--force", help="Also cancel a started run whose job SLURM here does not "
                                   "have though its folder changed lately (you know it runs nowhere else)."),
        now: bool = typer.Option(False, "--now", help="Stop started jobs at once, without saving their checkpoint "
                                 "(a run already cancelling a while is stopped so by a plain cancel too)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON: each run named, whether it was cancelled and why."),
    ) -> None:
        """Cancel the pending/running jobs of TARGETS. A started job saves a checkpoint first and shows
        RUNNING ("cancelling") until it has; then CANCELLED (`arctl sweep`/`arctl resume` relaunch them).
        A run cancelled again after a while of saving (a step that hangs never gets to its save), or with --now,
        is stopped at once: its job is killed, CANCELLED; it resumes from its last saved checkpoint.
        Exits 1 when a run it names was not cancelled and its job may still run (another host's or
        user's job, one SLURM here does not have, a debug run in another arctl: each says why), so
        `arctl cancel X && ...` stops there; a run with nothing left to stop (not active, no job, its
        job already ending or ended) is no failure: exit 0. --json exits the same."""
        with launch_errors():
            from arctl.launch.control import (
                NOT_ACTIVE,
                NOT_CANCELLED,
                STOPPED_AT_ONCE,
                cancel_runs,
                open_existing,
                select_runs,
            )
            from arctl.launch.refresh import refresh
            from arctl.launch.workspace import workdir_arg

            workspace, reg = open_existing(workdir)
            with reg:
                records = refresh(reg, workspace, select_runs(reg, list(targets)))
                done = cancel_runs(reg, workspace, records, force=force, now=now)
        if as_json:  # every run named, as the text counts them: one that was not active says so
            asked = {r.run_id for r, _ in done}
            print_json([{"run_id": r.run_id, "job_id": r.job_id, "state": r.state,
                         "cancelled": not what.startswith(NOT_CANCELLED), "outcome": what} for r, what in done]
                       + [{"run_id": r.run_id, "job_id": r.job_id, "state": r.state, "cancelled": False,
                           "outcome": NOT_ACTIVE} for r in records if r.run_id not in asked])
            _exit_if_left(done)
            return
        for rec, what in done:
            console.print(f"{esc(rec.run_id)}: {esc(what)}")
        idle = len(records) - len(done)
        left = sum(1 for _, what in done if what.startswith(NOT_CANCELLED))
        saving = sum(1 for r, what in done if r.state not in ("CANCELLED", "SUBMITTING")
                     and not what.startswith((NOT_CANCELLED, STOPPED_AT_ONCE)))
        again = f"`arctl cancel {esc(shlex.join(targets))}{esc(workdir_arg(workspace.root))}` again"
        console.print(f"{len(done) - left} run(s) cancelled" + (f"; {saving} save a checkpoint first (CANCELLED once "
                                                                f"saved; if that takes long, {again} stops "
                                                                "it at once, unsaved)" if saving else "")
                      + (f"; {left} not cancelled (above)" if left else "") + (f"; {idle} were not active" if idle else ""))
        _exit_if_left(done)


# what the outcomes of arctl.launch.control.cancel_runs that changed nothing say where no job of the run is left
# to stop: no job was submitted for it, its job is already ending, or it ended meanwhile (their wording is
# control.py's; tests/launch/test_dead_launch_views.py and test_launcher.py hold them to exit 0)
NOTHING_LEFT = ("nothing to cancel", "is already ending", "ended meanwhile")


def _exit_if_left(done: list) -> None:
    """Exit 1 where a run named was not cancelled and its job may still run (an outcome that begins with
    ``NOT_CANCELLED`` and says of none of :data:`NOTHING_LEFT`): from a hunt, "0 run(s) cancelled; 1 not cancelled
    ... another user's" exited 0, and a script went on as if the job had stopped."""
    from arctl.launch.control import NOT_CANCELLED

    if any(what.startswith(NOT_CANCELLED) and not any(n in what for n in NOTHING_LEFT) for _, what in done):
        raise typer.Exit(1)
