"""``run_dir/status.json``: what the job itself reports (written atomically by the job entry).

Fields: state (running | completed | preempted | requeued | failed), job_id, host, pid,
started_at, updated_at, ended_at, step, metric_name, metric_value, wandb_id, error, attempt.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

STATUS_FILE = "status.json"


def read_status(run_dir: Path) -> dict:
    try:
        return json.loads((Path(run_dir) / STATUS_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError, OSError):
        return {}


def write_status(run_dir: Path, **fields) -> dict:
    """Merge ``fields`` into status.json (atomic replace) and return the new content."""
    run_dir = Path(run_dir)
    data = read_status(run_dir)
    data.update(fields)
    data["updated_at"] = time.time()
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=".status.", suffix=".tmp")
    os.fchmod(fd, 0o644)  # readable by the team, like any file the job writes
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, run_dir / STATUS_FILE)
    return data
