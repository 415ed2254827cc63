"""What the tests of interrupted commands share: a process group never left running, and an export whose
placing of runs is interrupted part-way."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def group_killed_at_exit(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """``proc`` (started with ``start_new_session=True``); on leaving, its whole process group is killed if it
    still runs (a failed assertion, a timeout, pytest-timeout's signal): nothing of it writes after the test."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def interrupt_placing(monkeypatch, after: int) -> list[Path]:
    """Make :func:`arctl.report.export._place` raise KeyboardInterrupt (Ctrl-C) when it is asked to place a run
    after ``after`` runs were placed; returns the destinations placed so far (filled as the export runs)."""
    from arctl.report import export

    real, placed = export._place, []

    def place(src, dst):
        if len(placed) == after:
            raise KeyboardInterrupt
        placed.append(dst)
        return real(src, dst)

    monkeypatch.setattr(export, "_place", place)
    return placed
