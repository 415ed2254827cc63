"""The stop request between a verl run's job entry and verl's trainer (a Ray actor, maybe on another
node): files in the run dir, on the filesystem both see.

- ``STOP``: written by the job entry's watcher (:func:`arctl.backends.verl.trainer._watch`) when SLURM's
  warning (USR1) or a cancel asks the run to stop; it holds the time at which the watcher will abandon
  the step in progress (``abandon_at <epoch seconds>``). The trainer checkpoints after its step and ends
  (:class:`arctl.backends.verl.trainer_v1.ArctlPPOTrainer`).
- ``SAVING``: present while the trainer writes a checkpoint (:class:`arctl.backends.verl.checkpoints.
  SaveOnce`). The watcher does not abandon a save in progress at the end of the step's grace; it waits
  for it up to :data:`SAVE_WAIT_FRACTION` of the warning (an abandoned save leaves the run to resume
  from the checkpoint before it, up to ``trainer.save_freq`` steps back).

A stop that comes at a step that validates skips the validation when the time left before
``abandon_at`` is less than :data:`VALIDATION_MARGIN` times the last validation's duration (a
validation cut by the abandon would lose the step's logged row: verl logs a step after validating it),
except at the run's last step (its final evaluation). The skipped step is written to
``VALIDATION_SKIPPED`` beside ``STOP``; the attempt that resumes from that step's checkpoint validates it
before training (``trainer.val_before_train``) and logs the step's row again with the evaluation and the
step's training metrics, kept before its checkpoint's save (:data:`arctl.backends.verl.history.PENDING_ROW`;
W&B rewound to the step before it: :func:`arctl.backends.verl.history.prepare_attempt`), so the point is
not missing from the run's curves. A resume from an earlier checkpoint redoes the step, and its
validation with it: the file is then stale and removed. The same record is written before every
validation in the training loop and removed once verl has logged the step's row: verl saves a step's
checkpoint before it validates and logs, so a job killed during that validation (abandoned, TERM, a
node lost) would otherwise resume after the step without its evaluation, and at the last step end
"completed" without the run's final evaluation.
- ``VALIDATION_SECONDS``: how long the last validation took, for :func:`validation_fits` in a later
  attempt (a requeued attempt validates nothing before its first stop).
- ``FINISHED``: verl has logged the run's last step (its final evaluation with it): the run is complete,
  whatever stop request came during that step (the job would otherwise be requeued to an allocation that
  loads the models and ends at once).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from pathlib import Path

STOP_FILE = "STOP"
STOP_FILE_ENV = "ARCTL_STOP_FILE"  # the stop file's path where the config has none (arctl.stop_file)
SAVING_FILE = "SAVING"
VALIDATION_SKIPPED_FILE = "VALIDATION_SKIPPED"  # the step whose validation (and logged row) may be missing
VALIDATION_SECONDS_FILE = "VALIDATION_SECONDS"  # the last validation's duration
FINISHED_FILE = "FINISHED"  # the step at which verl logged the run's last row
SAVE_WAIT_FRACTION = 0.9  # of cluster.preempt_warning_s: the longest a save in progress is waited for
VALIDATION_MARGIN = 1.25  # the validation runs after a stop only if 1.25x its last duration is left


def request(path: str | Path, abandon_at: float | None) -> None:
    """Ask the trainer to stop after its step; ``abandon_at``: when the step will be abandoned. Written
    whole (a reader never sees it empty), in milliseconds rounded down: never later than asked (rounded to the
    nearest, "abandon now" read up to half a millisecond in the future: a test checking it failed in 2 of 3 runs of tests/verl)."""
    from arctl.config.files import atomic_write

    at = None if abandon_at is None else math.floor(abandon_at * 1000) / 1000
    atomic_write(Path(path), "stop requested\n" + (f"abandon_at {at:.3f}\n" if at is not None else ""))


def requested(path: str | Path | None) -> bool:
    return bool(path) and Path(str(path)).exists()


def abandon_at(path: str | Path | None) -> float | None:
    """The time the watcher abandons the step (None: not said, or no request)."""
    if not path:
        return None
    try:
        lines = Path(str(path)).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "abandon_at":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def validation_fits(path: str | Path | None, last_validation_s: float | None, now: float | None = None) -> bool:
    """Whether a validation may run after the stop request at ``path``: unless its last duration times
    :data:`VALIDATION_MARGIN` is known to end after the abandon time (no duration measured in this
    attempt, or no abandon time said: it runs, as it did before the check)."""
    deadline = abandon_at(path)
    if deadline is None or last_validation_s is None:
        return True
    left = deadline - (time.time() if now is None else now)
    return last_validation_s * VALIDATION_MARGIN <= left


def stop_file_of(config) -> str | None:
    """The stop file of verl's composed config (``arctl.stop_file``), else ``$ARCTL_STOP_FILE``."""
    import os

    arctl = config.get("arctl") if hasattr(config, "get") else None
    return (arctl.get("stop_file") if arctl is not None else None) or os.environ.get(STOP_FILE_ENV)


