"""The steps a verl run keeps, and its W&B history made to match them on every resume.

verl's file logger (``VERL_FILE_LOGGER_PATH`` = ``run_dir/verl_metrics.jsonl``, one
``{"step": N, "data": {...}}`` line per step) is rewritten by every attempt; before an attempt
starts, :func:`prepare_attempt` folds it into ``run_dir/metrics.jsonl`` (arctl's record, one
``{"trainer/global_step": N, ...}`` row per kept step, the tiny backend's format), keeping the steps
up to the checkpoint the attempt resumes from, and repairs the W&B files
(:func:`arctl.track.writer.repair_history`): rewound to the checkpoint, rows the W&B service lost
(a TERM reaches it too) re-logged. verl's tracker then resumes the run (``resume="allow"``) and logs
from the next step, so the synced history holds every step exactly once.

verl 0.9.1 saves a step's checkpoint before it validates and logs the step's row (``fit``: step ->
``_save_checkpoint`` -> ``on_step_end`` -> ``_validate`` -> ``_compute_metrics`` -> log): a job killed
in between left checkpoint N complete and row N nowhere, and the resume from N went on at N + 1 (the
step missing from the history) or logged row N as its redone evaluation alone. So the trainer writes
the step's training metrics to ``run_dir/pending_row.json`` (:data:`PENDING_ROW`, one row, replaced
whole) before a checkpoint's save begins and removes it once verl has logged the step
(:class:`arctl.backends.verl.trainer_v1.ArctlPPOTrainer`); :func:`kept_rows` takes it as row N where
neither log has one, so the resume logs it (W&B re-log, or the redone validation's row).

A checkpoint is durable, the rows it covers were not: verl's FileLogger writes unbuffered and never syncs, and
from a hunt (of the tiny backend) a node lost right after a checkpoint's save left the rows of the steps before it
in neither log nor the W&B files. The trainer flushes the rows to disk before each save begins
(:func:`flush_rows`); where a step up to the newest checkpoint is missing all the same
(:func:`history_gap_at`), the attempt resumes from the newest complete checkpoint before it, with a warning
(:func:`resume_point`, the one choice, asked by the dry run and by the attempt; :func:`prepare_resume` sets the
newer checkpoints aside and points verl's tracker at it), or fails in one line where none is kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from arctl.backends.verl.checkpoints import folder, newest_complete, problem, repair, saved_steps, set_aside
from arctl.config.files import atomic_write
from arctl.track.metrics_schema import STEP_KEY
from arctl.track.writer import METRICS_FILE, VERL_METRICS_FILE

VERL_LOG = VERL_METRICS_FILE  # verl's FileLogger output (VERL_FILE_LOGGER_PATH)
KEPT_LOG = METRICS_FILE
PENDING_ROW = "pending_row.json"  # the training metrics of a step being saved, until verl has logged its row


def _read_lines(path: Path) -> list[dict]:
    rows = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return rows
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a kill
    return rows


def write_pending_row(run_dir: Path, row: dict) -> None:
    """Record ``row`` (with its ``trainer/global_step``) as the row of the step about to be saved,
    replacing any earlier one (written whole: a reader never sees half of it)."""
    atomic_write(Path(run_dir) / PENDING_ROW, json.dumps(row))


def clear_pending_row(run_dir: Path, step: int) -> None:
    """verl has logged ``step``: the pending row of that step (or of an earlier one) goes."""
    path = Path(run_dir) / PENDING_ROW
    row = pending_row(run_dir)
    if row is None or int(row[STEP_KEY]) <= int(step):
        path.unlink(missing_ok=True)


def pending_row(run_dir: Path) -> dict | None:
    """The pending row (:func:`write_pending_row`), or None (none, or unreadable)."""
    try:
        row = json.loads((Path(run_dir) / PENDING_ROW).read_text())
    except (OSError, ValueError):
        return None
    return row if isinstance(row, dict) and isinstance(row.get(STEP_KEY), int) else None


def rows_up_to(run_dir: Path, resume_at: int | None) -> list[dict]:
    """Rows of steps ``<= resume_at`` from ``metrics.jsonl`` and verl's file log (the later attempt wins a
    step), in step order, and the pending row (:data:`PENDING_ROW`) of a step neither has (a job killed between
    the step's checkpoint and verl's log of its row). Reads only (a dry run's :func:`resume_point` asks it too);
    :func:`kept_rows` writes them."""
    run_dir = Path(run_dir)
    rows: dict[int, dict] = {}
    if (pending := pending_row(run_dir)) is not None:
        rows[pending[STEP_KEY]] = pending
    for row in _read_lines(run_dir / KEPT_LOG):
        if isinstance(row, dict) and isinstance(row.get(STEP_KEY), int):
            rows[row[STEP_KEY]] = row
    for line in _read_lines(run_dir / VERL_LOG):
        if isinstance(line, dict) and isinstance(line.get("step"), int) and isinstance(line.get("data"), dict):
            rows[line["step"]] = {**line["data"], STEP_KEY: line["step"]}
    limit = -1 if resume_at is None else int(resume_at)
    return [rows[s] for s in sorted(rows) if s <= limit]


def kept_rows(run_dir: Path, resume_at: int | None) -> list[dict]:
    """:func:`rows_up_to` ``resume_at``, made the run's record: ``metrics.jsonl`` is rewritten to hold exactly
    them and verl's file log and the pending row are removed (``arctl status`` reads the furthest step of the
    two logs)."""
    run_dir = Path(run_dir)
    kept = rows_up_to(run_dir, resume_at)
    atomic_write(run_dir / KEPT_LOG, "".join(json.dumps(r) + "\n" for r in kept))
    (run_dir / VERL_LOG).unlink(missing_ok=True)  # folded: its steps past the checkpoint are redone
    (run_dir / PENDING_ROW).unlink(missing_ok=True)  # folded, or of a step past the checkpoint (redone)
    return kept


def flush_rows(run_dir: Path) -> None:
    """``metrics.jsonl``, verl's file log and the pending row, and the run folder's entries of them, on disk
    (fsync): called before a checkpoint's save begins, so that a machine lost after the save never leaves the
    checkpoint without the rows it covers (verl's FileLogger writes unbuffered, never synced; the rows of the
    steps since the last save are in the page cache alone). An error names the file (fsync's does not)."""
    run_dir = Path(run_dir)
    for target in (run_dir / KEPT_LOG, run_dir / VERL_LOG, run_dir / PENDING_ROW, run_dir):
        try:
            fd = os.open(target, os.O_RDONLY)
        except FileNotFoundError:
            continue
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(target)) from err
        try:
            os.fsync(fd)
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(target)) from err
        finally:
            os.close(fd)


