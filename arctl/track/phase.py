"""What a run does before its first training step (e.g. "warming up 640/1200"), for ``arctl status``.

A backend writes ``run_dir/phase.json`` (:func:`write_phase`; None clears it) and the launch layer's
refresh reads it (:func:`read_phase`) into the registry, next to the step and the last metric.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from arctl.config.files import atomic_write

PHASE_FILE = "phase.json"


def write_phase(run_dir: str | Path, phase: str | None) -> None:
    """Record ``phase`` (atomically; never raises: progress reporting must not break a run)."""
    try:
        atomic_write(Path(run_dir) / PHASE_FILE, json.dumps({"phase": phase, "time": time.time()}))
    except OSError:
        pass


def read_phase(run_dir: str | Path) -> str | None:
    try:
        value = json.loads((Path(run_dir) / PHASE_FILE).read_text()).get("phase")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None
