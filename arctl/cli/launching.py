"""What ``arctl run``, ``arctl sweep`` and ``arctl resume`` share: launching items and printing the
result (``--dry-run`` output, waiting with progress, the closing "where are my runs and W&B files"
lines); and what the commands that show runs share: one-line launch errors, state colours."""

from __future__ import annotations

import itertools
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import typer

from arctl.cli.common import (
    console,
    err_console,
    esc,
    fail,
    fit_columns,
    is_terminal,
    plain_columns,
    print_json,
    printable,
    progress_bars,
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
    if not progress_bars(err_console):
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
    """Print what would be launched: the plan of every item, the configs of the runs that would start
    (:func:`print_configs`), the sbatch scripts, then the counts of each action (:func:`totals_line`; ``--json``:
    ``counts``), what the SLURM jobs reserve and whether the runs' checkpoints fit the workspace's disk
    (:func:`arctl.launch.disk_room.checkpoint_room`; ``checkpoint_disk``); write and submit nothing."""
    from arctl.launch.executors import choose_executor
    from arctl.launch.launcher import STARTS, dry_run_scripts, forced_sources_note, plan, planned_problem

    configured = items[0].config.get("cluster", {}).get("executor")
    requested = executor or configured or "auto"
    try:
        name, note = choose_executor(executor, configured, executor_by)
    except ValueError:
        if requested not in ("slurm",):
            raise
        name, note = "slurm", "executor: slurm (sbatch is not on PATH here: this is what would be submitted)"
    plan(items, workspace, force, name)
    for i in items:  # a run kept as it is, whose launch-only keys the spec now sets otherwise: said on its line
        if i.action in ("skip", "active"):
            i.reason += kept_settings_note(i, workspace, i.action == "active", force)
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
        active = [i for i in items if i.action == "active" and i.job]
        scripts = dry_run_scripts(to_launch, workspace, name, array_parallelism, {i.run_id: i.job for i in active},
                                  {i.run_id: i.after for i in active}, {i.run_id: i.state for i in active})
    except Exception:  # a job that cannot be set up (a bad verl.overrides entry): what refuses the launch says why
        if not refused:  # (from an audit: this was a traceback, exit 1, where the launch gives one line)
            raise
        scripts = []
    counts = action_counts(items)
    from arctl.launch.executors import reservation, reservation_line

    asked = reservation([i.config for i in to_launch]) if name == "slurm" else None
    from arctl.launch.disk_room import checkpoint_room

    room = checkpoint_room(to_launch, workspace)  # the checkpoints' disk at once against the workspace's free space
    grids: dict = {}
    points = [grid_point(i, grids) for i in items]  # a grid sweep's rows told apart (from a hunt: 8 alike rows)
    from arctl.launch.launcher import backend_notes, slurm_only_note, wandb_shell_note

    unused = slurm_only_note(name, to_launch)  # the launch's note, previewed (cluster.setup not run on this machine)
    before_step_0 = backend_notes(to_launch)  # e.g. a tiny warm-up its runs train first (the launch's notes)
    shell = wandb_shell_note(to_launch)  # W&B variables of this shell the runs do not take (the launch's note)
    forced = forced_sources_note(items, workspace)  # the runs that start from a run this launch reruns (the launch's note)
    if as_json:
        print_json({
            "dry_run": True, "executor": name, "workspace": str(workspace.root), "refused": refused,
            "runs": [{"run_id": i.run_id, "experiment": i.experiment, "arm": i.arm, "seed": i.seed,
                      "action": i.action, "reason": i.reason, "run_dir": str(workspace.run_dir(i.run_id)),
                      **grid_json(point), "config": shown_config(i.config)} for i, point in zip(items, points)],
            "sbatch": [{"title": t, "script": s} for t, s in scripts],
            "counts": counts,
            "reservation": asked,  # what the SLURM jobs ask of the cluster (None: no SLURM job would start)
            "checkpoint_disk": room and room.as_json(),  # None: no run that would start saves checkpoints to count
            "slurm_only": unused,  # the SLURM-only cluster keys a local or debug launch would not apply (None: none)
            "starting_from_forced": forced,  # the runs that start from a run it reruns, kept as they are (None: none)
            "backend_notes": before_step_0,  # what the runs do before step 0 that takes time (a warm-up): [] none
            "wandb_shell": shell,  # this shell's WANDB_ENTITY/TAGS/NOTES the runs do not use (None: none)
        })
        if refused:  # exits as the launch would: 2, with the launch's own error line
            fail(f"a launch would be refused: {refused}")
        return
    from rich.cells import cell_len
    from rich.table import Table

    console.print(f"[bold]dry run[/]: nothing is written or submitted. {esc(note)}")
    if refused:
        console.print(f"[bold red]a launch would be refused[/]: {esc(refused)} (the preview follows)")
    console.print(f"workspace: {esc(workspace.root)}")
    # the names whole (a user copies a run id): only the reason folds; a pipe, or a terminal too narrow for
    # that, gets plain lines (from a hunt: a run id folded over three lines, in a pipe too)
    # a grid sweep's grid point in a column of its own, after "would" (a script reads the action as the 5th word)
    gridded = any(p is not None for p in points)
    headers = ("run id", "experiment", "arm", "seed", "would", *(("grid point",) if gridded else ()), "why")
    rows = [[printable(str(v)) for v in (i.run_id, i.experiment, i.arm, i.seed, i.action,
                                         *((grid_text(p),) if gridded else ()), i.reason or "")]
            for i, p in zip(items, points)]
    table = Table(show_header=True, header_style="bold")
    for col in headers:
        table.add_column(col, overflow="fold", no_wrap=col != "why")
    natural = [max(cell_len(v) for v in (h, *(row[n] for row in rows))) for n, h in enumerate(headers)]
    why = len(headers) - 1
    # the reason wraps between words only: it names run ids too ("after <run id>"), which a fold split over lines
    # (from a hunt: at 125-165 columns); where its longest word does not fit either, plain lines
    word = max([cell_len(w) for row in rows for w in row[why].split()] or [1])
    if is_terminal(console) and fit_columns(table, natural, [why], [*natural[:why], min(natural[why], word)],
                                            console.width):
        for row in rows:
            table.add_row(*map(esc, row))
        console.print(table)
    else:
        plain_columns(headers, rows)
    print_configs(to_launch, {id(i): p for i, p in zip(items, points)})
    for title, script in scripts:
        section(f"[bold]{esc(title)}[/]")
        console.print(script, markup=False, highlight=False)
    console.print(esc(totals_line(counts)))
    if asked:
        console.print(esc(reservation_line(asked)))
    if room is not None:
        console.print(("[yellow]note:[/] " if room.over else "") + esc(room.line()))
    if unused:
        console.print("[yellow]note:[/] " + esc(unused))
    if forced:
        console.print("[yellow]note:[/] " + esc(forced))
    for said in before_step_0:
        console.print("[yellow]note:[/] " + esc(said))
    if shell:
        console.print("[yellow]note:[/] " + esc(shell))
    if refused:
        fail(f"a launch would be refused: {refused}")


@dataclass(frozen=True)
class GridPoint:
    """Where a run of a grid sweep sits in its sweep's grid: the grid's ``KEY=VALUE`` overrides it was composed with
    (``texts``; ``values``: each key's value as the sweep's grid writes it) and the grid's keys it reads nothing of
    (``unread``: it was composed without them, one run for every value of the key; :mod:`arctl.compose.resolve`)."""

    texts: tuple[str, ...]
    values: dict
    unread: tuple[str, ...]


GRID_UNREAD = "(unread)"  # a grid key's value in the plan's grid point where the run reads nothing of the key


def grid_texts(sweep: str | None, memo: dict) -> dict[str, tuple[str, object]]:
    """Each override text of sweep ``sweep``'s grid (``thinking.lam=0.5``, as :meth:`arctl.compose.sweep.Sweep.
    grid_points` writes it) -> (its key, the value as the grid writes it); {} for no sweep, a sweep without a grid,
    or one whose spec no longer reads (a resumed run's). ``memo``: sweep name -> this, for one command's items."""
    if sweep is None:
        return {}
    if sweep not in memo:
        from arctl.compose.errors import SpecError
        from arctl.compose.sweep import load_sweep

        try:
            spec = load_sweep(sweep)
        except (SpecError, OSError):
            memo[sweep] = {}
            return memo[sweep]
        keys = list(spec.grid)
        memo[sweep] = {text: (key, value) for point, values in zip(spec.grid_points(),
                                                                   itertools.product(*spec.grid.values()))
                       for text, key, value in zip(point, keys, values)} if keys else {}
    return memo[sweep]


def grid_point(item, memo: dict) -> GridPoint | None:
    """The :class:`GridPoint` of ``item`` (a :class:`arctl.launch.launcher.LaunchItem`: every cell it is, merged;
    one composed without its sweep, a resumed run, its config's values at the grid's keys), None where its sweep
    has no grid. ``memo``: :func:`grid_texts`'."""
    texts = grid_texts(item.sweep, memo)
    if not texts:
        return None
    read: list[str] = []
    unread: list[str] = []
    for cell in getattr(item, "cells", None) or [item.run]:
        read += [t for t in cell.sweep_overrides if t in texts and t not in read]
        unread += [texts[t][0] for t in cell.sweep_not_read if t in texts and texts[t][0] not in unread]
    if not read and not unread:  # a run resumed from its frozen config (`arctl resume`): its config's values
        return _own_point(item.config, texts)
    keys = {texts[t][0] for t in read}
    return GridPoint(tuple(read), {texts[t][0]: texts[t][1] for t in read}, tuple(k for k in unread if k not in keys))


def grid_text(point: GridPoint | None) -> str:
    """``thinking.lam=0.5``, ``reward.alpha=(unread)``, several joined by "," (one word: a script splits the plan's
    lines on blanks), "-" for none."""
    if point is None:
        return "-"
    return ",".join([*point.texts, *(f"{k}={GRID_UNREAD}" for k in point.unread)]) or "-"


def grid_json(point: GridPoint | None) -> dict:
    """``--json``'s keys of a run's grid point: ``grid`` (key -> value as the sweep's grid writes it; null: its sweep
    has no grid) and ``grid_unread`` (the grid's keys it reads nothing of: one run for every value)."""
    return {"grid": None if point is None else dict(point.values),
            "grid_unread": [] if point is None else list(point.unread)}


def launched_grid(item, memo: dict) -> dict:
    """A launch's ``--json`` keys of a submitted or skipped run's grid point (:func:`grid_json`), only where its
    sweep has a grid (the document's keys of a run of an experiment are as they were)."""
    point = grid_point(item, memo)
    return {} if point is None else grid_json(point)


SECRET_NOT_SHOWN = "(not shown)"  # a cluster.secrets entry a dry run's config does not show (shown_config)


def shown_config(config: dict) -> dict:
    """``config`` as a dry run shows it (its YAML, ``--json``'s ``config``): a ``cluster.secrets`` entry that is no
    variable's name and that this shell does not set is :data:`SECRET_NOT_SHOWN`, as the launch's refusal of it
    does not show it (:func:`arctl.launch.launcher.unset_secret_problem`: it may be a secret's value pasted in place
    of a name). From a hunt: the preview printed the pasted token above the line that said it was not shown."""
    from arctl.launch.launcher import VARIABLE_NAME

    cluster = config.get("cluster")
    named = cluster.get("secrets") if isinstance(cluster, dict) else None
    if not isinstance(named, list):
        return config
    shown = [n if VARIABLE_NAME.fullmatch(str(n)) or (os.environ.get(str(n)) or "").strip() else SECRET_NOT_SHOWN
             for n in named]
    return config if shown == named else {**config, "cluster": {**cluster, "secrets": shown}}


# what the dry run's last line says of each planned action (LaunchItem.action), in this order
ACTION_TOTALS = {"new": "would start (new)", "resume": "would resume", "rerun": "would rerun (--force)",
                 "skip": "skipped (completed)", "active": "skipped (under way)", "shared": "shared",
                 "refused": "refused"}
CONFIGS_WHOLE = 3  # a dry run starting at most this many runs prints each one's config, as it always did


def action_counts(items) -> dict[str, int]:
    """Planned action -> how many items :func:`arctl.launch.launcher.plan` gave it (those with any), in
    :data:`ACTION_TOTALS`' order: the dry run's totals line and its ``--json`` ``counts``."""
    counts = {action: 0 for action in ACTION_TOTALS}
    for item in items:
        counts[item.action] = counts.get(item.action, 0) + 1
    return {action: n for action, n in counts.items() if n}


def totals_line(counts: dict[str, int]) -> str:
    """"520 planned: 56 would resume, 304 skipped (completed), 160 shared": the dry run's last line. From a
    hunt: 520 cells printed 70,793 lines ending in a YAML config, never saying how many would resume."""
    said = ", ".join(f"{n} {ACTION_TOTALS.get(action, action)}" for action, n in counts.items())
    return f"{sum(counts.values())} planned: {said or 'nothing'}"


def config_groups(items) -> list[list]:
    """``items`` grouped by their config up to what names one run of an arm: the seed, the run's names
    (:func:`arctl.launch.shared.share_key`: run id, W&B name and id, ...) and the run it starts from
    (``trainer.init_run``, another seed's run), within one experiment and arm. Each group's first item
    comes first, in ``items``' order. The seeds of an arm (or of one of a sweep's grid points) are one group;
    a resumed run whose frozen config differs in anything else is a group of its own."""
    from arctl.launch.shared import share_key

    groups: dict[tuple, list] = {}
    for item in items:
        config = {**item.config, "seed": None}
        if isinstance(config.get("trainer"), dict):
            config["trainer"] = {**config["trainer"], "init_run": None}
        groups.setdefault((item.experiment, item.arm, share_key(config)), []).append(item)
    return list(groups.values())


def differing_keys(items) -> list[str]:
    """The dotted config keys whose values are not the same in every one of ``items`` (sorted)."""
    from arctl.track.runs.tidy import flatten_config

    flat = [flatten_config(i.config) for i in items]
    missing = object()
    keys = set().union(*flat)
    return sorted(k for k in keys if len({repr(f.get(k, missing)) for f in flat}) > 1)


def print_configs(starting, points: dict | None = None) -> None:
    """The configs of the runs a launch would start (not of those it skips or shares: another item's run).
    Up to :data:`CONFIGS_WHOLE` runs, each one's; more, each distinct config once (:func:`config_groups`),
    headed by the runs it serves and the keys in which they differ from the one shown, which ``--json`` has
    for every run. From a hunt: a 520-cell sweep printed 520 configs of 135 lines, 40 per arm that differed only
    in their seed and names, skipped and shared cells' too. YAML is coloured on a terminal only (in a pipe,
    rich's highlighting took 25 s of 84). ``points``: id(item) -> its :class:`GridPoint`, said in each heading."""
    from arctl.config.ranges import seeds_text
    from arctl.launch.rundir import dump_config

    def show(config: dict) -> None:
        text = dump_config(shown_config(config))
        if is_terminal(console):
            from rich.syntax import Syntax

            console.print(Syntax(text, "yaml", background_color="default"))
        else:  # the same lines as Syntax prints in a pipe (the YAML and a blank line), without its cost
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    groups = [[i] for i in starting] if len(starting) <= CONFIGS_WHOLE else config_groups(starting)
    for group in groups:
        first = group[0]
        point = (points or {}).get(id(first))
        at = f" {esc(printable(grid_text(point)))}" if point is not None else ""
        if len(group) == 1:
            section(f"[bold]{esc(first.run_id)}[/]  ({esc(first.experiment)}/{esc(first.arm)}/s{first.seed}{at})")
            show(first.config)
            continue
        would = ", ".join(f"{n} {ACTION_TOTALS[a]}" for a, n in action_counts(group).items())
        section(f"[bold]{esc(first.experiment)}/{esc(first.arm)}[/]{at}  ({len(group)} runs, one config)")
        console.print(esc(printable(
            f"{would}, seeds {seeds_text(i.seed for i in group)}: the config of {first.run_id} (s{first.seed}); the "
            f"{len(group) - 1} others differ from it only in {', '.join(differing_keys(group))} (--json has "
            "every run's config)")))
        show(first.config)


def report_launch(result, workspace, as_json: bool, quiet_json_extra: dict | None = None) -> None:
    from arctl.launch.workspace import workdir_arg

    err_console.print(esc(result.executor_note))  # on stderr, --json too (from a hunt: --json said nothing at all)
    if as_json:  # what was submitted and skipped is in the document
        return
    grids: dict = {}

    def cell(item) -> str:  # a grid sweep's run with its grid point (from a hunt: the rows were told apart by hash)
        point = grid_point(item, grids)
        return f"{item.experiment}/{item.arm}/s{item.seed}" + (f" {grid_text(point)}" if point is not None else "")

    for item in result.submitted:
        job = result.job_ids.get(item.run_id, "")
        console.print(esc(printable(f"  {item.action:<7} {item.run_id}  ({cell(item)})  job {job}")))
    for item, reason in result.skipped:
        console.print(f"  [dim]{esc(printable(f'skip    {item.run_id}  ({cell(item)})  {reason}'))}[/]")
    from arctl.launch.job_ids import array_master, job_id_order

    jobs = sorted({array_master(j) for j in result.job_ids.values()}, key=job_id_order)  # 8, 9, 10 (a hunt)
    what = f"{len(result.submitted)} run(s) submitted" if result.submitted else "nothing to submit"
    if result.executor == "slurm" and jobs:
        what += f" as SLURM job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)}"
    console.print(esc(f"{what}; {len(result.skipped)} skipped. `arctl status{workdir_arg(workspace.root)}` shows progress."))


def how_far(workspace, rec, now: float) -> tuple[int | None, float | None, tuple[float, float] | None]:
    """A running run's total steps, the seconds left at its attempt's pace (:func:`arctl.launch.progress.time_left`)
    and, where known, (seconds since its last step, the seconds a step took it: :func:`arctl.launch.progress.step_age`),
    from its status.json and metrics files; an attempt that has :func:`arctl.launch.progress.stalled` has no time
    left (None: it grew on every call, from a hunt). (None, None, None) for a run that is not running."""
    from arctl.launch import states
    from arctl.launch.progress import last_step_at, stalled, step_age, time_left
    from arctl.launch.status_file import read_status

    if rec.state != states.RUNNING:
        return None, None, None
    run_dir = workspace.run_dir(rec.run_id)
    status = {**read_status(run_dir), "step": rec.step}
    last_at = last_step_at(run_dir, status.get("metric_files"))
    age = step_age(status, last_at, now)
    left = None if age is not None and stalled(*age) else time_left(status, now, last_at)
    return status.get("total_steps"), left, age


def resumes_from(workspace, rec) -> int | None:
    """The step a stopped run's next attempt resumes from, where its job recorded one behind the step the run
    reached (status.json's ``resume_step``: a verl step abandoned on TERM keeps an older checkpoint; from a hunt,
    `arctl status` showed step 14 of a run that resumes from 10); else None. Read for stopped and failed runs only."""
    from arctl.launch import states
    from arctl.launch.status_file import read_status

    if rec.state not in (states.PREEMPTED, states.CANCELLED, states.FAILED) or rec.step is None:
        return None
    step = read_status(workspace.run_dir(rec.run_id)).get("resume_step")
    return step if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < rec.step else None


def step_text(step: int | None, total: int | None, left: float | None, age: tuple[float, float] | None = None) -> str:
    """``59/100 (~5 min left)``, ``59/100``, ``59`` or ``""``; ``55/400 (no step for 12 min; steps took ~0.3 s)``
    where the attempt has stalled (``age``: :func:`how_far`'s)."""
    from arctl.launch.progress import stall_text, stalled

    if step is None:
        return ""
    text = f"{step}/{total}" if total else str(step)
    if age is not None and stalled(*age):
        text += f" ({stall_text(*age)})"
    elif left is not None:
        text += f" (~{max(1, round(left / 60))} min left)" if left >= 60 else " (<1 min left)"
    return text


class Detached(typer.Exit):
    """A Ctrl-C while :func:`wait_with_progress` waited: the runs go on; exit 130. ``records``: each run's record as
    the wait last saw it (none for a run not polled yet), for ``--json``'s document (:func:`launch_and_report`)."""

    def __init__(self, records: list) -> None:
        super().__init__(130)
        self.records = records


def wait_with_progress(workspace, run_ids: list[str], as_json: bool):
    """Wait for the runs, printing state changes (and the step, of how many, with the time left at the
    run's pace, every 30 s): on stdout, or on stderr under ``--json`` (stdout is the document's; from a hunt,
    `arctl run --json > out.json` showed nothing for a 15-minute run). A Ctrl-C says that the runs go on
    and raises :class:`Detached`."""
    from arctl.launch.launcher import wait_for
    from arctl.launch.progress import shown_metric

    last: dict[str, tuple] = {}
    last_print = [0.0]
    seen: dict[str, object] = {}
    out = err_console if as_json else console

    def on_update(records) -> None:
        seen.update((r.run_id, r) for r in records)
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
                out.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {esc(r.run_id)} {styled(r.state)}"
                          f"{esc(printable(step + metric))}")  # a job wrote the phase and the metric name
                last[r.run_id] = key
        if periodic:
            last_print[0] = now

    try:
        return wait_for(workspace, run_ids, on_update=on_update, on_problem=lambda text: err_console.print(
            f"[yellow]warning:[/] {esc(printable(text))}", markup=True, highlight=False))
    except KeyboardInterrupt:
        from arctl.launch.workspace import workdir_arg

        err_console.print(esc(f"detached: the runs go on in the background; `arctl status{workdir_arg(workspace.root)}` "
                              "shows them"))
        raise Detached(list(seen.values())) from None