def history_gap_at(config: dict, run_dir: Path, resume_at: int, redo_validation: bool = False) -> int | None:
    """The first step a resume from the checkpoint of ``resume_at`` would leave out of the run's history
    (:func:`arctl.track.writer.history_gap` over :func:`rows_up_to` it), or None. ``redo_validation``: the attempt
    logs step ``resume_at`` again (:func:`prepare_attempt`), so the steps before it are what the records must hold.
    Reads only."""
    from arctl.track.writer import history_gap

    at, rows = int(resume_at), rows_up_to(run_dir, resume_at)
    if redo_validation and at:
        at, rows = at - 1, [r for r in rows if r[STEP_KEY] < int(resume_at)]
    return history_gap(config, run_dir, at, rows)


def prepare_attempt(config: dict, run_dir: Path, resume_at: int | None, redo_validation: bool = False) -> list[dict]:
    """Before an attempt that resumes from the checkpoint at ``resume_at`` (None: starts over):
    keep the rows up to it and repair the W&B files to match. Returns the kept rows.

    ``redo_validation``: a stop skipped the validation of step ``resume_at``
    (:func:`arctl.backends.verl.stop_request.skipped_validation`); the attempt validates it before
    training and logs the step's row again, its kept metrics with the evaluation
    (:func:`kept_row`, :class:`arctl.backends.verl.trainer_v1.ArctlPPOTrainer`), so W&B is rewound to
    the step before it (``metrics.jsonl`` keeps the row until the attempt's own replaces it).

    ``resume_at`` is the checkpoint :func:`resume_point` chose, whose steps' rows the records hold; ValueError (one
    line), before anything is written, where they do not (a caller that chose otherwise): the resume would complete
    the run with the step missing from its history."""
    from arctl.track.writer import gap_line, repair_history

    if resume_at is not None and (gap := history_gap_at(config, run_dir, int(resume_at), redo_validation)) is not None:
        raise ValueError(f"{gap_line(run_dir, gap, int(resume_at))}: a resume from that checkpoint would leave the step "
                         f"out of the run's history; set {folder(Path(run_dir) / 'checkpoints', int(resume_at))} aside "
                         "(the next attempt resumes from a checkpoint before it, where one is kept), or start the run over")
    kept = kept_rows(run_dir, resume_at)
    at, rows = resume_at, kept
    if redo_validation and resume_at:
        at, rows = int(resume_at) - 1, [r for r in kept if r[STEP_KEY] < int(resume_at)]
    repair_history(config, run_dir, at, rows)
    return kept


def kept_row(run_dir: Path, step: int) -> dict:
    """The row of ``step`` in ``metrics.jsonl`` ({} where there is none)."""
    for row in _read_lines(Path(run_dir) / KEPT_LOG):
        if isinstance(row, dict) and row.get(STEP_KEY) == int(step):
            return row
    return {}


