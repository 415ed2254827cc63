"""Rebuild a workspace's registry from its run folders (``arctl repair``).

The registry is an index; the run folders hold the facts: each ``runs/<run_id>/`` has the frozen
``config.yaml`` (experiment, arm, seed, scale, backend, its sweep as the W&B group), ``status.json``
(what the job last reported: state, job id, executor, step, metric, W&B id), and ``shared.json`` (the
experiments a shared arm serves). A damaged, foreign or hand-edited ``registry.sqlite`` is moved
aside (kept as ``registry.sqlite.damaged-<time>``) and a new one is written from those files. A run
whose job was still running is entered as RUNNING with its job id, so the next refresh asks its
scheduler; one submitted to SLURM and not started yet, as PENDING with the job id its ``job/`` link
names; one cancelled before its job started (``arctl cancel`` wrote "cancelled", or left its request:
:data:`arctl.launch.status_file.CANCEL_FILE`), as CANCELLED, and so is one whose job stopped on `arctl cancel`'s
request (status.json "preempted" with ``cancelled``, or beside the request); every run is entered with the request its
folder holds (a job still stopping on it: the next refresh makes it CANCELLED once it has stopped); one
whose job left no executor behind is FAILED, and ``arctl resume`` resumes it. A run keeps the sweep that
launched it (its W&B group, where that names a sweep spec and is not its experiment).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import shutil
import stat
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from arctl.compose.paths import find_spec
from arctl.config.files import create_file, pid_exists
from arctl.launch import states
from arctl.launch.executors import LaunchError
from arctl.launch.progress import run_progress
from arctl.launch.registry import JOB_ID, Registry, RunRecord, lock_folder
from arctl.launch.run_id import SAFE_ID
from arctl.launch.rundir import RunDirError, read_run_config
from arctl.launch.shared import read_members, read_shared
from arctl.launch.status_file import cancel_requested_at, named_job, read_status
from arctl.launch.workspace import Workspace, queued_job, workdir_arg
from arctl.track.identity import wandb_generation

REPORTED = {"completed": states.COMPLETED, "failed": states.FAILED, "preempted": states.PREEMPTED,
            "cancelled": states.CANCELLED}  # cancelled: before its job started (arctl.launch.control._mark_cancelled)
# each message names the command that resumes the run in its workspace ({resume}: `arctl resume RUN --workdir WS`,
# :func:`_record`; from a hunt: a bare `arctl resume` acts on ./arctl-runs and names no run)
UNKNOWN = "the registry was rebuilt and its job left no executor to ask; {resume} resumes it"
QUEUED = ("submitted before the registry was rebuilt, and its job id was only there: if its job is still "
          "queued (squeue), cancel it (scancel) before {resume}, or two jobs train one run")  # SLURM's
# a local or debug run's (executor -> why no job of it runs): what runs it holds the workspace open, and a repair
# runs only while none does (:func:`_exclusive`); in a copy of a live workspace, it runs the original's folder
NEVER_STARTED = {
    "local": "no local queue starts it (a queue starts only the runs its own registry names under it, and this "
             "new registry names none)",
    "debug": "no arctl process trains it here (the debug executor trains in its launch, and a repair runs only "
             "while no launch has the workspace open)",
}
NOT_STARTED = "submitted before the registry was rebuilt and never started; {why}: {resume} resumes it"


def launched_by(config: dict) -> str | None:
    """The sweep that launched the run of frozen ``config``: its W&B group where that is not its experiment
    and names a sweep spec on the search path (:func:`arctl.compose.resolve.resolve_arm` sets the group to
    the sweep's name), else None. What the registry's ``sweep`` column held, and the sweep it is listed under
    (from a hunt: a repair lost the column, and the hints that launch the run again named its experiment, not
    the sweep with its overrides). A ``wandb.group`` set by hand (``wandb.group=mygroup``) names no sweep: taken
    for one, the hints said ``arctl sweep mygroup``, which fails with "unknown sweep" (a review)."""
    wandb = config.get("wandb") if isinstance(config.get("wandb"), dict) else {}
    group = wandb.get("group")
    if not isinstance(group, str) or not SAFE_ID.match(group) or group == config.get("experiment"):
        return None
    return group if find_spec("sweeps", group) is not None else None


def _executor(status: dict) -> str | None:
    """The executor of the attempt ``status`` reports. For one submitted whose job never started, what the
    launch wrote (:func:`arctl.launch.status_file.mark_submitted`): the launching process's pid for a debug
    run, the host only for a local one, neither for SLURM (None here: the job/ link says, :func:`_queued`);
    not its ``executor``, which that write keeps from the attempt before (a run resumed on another executor)."""
    if status.get("state") != "submitted":
        return status.get("executor")
    if status.get("pid") is not None:
        return "debug"
    return "local" if status.get("host") is not None else None


@dataclass
class Repaired:
    kept: str | None  # where the old registry went (None: there was none)
    runs: list[RunRecord] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (folder, why)


def _record(run_id: str, config: dict, status: dict, run_dir,
            queued: tuple[str, str | None, float] | None = None, where: str = "") -> RunRecord:
    """``queued``: (job id, its state as the scheduler says or None, when it was submitted) of the
    SLURM job submitted for it that had not started (:func:`_queued`). ``where``: what names the workspace
    in a command (:func:`arctl.launch.workspace.workdir_arg`)."""
    resume = f"`arctl resume {run_id}{where}`"
    scale = (config.get("scale") or {}).get("name") if isinstance(config.get("scale"), dict) else None
    reported = status.get("state")
    executor = _executor(status)
    job_id = status.get("job_id") if isinstance(status.get("job_id"), str) and JOB_ID.match(status["job_id"]) else None
    if executor == "debug":
        job_id = "debug"  # the registry's name for the in-process executor's job
    # `arctl cancel`'s request to this attempt's job: its stop was a cancel, not a preemption (from a hunt: a repair
    # made cancelled runs PREEMPTED); an older job's stop says only "preempted", where the request may still be
    asked = cancel_requested_at(run_dir)
    if reported == "preempted" and (status.get("cancelled") is True or asked is not None):
        state, error = states.CANCELLED, None
    elif reported in REPORTED:
        state, error = REPORTED[reported], status.get("error") if reported == "failed" else None
    elif reported == "submitted" and queued and queued[1] in states.ACTIVE:  # the scheduler has its job
        (job_id, state, _), error, executor = queued, None, "slurm"
    elif reported == "submitted" and asked is not None:  # cancelled before its job started, "submitted" left
        state, error, job_id = states.CANCELLED, None, None
    elif reported == "submitted" and queued and queued[1] is not None:  # it ended before the run started
        state, job_id = states.FAILED, None
        error = f"its SLURM job {queued[0]} ended ({queued[1].lower()}) before the run started; {resume} resumes it"
    elif reported == "submitted" and executor in NEVER_STARTED:  # a local or debug run: no job of it runs, or will
        state, error, job_id = states.FAILED, NOT_STARTED.format(why=NEVER_STARTED[executor], resume=resume), None
    elif reported == "submitted":  # its job id was the registry's (the job id status.json names is an earlier
        state, error, job_id = states.FAILED, QUEUED.format(resume=resume), None  # attempt's): its SLURM job may still be queued
    elif job_id and executor in ("slurm", "local"):
        state, error = states.RUNNING, None  # the next refresh asks its scheduler (or its process)
    else:
        state, error = states.FAILED, UNKNOWN.format(resume=resume)
    if state == states.CANCELLED and job_id is None:  # cancelled while queued: the job its launch named (a queue's)
        job_id = _named_job(run_dir)
    progress = run_progress(run_dir, status, active=state in states.ACTIVE)
    # a --force rerun's generation is in its W&B id (<run_id>-g<N>): the next rerun must not reuse an id
    wandb = config.get("wandb") if isinstance(config.get("wandb"), dict) else {}
    again = wandb_generation(run_id, wandb.get("id"))
    # a run that never started has no W&B id in status.json: its config's, which its job would have used (as the
    # launch records it at submission: none where W&B is disabled)
    wandb_run = status.get("wandb_id") or (wandb.get("id") if isinstance(wandb.get("id"), str)
                                           and wandb.get("mode") != "disabled" else None)
    return RunRecord(
        run_id=run_id, experiment=str(config["experiment"]), arm=str(config["arm"]), seed=int(config["seed"]),
        sweep=launched_by(config), state=state, scale=scale, backend=config.get("backend"), executor=executor,
        job_id=job_id,
        attempts=_attempts(run_dir, status), created_at=status.get("started_at"),
        started_at=status.get("started_at"), step=progress.get("step"),
        # an attempt that ended without saying when (submitted, never started): when it was cancelled, else when its
        # status was last written
        ended_at=status.get("ended_at") or ((asked if state == states.CANCELLED else None) or status.get("updated_at")
                                            if state in states.TERMINAL else None),
        # `arctl cancel`'s request, as the registry had it (the request in the folder is this attempt's: the next
        # submission removes it): a job still stopping on it is made CANCELLED, not PREEMPTED, by the refresh that sees
        # it stopped; an ended run keeps it as `arctl status --json` showed it before (from a hunt: a repair dropped it)
        cancel_requested=asked,
        metric_name=progress.get("metric_name"), metric_value=progress.get("metric_value"),
        metric_nonfinite=progress.get("metric_nonfinite"),
        wandb_id=wandb_run, error=error, claim=None, generation=again or 0,
        submitted_at=queued[2] if queued and state in states.ACTIVE else None,
    )


def _named_job(run_dir) -> str | None:
    """The job id the run's last submission named in its folder (:func:`arctl.launch.status_file.named_job`), where
    it is one arctl makes; else None."""
    named = named_job(run_dir)
    return named if named is not None and JOB_ID.match(named) else None


def _attempts(run_dir, status: dict) -> int:
    """How many times the run was submitted, as far as its folder tells: the job starts its status.json counts,
    with those of its earlier generations (``previous/*/status.json``: a --force rerun starts counting again),
    and at least one where a submission wrote its status (a run cancelled while queued started no job)."""
    count = int(status.get("attempt") or 0)
    with contextlib.suppress(OSError):
        for archive in (Path(run_dir) / "previous").iterdir():
            count += int(read_status(archive).get("attempt") or 0)
    return max(count, 1 if status.get("state") else 0)


def _queued(folders) -> dict[str, tuple[str, str | None, float]]:
    """Run folder name -> (job id, state, submitted at) for the runs submitted to SLURM whose job
    had not started (:func:`arctl.launch.workspace.queued_job`), their states from ONE scheduler
    call. The state is None where the scheduler does not have the job (purged from accounting,
    another cluster's) or none answers here: such a run is rebuilt FAILED with the message to check
    squeue, not PENDING (a row no scheduler confirms would stay pending for ever)."""
    from arctl.launch.refresh import scheduler_states

    links = {f.name: (job, f) for f in folders if (job := queued_job(f))}
    raw, _source = scheduler_states([job for job, _ in links.values()])
    return {name: (job, states.slurm_state(raw[job]) if job in raw else None, (folder / "job" / job).lstat().st_mtime)
            for name, (job, folder) in links.items()}


def copy_of(run_id: str, config: dict) -> str | None:
    """The run whose folder ``runs/<run_id>/`` is a copy of (``cp -r runs/X runs/X.bak``: its config.yaml names
    run X, :func:`arctl.launch.rundir.read_run_config`'s ``run_id``), else None. Such a folder is no run of its
    own: registered, it made a second run of one cell (from a hunt: reports choked on it)."""
    named = config.get("run_id")
    return None if named == run_id else str(named)


def _why_not(run_id: str, config: dict) -> str | None:
    if not SAFE_ID.match(run_id):
        return "its name is not a run id"
    if (original := copy_of(run_id, config)) is not None:  # a hand-edited run_id is not echoed (control characters)
        return (f"it is a copy of run {original if SAFE_ID.match(original) else '(another id)'} (its config.yaml's "
                "run_id), made by hand: not a run of its own (keep a copy outside runs/)")
    for key, kind in (("experiment", str), ("arm", str), ("seed", int)):
        if not isinstance(config.get(key), kind) or isinstance(config.get(key), bool):
            return f"its config.yaml has no {key}"
    if not (SAFE_ID.match(config["experiment"]) and SAFE_ID.match(config["arm"])) or config["seed"] < 0:
        return "its config.yaml names no experiment/arm/seed arctl could have made"
    return None


REPAIR_WAIT_S = 10.0  # how long a repair waits for the commands that have the registry open (a status) to end


def rebuild_registry(workspace: Workspace) -> Repaired:
    """Write a new registry from ``runs/*`` beside the old one, then move the old one aside and the
    new one in: an interruption (Ctrl-C, a kill) before the swap leaves the old registry in place
    (and a ``registry.sqlite.new-<pid>`` to delete), never a workspace without one.

    All of it holds the workspace folder's exclusive lock (:func:`arctl.launch.registry.lock_folder`),
    which every registry open shares: a launch that starts during the repair waits for it and then
    writes into the new file (from a hunt: its row went into the old one, moved aside, and its run
    trained unrecorded), and a second repair is refused. Not the old file's SQLite lock: a repair is
    for a file SQLite may not open at all."""
    path = workspace.registry_path
    held = _exclusive(path)
    try:
        if (holder := registry_holder(path)) is not None:  # an arctl of before the lock
            raise LaunchError(_in_use(path, holder))
        before = _fingerprint(path)
        new = path.with_name(f"{path.name}.new-{os.getpid()}")
        for left in path.parent.glob(f"{path.name}.new-*"):  # this repair's, or a killed one's
            pid = left.name.removeprefix(f"{path.name}.new-").split("-")[0]
            if left.name.startswith(new.name) or not (pid.isdigit() and pid_exists(int(pid))):
                left.unlink(missing_ok=True)
        try:
            _made_like(new, path)
            result = _rebuild(workspace, new)
            if _fingerprint(path) != before:  # a writer without the lock (an older arctl, a file system without flock)
                raise LaunchError(f"another arctl process wrote {path} during the repair (the old registry is left "
                                  "as it was): run `arctl repair` again")
        except BaseException:
            for suffix in ("", "-wal", "-shm", "-journal"):
                path.with_name(new.name + suffix).unlink(missing_ok=True)
            raise
        try:
            _swap(path, new, result)
        except BaseException:  # the new registry is not left beside an old one that could not be moved aside
            new.unlink(missing_ok=True)
            raise
        return result
    finally:
        if held is not None:
            os.close(held)


def _made_like(new: Path, old: Path) -> None:
    """Create the new registry ``new`` with the old one's group and mode, joined by what this user's
    umask grants (:func:`arctl.config.files.create_file`), so that everyone who could write the old one
    can write the new one. From a hunt: in a workspace shared by a group, a repair by one member made a
    file only they could write (SQLite's 0644), and the others could no longer launch."""
    create_file(new)
    try:
        was, now = old.stat(), new.stat()
    except OSError:  # no old registry: the umask's mode alone (no new file: the open that follows says why)
        return
    if was.st_gid != now.st_gid:
        with contextlib.suppress(OSError):  # (a group this user is not in: the folder's, as any file it makes)
            os.chown(new, -1, was.st_gid)
    os.chmod(new, stat.S_IMODE(now.st_mode) | (stat.S_IMODE(was.st_mode) & 0o666))


def _in_use(path: Path, holder: int | None) -> str:
    who = f"open in process {holder}" if holder is not None else "open in another arctl process"
    return (f"{path} is {who} (a local queue, a launch, `arctl run --wait`, another `arctl repair`?): a repair "
            "would replace the file it writes to, and what it writes next would be lost — let it end or stop it, "
            "then run `arctl repair` again")


def _exclusive(path: Path) -> int | None:
    """The workspace folder's exclusive lock (None: no flock there), waiting REPAIR_WAIT_S for the
    commands that have the registry open; a LaunchError naming the holder where one keeps it."""
    try:
        return lock_folder(path.parent, exclusive=True, wait_s=0)
    except BlockingIOError:
        pass
    if (holder := registry_holder(path)) is None:  # a short command (a status), or another repair: wait a little
        try:
            return lock_folder(path.parent, exclusive=True, wait_s=REPAIR_WAIT_S)
        except BlockingIOError:
            holder = registry_holder(path)
    raise LaunchError(_in_use(path, holder))


def _fingerprint(path: Path) -> list[tuple[int, int, int] | None]:
    """What a write to the registry changes: its file's and its log's inode, size and modification time."""
    seen = []
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            st = p.stat()
            seen.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            seen.append(None)
    return seen


_SHM_DMS = 128  # SQLite's WAL index: every connection holds a read lock on this byte of the -shm file


def registry_holder(path: Path) -> int | None:
    """The pid of another process that has the registry open (SQLite's lock on its WAL index, which a
    killed process's does not keep), or None. Linux's ``struct flock`` layout; elsewhere None."""
    shm = path.with_name(path.name + "-shm")
    if not sys.platform.startswith("linux") or not shm.exists():
        return None
    try:
        fd = os.open(shm, os.O_RDONLY)
    except OSError:
        return None
    try:
        layout = "hhqqi4x"  # l_type, l_whence, l_start, l_len, l_pid
        got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(layout, fcntl.F_WRLCK, os.SEEK_SET, _SHM_DMS, 1, 0))
        kind, _, _, _, pid = struct.unpack(layout, got)
        return None if kind == fcntl.F_UNLCK else int(pid)
    except OSError:
        return None
    finally:
        os.close(fd)


_NO_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS}


def _swap(path: Path, new: Path, result: Repaired) -> None:
    """Keep the old registry (and its log) under ``.damaged-<time>`` and move ``new`` in its place.
    Never over a file kept before (from a hunt: two repairs in one second kept the second's copy over
    the first's, the only record of sweep memberships and queued job ids): the next free name,
    ``.damaged-<time>-2`` and on."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in itertools.count(1):
        kept = path.with_name(f"{path.name}.damaged-{stamp}" + (f"-{n}" if n > 1 else ""))
        if any(kept.with_name(kept.name + s).exists() for s in ("", "-wal", "-shm")):
            continue
        if not path.exists() or _keep(path, kept):  # kept under another name, the old file still in place
            break
    # the old write-ahead log and its index go aside too, whether or not the old file is there: SQLite
    # would replay a log left beside the new file over it (a registry deleted while a holder ran)
    for suffix in ("-wal", "-shm"):
        if path.with_name(path.name + suffix).exists():
            _move(path.with_name(path.name + suffix), kept.with_name(kept.name + suffix))
    result.kept = str(kept) if kept.exists() else None
    os.replace(new, path)  # closed: SQLite checkpointed its log into it and removed it; never a moment without one


def _keep(path: Path, kept: Path) -> bool:
    """Keep ``path`` also as ``kept``; False where ``kept`` was taken meanwhile."""
    try:
        os.link(path, kept)
        return True
    except FileExistsError:
        return False
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
    try:  # a file system without hard links: a copy, made only where no file is
        with open(path, "rb") as src, open(kept, "xb") as dst:
            shutil.copyfileobj(src, dst)
    except FileExistsError:
        return False
    shutil.copystat(path, kept)
    return True


def _move(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, never over a file there (a FileExistsError)."""
    try:
        os.link(src, dst)
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        if dst.exists():
            raise FileExistsError(errno.EEXIST, "exists", str(dst)) from None
        src.rename(dst)
        return
    src.unlink()

    return True


def _rebuild(workspace: Workspace, path) -> Repaired:
    result = Repaired(None)
    members: list[tuple[str, str]] = []
    folders = sorted(workspace.runs_dir.iterdir()) if workspace.runs_dir.is_dir() else []
    queued = _queued([f for f in folders if f.is_dir()])
    where = workdir_arg(workspace.root, stored=True)
    for folder in folders:
        if not folder.is_dir():
            continue
        try:
            config = read_run_config(folder)
        except RunDirError as err:
            result.skipped.append((folder.name, str(err)))
            continue
        why = _why_not(folder.name, config)
        if why:
            result.skipped.append((folder.name, why))
            continue
        result.runs.append(rec := _record(folder.name, config, read_status(folder), folder, queued.get(folder.name),
                                            where))
        if rec.sweep is not None:
            members.append((rec.sweep, folder.name))  # the sweep it was launched by
        members += [(exp, folder.name) for exp in read_shared(folder) if SAFE_ID.match(exp)]
        members += [(name, folder.name) for name in read_members(folder) if SAFE_ID.match(name)]  # sweeps that kept it
    with Registry(path, lock=False) as reg:  # the repair holds the lock: its own file
        reg.claim(result.runs, token="repair")  # inserts each run (as SUBMITTING) ...
        reg.update_many((r.run_id, {k: v for k, v in r.as_dict().items() if k != "run_id"})  # ... as it was
                        for r in result.runs)
        reg.add_members(members)
    return result
