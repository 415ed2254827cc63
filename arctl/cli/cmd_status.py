"""``arctl status [SWEEP|EXP|RUN]``: the registry's runs, refreshed from the jobs and the scheduler."""

from __future__ import annotations

import shlex
import time

import typer

from arctl.cli.common import (
    WORKDIR_HELP,
    console,
    err_console,
    esc,
    fail,
    fit_columns,
    is_terminal,
    nonempty_option,
    plain_columns,
    print_json,
    printable,
    slow_note,
)
from arctl.cli.launching import grid_json, grid_text, how_far, launch_errors, resumes_from, step_text, styled

# what `arctl status` says on a terminal while SLURM's accounting is slow to answer: its way out first, within 80 columns
# (rich crops or wraps a spinner's line to the terminal; from a review)
SLOW_REFRESH_NOTE = "--no-refresh shows the last states now; waiting for sacct (up to {seconds} s)"


def elapsed_s(rec, now: float) -> float | None:
    """How long run ``rec`` ran, in seconds (the table's elapsed column and --json's ``elapsed_s``), never below 0
    (a job's clock on another host may run behind this one's); None where it never started. An active run's runs
    to ``now``; an ended run's to its ``ended_at``, else (a run an older arctl ended without recording when: a
    kill) to its row's last write (``updated_at``), else None: never to ``now``, which grew the time of a run
    that lasted 55 s on every call (from a hunt)."""
    from arctl.launch.states import TERMINAL

    if not rec.started_at:
        return None
    end = rec.ended_at or (rec.updated_at if rec.state in TERMINAL else now)
    return None if end is None else max(0.0, end - rec.started_at)


