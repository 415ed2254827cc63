"""What ``arctl run``, ``arctl sweep`` and ``arctl resume`` share: launching items and printing the
result (``--dry-run`` output, waiting with progress, the closing "where are my runs and W&B files"
lines); and what the commands that show runs share: one-line launch errors, state colours."""

from __future__ import annotations

import time
from contextlib import contextmanager

import typer

from arctl.cli.common import (
    console,
    err_console,
    esc,
    fail,
    fit_columns,
    plain_columns,
    print_json,
    printable,
    section,
    user_errors,
)

STATE_STYLE = {
    "COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow", "SUBMITTING": "yellow",
    "FAILED": "bold red", "PREEMPTED": "magenta", "CANCELLED": "red", "INTERRUPTED": "red",
}


@contextmanager
def launch_errors():
    """User mistakes of the launch layer (bad executor, sbatch refusal, bad run dir) -> one line, exit 2."""
    with user_errors():
        try:
            yield
        except typer.Exit:
            raise
        except Exception as err:
            from arctl.launch.backends import BackendError
            from arctl.launch.executors import LaunchError
            from arctl.launch.rundir import RunDirError

            if isinstance(err, (LaunchError, RunDirError, BackendError)):
                fail(str(err))
            raise


@contextmanager
def composing(name: str):
    """A transient progress bar on a terminal's stderr while a sweep's cells are composed (650 cells of
    `paper --seeds 0-49`: ~15 s that printed nothing, from a hunt); yields the ``on_cell`` callback."""
    if not err_console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # the name as the task's description: TextColumn formats its text (a review: a "{" in it was a traceback)
    with Progress(TextColumn("composing {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task(esc(name), total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def sweep_items(name: str, overrides: list[str], scale: str | None, seeds: list[int] | None, workdir, force: bool,
                launching: bool = True):
    """The launch items of sweep ``name`` (:class:`arctl.launch.launcher.LaunchItem`, one per cell), as
    ``arctl sweep`` launches them: with ``share_arms``, a cell that is the same run as another, or as a
    run of the workspace ``workdir``, carries that run's id (:func:`arctl.launch.shared.mark_shared`).
    ``launching`` False: for naming the runs only (an export of a sweep launched before a conflict was refused)."""
    from arctl.compose import resolve_sweep
    from arctl.compose.sweep import load_sweep
    from arctl.launch.launcher import items_from_resolved

    with composing(name) as on_cell:
        resolved = resolve_sweep(name, list(overrides or []), scale, seeds, on_cell=on_cell)
    items = items_from_resolved(resolved, launching=launching)
    if load_sweep(name).share_arms:
        from arctl.launch.shared import mark_shared, workspace_runs
        from arctl.launch.workspace import Workspace

        mark_shared(items, *workspace_runs(items, Workspace.open(workdir), force))
    return items


def styled(state: str) -> str:
    return f"[{STATE_STYLE.get(state, 'white')}]{state}[/]"


def dry_run_report(items, workspace, executor: str | None, force: bool, array_parallelism: int | None,
                   as_json: bool, executor_by: str = "--executor") -> None:
    """Print what would be launched; write and submit nothing."""
    from arctl.launch.executors import choose_executor
    from arctl.launch.launcher import STARTS, dry_run_scripts, plan, planned_problem
    from arctl.launch.rundir import dump_config

    configured = items[0].config.get("cluster", {}).get("executor")
    requested = executor or configured or "auto"
    try:
        name, note = choose_executor(executor, configured, executor_by)
    except ValueError:
        if requested not in ("slurm",):
            raise
        name, note = "slurm", "executor: slurm (sbatch is not on PATH here: this is what would be submitted)"
    plan(items, workspace, force)
    to_launch = [i for i in items if i.action in STARTS]
    # what the launch itself would refuse (workspace_problem, executor_problem), shown, not raised: a dry run previews
    refused = planned_problem(items, workspace)
    if to_launch and not refused:
        from arctl.launch.executors import LaunchError
        from arctl.launch.launcher import executor_problem

        try:  # the launch asks of every run it would claim (shared cells are recorded, not run)
            executor_problem(name, [i for i in items if not i.shares], array_parallelism, workspace, to_launch)
        except LaunchError as err:
            refused = str(err)
    try:
        scripts = dry_run_scripts(to_launch, workspace, name, array_parallelism,
                                  {i.run_id: i.job for i in items if i.action == "active" and i.job})
    except Exception:  # a job that cannot be set up (a bad verl.overrides entry): what refuses the launch says why
        if not refused:  # (from an audit: this was a traceback, exit 1, where the launch gives one line)
            raise
        scripts = []
    if as_json:
        print_json({
            "dry_run": True, "executor": name, "workspace": str(workspace.root), "refused": refused,
            "runs": [{"run_id": i.run_id, "experiment": i.experiment, "arm": i.arm, "seed": i.seed,
                      "action": i.action, "reason": i.reason, "run_dir": str(workspace.run_dir(i.run_id)),
                      "config": i.config} for i in items],
            "sbatch": [{"title": t, "script": s} for t, s in scripts],
        })
        if refused:  # exits as the launch would: 2, with the launch's own error line
            fail(f"a launch would be refused: {refused}")
        return
    from rich.cells import cell_len
    from rich.syntax import Syntax
    from rich.table import Table

    console.print(f"[bold]dry run[/]: nothing is written or submitted. {esc(note)}")
    if refused:
        console.print(f"[bold red]a launch would be refused[/]: {esc(refused)} (the preview follows)")
    console.print(f"workspace: {esc(workspace.root)}")
    # the names whole (a user copies a run id): only the reason folds; a pipe, or a terminal too narrow for
    # that, gets plain lines (from a hunt: a run id folded over three lines, in a pipe too)
    headers = ("run id", "experiment", "arm", "seed", "would", "why")
    rows = [[printable(str(v)) for v in (i.run_id, i.experiment, i.arm, i.seed, i.action, i.reason or "")] for i in items]
    table = Table(show_header=True, header_style="bold")
    for col in headers:
        table.add_column(col, overflow="fold", no_wrap=col != "why")
    natural = [max(cell_len(v) for v in (h, *(row[n] for row in rows))) for n, h in enumerate(headers)]
    if console.is_terminal and fit_columns(table, natural, [5], [*natural[:5], min(natural[5], 16)], console.width):
        for row in rows:
            table.add_row(*map(esc, row))
        console.print(table)
    else:
        plain_columns(headers, rows)
    for i in items:
        section(f"[bold]{esc(i.run_id)}[/]  ({esc(i.experiment)}/{esc(i.arm)}/s{i.seed})")
        console.print(Syntax(dump_config(i.config), "yaml", background_color="default"))
    for title, script in scripts:
        section(f"[bold]{esc(title)}[/]")
        console.print(script, markup=False, highlight=False)
    if refused:
        fail(f"a launch would be refused: {refused}")


def report_launch(result, workspace, as_json: bool, quiet_json_extra: dict | None = None) -> None:
    if as_json:
        return
    err_console.print(esc(result.executor_note))
    for item in result.submitted:
        job = result.job_ids.get(item.run_id, "")
        console.print(esc(f"  {item.action:<7} {item.run_id}  ({item.experiment}/{item.arm}/s{item.seed})  job {job}"))
    for item, reason in result.skipped:
        console.print(f"  [dim]{esc(f'skip    {item.run_id}  ({item.experiment}/{item.arm}/s{item.seed})  {reason}')}[/]")
    jobs = sorted({j.split("_")[0] for j in result.job_ids.values()})
    what = f"{len(result.submitted)} run(s) submitted" if result.submitted else "nothing to submit"
    if result.executor == "slurm" and jobs:
        what += f" as SLURM job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)}"
    console.print(esc(f"{what}; {len(result.skipped)} skipped. `arctl status` shows progress."))


def how_far(workspace, rec, now: float) -> tuple[int | None, float | None]:
    """A running run's total steps and the seconds left at its attempt's pace, from its status.json
    (:func:`arctl.launch.progress.time_left`); (None, None) for a run that is not running."""
    from arctl.launch import states
    from arctl.launch.progress import time_left
    from arctl.launch.status_file import read_status

    if rec.state != states.RUNNING:
        return None, None
    status = {**read_status(workspace.run_dir(rec.run_id)), "step": rec.step}
    return status.get("total_steps"), time_left(status, now)


def step_text(step: int | None, total: int | None, left: float | None) -> str:
    """``59/100 (~5 min left)``, ``59/100``, ``59`` or ``""``."""
    if step is None:
        return ""
    text = f"{step}/{total}" if total else str(step)
    if left is not None:
        text += f" (~{max(1, round(left / 60))} min left)" if left >= 60 else " (<1 min left)"
    return text


def wait_with_progress(workspace, run_ids: list[str], as_json: bool):
    """Wait for the runs, printing state changes (and the step, of how many, with the time left at the
    run's pace, every 30 s)."""
    from arctl.launch.launcher import wait_for
    from arctl.launch.progress import shown_metric

    last: dict[str, tuple] = {}
    last_print = [0.0]

    def on_update(records) -> None:
        if as_json:
            return
        now = time.monotonic()
        periodic = now - last_print[0] > 30
        for r in records:
            key = (r.state, r.error, r.step, r.phase)
            previous = last.get(r.run_id, (None, None, None, None))
            if previous[:2] != key[:2] or (r.state == "PENDING" and previous[3] != key[3]) or (periodic and r.state == "RUNNING" and previous[2:] != key[2:]):
                metric = " " + shown if (shown := shown_metric(r.metric_name, r.metric_value, r.metric_nonfinite)) else ""
                step = f" step {step_text(r.step, *how_far(workspace, r, time.time()))}" if r.step is not None else ""
                if r.phase and r.state in ("RUNNING", "PENDING"):  # "warming up 640/1200", "waiting for <run>"
                    step, metric = f" {r.phase}", ""
                console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {esc(r.run_id)} {styled(r.state)}"
                              f"{esc(printable(step + metric))}")  # a job wrote the phase and the metric name
                last[r.run_id] = key
        if periodic:
            last_print[0] = now

    try:
        return wait_for(workspace, run_ids, on_update=on_update, on_problem=lambda text: err_console.print(
            f"[yellow]warning:[/] {esc(printable(text))}", markup=True, highlight=False))
    except KeyboardInterrupt:
        err_console.print("detached: the runs go on in the background; `arctl status` shows them")
        raise typer.Exit(130) from None


