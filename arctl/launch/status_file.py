"""``run_dir/status.json``: what the job itself reports (written atomically by the job entry).

Fields: state (submitted | running | stopping | completed | preempted | requeued | failed | cancelled: a run `arctl cancel`
ended before its job started, or a debug run its user stopped, and the runs of its launch it left unstarted:
:func:`mark_cancelled`; or a job that found the cancel's request as it started, and trained nothing:
:func:`arctl.launch.job._start_attempt`), job_id, host, host_id (the host's
:func:`arctl.config.files.machine_identity`, written with ``host``: a Mac's, whose name changes with its network), pid,
pid_start (the process ``pid`` names, as no other is: :func:`process_identity`, where /proc says it), executor, started_at, updated_at, ended_at, step,
metric_name, metric_value (null where the metric was not finite: metric_nonfinite says "nan", "inf" or "-inf"),
wandb_id, error, attempt, signal, warning (e.g. a checkpoint that failed its checksum and was skipped), metric_files (the marks of the
metrics files when the attempt started: :func:`arctl.launch.progress.file_marks`), first_step and
first_step_at (where this attempt's pace starts, and when: :func:`arctl.launch.progress.watch_pace`), last_step and
last_step_at (the newest step the job saw after it, and when; both times on the job's node's clock, so that their
difference is one clock's) with total_steps and test_freq (the run's
schedule): the attempt's pace and the time left, :func:`arctl.launch.progress.time_left`; resume_step (an attempt
that ended preempted or failed in its Python, or whose job a refresh found dead (:func:`note_resume_step`): the step its
next attempt resumes from, its newest complete checkpoint's, 0: it starts over;
null while an attempt runs or where the backend cannot say: :func:`arctl.launch.job.resume_step`); cancelled (true beside
"preempted": the stop was `arctl cancel`'s, which left :data:`CANCEL_FILE`; the state stays "preempted" for the
readers of before it).

:data:`CANCEL_FILE`, beside it: `arctl cancel`'s request to the run's job (the time it asked), written before it
signals the job (:func:`mark_cancel_requested`) and removed with the next attempt's "submitted": a TERM alone does not
tell a cancel from a preemption, and `arctl repair`, which rebuilds the registry from the folders, made a cancelled
run PREEMPTED (from a hunt). A job that finds it as it starts trains nothing (:func:`arctl.launch.job._start_attempt`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import threading
import time
from pathlib import Path

from arctl.config.files import atomic_write, machine_identity

STATUS_FILE = "status.json"
CANCEL_FILE = "cancel_requested"  # `arctl cancel`'s request to the run's job: the time it asked (mark_cancel_requested)
KILLED_FILE = "cancel_killed"  # `arctl cancel --now` (or a second cancel) killed the job: when (mark_killed)
JOB_PROCESS_FILE = "job_process"  # a local run's job id and the process it names, as no other (name_job_process)
NONFINITE_TEXTS = ("nan", "inf", "-inf")
"""``metric_nonfinite``: the headline metric's value where it is no finite number (status.json, the registry)."""


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _integer(low: int | None = None):
    """A check: an int (not a bool) SQLite's INTEGER holds, at least ``low`` where given."""
    return lambda v: (isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
                      and (low is None or v >= low))


def _text(v) -> bool:
    return isinstance(v, str) and len(v) <= 10_000


STATES = ("submitted", "running", "stopping", "completed", "preempted", "requeued", "failed", "cancelled")
_FIELDS = {  # field -> what its value must be (a status file is written by a job, but read as input)
    "state": lambda v: v in STATES,
    "job_id": _text, "host": _text, "host_id": _text, "executor": _text, "metric_name": _text, "wandb_id": _text, "error": _text,
    "signal": _text, "warning": _text, "pid_start": _text, "cancelled": lambda v: isinstance(v, bool),
    "pid": _integer(1), "uid": _integer(0), "step": _integer(), "first_step": _integer(), "first_step_at": _number,
    "last_step": _integer(), "last_step_at": _number,
    "total_steps": _integer(1), "test_freq": _integer(1), "attempt": _integer(0), "resume_step": _integer(0),
    "metric_value": _number, "metric_nonfinite": lambda v: v in NONFINITE_TEXTS, "started_at": _number, "updated_at": _number, "ended_at": _number,
    "metric_files": lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(m, list) and len(m) == 3
        and all(map(_integer(), m)) for k, m in v.items()),
}


