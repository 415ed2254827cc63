"""The shape of a SLURM job id, in one place: ``123`` (a job of its own) or ``123_4`` (task 4 of array 123)."""

from __future__ import annotations


def is_array_task(job_id: str | None) -> bool:
    """Whether ``job_id`` is an array's task (``123_4``), not a job of its own (``123``) nor none."""
    return bool(job_id) and "_" in str(job_id)


def array_master(job_id: str) -> str:
    """The job ``job_id`` belongs to: an array task's array (``123_4``: ``123``), a job of its own itself."""
    return str(job_id).split("_")[0]


def job_id_order(job_id: str) -> tuple:
    """Sort key of job ids as numbers: ``9`` before ``10``, ``31_2`` (an array's task) before ``31_10``; what is
    not a SLURM job id (``debug``, ``queue:PID``) after them, as text (from a hunt: "SLURM jobs 10, 8, 9")."""
    parts = str(job_id).split("_")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), "")
    return (1, (), str(job_id))
