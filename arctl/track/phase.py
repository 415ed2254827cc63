"""What a backend tells ``arctl status`` besides steps and metrics.

- the phase, what a run does before its first training step (e.g. "warming up 640/1200"):
  ``run_dir/phase.json`` (:func:`write_phase`; None clears it);
- a warning that stays with the run (e.g. "skipped 1 damaged checkpoint ...; resumed from ..."):
  ``run_dir/warning.json`` (:func:`write_warning`).

The launch layer's refresh reads both (:func:`read_phase`, :func:`read_warning`) into the registry,
next to the step and the last metric.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from arctl.config.files import atomic_write

PHASE_FILE = "phase.json"
WARNING_FILE = "warning.json"


def _write(run_dir: str | Path, name: str, key: str, value: str | None) -> None:
    try:  # atomically; never raises: what is only reported must not break a run
        atomic_write(Path(run_dir) / name, json.dumps({key: value, "time": time.time()}))
    except OSError:
        pass


def _read(run_dir: str | Path, name: str, key: str) -> str | None:
    try:
        value = json.loads((Path(run_dir) / name).read_text()).get(key)
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return str(value)[:2000] if value else None


def write_phase(run_dir: str | Path, phase: str | None) -> None:
    """Record ``phase`` (None clears it)."""
    _write(run_dir, PHASE_FILE, "phase", phase)


def waiting_phase(run_id: str) -> str:
    """The phase of a run that waits for the run it starts from (``trainer.init_from``)."""
    return f"waiting for {run_id}"


def queued_phase(run_id: str) -> str:
    """The phase of a run whose job waits for a slot: the end of ``run_id``'s job (a sweep's Ray jobs keep
    to ``cluster.array_parallelism``)."""
    return f"queued behind {run_id}'s job (cluster.array_parallelism)"


def is_queued(phase: str | None) -> bool:
    """Whether ``phase`` is :func:`queued_phase`'s."""
    return bool(phase) and str(phase).startswith("queued behind ")


def is_waiting(phase: str | None) -> bool:
    """Whether ``phase`` is :func:`waiting_phase`'s."""
    return bool(phase) and str(phase).startswith("waiting for ")


SLOT_PHASE = "queued for a local slot"


def slot_phase(slots: int) -> str:
    """The phase of a local run whose queue waits for one of the workspace's ``slots``: another launch's
    runs in the same workspace hold them (:mod:`arctl.launch.local_queue`)."""
    return f"{SLOT_PHASE} (another launch into this workspace runs; this one runs {slots} at a time)"


def is_slot_queued(phase: str | None) -> bool:
    """Whether ``phase`` is :func:`slot_phase`'s."""
    return bool(phase) and str(phase).startswith(SLOT_PHASE)


def read_phase(run_dir: str | Path) -> str | None:
    return _read(run_dir, PHASE_FILE, "phase")


def write_warning(run_dir: str | Path, warning: str) -> None:
    """Record ``warning`` for ``arctl status``."""
    _write(run_dir, WARNING_FILE, "warning", warning)


def read_warning(run_dir: str | Path) -> str | None:
    return _read(run_dir, WARNING_FILE, "warning")


CHECKPOINT_SCAN = "checkpoints: "
"""The start of a warning about the checkpoints an attempt found as it started (damaged ones skipped, verl's
tracker fixed): it describes that attempt's start, and the next attempt's scan replaces it (:func:`scan_warning`)."""


def scan_warning(run_dir: str | Path, notes: list[str]) -> None:
    """Record what this attempt's checkpoint scan found (``notes``), or, where it found nothing wrong, clear an
    earlier attempt's (from a hunt: "skipped 1 damaged checkpoint(s) ...; resumed from step_000200.pt" stayed in
    `arctl status` through later attempts that resumed from intact newer checkpoints, and in the run's final
    status). A warning of another kind (W&B rows lost, a gradient skipped) is left as it is where nothing is found."""
    if notes:
        write_warning(run_dir, CHECKPOINT_SCAN + "; ".join(notes))
    elif (read_warning(run_dir) or "").startswith(CHECKPOINT_SCAN):
        write_warning(run_dir, None)