def closing_lines(workspace, records) -> None:
    """Where the runs and their W&B files are (each run when there are few), and what failed."""
    if records and len(records) <= 12:
        for r in records:
            run_dir = workspace.run_dir(r.run_id)
            job = f"  (job {r.job_id})" if r.job_id else ""  # its final job, not the queue:PID said at submission
            console.print(f"{styled(r.state)} {esc(f'{r.experiment}/{r.arm}/s{r.seed}: {run_dir}{job}')}")
            wandb_dirs = wandb_folders(run_dir)
            if wandb_dirs:
                console.print(esc(f"    W&B: {wandb_dirs[-1]}" + (f" (+{len(wandb_dirs) - 1} earlier)" if len(wandb_dirs) > 1 else "")))
    console.print(esc(f"runs:      {workspace.runs_dir}/<run id>/ (config.yaml, checkpoints/, job/ logs)"))
    console.print(esc(f"W&B files: {workspace.runs_dir}/<run id>/wandb/  (offline runs: `wandb sync <dir>` uploads one)"))
    bad = [r for r in records if r.state in ("FAILED", "CANCELLED", "PREEMPTED", "INTERRUPTED")]
    for r in bad:
        err_console.print(f"[red]{esc(r.run_id)} {r.state}[/]{esc(printable(': ' + r.error) if r.error else '')} — "
                          f"`arctl logs {esc(r.run_id)}`")