def _elapsed(rec, now: float) -> str:
    if (elapsed := elapsed_s(rec, now)) is None:
        return ""
    seconds = int(elapsed)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        target: str = typer.Argument(None, metavar="SWEEP|EXPERIMENT|RUN", help="A sweep, an experiment or a run id (prefix); default: every run."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        refresh: bool = typer.Option(True, "--refresh/--no-refresh", help="Ask the scheduler (one sacct call) first."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON: a list of run records."),
        only: list[str] | None = typer.Option(None, "--state", metavar="STATE", help="Only the runs in this state, as "
                                       "the table shows it (repeatable, any case): e.g. --state failed --state preempted."),
    ) -> None:
        """Runs with state, job id, step (a running run's: of how many, and the time left at its pace, or how
        long it has logged no step where it stalled), last metric, W&B run id and elapsed time."""
        wanted = _states_asked(only)  # before the registry is opened or refreshed: a typo changes nothing
        with launch_errors():
            from arctl.launch.control import open_existing, select_runs
            from arctl.launch.refresh import SACCT_TIMEOUT_S
            from arctl.launch.refresh import refresh as refresh_runs

            workspace, reg = open_existing(workdir, reading=True)
            with reg:
                records = select_runs(reg, [target], prefixes=True) if target is not None else reg.list()
                reg_ids = {r.run_id for r in (records if target is None else reg.list())}
                if refresh:
                    with slow_note(SLOW_REFRESH_NOTE.format(seconds=SACCT_TIMEOUT_S)):
                        records = refresh_runs(reg, workspace, records, reading=True)
        if reg.unsaved:  # a full disk: what the refresh found is shown all the same
            from arctl.launch.refresh import UNSAVED_NOTE

            err_console.print(f"[yellow]note[/]: {esc(UNSAVED_NOTE.format(why=reg.unsaved))}")
        now = time.time()
        from arctl.launch.progress import shown_metric, stalled
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
        counts: dict[str, int] = {}  # every selected run's, shown or not: the totals line counts them all
        for r in records:
            state = INTERRUPTED if r.run_id in interrupted else r.state
            counts[state] = counts.get(state, 0) + 1
        selected = len(records)
        # `arctl status SWEEP`: each run judged against the sweep as it now stands (its grid point; a run its cells no
        # longer compose is marked), over every selected run, shown or not: the totals line counts them
        judged, sweep_notes = sweep_judged(target, records, workspace)
        everything = records
        if wanted is not None:  # filtered on the state shown (INTERRUPTED too), after the refresh
            records = [r for r in records if (INTERRUPTED if r.run_id in interrupted else r.state) in wanted]

        # the other (experiment, arm) cells a shared run serves (a sweep with share_arms; shared.json)
        serves = {r.run_id: read_served(workspace.run_dir(r.run_id), r.arm) for r in records}
        lost = _unregistered(workspace, reg_ids) if target is None else []
        # running runs: (total steps, s left, (s since the last step, s a step) or None)
        far = {r.run_id: how_far(workspace, r, now) for r in records}
        back = {r.run_id: resumes_from(workspace, r) for r in records}  # stopped and failed runs: a resume step behind
        from arctl.launch.workspace import workdir_arg

        note = (f"{len(lost)} run folder(s) in {workspace.runs_dir} are not in the registry (e.g. {lost[0]}): "
                f"`arctl repair{workdir_arg(workspace.root)}` rebuilds it from the run folders") if lost else None
        if as_json:
            # on stderr, not in the document: --json prints a list of registry records, which scripts read as
            # such; a folder the registry has no row for is no record (its state, job and step are unknown)
            if note:
                err_console.print(f"[yellow]note[/]: {esc(note)}")
            # "state" is the state the table shows (a script polling it for SUBMITTING waited for ever on a dead
            # launch's run, from a hunt); "recorded_state" the registry's
            print_json([{**r.as_dict(), "state": INTERRUPTED if r.run_id in interrupted else r.state,
                         "recorded_state": r.state,
                         "elapsed_s": elapsed_s(r, now),  # as the table's
                         "total_steps": far[r.run_id][0], "time_left_s": far[r.run_id][1],
                         # a running attempt's: since its last step (None before its pace began), and whether that
                         # is a stall (the table says "no step for ..." instead of a time left)
                         "last_step_age_s": age[0] if (age := far[r.run_id][2]) else None,
                         "stalled": bool(age and stalled(*age)),
                         "resume_step": back[r.run_id],
                         "run_dir": str(workspace.run_dir(r.run_id)), "serves": [list(c) for c in serves[r.run_id]],
                         **judged_json(judged.get(r.run_id))}
                        for r in records])
            for line in sweep_notes:
                err_console.print(f"[yellow]note[/]: {esc(printable(line))}")
            return
        # a sweep's grid point and whether the sweep as it stands composes the run: columns at the end, where they say
        # something (the others' positions kept: the table gives way by position)
        shown_judged = [j for r in records if (j := judged.get(r.run_id)) is not None]
        gridded = any(j.point is not None for j in shown_judged)
        marked = any(not j.now for j in shown_judged)
        headers = ("run id", "experiment/arm/seed", "state", "job", "step", "last metric", "W&B run", "elapsed",
                   *(("grid point",) if gridded else ()), *((IN_SWEEP,) if marked else ()))
        rows = []
        for r in records:
            state = INTERRUPTED if r.run_id in interrupted else r.state
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
                                                     step_text(r.step, *far[r.run_id]) + (
                                                         f" (resumes from {back[r.run_id]})"
                                                         if back[r.run_id] is not None else ""),
                                                     metric, r.wandb_id or "",
                                                     _elapsed(r, now),
                                                     *((_grid_cell(judged.get(r.run_id)),) if gridded else ()),
                                                     *((_in_sweep(judged.get(r.run_id)),) if marked else ()))))
        table = _table(headers, rows) if is_terminal(console) else None
        if table is not None:
            console.print(table)
        else:  # plain aligned columns: never truncated, fast for thousands of runs
            plain_columns(headers, rows)
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        shown = (f"{len(records)} of {selected} run(s) shown ({', '.join(sorted(wanted))}); all: " if wanted is not None
                 else f"{selected} run(s): ")
        console.print(f"{shown}{summary or 'none'}  [dim](workspace {esc(workspace.root)})[/]")
        for line in not_in_sweep_lines(target, judged, everything) + sweep_notes:
            console.print(f"[yellow]{esc(printable(line))}[/]")
        errors = errors_shown(records, wanted is not None)
        for r in records:
            if r.run_id in errors:  # a job's error (Ray's carries colour codes): printable
                colour = "red" if r.state == "FAILED" else "yellow"  # (a preempted run goes on when resumed)
                console.print(f"[{colour}]{esc(r.run_id)}: {esc(printable(r.error))}[/]")
            if r.warning:
                console.print(f"[yellow]{esc(r.run_id)}: {esc(printable(r.warning))}[/]")
        # (from a hunt: only FAILED runs were counted here, so a preempted run's error left out went unsaid)
        if hidden := [r for r in records if r.state in ERRORS_OF and r.error and r.run_id not in errors]:
            kinds = sorted({r.state.lower() for r in hidden})
            more = (f"`arctl status{' ' + shlex.quote(target) if target else ''}"
                    f"{''.join(f' --state {k}' for k in kinds)}{workdir_arg(workspace.root)}`")
            console.print(f"[red]... and {len(hidden)} earlier {' or '.join(kinds)} run(s)' errors: {esc(more)} lists "
                          "every one[/]")
        if note:
            console.print(f"[yellow]note[/]: {esc(note)}")