@dataclass
class ResumePoint:
    """Where the run's next attempt resumes (:func:`resume_point`): the checkpoint of ``step`` (0: none, the run
    starts over), whether it validates that step first (``redo_validation``: a stop skipped it), the complete
    checkpoints newer than it that it goes back past (``passed``: their steps' rows were lost) and one line per
    checkpoint skipped or passed (``notes``)."""

    step: int
    redo_validation: bool = False
    passed: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def resume_point(config: dict, run_dir: Path | str, checkpoint_dir: Path | str | None = None) -> ResumePoint:
    """The one choice of the checkpoint the run's next attempt resumes from (the dry run's :func:`resume_step` and
    the attempt's :func:`prepare_resume` both ask it; reads only): the newest complete one in ``checkpoint_dir``
    (default ``run_dir/checkpoints``) whose steps' rows the run's records hold (metrics.jsonl, verl's file log, the
    pending row, the W&B files: :func:`history_gap_at`), else the newest complete one before the first step they
    lack, with a note saying so (from a hunt: a node lost right after a checkpoint was saved took the rows it
    covers; the resume would complete the run with those steps missing). ValueError (one line) where no complete
    checkpoint before that step is kept."""
    from arctl.backends.verl import stop_request
    from arctl.track.writer import gap_line

    run_dir = Path(run_dir)
    d = Path(checkpoint_dir) if checkpoint_dir is not None else run_dir / "checkpoints"
    newest, notes = newest_complete(d)
    if not newest:
        return ResumePoint(0, notes=notes)
    skipped = stop_request.skipped_validation(run_dir / stop_request.STOP_FILE)
    passed: list[int] = []
    lost, below = None, None  # the first step the records lack, in words; the first they lack from any checkpoint
    for step in (s for s in saved_steps(d) if s <= newest and problem(d, s) is None):
        if below is None or step < below:
            if (gap := history_gap_at(config, run_dir, step, redo_validation=skipped == step)) is None:
                if lost is not None:
                    notes.append(f"{lost}: resumed from {folder(d, step)}, not {folder(d, newest)} (steps "
                                 f"{step + 1}..{newest} are trained again)")
                return ResumePoint(step, skipped == step, passed, notes)
            lost, below = lost or gap_line(run_dir, gap, step), gap if below is None else min(below, gap)
        passed.append(step)
    keep = (config.get("verl") or {}).get("keep_checkpoints")
    raise ValueError(f"{lost}, and no complete checkpoint before step {below} is kept"
                     f"{f' (verl.keep_checkpoints={keep})' if keep else ''}: a resume from {folder(d, newest)} would "
                     f"leave the step out of the run's history; restore the row to {run_dir / 'metrics.jsonl'}, or "
                     f"start the run over: remove {d}, then resume it")


def resume_step(config: dict, run_dir: Path | str) -> int | None:
    """The step the run's next attempt resumes from, as it will choose it (:func:`resume_point`): 0 where it has
    no complete checkpoint (it starts over), None where it cannot resume (none kept before a step its records
    lost: :func:`resume_point`'s line, which the launch refuses the run with and its dry run shows,
    :func:`arctl.backends.verl.run_config.resume_problem`). What a dry run and the job's preempted line show. A config that is not a
    whole run's (no ``verl`` section: a caller that has the folder only): its checkpoints alone say, as the tiny
    backend's ``resume_point`` answers one."""
    if not isinstance(config.get("verl"), dict):
        return newest_complete(Path(run_dir) / "checkpoints")[0]
    try:
        return resume_point(config, run_dir).step
    except ValueError:
        return None


def prepare_resume(config: dict, run_dir: Path | str, checkpoint_dir: Path | str | None = None) -> ResumePoint:
    """Before an attempt: :func:`resume_point`, made what verl finds: the checkpoints it goes back past set aside
    (:func:`arctl.backends.verl.checkpoints.set_aside`: the attempt saves those steps anew) and verl's tracker
    pointed at the chosen one (:func:`arctl.backends.verl.checkpoints.repair`). ValueError (one line, nothing
    changed) where it cannot resume."""
    d = Path(checkpoint_dir) if checkpoint_dir is not None else Path(run_dir) / "checkpoints"
    point = resume_point(config, run_dir, d)
    aside = [set_aside(d, step).name for step in point.passed]
    if aside:
        point.notes.append(f"set aside in {d}: {', '.join(aside)} (checkpoints past rows the run lost; never "
                           "resumed from: remove them to free their disk)")
    _, notes = repair(d)  # the newest complete checkpoint left is the chosen one
    point.notes += [n for n in notes if n not in point.notes]
    return point