def wandb_folders(run_dir) -> list:
    """A run's offline W&B run folders, oldest first (one per attempt)."""
    return sorted((run_dir / "wandb").rglob("offline-run-*"))


def figure_commands(items, workdir) -> list[str]:
    """``arctl report --figure F`` for the figure of each launched experiment (its spec's ``figure:``)."""
    import shlex

    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment

    def figure(experiment: str) -> str | None:
        try:
            return load_experiment(experiment).figure
        except SpecError:  # a resumed run's spec not on this search path (its frozen config is all it needs):
            return None    # said after its job ran, as an error line, it lost the launch's output (from a hunt)

    experiments = dict.fromkeys(i.experiment for i in items)
    figures = dict.fromkeys(f for f in (figure(e) for e in experiments) if f)
    where = f" --workdir {shlex.quote(str(workdir))}" if workdir is not None else ""
    return [f"arctl report --figure {f}{where}" for f in figures]


def launch_and_report(items, *, workdir, executor, force, wait, array_parallelism, as_json, members, dry_run,
                      executor_by: str = "--executor"):
    """The body of run/sweep/resume once the items are known (``executor_by``: where ``executor`` came
    from, for the executor line)."""
    from arctl.launch.launcher import launch
    from arctl.launch.workspace import Workspace

    workspace = Workspace.open(workdir)
    if dry_run:
        dry_run_report(items, workspace, executor, force, array_parallelism, as_json, executor_by)
        return
    import contextlib
    import sys

    # in-process (debug) jobs may print: keep stdout for the JSON document
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    with quiet:
        result = launch(items, workspace, executor=executor, force=force, array_parallelism=array_parallelism,
                        members=members, echo=lambda m: err_console.print(f"[dim]{esc(m)}[/]"), executor_by=executor_by)
    report_launch(result, workspace, as_json)
    waited = None
    should_wait = wait if wait is not None else result.executor == "local"
    # what another launch has under way (skipped here) is waited for too: a second terminal's `arctl run` of runs
    # still running returned at once, saying to draw their figure (from a hunt)
    waiting = [i.run_id for i in result.submitted] + [r for r in result.in_flight if should_wait]
    if result.executor == "debug" or (should_wait and waiting):
        waited = wait_with_progress(workspace, waiting, as_json)
    figures = figure_commands(items, workdir)
    if as_json:
        final = {r.run_id: r for r in waited or []}
        print_json({
            "executor": result.executor, "workspace": str(workspace.root),
            **({"parallelism": result.parallelism} if result.parallelism else {}),
            "submitted": [{"run_id": i.run_id, "experiment": i.experiment, "arm": i.arm, "seed": i.seed,
                           # a run waited for: its job as status and its folder name it (a local run's
                           # queue:PID at submission is its job's once it starts; from a hunt)
                           "action": i.action, "job_id": (final[i.run_id].job_id if i.run_id in final else None)
                           or result.job_ids.get(i.run_id),
                           "run_dir": str(workspace.run_dir(i.run_id)),
                           "state": final[i.run_id].state if i.run_id in final else "PENDING",
                           # what the text's closing lines say of a run waited for: why it ended so, its W&B files
                           **({"error": final[i.run_id].error,
                               "wandb": [str(d) for d in wandb_folders(workspace.run_dir(i.run_id))]}
                              if i.run_id in final else {})}
                          for i in result.submitted],
            # a run another launch had under way, waited for: its state as it ended
            "skipped": [{"run_id": i.run_id, "reason": why, **({"state": final[i.run_id].state}
                                                                if i.run_id in final else {})}
                        for i, why in result.skipped],
            "figures": figures,
        })
    else:
        if waited is not None or result.skipped:
            closing_lines(workspace, waited or [])
        failed = any(r.state != "COMPLETED" for r in waited or [])
        elsewhere = set(result.in_flight) - {r.run_id for r in waited or []}  # under way, not waited for
        for command in [] if failed else figures:
            when = "when the runs are done, draw" if (result.submitted and waited is None) or elsewhere else "draw"
            console.print(esc(f"{when} the figure: {command}"))
    # exit 1 where a run waited for did not complete, whatever ended it (cancelled, preempted: `arctl run X &&
    # arctl report ...` went on to report a run that never finished, from a hunt); the last line says which
    unfinished = [r for r in waited or [] if r.state != "COMPLETED"]
    if unfinished:
        said = ", ".join(f"{r.run_id} {r.state}" for r in unfinished)
        err_console.print(f"[red]{len(unfinished)} of {len(waited)} run(s) did not complete[/]: {esc(printable(said))}")
        raise typer.Exit(1)
