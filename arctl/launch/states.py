"""Run states (registry vocabulary, SLURM-like) and how scheduler states map onto them."""

from __future__ import annotations

import re

SUBMITTING = "SUBMITTING"  # claimed by one `arctl run/sweep` process, being submitted
PENDING = "PENDING"  # submitted, waiting for resources (or requeued)
RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
PREEMPTED = "PREEMPTED"  # stopped with a checkpoint; the next sweep resumes it
CANCELLED = "CANCELLED"
# shown only (`arctl status`), never stored: a run whose launch died before submitting it (its row stays
# SUBMITTING under the dead launch's claim until the next launch takes it for a new run); SUBMITTING would
# say someone still submits it
INTERRUPTED = "INTERRUPTED"

ALL = frozenset({SUBMITTING, PENDING, RUNNING, COMPLETED, FAILED, PREEMPTED, CANCELLED})
ACTIVE = frozenset({SUBMITTING, PENDING, RUNNING})
TERMINAL = frozenset({COMPLETED, FAILED, PREEMPTED, CANCELLED})
SUBMITTED = frozenset({PENDING, RUNNING})  # in the scheduler's hands: a job that is queued or runs
# what `arctl sweep` relaunches (and resumes from the last checkpoint) without --force
RELAUNCHABLE = frozenset({FAILED, PREEMPTED, CANCELLED})

SLURM_JOB = r"\d+(_\d+)?"  # a SLURM job id, or an array task's: 123, 123_4
SLURM_JOB_ID = re.compile(rf"^{SLURM_JOB}\Z")  # \Z: $ also matches before a trailing newline

# sacct states -> registry states (the part before " by <uid>", e.g. "CANCELLED by 0")
SLURM_STATES = {
    "PENDING": PENDING,
    "REQUEUED": PENDING,
    "REQUEUE_HOLD": PENDING,
    "REQUEUE_FED": PENDING,
    "CONFIGURING": PENDING,
    "RESIZING": PENDING,
    "SUSPENDED": PENDING,
    "RUNNING": RUNNING,
    "COMPLETING": RUNNING,
    "STAGE_OUT": RUNNING,
    "SIGNALING": RUNNING,
    "COMPLETED": COMPLETED,
    "CANCELLED": CANCELLED,
    "FAILED": FAILED,
    "NODE_FAIL": FAILED,
    "BOOT_FAIL": FAILED,
    "OUT_OF_MEMORY": FAILED,
    "DEADLINE": FAILED,
    "TIMEOUT": PREEMPTED,
    "PREEMPTED": PREEMPTED,
}


def slurm_state(raw: str) -> str | None:
    """Registry state for a sacct/squeue state string (None when unknown)."""
    word = raw.strip().split(" ")[0].rstrip("+").upper()
    return SLURM_STATES.get(word)