IN_SWEEP = "in sweep"  # the table's column where `arctl status SWEEP` marks a run the sweep as it stands does not compose
DIFFERS_SHOWN = 3  # keys a line under the table names of runs the sweep no longer composes, then "and N more"


def sweep_judged(target: str | None, records, workspace) -> tuple[dict, list[str]]:
    """Where ``target`` names a sweep: run id -> :class:`arctl.cli.launching.InSweep` of ``records``, and the notes of
    scales at which the sweep does not compose (:func:`arctl.cli.launching.sweep_now`); else ({}, []): nothing is
    composed for a run, an experiment or every run."""
    if target is None or not records:
        return {}, []
    from arctl.compose.errors import SpecError
    from arctl.compose.sweep import load_sweep

    try:
        load_sweep(target)
    except (SpecError, OSError, ValueError):  # no sweep of that name (an experiment, a run id prefix)
        return {}, []
    from arctl.cli.launching import sweep_now

    with launch_errors():
        return sweep_now(target, records, workspace)


def judged_json(judged) -> dict:
    """``--json``'s keys of :func:`sweep_judged` for one run: ``in_sweep`` (whether the sweep named as the target
    composes it as it now stands; null: the target is no sweep, or the sweep does not compose), ``sweep_differs``
    (for a run it does not compose: key -> {"ran": the run's value, "sweep": the sweep's now} against the nearest
    cell at its experiment, arm and seed; null where the sweep has no such cell), ``grid`` and ``grid_unread``
    (:func:`arctl.cli.launching.grid_json`)."""
    if judged is None:
        return {"in_sweep": None, "sweep_differs": None, **grid_json(None)}
    differs = None if judged.differs is None else {k: {"ran": a, "sweep": b} for k, (a, b) in judged.differs.items()}
    return {"in_sweep": judged.now, "sweep_differs": differs, **grid_json(judged.point)}


def _grid_cell(judged) -> str:
    return "" if judged is None else grid_text(judged.point)


def _in_sweep(judged) -> str:
    return "" if judged is None else "yes" if judged.now else "no"


def not_in_sweep_lines(target: str | None, judged: dict, records) -> list[str]:
    """Under the table of `arctl status SWEEP`: how many of ``records`` (every selected run's) the sweep as it stands
    does not compose, then one line per arm and set of differences (its seeds; the keys, the runs' values and the
    sweep's now; a few run ids), else []."""
    from arctl.config.ranges import seeds_text

    off = [r for r in records if (j := judged.get(r.run_id)) is not None and not j.now]
    if not off:
        return []
    groups: dict[tuple[str, str], list] = {}
    for r in off:
        differs = judged[r.run_id].differs
        said = ("the sweep composes no such cell now (its arm or experiment removed or renamed)" if differs is None
                else _differences(differs))
        groups.setdefault((f"{r.experiment}/{r.arm}", said), []).append(r)
    lines = [f"{len(off)} of {len(judged)} run(s), `no` under `{IN_SWEEP}`, are not what sweep {target} composes as it now stands "
             "(specs edited or grid changed since they ran, or a launch's command-line overrides): a launch of the sweep "
             "would not use them"]
    for (cell, said), runs in sorted(groups.items()):
        ids = [r.run_id for r in runs]
        lines.append(f"  {cell} seed(s) {seeds_text(r.seed for r in runs)}: {said} "
                     f"({', '.join(ids[:3])}{f' and {len(ids) - 3} more' if len(ids) > 3 else ''})")
    return lines