def _beside(stop_file: str | Path | None, name: str) -> Path | None:
    """The file ``name`` beside the stop file (None without one)."""
    return Path(str(stop_file)).parent / name if stop_file else None


def _write(path: Path | None, text: str) -> None:
    """Write ``path`` whole (nothing without a path)."""
    if path is not None:
        from arctl.config.files import atomic_write

        atomic_write(path, text)


def saving_marker(stop_file: str | Path | None) -> Path | None:
    return _beside(stop_file, SAVING_FILE)


def skipped_marker(stop_file: str | Path | None) -> Path | None:
    return _beside(stop_file, VALIDATION_SKIPPED_FILE)


def finished_marker(stop_file: str | Path | None) -> Path | None:
    return _beside(stop_file, FINISHED_FILE)


def mark_finished(stop_file: str | Path | None, step: int) -> None:
    """Record that the run's last step ``step`` is logged (nothing without a stop file)."""
    _write(finished_marker(stop_file), f"{int(step)}\n")


def finished(stop_file: str | Path | None) -> bool:
    marker = finished_marker(stop_file)
    return marker is not None and marker.is_file()


def record_validation_s(stop_file: str | Path | None, seconds: float) -> None:
    """Record how long the last validation took (nothing without a stop file)."""
    _write(_beside(stop_file, VALIDATION_SECONDS_FILE), f"{float(seconds):.3f}\n")


def recorded_validation_s(stop_file: str | Path | None) -> float | None:
    """The duration :func:`record_validation_s` wrote (None: none, or unreadable)."""
    path = _beside(stop_file, VALIDATION_SECONDS_FILE)
    try:
        value = float(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None
    return value if value is not None and value >= 0 and value == value else None


def mark_skipped_validation(stop_file: str | Path | None, step: int) -> None:
    """Record that the stop at ``step`` skipped its validation (written whole; nothing without a stop file)."""
    _write(skipped_marker(stop_file), f"{int(step)}\n")


def skipped_validation(stop_file: str | Path | None) -> int | None:
    """The step whose validation a stop skipped (None: none, or the record cannot be read)."""
    marker = skipped_marker(stop_file)
    try:
        return int(marker.read_text().strip()) if marker is not None else None
    except (OSError, ValueError):
        return None


def clear_skipped_validation(stop_file: str | Path | None) -> None:
    marker = skipped_marker(stop_file)
    if marker is not None:
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def saving(stop_file: str | Path | None) -> Iterator[None]:
    """Mark a checkpoint save in progress for the block (nothing without a stop file path)."""
    marker = saving_marker(stop_file)
    if marker is None:
        yield
        return
    try:
        marker.write_text(f"{time.time():.3f}\n")
    except OSError:
        marker = None
    try:
        yield
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)
