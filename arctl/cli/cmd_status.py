"""``arctl status [SWEEP|EXP|RUN]``: the registry's runs, refreshed from the jobs and the scheduler."""

from __future__ import annotations

import sys
import time

import typer

from arctl.cli.common import console, err_console, esc, nonempty_option, print_json, printable
from arctl.cli.launching import how_far, launch_errors, step_text, styled


def _elapsed(rec, now: float) -> str:
    if not rec.started_at:
        return ""
    seconds = int(max(0.0, (rec.ended_at or now) - rec.started_at))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        target: str = typer.Argument(None, metavar="SWEEP|EXPERIMENT|RUN", help="A sweep, an experiment or a run id (prefix); default: every run."),
        workdir: str | None = nonempty_option("--workdir", help="Workspace (default $ARCTL_HOME or ./arctl-runs)."),
        refresh: bool = typer.Option(True, "--refresh/--no-refresh", help="Ask the scheduler (one sacct call) first."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON: a list of run records."),
    ) -> None:
        """Runs with state, job id, step (a running run's: of how many, and the time left at its pace),
        last metric, W&B run id and elapsed time."""
        with launch_errors():
            from arctl.launch.control import open_existing, select_runs
            from arctl.launch.refresh import refresh as refresh_runs

            workspace, reg = open_existing(workdir, reading=True)
            with reg:
                records = select_runs(reg, [target], prefixes=True) if target is not None else reg.list()
                reg_ids = {r.run_id for r in (records if target is None else reg.list())}
                if refresh:
                    records = refresh_runs(reg, workspace, records)
        now = time.time()
        from arctl.launch.progress import shown_metric
        from arctl.launch.refresh import CANCEL_ASKED, folder_gone, interrupted_launch
        from arctl.launch.states import INTERRUPTED
        from arctl.track.runs.discover import read_served

        # shown as their warning (in JSON too), never written: a dead launch's new runs, which no one submits
        # (their rows say SUBMITTING: shown INTERRUPTED), with what submits them; an active run whose folder
        # was deleted, whose job fails
        interrupted = set()
        for r in records:  # beside a warning the row has (a review: it was replaced)
            if said := interrupted_launch(r, workspace.run_dir(r.run_id), now):
                interrupted.add(r.run_id)
            if said := said or folder_gone(r, workspace.run_dir(r.run_id)):
                r.warning = f"{said}; {r.warning}" if r.warning else said

        # the other (experiment, arm) cells a shared run serves (a sweep with share_arms; shared.json)
        serves = {r.run_id: read_served(workspace.run_dir(r.run_id), r.arm) for r in records}
        lost = _unregistered(workspace, reg_ids) if target is None else []
        far = {r.run_id: how_far(workspace, r, now) for r in records}  # running runs: (total steps, s left)
        note = (f"{len(lost)} run folder(s) in {workspace.runs_dir} are not in the registry (e.g. {lost[0]}): "
                f"`arctl repair --workdir {workspace.root}` rebuilds it from the run folders") if lost else None
        if as_json:
            if note:
                err_console.print(f"[yellow]note[/]: {esc(note)}")
            print_json([{**r.as_dict(), "elapsed_s": (r.ended_at or now) - r.started_at if r.started_at else None,
                         "total_steps": far[r.run_id][0], "time_left_s": far[r.run_id][1],
                         "run_dir": str(workspace.run_dir(r.run_id)), "serves": [list(c) for c in serves[r.run_id]]}
                        for r in records])
            return
        headers = ("run id", "experiment/arm/seed", "state", "job", "step", "last metric", "W&B run", "elapsed")
        rows, counts = [], {}
        for r in records:
            state = INTERRUPTED if r.run_id in interrupted else r.state
            counts[state] = counts.get(state, 0) + 1
            metric = shown_metric(r.metric_name, r.metric_value, r.metric_nonfinite)
            if r.phase and r.state in ("RUNNING", "PENDING"):  # e.g. "warming up 640/1200", "waiting for <run>"
                metric = r.phase
            elif state == "SUBMITTING" and r.cancel_requested is not None:
                metric = CANCEL_ASKED
            cell = f"{r.experiment}/{r.arm}/s{r.seed}"
            here = [f"{e}/{a}" for e, a in serves[r.run_id] if e == target and r.experiment != target]
            if here:  # another experiment's run, listed because it is this one's cells too
                cell += f" as {', '.join(here)}"
            # what a job wrote (its phase, metric name) reaches the terminal: no control sequence of it does
            rows.append(tuple(printable(c) for c in (r.run_id, cell, state, r.job_id or "",
                                                     step_text(r.step, *far[r.run_id]), metric, r.wandb_id or "",
                                                     _elapsed(r, now))))
        if console.is_terminal:
            from rich.table import Table

            table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
            for col in headers:
                table.add_column(col, no_wrap=True)
            for row in rows:
                table.add_row(*map(esc, row[:2]), styled(row[2]), *map(esc, row[3:]))
            console.print(table)
        else:  # plain aligned columns: never truncated, fast for thousands of runs
            widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
            lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in [headers, *rows]]
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        console.print(f"{len(records)} run(s): {summary or 'none'}  [dim](workspace {esc(workspace.root)})[/]")
        for r in records:
            if r.state == "FAILED" and r.error:  # a job's error (Ray's carries colour codes): printable
                console.print(f"[red]{esc(r.run_id)}: {esc(printable(r.error))}[/]")
            if r.warning:
                console.print(f"[yellow]{esc(r.run_id)}: {esc(printable(r.warning))}[/]")
        if note:
            console.print(f"[yellow]note[/]: {esc(note)}")


def _unregistered(workspace, known: set[str]) -> list[str]:
    """Run folders (with a config.yaml) the registry has no row for: a registry deleted, emptied or
    copied from elsewhere. A run folder copied by hand (``cp -r runs/X runs/X.bak``) is none: `arctl repair`
    skips it (:func:`arctl.launch.repair.copy_of`), so the note would name repair for it for ever."""
    from arctl.launch.repair import copy_of
    from arctl.launch.rundir import RunDirError, read_run_config

    try:
        names = sorted(p.name for p in workspace.runs_dir.iterdir() if p.name not in known)
    except OSError:
        return []

    def a_copy(name: str) -> bool:
        try:
            return copy_of(name, read_run_config(workspace.run_dir(name))) is not None
        except RunDirError:
            return False

    return [name for name in workspace.unregistered(names) if not a_copy(name)]