def _differences(differs: dict) -> str:
    if not differs:
        return "its config.yaml cannot be read, or it differs only in its names"
    from arctl.config.hydra_text import override_value

    def text(value) -> str:
        try:
            out = override_value(value)
        except ValueError:
            out = str(value)
        return out if len(out) <= 30 else out[:27] + "..."

    keys = list(differs)
    said = ", ".join(f"{k}={text(differs[k][0])} (the sweep now: {text(differs[k][1])})" for k in keys[:DIFFERS_SHOWN])
    return said + (f" and {len(keys) - DIFFERS_SHOWN} more key(s)" if len(keys) > DIFFERS_SHOWN else "")


ERRORS_SHOWN = 10  # failed runs whose error the table's end says, the latest first, unless --state asks for them
ERRORS_OF = ("FAILED", "PREEMPTED")  # a preempted run's error: SLURM's TIMEOUT before its stop checkpoint (a review)


def errors_shown(records, asked: bool) -> set[str]:
    """The failed (or preempted) runs whose error `arctl status` prints under its table: all where ``--state`` chose
    the runs shown, else the :data:`ERRORS_SHOWN` that ended last (from a hunt: a workspace of 5,000 runs printed 438
    errors, some a year old, under its totals line)."""
    failed = [r for r in records if r.state in ERRORS_OF and r.error]
    if not asked:
        failed = sorted(failed, key=lambda r: r.ended_at or r.updated_at or 0.0)[-ERRORS_SHOWN:]
    return {r.run_id for r in failed}


def _states_asked(given: list[str] | None) -> frozenset[str] | None:
    """The states ``--state`` asks for, upper-cased (None: no filter): the registry's states
    (:data:`arctl.launch.states.ALL`) and INTERRUPTED, which the table shows for a dead launch's runs.
    An unknown one is one error line naming the known ones (exit 2), before anything is read."""
    if not given:
        return None
    from arctl.launch import states

    known = states.ALL | {states.INTERRUPTED}
    for value in given:
        if value.strip().upper() not in known:
            fail(f"--state {value!r} is not a run state: use one of {', '.join(sorted(known))} (any case; repeat "
                 "--state for several)")
    return frozenset(value.strip().upper() for value in given)


_EXP = 1  # the experiment/arm/seed column: what the run id says already, but for a shared run's "as ..."
_WANDB = 6


def _table(headers: tuple[str, ...], rows: list[tuple[str, ...]]):
    """The rows as a rich table that fits the terminal with every cell whole, or None where it cannot (the caller
    prints plain lines then). No cell is cut: a user copies a run id and a W&B run id (a ``--force`` rerun's differs
    from its run id by ``-g1`` alone) and reads a metric's value (``train/loss=nan``); cut with "…", every W&B id
    looked the same and a NaN was hidden, at 114-175 columns while narrower terminals showed them whole in plain
    lines (from a hunt). Too wide, the table first leaves out the experiment/arm/seed column where every row's says
    what its run id says, else gives way to plain lines. The W&B run column is left out where every W&B run id is
    its run's id (arctl names them so): it repeated the widest column (from a hunt)."""
    from rich.cells import cell_len
    from rich.table import Table

    shown = [i for i in range(len(headers)) if i != _WANDB or any(row[i] not in ("", row[0]) for row in rows)]
    natural = {i: max(cell_len(v) for v in (headers[i], *(row[i] for row in rows))) for i in shown}
    repeats_id = all(row[0].startswith(row[_EXP].replace("/", "_") + "_") for row in rows)
    for left_out in ((), (_EXP,)) if repeats_id else ((),):
        columns = [i for i in shown if i not in left_out]
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for i in columns:
            table.add_column(headers[i], no_wrap=True)
        widths = [natural[i] for i in columns]
        if fit_columns(table, widths, [], widths, console.width):
            for row in rows:
                table.add_row(*(styled(row[i]) if i == 2 else esc(row[i]) for i in columns))
            return table
    return None


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