def closing_lines(workspace, records) -> None:
    """Where the runs and their W&B files are (each run when there are few), and what failed."""
    from arctl.launch.workspace import workdir_arg

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
                          f"`arctl logs {esc(r.run_id + workdir_arg(workspace.root))}`")


def wandb_folders(run_dir) -> list:
    """A run's offline W&B run folders, oldest first (one per attempt)."""
    return sorted((run_dir / "wandb").rglob("offline-run-*"))


def figure_lines(items, workdir) -> tuple[list[str], list[str]]:
    """(the ``arctl report --figure F`` commands that draw the launched experiments' figures, a note for each
    figure that none can draw). A figure whose spec reads other experiments gets the launched ones named
    (``--sweep S`` where a sweep's cells were launched, else ``--experiment E``): from a hunt, the README's
    own flow (``arctl cp main-grpo experiments/my-exp.yaml``, ``arctl run my-exp``) ended with a command
    that reads main-grpo's runs, "no runs of experiment(s) main-grpo, ...", exit 2. A ``figure:`` that names
    no usable report spec is said as such, not printed as a command that fails ("unknown figure")."""
    import shlex

    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment
    from arctl.launch.workspace import workdir_arg

    def figure(experiment: str) -> str | None:
        try:
            return load_experiment(experiment).figure
        except SpecError:  # a resumed run's spec not on this search path (its frozen config is all it needs):
            return None    # said after its job ran, as an error line, it lost the launch's output (from a hunt)

    experiments = dict.fromkeys(i.experiment for i in items)
    by_figure: dict[str, list[str]] = {}
    for exp in experiments:
        if name := figure(exp):
            by_figure.setdefault(name, []).append(exp)
    sweeps = {getattr(i, "sweep", None) for i in items}
    sweep = next(iter(sweeps)) if len(sweeps) == 1 else None  # every cell of one sweep: the runs it composed
    where = workdir_arg(workdir) if workdir is not None else ""
    commands, notes = [], []
    for name, launched in by_figure.items():
        which = " and ".join(launched)
        try:
            reads = figure_reads(name)
        except Exception as err:  # noqa: BLE001 - ReportError or SpecError: the spec's own one line
            notes.append(f"no figure to draw: {which} {'names' if len(launched) == 1 else 'name'} figure {name}, "
                         f"which `arctl report` cannot draw: {err}")
            continue
        named = ""
        if reads is not None and not set(launched) <= set(reads):
            named = (f" --sweep {shlex.quote(sweep)}" if sweep is not None
                     else "".join(f" --experiment {shlex.quote(e)}" for e in launched))
        commands.append(f"arctl report --figure {shlex.quote(name)}{named}{where}")
    return commands, notes