def start_ticks(pid: int) -> int:
    """When process ``pid`` of this machine started, in clock ticks since its boot (/proc; OSError where /proc has no
    such process, or no /proc: macOS)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])
    except (IndexError, ValueError) as err:
        raise OSError(f"/proc/{pid}/stat says no start") from err


def process_identity(pid: int) -> str | None:
    """Process ``pid`` of this machine, named as no other process is: the boot it runs in and its start in clock
    ticks since that boot (``<boot_id>:<ticks>``, from /proc), which no clock step moves; None without /proc
    (macOS) or such a process. From the hunt of clocks: a start computed from the boot's wall-clock time (/proc/stat's
    ``btime``) moves with every step of the clock, and an NTP step of a few seconds made a debug run's live process
    read as a later one holding its pid: the run was marked FAILED for good while it trained."""
    try:
        return f"{Path('/proc/sys/kernel/random/boot_id').read_text().strip()}:{start_ticks(pid)}"
    except OSError:
        return None


def name_job_process(run_dir: Path, job_id: str, pid: int) -> None:
    """:data:`JOB_PROCESS_FILE` in ``run_dir``: local job ``job_id`` is process ``pid`` of this machine, named as no
    other (:func:`process_identity`; nothing where /proc cannot say). Written by whoever records the job id (the
    launcher: its local queue; the queue: the job it started) before the registry has it, and removed with the next
    attempt's "submitted"; a file of its own, not status.json, which the job writes meanwhile from another process.
    From the hunt of clocks: a start time from /proc moves with a clock step, and a step of 90 s forward made the
    live job of a local run read as a later process holding its pid: FAILED for good while it trained."""
    if (identity := process_identity(pid)) is not None:
        with contextlib.suppress(OSError):  # the times are compared then, as before
            atomic_write(Path(run_dir) / JOB_PROCESS_FILE, f"{job_id} {identity}")


def _job_process(run_dir: Path) -> tuple[str, str] | None:
    """(job id, process identity) of :data:`JOB_PROCESS_FILE` in ``run_dir`` (:func:`name_job_process`), or None."""
    try:
        named, identity = (Path(run_dir) / JOB_PROCESS_FILE).read_text().split(" ", 1)
    except (OSError, ValueError):
        return None
    return named, identity


def named_job_process(run_dir: Path, job_id: str | None) -> str | None:
    """The process local job ``job_id`` of ``run_dir``'s run was named as (:func:`name_job_process`), None where
    none was named for that job id."""
    named = _job_process(run_dir)
    return named[1] if named is not None and job_id and named[0] == job_id else None


def named_job(run_dir: Path) -> str | None:
    """The local job id the run's last submission named in ``run_dir`` (:func:`name_job_process`: a local queue's
    ``queue:N``, or the job it started), or None."""
    named = _job_process(run_dir)
    return named[0] if named is not None else None


def read_status(run_dir: Path) -> dict:
    """What the job reported: the fields of status.json that hold a value of their kind (a damaged,
    truncated or hand-edited file yields the fields that are right, or {})."""
    try:
        data = json.loads((Path(run_dir) / STATUS_FILE).read_text())
    except (ValueError, OSError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k in _FIELDS and (v is None or _FIELDS[k](v))}


_WRITING = threading.Lock()  # one read-merge-write at a time in a process (the job's main, pace and stop threads)


def write_status(run_dir: Path, **fields) -> dict:
    """Merge ``fields`` into status.json (atomic replace) and return the new content. Never from a signal
    handler: it may interrupt its own thread inside this lock (the job entry writes from a thread). ``host``
    written comes with its ``host_id``: this machine's identity where it is this host's name, else none."""
    run_dir = Path(run_dir)
    if "host" in fields and "host_id" not in fields:
        fields["host_id"] = machine_identity() if fields["host"] == socket.gethostname() else None
    with _WRITING:
        data = read_status(run_dir)
        data.update(fields)
        data["updated_at"] = time.time()
        atomic_write(run_dir / STATUS_FILE, json.dumps(data))
    return data


def note_resume_step(run_dir: Path, seen: dict, step: int) -> bool:
    """``resume_step`` for an attempt whose job was found dead (killed: it could not write it; from the hunt of
    limits, `arctl status` of a killed run showed the step it reached, not the one it resumes from), written only
    where status.json is still as the refresh that found it read it (``seen``: its state, job and last write, not a
    later attempt's) and holds no step yet. Its ``updated_at`` is kept: the job's last write. Returns whether it was
    written."""
    run_dir = Path(run_dir)
    with _WRITING:
        data = read_status(run_dir)
        if (any(data.get(k) != seen.get(k) for k in ("state", "job_id", "attempt", "updated_at"))
                or data.get("resume_step") is not None):
            return False
        data["resume_step"] = step
        atomic_write(run_dir / STATUS_FILE, json.dumps(data))
    return True


def mark_submitted(run_dir: Path, process: tuple[int | None, str] | None = None) -> dict:
    """status.json of an attempt being submitted: ``submitted``, and none of the previous attempt's
    error, start, end or process (a refresh would take them for this attempt's: an elapsed time of 0
    or of days, a debug run failed for a process that ended with the last attempt). ``process``: (pid,
    host) of the process that will run it (the debug executor's launch, this user's: ``uid``), which a refresh watches; a local
    run's (None, host): its job's process is asked on that host only."""
    pid, host = process if process is not None else (None, None)
    withdraw_cancel_request(run_dir, killed=True)  # an earlier attempt's: not this one's
    with contextlib.suppress(OSError):
        (Path(run_dir) / JOB_PROCESS_FILE).unlink(missing_ok=True)  # an earlier attempt's job
    return write_status(run_dir, state="submitted", error=None, started_at=None, ended_at=None, pid=pid, host=host,
                        pid_start=None if pid is None else process_identity(pid),
                        uid=None if pid is None else os.getuid(), cancelled=None)


def mark_cancel_requested(run_dir: Path, at: float) -> None:
    """:data:`CANCEL_FILE` in ``run_dir``: `arctl cancel` asks the run's job to stop (at time ``at``), written before
    the signal, so that the job's stop says it was a cancel (status.json's ``cancelled``) and `arctl repair` rebuilds
    the run CANCELLED, not PREEMPTED. A file of its own, not a field of status.json, whose job rewrites it at every
    step: a job's write begun before this one would take it out again, and this one could put back the job's
    "running" over its end. Nothing is written where the folder is gone or cannot be written."""
    _write_time(run_dir, CANCEL_FILE, at)


def _write_time(run_dir: Path, name: str, at: float) -> None:
    """File ``name`` in ``run_dir`` holding time ``at``; nothing where the folder is gone or cannot be written."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    with contextlib.suppress(OSError):
        atomic_write(run_dir / name, f"{at!r}\n")


