"""The CPU rehearsal trainer's progress file (``run_dir/rehearsal.json``,
:mod:`arctl.backends.verl.rehearsal`), read by the real-SLURM tests that stop it mid-step."""

from __future__ import annotations

import json
from pathlib import Path

from arctl.backends.verl.rehearsal import PROGRESS_FILE


def progress(run_dir: Path) -> dict:
    """The step in progress (``step``, ``phase``, ``resumed_from``), or {} before the first write."""
    try:
        return json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return {}


def running(run_dir: Path, step: int) -> bool:
    """Whether ``step`` has started and is not saved yet (the moment to stop it mid-step)."""
    now = progress(run_dir)
    return now.get("step") == step and now.get("phase") == "running"
