"""A job's log as arctl's job writes it, and its last attempt's lines.

Every line the job itself writes starts ``[arctl job HH:MM:SS] ``; each attempt starts with
``run <run id> attempt <n> on <host> (job <id>)``. SLURM appends a requeued task's attempts to one stderr
file, so whoever reads a reason from a log reads the last attempt's lines only: the job's own failure where
status.json could not be written (:func:`arctl.launch.job.reported_failure`), `arctl status`'s reason
(:func:`arctl.launch.control.error_summary`), SLURM's out-of-memory line (:func:`arctl.launch.refresh`), the
thread limit in the job's own log (:mod:`arctl.launch.job`). Light on imports: the refresh reads it on every
`arctl status`."""

from __future__ import annotations

import re
import time
from pathlib import Path

LOG_TAIL_BYTES = 1 << 16  # how much of a log's end is read where its last lines are all that is asked for


def log_line(message: str) -> str:
    """``message`` as a line of the job's log."""
    return f"[arctl job {time.strftime('%H:%M:%S')}] {message}"


def attempt_message(run_id: str, attempt: int, host: str, job_id: str | None) -> str:
    """What the job logs as an attempt starts: :data:`ATTEMPT_LINE` finds it."""
    return f"run {run_id} attempt {attempt} on {host} (job {job_id})"


LINE_START = r"^\[arctl job [0-9:]+\] "  # (a pattern) what :func:`log_line` puts before each message
ATTEMPT_LINE = re.compile(LINE_START + r"run \S+ attempt \d+ on ")


def last_attempt(lines: list[str]) -> list[str]:
    """The lines from the last attempt's first line on (all of ``lines`` where none starts an attempt: a log
    of an arctl before the line, or a tail that begins inside the attempt)."""
    starts = [i for i, text in enumerate(lines) if ATTEMPT_LINE.match(text)]
    return lines[starts[-1]:] if starts else lines


def last_attempt_lines(path: Path, tail_bytes: int | None = None) -> list[str] | None:
    """The last attempt's lines of the log at ``path`` (:func:`last_attempt`), read whole or only its last
    ``tail_bytes`` (the first line read may then be a part of one); None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            if tail_bytes is not None:
                f.seek(max(0, f.seek(0, 2) - tail_bytes))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return last_attempt(text.splitlines())


def stderr_logs(folder: Path) -> list[Path]:
    """The stderr logs (``*_log.err``, submitit's names) in ``folder``, in name order; [] where it is no folder."""
    return sorted(folder.glob("*_log.err")) if folder.is_dir() else []