def _read_time(run_dir: Path, name: str) -> float | None:
    """The time file ``name`` in ``run_dir`` holds (:func:`_write_time`), or None."""
    try:
        at = float((Path(run_dir) / name).read_text().strip())
    except (OSError, ValueError):
        return None
    return at if _number(at) else None


def withdraw_cancel_request(run_dir: Path, killed: bool = False) -> None:
    """No :data:`CANCEL_FILE` in ``run_dir`` (with ``killed``, no :data:`KILLED_FILE` either): a cancel that signalled
    nothing, or (both) a new attempt."""
    for name in (KILLED_FILE, CANCEL_FILE) if killed else (CANCEL_FILE,):
        with contextlib.suppress(OSError):
            (Path(run_dir) / name).unlink(missing_ok=True)


def mark_killed(run_dir: Path, at: float) -> None:
    """:data:`KILLED_FILE` in ``run_dir``: `arctl cancel` killed the run's job at time ``at`` (KILL to every process of
    a SLURM job, or of a local job's process tree). Its "stopping" in status.json is then no checkpoint being saved, which a refresh would wait up to
    :data:`arctl.launch.refresh.STOP_TIMEOUT_S` for (from a hunt: a killed job read "cancelling: saving its
    checkpoint" for 15 minutes). Nothing is written where the folder is gone or cannot be written."""
    _write_time(run_dir, KILLED_FILE, at)


def killed_at(run_dir: Path) -> float | None:
    """When `arctl cancel` killed the job of the run's current attempt (:data:`KILLED_FILE`), or None."""
    return _read_time(run_dir, KILLED_FILE)


def cancel_requested_at(run_dir: Path) -> float | None:
    """When `arctl cancel` asked the job of the run's current attempt to stop (:data:`CANCEL_FILE`), or None."""
    return _read_time(run_dir, CANCEL_FILE)


def mark_cancelled(run_dir: Path, ended_at: float | None, executor: str | None) -> None:
    """status.json of a run that its registry row now says CANCELLED: "cancelled", when, and its executor (which
    a never-started run's "submitted" does not name), so that the folder says what the registry does and
    `arctl repair`, which rebuilds the registry from the folders, keeps it CANCELLED. Written by `arctl cancel`
    (:func:`arctl.launch.control._mark_cancelled`) and by a debug launch its user stopped
    (:func:`arctl.launch.launcher._debug_interrupted`), each only after its conditional registry write won. From
    a hunt and a review: a cancelled queued run kept "submitted", a stopped debug run "preempted", and a repair
    made them FAILED and PREEMPTED. Nothing is written where the folder is gone or cannot be written (the
    registry holds the cancel)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    try:
        write_status(run_dir, state="cancelled", ended_at=ended_at, **({"executor": executor} if executor else {}))
    except OSError:
        pass