def figure_reads(name: str) -> list[str] | None:
    """The experiments whose runs figure ``name`` reads as its spec says (None: every experiment's, or none
    where it is drawn from definitions alone, which take no ``--experiment``); ReportError or SpecError where
    there is no such figure or its spec is broken (what ``arctl report --figure`` would say)."""
    from arctl.compose.report_specs import spec_builder
    from arctl.report.data import resolve_experiments
    from arctl.report.render import BUILDERS
    from arctl.report.specs import load_spec

    spec = load_spec("figure", name)
    if BUILDERS[spec_builder(spec)][1] is None:
        return None
    return resolve_experiments(spec, None, None)


KEPT_SHOWN = 3  # the differing keys a skipped run's line names, then "and N more"


def kept_settings_note(item, workspace, active: bool, force: bool) -> str:
    """"; its config.yaml has K=V, ... not your spec's (...)" for a run the launch keeps as it is (completed,
    or under way: ``active``) whose frozen config.yaml differs from what the spec now composes in the keys the run
    id leaves out (:func:`arctl.launch.cells.runs_differently`), else "". From a hunt: ``wandb.notes`` and
    ``wandb.project`` edited after a run completed were skipped with "completed" and never reached it, without a
    word. A run that is done is compared in ``wandb.*`` only (where its W&B run logged and what it is called: its
    ``cluster`` said only where it ran); one under way in every launch-only key (it goes on with its own
    ``cluster.time_min``). Only a kept run's config.yaml is read; the run id is unchanged."""
    from arctl.config.hydra_text import override_value
    from arctl.launch.cells import runs_differently
    from arctl.launch.rundir import READ_KEYS, read_run_config
    from arctl.track.runs.tidy import flatten_config

    try:
        frozen = flatten_config(read_run_config(workspace.run_dir(item.run_id)))
    except Exception:  # noqa: BLE001 - no readable config.yaml: nothing to compare (status and logs say why)
        return ""
    composed = flatten_config(item.config)

    def compared(key: str) -> bool:
        if key.split(".", 1)[0] in READ_KEYS or key == "wandb.id":  # named by the launch, not the spec
            return False
        return runs_differently(key) if active else key.startswith("wandb.")

    missing = object()
    differing = [k for k in sorted(composed.keys() | frozen.keys()) if compared(k)
                 and frozen.get(k, _schema_default(k)) != composed.get(k, _schema_default(k, missing))]
    if not differing:
        return ""

    def shown(key: str) -> str:
        value = frozen.get(key, _schema_default(key))
        try:
            text = override_value(value)
        except ValueError:  # NaN: written as Python writes it
            text = str(value)
        return f"{key}={printable(text if len(text) <= 40 else text[:37] + '...')}"

    said = ", ".join(shown(k) for k in differing[:KEPT_SHOWN])
    if len(differing) > KEPT_SHOWN:
        said += f" and {len(differing) - KEPT_SHOWN} more"
    then = ("it goes on with its own" if active else "--force reruns it with yours" if not force
            else "it was brought along, not rerun")
    return f"; its config.yaml has {said}, not your spec's (launch-only keys, outside the run id: {then})"


