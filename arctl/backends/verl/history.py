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
"""

from __future__ import annotations

import json
from pathlib import Path

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


def kept_rows(run_dir: Path, resume_at: int | None) -> list[dict]:
    """Rows of steps ``<= resume_at`` from ``metrics.jsonl`` and verl's file log (the later attempt
    wins a step), in step order, and the pending row (:data:`PENDING_ROW`) of a step neither has (a
    job killed between the step's checkpoint and verl's log of its row); ``metrics.jsonl`` is rewritten
    to hold exactly them and verl's file log and the pending row are removed (``arctl status`` reads the
    furthest step of the two logs)."""
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
    kept = [rows[s] for s in sorted(rows) if s <= limit]
    atomic_write(run_dir / KEPT_LOG, "".join(json.dumps(r) + "\n" for r in kept))
    (run_dir / VERL_LOG).unlink(missing_ok=True)  # folded: its steps past the checkpoint are redone
    (run_dir / PENDING_ROW).unlink(missing_ok=True)  # folded, or of a step past the checkpoint (redone)
    return kept


def prepare_attempt(config: dict, run_dir: Path, resume_at: int | None, redo_validation: bool = False) -> list[dict]:
    """Before an attempt that resumes from the checkpoint at ``resume_at`` (None: starts over):
    keep the rows up to it and repair the W&B files to match. Returns the kept rows.

    ``redo_validation``: a stop skipped the validation of step ``resume_at``
    (:func:`arctl.backends.verl.stop_request.skipped_validation`); the attempt validates it before
    training and logs the step's row again, its kept metrics with the evaluation
    (:func:`kept_row`, :class:`arctl.backends.verl.trainer_v1.ArctlPPOTrainer`), so W&B is rewound to
    the step before it (``metrics.jsonl`` keeps the row until the attempt's own replaces it).

    ValueError (one line) where neither log nor the W&B files hold the row of a step up to the checkpoint
    (:func:`arctl.track.writer.history_gap`: lost with a node after the checkpoint was saved): the resume
    would complete the run with the step missing from its history (from a hunt, of the tiny backend)."""
    from arctl.track.writer import gap_line, history_gap, repair_history

    kept = kept_rows(run_dir, resume_at)
    at, rows = resume_at, kept
    if redo_validation and resume_at:
        at, rows = int(resume_at) - 1, [r for r in kept if r[STEP_KEY] < int(resume_at)]
    if at is not None and (gap := history_gap(config, run_dir, int(at), rows)) is not None:
        from arctl.backends.verl.checkpoints import folder

        raise ValueError(f"{gap_line(run_dir, gap, int(resume_at))}: a resume from that checkpoint would leave the step "
                         f"out of the run's history; move {folder(Path(run_dir) / 'checkpoints', int(resume_at))} aside "
                         "(the next attempt resumes from a checkpoint before it, where one is kept), or start the run over")
    repair_history(config, run_dir, at, rows)
    return kept


def kept_row(run_dir: Path, step: int) -> dict:
    """The row of ``step`` in ``metrics.jsonl`` ({} where there is none)."""
    for row in _read_lines(Path(run_dir) / KEPT_LOG):
        if isinstance(row, dict) and row.get(STEP_KEY) == int(step):
            return row
    return {}