def _schema_default(key: str, absent=None):
    """The schema's default of dotted ``key`` (a key a config frozen before it existed lacks: ``wandb.notes``),
    or ``absent`` where the schema has no plain default for it."""
    import dataclasses

    from arctl.config.schema import RunConfig

    kind = RunConfig
    *sections, last = key.split(".")
    for part in sections:
        found = {f.name: f for f in dataclasses.fields(kind)}.get(part) if dataclasses.is_dataclass(kind) else None
        if found is None or found.default_factory is dataclasses.MISSING:
            return absent
        kind = found.default_factory
    found = {f.name: f for f in dataclasses.fields(kind)}.get(last) if dataclasses.is_dataclass(kind) else None
    if found is None:
        return absent
    if found.default is not dataclasses.MISSING:
        return found.default
    return found.default_factory() if found.default_factory is not dataclasses.MISSING else absent


def launch_and_report(items, *, workdir, executor, force, wait, array_parallelism, as_json, members, dry_run,
                      executor_by: str = "--executor"):
    """The body of run/sweep/resume once the items are known (``executor_by``: where ``executor`` came
    from, for the executor line)."""
    from arctl.launch.launcher import launch
    from arctl.launch.workspace import Workspace

    workspace = Workspace.open(workdir)
    from arctl.launch.shared import mark_same_computation

    mark_same_computation(items, workspace, force)  # a run of the cell under an earlier id that computes the same
    if dry_run:
        dry_run_report(items, workspace, executor, force, array_parallelism, as_json, executor_by)
        return
    import contextlib
    import sys

    # in-process (debug) jobs may print: keep stdout for the JSON document
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    with quiet:
        result = launch(items, workspace, executor=executor, force=force, array_parallelism=array_parallelism,
                        members=members, echo=lambda m: err_console.print(f"[dim]{esc(printable(m))}[/]"), executor_by=executor_by)
    # a run the registry kept as it is (not a shared cell, nor a rerun or resume this launch claimed and then dropped,
    # whose config.yaml it wrote or put back: the launch sets their action) says where its launch-only keys differ
    result.skipped = [(i, why if i.shares or i.action in ("rerun", "resume")
                       else why + kept_settings_note(i, workspace, i.run_id in result.in_flight, force))
                      for i, why in result.skipped]
    report_launch(result, workspace, as_json)
    figures, figure_notes = figure_lines(items, workdir)  # before the wait: a Ctrl-C there still reports them
    waited, detached = None, None
    should_wait = wait if wait is not None else result.executor == "local"
    # what another launch has under way (skipped here) is waited for too: a second terminal's `arctl run` of runs
    # still running returned at once, saying to draw their figure (from a hunt)
    waiting = [i.run_id for i in result.submitted] + [r for r in result.in_flight if should_wait]
    if result.executor == "debug" or (should_wait and waiting):
        if others := [r for r in result.in_flight if should_wait]:  # said on stderr (--json too): what it waits on
            err_console.print(esc(f"waiting for {len(others)} run(s) another launch has under way: "
                                  f"{', '.join(others[:5])}{' ...' if len(others) > 5 else ''}"), highlight=False)
        try:
            waited = wait_with_progress(workspace, waiting, as_json)
        except Detached as stop:  # Ctrl-C: --json still prints its one document (from a hunt: stdout was empty, and
            if not as_json:       # a script lost the run ids, job ids and folders of runs that went on)
                raise
            detached = stop
    from arctl.launch import states

    # no figure is drawn from runs that ended without completing (a Ctrl-C's runs that go on still may)
    seen = waited if detached is None else detached.records
    failed = any(r.state != "COMPLETED" and r.state not in states.ACTIVE for r in seen or [])
    if as_json:
        launch_json(result, workspace, seen or [], [] if failed else figures, figure_notes, detached is not None)
        if detached is not None:
            raise detached
    else:
        if waited is not None or result.skipped:
            closing_lines(workspace, waited or [])
        elsewhere = set(result.in_flight) - {r.run_id for r in waited or []}  # under way, not waited for
        for command in [] if failed else figures:
            when = "when the runs are done, draw" if (result.submitted and waited is None) or elsewhere else "draw"
            console.print(esc(f"{when} the figure: {command}"))
        for note in figure_notes:
            console.print(esc(note))
    # exit 1 where a run waited for did not complete, whatever ended it (cancelled, preempted: `arctl run X &&
    # arctl report ...` went on to report a run that never finished, from a hunt); the last line says which
    unfinished = [r for r in waited or [] if r.state != "COMPLETED"]
    if unfinished:
        said = ", ".join(f"{r.run_id} {r.state}" for r in unfinished)
        err_console.print(f"[red]{len(unfinished)} of {len(waited)} run(s) did not complete[/]: {esc(printable(said))}")
        raise typer.Exit(1)


def launch_json(result, workspace, seen, figures: list[str], figure_notes: list[str], detached: bool) -> None:
    """The one ``--json`` document of a launch: what it submitted and skipped, each run waited for in the state the
    wait last saw (``seen``; a run not waited for, or not polled yet, ``PENDING``), the figures to draw.
    ``detached``: a Ctrl-C stopped the wait; the runs go on (``"detached": true``, only then)."""
    final = {r.run_id: r for r in seen}
    grids: dict = {}
    print_json({
        "executor": result.executor, "workspace": str(workspace.root),
        **({"parallelism": result.parallelism} if result.parallelism else {}),
        "submitted": [{"run_id": i.run_id, "experiment": i.experiment, "arm": i.arm, "seed": i.seed,
                       **launched_grid(i, grids),
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
        # what the text's skip lines name (from a hunt: run_id and reason only); a run another launch had
        # under way, waited for: its state as it ended
        "skipped": [{"run_id": i.run_id, "experiment": i.experiment, "arm": i.arm, "seed": i.seed, "reason": why,
                     **launched_grid(i, grids),
                     **({"state": final[i.run_id].state} if i.run_id in final else {})}
                    for i, why in result.skipped],
        # as the text: no figure to draw from runs that did not complete (from a hunt: listed after a failure)
        "figures": figures,
        **({"figure_notes": figure_notes} if figure_notes else {}),
        **({"detached": True} if detached else {}),
    })


@dataclass
class InSweep:
    """What :func:`sweep_now` says of one run of a sweep: whether the sweep as it now stands composes it (a launch
    of it would keep or share it: ``now``), its grid point (a grid sweep's; for a run it does not compose, the
    run's own values at the grid's keys), and for one it does not compose, the keys in which the run differs from
    the nearest cell the sweep now composes at its experiment, arm and seed (``differs``: key -> (the run's value,
    the sweep's); None where the sweep composes no such cell: its arm or experiment removed or renamed)."""

    now: bool
    point: GridPoint | None = None
    differs: dict | None = None


def sweep_now(name: str, records, workspace) -> tuple[dict[str, InSweep], list[str]]:
    """Run id -> :class:`InSweep` for ``records`` (the registry's runs of sweep ``name``), and a note per scale at
    which the sweep does not compose as it stands (its runs there not judged). The sweep is composed once per scale
    of the runs, at their seeds (seeds added with ``--seeds`` count), without command-line overrides, as the launch
    plans it (:func:`arctl.compose.resolve_sweep`, :func:`arctl.launch.launcher.items_from_resolved`; with
    ``share_arms``, a cell kept as one of these runs: :func:`arctl.launch.shared.mark_shared`; a run of the cell
    that differs only in settings it does not read: :func:`arctl.launch.shared.mark_same_computation`). Each arm and
    grid point is composed once (Hydra: ~0.2-0.4 s), at two of the runs' seeds, the others' cells given their seed
    (:func:`_at_seeds`): the cost grows with the sweep's arms, grid points and scales, hardly with its runs, and is
    paid once: the cells are kept in the workspace (:class:`ComposedCache`) until a spec or arctl's code changes; only
    the config.yaml of runs the sweep does not compose (and, with ``share_arms``, of the runs that no cell has by its own
    id) is read. From a hunt: after an arm was edited, `arctl status` listed evx/grpo/s0 COMPLETED twice
    and nothing said which was the sweep's cell."""
    from arctl.compose.errors import SpecError
    from arctl.compose.sweep import load_sweep
    from arctl.launch.run_id import identity_differences, with_keys_added_later
    from arctl.launch.rundir import RunDirError, read_run_config

    configs: dict[str, dict | None] = {}

    def config_of(run_id: str) -> dict | None:
        if run_id not in configs:
            try:
                configs[run_id] = with_keys_added_later(read_run_config(workspace.run_dir(run_id)))
            except RunDirError:
                configs[run_id] = None
        return configs[run_id]

    share = load_sweep(name).share_arms
    by_scale: dict[str | None, list] = {}
    for rec in records:
        by_scale.setdefault(rec.scale, []).append(rec)
    items, notes, judged = [], [], []
    cache = ComposedCache(name, workspace)
    for scale, recs in by_scale.items():
        try:
            part = _items_now(name, scale, recs, workspace, share, config_of, cache)
        except SpecError as err:
            notes.append(f"sweep {name} does not compose as it stands{f' at scale {scale}' if scale else ''}, so its "
                         f"{len(recs)} run(s) there are not judged: {err}")
            continue
        items += [(scale, item) for item in part]
        judged += recs
    grids: dict = {}
    by_id: dict[str, list] = {}
    by_cell: dict[tuple, list] = {}  # (scale, experiment, arm, seed) -> the cells there: a run's nearest is of its scale
    for scale, item in items:
        by_id.setdefault(item.run_id, []).append(item)
        by_cell.setdefault((scale, item.experiment, item.arm, item.seed), []).append(item)
    out: dict[str, InSweep] = {}
    for rec in judged:
        if rec.run_id in by_id:
            points = [p for i in by_id[rec.run_id] if (p := grid_point(i, grids)) is not None]
            out[rec.run_id] = InSweep(True, _merged(points))
            continue
        config = config_of(rec.run_id)
        cells = by_cell.get((rec.scale, rec.experiment, rec.arm, rec.seed), [])
        differs = None
        if cells and config is not None:
            differs = min((identity_differences(config, i.config) for i in cells), key=len)
        elif cells:
            differs = {}
        out[rec.run_id] = InSweep(False, _own_point(config, grid_texts(name, grids)), differs)
    return out, notes


def _items_now(name: str, scale: str | None, recs, workspace, share: bool, config_of,
               cache: ComposedCache | None = None) -> list:
    """The launch items of sweep ``name`` at ``scale`` and the seeds of ``recs`` (its runs there), each as a launch
    of the sweep would take it now (shared, or the same computation under an earlier id); :func:`sweep_now`'s. The
    composed cells are ``cache``'s where it has them (:class:`ComposedCache`); what is shared is judged each time."""
    from arctl.launch.shared import REUSABLE, WorkspaceRun, mark_same_computation, mark_shared, share_key

    def compose(seeds: list[int]) -> list:
        from arctl.compose import resolve_sweep
        from arctl.launch.launcher import items_from_resolved

        with composing(name) as on_cell:
            return items_from_resolved(resolve_sweep(name, [], scale, seeds, on_cell=on_cell), launching=False)

    def every(seeds: list[int]) -> list:
        # two seeds composed, the others given their seed (:func:`_at_seeds`: ~5 ms a cell less, seconds for a sweep
        # of 1,000 runs)
        part = compose(seeds[:2])
        spread = _at_seeds(part, seeds[:2], seeds[2:])
        return part + spread if spread is not None else compose(seeds) if seeds[2:] else part

    def composed(how, seeds: list[int]) -> list:
        return how(seeds) if cache is None else cache.items(how.__name__, scale, seeds, lambda: how(seeds))

    def marked(part: list) -> list:
        if share:  # which run a cell is kept as: its own, else one of the sweep's runs of the same config
            ids = {i.run_id for i in part}
            mark_shared(part, {r.run_id: r.state for r in recs if r.run_id in ids},
                        [WorkspaceRun(r.run_id, r.experiment, r.arm, r.seed, r.state, share_key(config))
                         for r in recs if r.run_id not in ids and r.state in REUSABLE
                         and (config := config_of(r.run_id)) is not None])
        return mark_same_computation(part, workspace)

    seeds = sorted({r.seed for r in recs})
    part = marked(composed(every, seeds))
    ids = {i.run_id for i in part}
    # a run that none of those cells is, at a seed not composed (given its seed), composed at its seed before it is
    # judged (where every seed was composed, the same cells again)
    if seeds[2:] and (again := sorted({r.seed for r in recs if r.run_id not in ids} - set(seeds[:2]))):
        part = [i for i in part if i.seed not in again] + marked(composed(compose, again))
    return part


SWEEP_CACHE = "sweeps"  # <workspace>/.arctl-cache/sweeps/: the cells `arctl status SWEEP` composed (ComposedCache)
SWEEP_CACHE_VERSION = 1


class ComposedCache:
    """The cells :func:`sweep_now` composes of sweep ``name`` (its launch items at a scale and seeds, as
    :func:`arctl.launch.launcher.items_from_resolved` gives them, before anything of the workspace marks them), kept
    as JSON in ``<workspace>/.arctl-cache/sweeps/`` (beside the report's cache of parsed runs), one file per scale and
    seed set, under a key of everything the composition reads (:func:`compose_inputs`): a repeated `arctl status
    SWEEP` reads them instead of composing (Hydra: ~0.2-0.4 s an arm and grid point; from a review: `status paper`
    went from 0.6 s to 2.3 s with the judgement). An entry of another key (a spec edited, added or removed, another
    search path, arctl's or a plugin's code changed), another version, or one that does not read back is composed
    again and rewritten; a workspace where it cannot be written composes each time, as without it."""

    def __init__(self, name: str, workspace) -> None:
        self.name = name
        from arctl.track.runs.cache import WORKSPACE_CACHE

        self.folder = workspace.root / WORKSPACE_CACHE / SWEEP_CACHE
        self._inputs: dict | None = None

    def items(self, how: str, scale: str | None, seeds: list[int], compose) -> list:
        """The cells at ``scale`` and ``seeds`` (``how``: what ``compose`` does, part of the key): the cache's, else
        ``compose()``'s, stored where none of its key's files changed within :data:`arctl.track.runs.cache.RECENT_NS`
        of now (a file rewritten within one tick of the clock keeps its stat: the report cache's rule)."""
        import hashlib
        import json

        from arctl.track.runs.cache import RECENT_NS

        if self._inputs is None:  # taken before anything is composed: an edit meanwhile makes the entry stale
            try:
                self._inputs = compose_inputs()
            except Exception:  # noqa: BLE001 - no key (a spec removed while listed, an installed package's broken
                # entry points or plugin): composed as without a cache
                self._inputs = {}
        if not self._inputs:
            return compose()
        key = {**self._inputs, "sweep": self.name, "how": how, "scale": scale, "seeds": list(seeds)}
        named = json.dumps([self.name, how, scale, list(seeds)]).encode()
        path = self.folder / f"{hashlib.sha256(named).hexdigest()[:24]}.json"
        if (found := _cached_items(path, key)) is not None:
            return found
        items = compose()
        if all(max(f[2], f[4]) < time.time_ns() - RECENT_NS for f in key["files"]):
            _store_items(path, key, items)
        return items


def compose_inputs() -> dict:
    """What a sweep's composition reads, as :class:`ComposedCache`'s key: arctl's version and code (its ``.py`` and
    ``.yaml`` files, its config groups and the built-in backends' scale profiles among them:
    :func:`arctl.launch.provenance.code_hash`), the ``arctl.backends`` and ``arctl.methods`` entry points of the
    installed packages with their code's hash (and an installed backend's config-group files), Python's version, the
    site-packages folders' modification times (a package installed, upgraded or removed), the spec search path
    (``$ARCTL_SPECS``, the project, the shipped specs: :func:`arctl.compose.paths.spec_roots`) and of every
    experiment and sweep file there and every file of a user's ``conf/`` its path, size, modification and change
    times and inode (:func:`arctl.track.runs.cache.config_key`). Cheap (~50 ms): no installed package's metadata is
    parsed and no backend loaded unless a package brings one. OSError where a file cannot be stat'ed."""
    import sysconfig
    from importlib import metadata

    import arctl
    from arctl.algo.methods import registry
    from arctl.backends import base
    from arctl.compose.paths import spec_roots, user_config_dirs
    from arctl.launch.provenance import _module_code_hash, code_hash
    from arctl.track.runs.cache import config_key

    roots = spec_roots()
    folders = user_config_dirs()
    points = metadata.entry_points()
    plugins = [[group, point.name, point.value,
                point.value.split(":")[0].split(".")[0] == arctl.__name__ or _module_code_hash(point.module)]
               for group in (base.ENTRY_POINT_GROUP, registry.ENTRY_POINT_GROUP)
               for point in sorted(points.select(group=group), key=lambda p: (p.name, p.value))]
    if any(group == base.ENTRY_POINT_GROUP and own is not True for group, *_, own in plugins):
        # an installed backend's scale profiles, where it brings one (loads the backends)
        from arctl.compose.plugins import conf_dirs

        own = Path(arctl.__file__).resolve().parent
        folders += [folder for folder in conf_dirs() if not folder.resolve().is_relative_to(own)]
    files = [config_key(path) for root in roots for kind in ("experiments", "sweeps")
             for path in sorted((root.path / kind).glob("*.yaml"))]
    files += [config_key(path) for folder in folders for path in _files_under(folder)
              if "__pycache__" not in path.parts]
    site = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    return {"version": SWEEP_CACHE_VERSION, "arctl": arctl.__version__, "code": code_hash(), "plugins": plugins,
            "python": sys.version, "site": [[p, os.stat(p).st_mtime_ns] for p in site if os.path.isdir(p)],
            "roots": [[str(root.path), root.origin] for root in roots], "config_dirs": [str(f) for f in folders],
            "files": files}


def _files_under(folder: Path) -> list[Path]:
    """Every file under ``folder``, through linked folders as Hydra reads them (a lab's ``conf/algo`` linked to a
    shared folder: from a review, ``rglob`` did not enter it, and an edit there left a cached status stale), each
    real folder once (a link back up is not followed again)."""
    found: list[Path] = []
    seen: set[str] = set()
    for top, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs.clear()
            continue
        seen.add(real)
        dirs.sort()
        found += [Path(top) / name for name in sorted(names) if os.path.isfile(os.path.join(top, name))]
    return found


def _item_doc(item) -> dict:
    from dataclasses import asdict

    return asdict(item)  # its run and cells (ResolvedRun) as mappings too


def _item_of(doc: dict):
    from arctl.compose.run import ResolvedRun
    from arctl.launch.launcher import LaunchItem

    return LaunchItem(**{**doc, "run": ResolvedRun(**doc["run"]), "cells": [ResolvedRun(**c) for c in doc["cells"]]})


def _cached_items(path, key: dict) -> list | None:
    """The launch items :func:`_store_items` wrote to ``path`` under ``key``; None where there is no such file, it
    has another key or version, or does not read as items (a damaged or foreign file: composed again)."""
    import json

    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("items"), list):
            return None
        return [_item_of(doc) for doc in entry["items"]]
    except (OSError, ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None


def _store_items(path, key: dict, items: list) -> None:
    """Write ``items`` to ``path`` under ``key``, in one step (:func:`arctl.config.files.atomic_write`: a reader
    meanwhile reads the old entry or the new, whole), only where JSON gives them back as they are (a tuple, a
    non-text key or a NaN would not); best effort: a workspace that cannot be written keeps no cache."""
    import json

    from arctl.config.files import atomic_write

    try:
        text = json.dumps({"key": key, "items": [_item_doc(i) for i in items]})
        if [_item_of(doc) for doc in json.loads(text)["items"]] != items:
            return
    except (TypeError, ValueError, RecursionError):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
    except OSError:
        pass


def _at_seeds(items: list, probe: list[int], seeds: list[int]) -> list | None:
    """The launch items of ``items`` (a sweep's, composed at the two ``probe`` seeds) at each of ``seeds``, each
    the first probe seed's with its ``seed`` (and the id of the run it starts from, at that seed) put in; None where
    that does not give the second probe seed's run ids (the arm's config reads its seed elsewhere), and [] where
    there are no other seeds. Only what names the run changes: the configs and their ids are those a launch at
    those seeds composes, where the seed is read nowhere else."""
    from dataclasses import replace

    from arctl.launch.run_id import make_run_id
    from arctl.launch.rundir import frozen_config

    if not seeds:
        return []
    if len(probe) < 2:
        return None

    def key(item) -> tuple:
        return (item.experiment, item.arm, item.needed_by is None,
                tuple((tuple(c.sweep_overrides), tuple(c.sweep_not_read)) for c in item.cells or [item.run]))

    first = [i for i in items if i.seed == probe[0]]
    second = {key(i): i.run_id for i in items if i.seed == probe[1]}

    def at(seed: int) -> list:
        ids: dict[str, str] = {}
        out = []
        for item in first:
            config = {**item.config, "seed": seed}
            if item.after is not None:
                config["trainer"] = {**config["trainer"], "init_run": ids.get(item.after, item.after)}
            run_id = ids[item.run_id] = make_run_id(config)
            out.append(replace(item, run_id=run_id, after=ids.get(item.after, item.after) if item.after else None,
                               run=replace(item.run, seed=seed, config=frozen_config(config, run_id, run_id)),
                               cells=[replace(c, seed=seed) for c in item.cells]))
        return out

    check = at(probe[1])
    if len(second) != len(first) or [second.get(key(i)) for i in first] != [i.run_id for i in check]:
        return None
    return [i for seed in seeds for i in at(seed)]


def _merged(points: list[GridPoint]) -> GridPoint | None:
    """The grid points of the cells one run is (a shared run's, an unread key's), as one."""
    if not points:
        return None
    texts = tuple(dict.fromkeys(t for p in points for t in p.texts))
    values = {k: v for p in points for k, v in p.values.items()}
    return GridPoint(texts, values, tuple(dict.fromkeys(k for p in points for k in p.unread if k not in values)))


def _own_point(config: dict | None, texts: dict) -> GridPoint | None:
    """A run's own values at the grid's keys that are config keys (its frozen ``config``), as a :class:`GridPoint`;
    None without a grid or a readable config."""
    if not texts or config is None:
        return None
    from arctl.config.hydra_text import override_value
    from arctl.track.runs.tidy import flatten_config

    flat = flatten_config(config)
    keys = list(dict.fromkeys(k for k, _ in texts.values()))
    values = {k: flat[k] for k in keys if k in flat}
    shown = []
    for key, value in values.items():
        try:
            shown.append(f"{key}={override_value(value)}")
        except ValueError:  # NaN: as Python writes it
            shown.append(f"{key}={value}")
    return GridPoint(tuple(shown), values, ())
