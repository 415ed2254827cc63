"""Cancel runs and find their logs."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from functools import partial
from pathlib import Path

from arctl.launch import states
from arctl.launch.executors import LaunchError
from arctl.launch.joblog import last_attempt_lines
from arctl.launch.refresh import (
    CANCELLING,
    INTERRUPTED_BEFORE,
    KILLED,
    LAUNCH_CANCELS,
    debug_process_alive,
    interrupted_note,
    local_job_alive,
    refresh,
    revive_requeued,
    settled,
)
from arctl.launch.registry import Registry, RegistryError, RunRecord, in_workspace
from arctl.launch.signals import add_note, run_to_its_answer, signals_held
from arctl.launch.status_file import (
    CANCEL_FILE,
    mark_cancel_requested,
    mark_cancelled,
    mark_killed,
    read_status,
    withdraw_cancel_request,
)
from arctl.launch.workspace import Workspace, workdir_arg

# scancel's lines for a job id SLURM does not have (ended and purged, another cluster's), and for a
# job that is ending already: the other jobs of the same call were cancelled
GONE = re.compile(r"job id (\S+?): Invalid job id specified")
ENDING = re.compile(r"job id (\S+?): Job/step already completing or completed")
NOT_CANCELLED = "not cancelled"  # how an outcome of :func:`cancel_runs` that changed nothing begins
NOT_ACTIVE = f"{NOT_CANCELLED}: not active"  # a run named that has no job to cancel (completed, failed, cancelled, ...)
FORCE_LEAVES_IT = "--force records it CANCELLED but leaves it running"  # a refusal's hint: --force signals nothing
STOPPED_AT_ONCE = "stopped at once"  # how the outcome of a cancel that killed its job begins
KILL_AFTER_S = 30.0  # a run cancelling for this long whose job is cancelled again is stopped at once (no checkpoint)
GONE_WAIT_S = 5.0  # how long a cancel that killed a local job waits for its process to be gone, to record the run
SILENT_S = 3600.0  # a started run whose folder and logs have not changed for this long, and whose job SLURM
# does not have, is taken for dead (a live job writes its logs, metrics, status or checkpoints meanwhile)


SCANCEL_ANSWER_WAIT_S = 10.0  # how long a cancel interrupted during scancel waits for its answer (then stops it)


def cancel_runs(reg: Registry, workspace: Workspace, records: list[RunRecord],
                force: bool = False, now: bool = False) -> list[tuple[RunRecord, str]]:
    """Cancel the active runs among ``records`` (one scancel for all SLURM jobs). A run whose job has
    not started is CANCELLED at once, in its status.json too (:func:`_mark_cancelled`); a started one is
    asked to stop (TERM: it saves a checkpoint) and stays active until it has, then becomes CANCELLED
    (:func:`arctl.launch.refresh.merge_state`), so no resume can start beside the attempt that is still
    saving. A job that is starting counts as started: a local job whose process was alive and signalled, a SLURM
    job the scheduler runs (the row RUNNING), whose status.json still says "submitted" (a hunt: recorded
    CANCELLED at once, it caught the TERM as it started and trained beside a relaunch); such a job that finds the
    cancel's request as it starts ends at once (:func:`arctl.launch.job._start_attempt`). scancel cancels the
    jobs it has and complains about the others: a job already ending is left to the next refresh (it completes
    or fails); one SLURM does not have ("Invalid job id specified") is CANCELLED when its run never started or has been silent for :data:`SILENT_S` (nothing in its folder or its job's logs changed:
    killed without a word), and left as it is, with why, otherwise (it may run on another cluster;
    ``force``: the user knows it runs nowhere, so it is CANCELLED too). A debug run that trains inside a
    live arctl process is left to that process (Ctrl-C there; ``force``: recorded CANCELLED, which its
    end does not overwrite). An outcome that changed nothing begins with :data:`NOT_CANCELLED`.

    A started job that is cancelled again once it has been cancelling for :data:`KILL_AFTER_S` (its first request's
    time is kept), or with ``now``, is stopped at once, without its checkpoint (from a hunt: a job whose step hung
    never reached the end of the step where it heeds the TERM, and showed "cancelling" for ever; a second cancel
    changed nothing): a local job's process and every process below it are killed (:func:`_kill_local_job`),
    and the run is recorded CANCELLED once they are gone (the refresh's way for a cancelled job that died); a SLURM
    job is sent KILL (``scancel --signal=KILL --full``, after the plain scancel that makes SLURM record it
    cancelled); such an outcome begins with :data:`STOPPED_AT_ONCE`. A debug run is stopped at once by a second
    Ctrl-C in its own process, as before.

    A run its launch is still submitting (SUBMITTING) gets only the request: the launch records it with
    its job and cancels that job (:func:`arctl.launch.launcher._record_submitted`): a SLURM one stays
    PENDING with the request until SLURM says the job ended (it may have started), a local or debug one
    is CANCELLED; a dead launch's job, adopted by a refresh, is cancelled the same way. A run whose launch
    died before submitting it has no job to cancel: it is left as it is, saying so (:data:`NOT_CANCELLED`;
    `arctl status` shows it INTERRUPTED, :func:`arctl.launch.refresh.interrupted_launch`). Each
    write is conditional on the row as read (its claim and job); a row another process changed
    meanwhile (a launch recorded its job) is read again and cancelled as it is now."""
    outcome: list[tuple[RunRecord, str]] = []
    if not reg.readonly:  # an ended run whose job SLURM brought back is active again: cancellable (a hunt)
        records = revive_requeued(reg, records)
    todo = [r for r in records if r.state in states.ACTIVE]
    if todo and reg.readonly:  # before any scancel: a cancel the registry cannot record is not made at all
        raise LaunchError(f"{workspace.registry_path}: this workspace cannot be written here, and a cancel is "
                          "recorded in it; nothing was cancelled — cancel as a user who can write it")
    asked: set[str] = set()  # the SLURM jobs scancel was asked to stop: never asked twice
    for _ in range(3):
        changed = _cancel_once(reg, workspace, todo, force, now, outcome, asked)
        todo = []
        for rec in (reg.get(run_id) for run_id in changed):
            if rec is not None and rec.state in states.ACTIVE:
                todo.append(rec)
            elif rec is not None and rec.executor == "slurm" and rec.job_id in asked:  # ended by this cancel
                outcome.append((rec, f"cancelled (job {rec.job_id}): it ended {rec.state}"))
        if not todo:
            break
    for rec in todo:
        outcome.append((rec, f"{NOT_CANCELLED}: its row kept changing while this cancel ran; try again"))
    return outcome


def _cancel_once(reg: Registry, workspace: Workspace, active: list[RunRecord], force: bool, at_once: bool,
                 outcome: list[tuple[RunRecord, str]], asked: set[str]) -> list[str]:
    """One pass of :func:`cancel_runs` over ``active``, appending to ``outcome``; returns the run ids
    whose rows changed before this pass wrote them. ``asked``: the jobs an earlier pass scancelled (a
    run whose job is among them is cancelled without asking again: SLURM would answer "already
    completing"); this pass adds its own. ``at_once``: stop the started jobs at once (``now``)."""
    changed = []
    now = time.time()
    where = workdir_arg(workspace.root)

    def kill(rec: RunRecord) -> bool:  # a started job to stop at once: asked to, or cancelling long enough
        return rec.state == states.RUNNING and (at_once or (rec.cancel_requested is not None
                                                            and now - rec.cancel_requested >= KILL_AFTER_S))

    submitting = [r for r in active if r.state == states.SUBMITTING]
    for rec in submitting:  # its job id, if any, is an earlier attempt's: nothing to scancel
        view = settled(rec, workspace.run_dir(rec.run_id), now)  # rec itself while its launch lives
        if view is None or view.state not in states.ACTIVE:
            # its launch died before submitting it and gave it no job: no job runs, and a request would be
            # undone with the dead claim by the next launch (from the hunt of interrupted launches: "cancelled"
            # was said, and the row stayed SUBMITTING). A dead launch's job: asked below, cancelled by the
            # refresh that adopts it (_settle_dead_claims)
            # (view None: its launch's claim is stale, or settled() would have given the row back itself)
            said = interrupted_note(rec) if view is None else f"{INTERRUPTED_BEFORE}; it is {view.state} as before"
            outcome.append((rec, f"{NOT_CANCELLED}: nothing to cancel, {said}"))
            continue
        if not reg.update_if(rec.run_id, {"state": states.SUBMITTING, "claim": rec.claim}, {"cancel_requested": now},
                             touch=False):  # the claim's age stays its launch's
            changed.append(rec.run_id)
            continue
        rec.cancel_requested = now
        mark_cancel_requested(workspace.run_dir(rec.run_id), now)  # for the job its launch (or a refresh) stops
        outcome.append((rec, f"cancelled: its launch died after submitting job {view.job_id}, which the next "
                             "`arctl status` cancels" if view is not rec else
                             f"cancelled while its launch submits it ({LAUNCH_CANCELS})"))
    active = [r for r in active if r.state != states.SUBMITTING]

    # the request, in each run's folder before any signal: the job that stops says it was cancelled (not preempted),
    # and `arctl repair` rebuilds it so (:func:`arctl.launch.status_file.mark_cancel_requested`); withdrawn below
    # wherever this cancel signals and cancels nothing (:func:`not_cancelled`)
    # a run an earlier cancel asked keeps that request (its time), whatever this one does (from a review: a second
    # cancel that reached nothing, "already ending", took the first one's request and kill away)
    earlier = {r.run_id: r.cancel_requested for r in active if r.cancel_requested is not None}
    for rec in active:
        mark_cancel_requested(workspace.run_dir(rec.run_id), earlier.get(rec.run_id, now))

    def withdraw(rec: RunRecord) -> None:
        if rec.run_id not in earlier:
            withdraw_cancel_request(workspace.run_dir(rec.run_id))

    def not_cancelled(rec: RunRecord, why: str) -> None:
        withdraw(rec)
        outcome.append((rec, f"{NOT_CANCELLED}: {why}"))

    slurm_ids = [r.job_id for r in active if r.executor == "slurm" and r.job_id and r.job_id not in asked]
    gone: set[str] = set()
    ending: set[str] = set()
    killed_slurm: set[str] = set()  # the SLURM jobs sent KILL
    killed: list[RunRecord] = []  # the local runs whose jobs were killed: recorded once their processes are gone
    if slurm_ids:
        plain: list[subprocess.CompletedProcess] = []  # the plain scancel's answer, as soon as it is read

        def answered(proc: subprocess.CompletedProcess) -> None:
            nonlocal gone, ending
            if proc.returncode != 0:
                errors = [line for line in proc.stderr.splitlines() if line.strip()]
                gone = {m.group(1) for line in errors if (m := GONE.search(line))}
                ending = {m.group(1) for line in errors if (m := ENDING.search(line))}
                if not errors or len(gone) + len(ending) < len(errors):
                    raise LaunchError(f"scancel failed: {' '.join(proc.stderr.split())[:300]}")

        def reached() -> bool:  # whether the plain scancel reached the jobs (SLURM records them cancelled): read
            # from its answer itself, not from a flag set after it (from a review: a Ctrl-C in the microseconds
            # between the answer and the flag withdrew the requests of jobs SLURM had cancelled)
            try:
                answered(plain[0])
            except (IndexError, LaunchError):
                return False
            return True

        try:
            if not shutil.which("scancel"):
                raise LaunchError("scancel is not on PATH: cancel these SLURM jobs where SLURM is available")
            try:
                answered(run_to_its_answer(["scancel", *slurm_ids], SCANCEL_ANSWER_WAIT_S, into=plain))
            except BaseException as stop:  # a stop while scancel ran: its answer, awaited, says whether it got through
                said = getattr(stop, "answered", None)
                if isinstance(said, subprocess.CompletedProcess):
                    plain[:] = [said]
                elif hasattr(stop, "answered"):
                    add_note(stop, f"scancel had not answered {SCANCEL_ANSWER_WAIT_S:g} s after the interrupt and was "
                                   "stopped: it may have cancelled the jobs all the same (`arctl status` says)")
                raise
            # stopped at once: KILL now to every process of the job, the batch script's too (the plain scancel
            # above had SLURM record it cancelled; SLURM sends KILL itself only once its KillWait has passed)
            killing = [r.job_id for r in active if r.executor == "slurm" and r.job_id in slurm_ids and kill(r)
                       and r.job_id not in gone]
            if killing:
                proc = run_to_its_answer(["scancel", "--signal=KILL", "--full", *killing], SCANCEL_ANSWER_WAIT_S)
                errors = [line for line in proc.stderr.splitlines() if line.strip()]
                if proc.returncode != 0 and (not errors or not all(GONE.search(e) or ENDING.search(e) for e in errors)):
                    raise LaunchError(f"scancel --signal=KILL failed: {' '.join(proc.stderr.split())[:300]}")
                gone |= {m.group(1) for line in errors if (m := GONE.search(line))}
                still_ending = {m.group(1) for line in errors if (m := ENDING.search(line))}
                killed_slurm.update(set(killing) - gone - still_ending)
                for rec in active:  # their "stopping" is no checkpoint being saved: a refresh need not wait for it
                    if rec.executor == "slurm" and rec.job_id in killed_slurm:
                        mark_killed(workspace.run_dir(rec.run_id), time.time())
                ending -= killed_slurm  # the plain scancel's "already completing": the KILL reached it all the same
        except BaseException:  # before scancel reached the jobs: no request of this cancel is left to stop their next
            # attempt (from a review: a controller that did not answer left it, and the job's requeue trained nothing);
            # after it (an interrupt during its answer or the KILL), the jobs stop cancelled: their requests stay, for
            # the job and `arctl status` to read (from a hunt: a Ctrl-C as scancel answered withdrew them, and the
            # cancelled runs ended PREEMPTED)
            if not reached():
                for rec in active:
                    if rec.job_id not in asked:
                        withdraw(rec)
            raise
        asked.update(slurm_ids)
    for rec in active:
        status = read_status(workspace.run_dir(rec.run_id))
        started = status.get("state") in ("running", "stopping")
        if rec.executor == "debug" and rec.state == states.RUNNING and not force and debug_process_alive(status):
            not_cancelled(rec, f"it trains inside the arctl process {status['pid']} on "
                               f"{status.get('host') or 'this host'} (debug executor): stop it there with Ctrl-C "
                               f"({FORCE_LEAVES_IT})")
            continue
        if rec.executor == "slurm" and rec.job_id in ending:
            not_cancelled(rec, f"its job {rec.job_id} is already ending "
                               f"(`arctl status{workdir_arg(workspace.root)}` shows how)")
            continue
        if rec.executor == "slurm" and rec.job_id in gone and started and not force and not _silent(workspace, rec):
            not_cancelled(rec, f"SLURM here does not have its job {rec.job_id}, and its folder "
                               f"or logs changed within the last {SILENT_S / 60:.0f} min (another cluster's job? "
                               "cancel it there; a job killed without a word is cancelled once all is that quiet, "
                               "or now with --force)")
            continue
        alive = local_job_alive(rec, status, workspace) if rec.executor == "local" else False
        # a run waiting in another host's local queue is cancelled in the registry, which that queue reads; only a
        # job's live process there cannot be signalled from here (from a review)
        if alive is None and (rec.job_id or "").startswith("queue:"):
            alive = False
        if alive is None and not force:
            not_cancelled(rec, f"its job (process {rec.job_id}) runs on {status.get('host')}, "
                               f"not this host: cancel it there ({FORCE_LEAVES_IT})")
            continue
        starting = False  # its job may have begun though its status.json does not say so yet
        stopped = False  # its job was stopped at once
        cancelling = rec.cancel_requested is not None and rec.state == states.RUNNING  # asked before: since then
        if alive and rec.job_id and rec.job_id.isdigit():
            asked_now = rec.cancel_requested is None
            if asked_now:  # the request recorded before the signal: the refresh of the job it stops reads it
                # (CANCELLED, not PREEMPTED for a stop checkpoint, nor FAILED "died without reporting" for a kill), also
                # where this cancel is cut short once it signalled (from a hunt: a Ctrl-C right after the TERM left the
                # run PREEMPTED, its folder saying cancelled)
                if not reg.update_if(rec.run_id, {"state": rec.state, "job_id": rec.job_id, "claim": None},
                                     {"cancel_requested": now}):
                    changed.append(rec.run_id)  # read again, and cancelled as it is now
                    continue
                rec.cancel_requested = now
            try:
                if kill(rec):
                    stopped = _kill_local_job(int(rec.job_id), partial(local_job_alive, rec, status, workspace))
                    if not stopped:  # its pid is another process's now: the job ended meanwhile
                        raise ProcessLookupError(rec.job_id)
                    mark_killed(workspace.run_dir(rec.run_id), time.time())  # a refresh says "killed" meanwhile
                else:
                    os.kill(int(rec.job_id), signal.SIGTERM)  # the controller forwards it: checkpoint and stop
            except (ProcessLookupError, PermissionError) as err:
                # nothing signalled: no request of this cancel is left in the registry either
                if asked_now and reg.update_if(rec.run_id, {"state": rec.state, "job_id": rec.job_id,
                                                            "cancel_requested": now}, {"cancel_requested": None}):
                    rec.cancel_requested = None
                if isinstance(err, ProcessLookupError):  # it ended meanwhile: the run is what it reports
                    not_cancelled(rec, f"its job (process {rec.job_id}) ended meanwhile "
                                       f"(`arctl status{workdir_arg(workspace.root)}` shows how)")
                else:  # another user's process: this run only, the others go on
                    not_cancelled(rec, f"its job (process {rec.job_id}) is another user's")
                continue
            starting = not started
        elif rec.executor != "slurm" or rec.job_id in gone:
            started = False  # waiting in the local queue, or its job is gone: nothing to save
        else:  # a job SLURM runs (said the refresh before this cancel), scancel'ed as it starts
            starting = not started and rec.state == states.RUNNING and bool(rec.job_id)
            stopped = rec.executor == "slurm" and rec.job_id in killed_slurm
        asked_at = rec.cancel_requested if cancelling else now
        if stopped:
            values = {"cancel_requested": asked_at, "phase": KILLED, "claim": None, "before_claim": None}
            outcome.append((rec, f"{STOPPED_AT_ONCE} (job {rec.job_id} killed): its checkpoint was not saved; "
                                 f"{_resumes(workspace, rec)}"))
        elif started or starting:
            # the run stays active until its job has ended (refresh: CANCELLED): a job signalled alive, or that SLURM
            # runs, whose status.json still said "submitted" may have caught the TERM as it started and trains on to
            # its first checkpoint (from a hunt: recorded CANCELLED at once, it ran beside the relaunch that row
            # allowed); one that finds this cancel's request as it starts ends at once, "cancelled"
            # (arctl.launch.job._start_attempt)
            values = {"cancel_requested": asked_at, "phase": CANCELLING, "claim": None,
                      "before_claim": None}
            # (a first cancel's way out, `arctl cancel` again, is said by the command once for all its runs)
            again = (f" (asked {now - asked_at:.0f} s ago; `arctl cancel {rec.run_id}{where}` again after "
                     f"{KILL_AFTER_S:.0f} s, or with --now, stops it at once, unsaved)" if cancelling else "")
            outcome.append((rec, f"cancelling (job {rec.job_id}): " + ("it saves a checkpoint and stops" if started else
                                                                       "it was starting; CANCELLED once it has "
                                                                       "stopped") + again))
        else:  # (no phase: "waiting for <run>", "queued behind ..." are a waiting run's; from a hunt: --json of the
            # CANCELLED run still said "waiting for ...")
            values = {"state": states.CANCELLED, "cancel_requested": now, "ended_at": now, "claim": None,
                      "before_claim": None, "phase": None}
            outcome.append((rec, f"cancelled (job {rec.job_id})"))
        if not reg.update_if(rec.run_id, {"state": rec.state, "job_id": rec.job_id, "claim": None}, values):
            if stopped and rec.executor == "local" and (row := reg.get(rec.run_id)) is not None and \
                    row.job_id == rec.job_id and row.state not in states.ACTIVE:  # its end recorded meanwhile (the
                killed.append(rec)  # local queue's refresh, once the killed job was gone): stopped all the same
                continue
            outcome.pop()
            if not alive and rec.job_id not in asked:  # nothing signalled: read again, and asked again if still active
                withdraw(rec)
            changed.append(rec.run_id)
            continue
        for k, v in values.items():
            setattr(rec, k, v)
        if values.get("state") == states.CANCELLED:
            _mark_cancelled(reg, workspace, rec)
        if stopped and rec.executor == "local":
            killed.append(rec)
    _record_killed(reg, workspace, killed)
    return changed


def _kill_local_job(pid: int, still_it) -> bool:
    """Kill (SIGKILL) process ``pid``, a local job's submitit controller, and every process below it (its task, the
    training, and theirs): not their process group, which is the local queue's, shared with its other runs. Each
    is stopped (SIGSTOP) before its children are looked up, so that none of them is reaped, nor its pid reused,
    nor a new one started, before all are killed, the deepest first. ``still_it()``: whether ``pid`` is still the
    job's process, asked once it is stopped (:func:`arctl.launch.refresh.local_job_alive`): where it is not (it
    ended, and its pid was taken meanwhile) it is let go on and nothing is killed (False). ProcessLookupError
    where it has ended, PermissionError where it is another user's.

    Ctrl-C, SIGTERM and SIGHUP wait until all are killed (:func:`signals_held`), and a process stopped here is never
    left stopped: where the sequence is cut short all the same (an error), each one not killed is let go on
    (SIGCONT). From a hunt: a Ctrl-C while the processes were looked up left the job's controller stopped for
    good, its training child went on, and its local slot stayed taken."""
    stopped: dict[int, None] = {}  # stopped here and not killed (yet), in the order they were stopped
    with signals_held():
        try:
            os.kill(pid, signal.SIGSTOP)
            stopped[pid] = None
            if not still_it():
                return False
            order, level, seen = [pid], [pid], {pid}
            while level:
                below = _children()
                level = [c for p in level for c in below.get(p, ()) if c not in seen]
                for child in level:
                    seen.add(child)
                    with contextlib.suppress(OSError):
                        os.kill(child, signal.SIGSTOP)
                        stopped[child] = None
                order += level
            for proc in reversed(order):
                with contextlib.suppress(OSError):
                    os.kill(proc, signal.SIGKILL)
                stopped.pop(proc, None)  # its pid may be another process's once it is gone: never signalled again
            return True
        finally:
            for proc in stopped:
                with contextlib.suppress(OSError):
                    os.kill(proc, signal.SIGCONT)



def _children() -> dict[int, list[int]]:
    """The live processes of this machine by parent pid (zombies left out: they cannot be killed), from /proc,
    else from ``ps``."""
    rows: list[tuple[int, int, str]] = []
    if Path("/proc/self").exists():
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
                    rows.append((int(entry.name), int(fields[1]), fields[0]))
    else:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,stat="], capture_output=True, text=True, timeout=30)
            for line in out.stdout.splitlines():
                with contextlib.suppress(ValueError):
                    pid, ppid, stat = line.split(None, 2)
                    rows.append((int(pid), int(ppid), stat))
    found: dict[int, list[int]] = {}
    for pid, ppid, stat in rows:
        if not stat.startswith("Z"):
            found.setdefault(ppid, []).append(pid)
    return found


def _record_killed(reg: Registry, workspace: Workspace, killed: list[RunRecord]) -> None:
    """Once the processes of the local jobs this cancel killed are gone (at most :data:`GONE_WAIT_S`), their runs
    as a refresh records a cancelled job that died before its checkpoint was saved (CANCELLED, and why), into
    ``killed`` too (the records the cancel's outcome holds)."""
    if not killed:
        return
    deadline = time.monotonic() + GONE_WAIT_S
    while time.monotonic() < deadline and any(
            local_job_alive(rec, read_status(workspace.run_dir(rec.run_id)), workspace) for rec in killed):
        time.sleep(0.1)
    rows = [row for row in (reg.get(rec.run_id) for rec in killed) if row is not None]
    by_id = {row.run_id: row for row in refresh(reg, workspace, rows)}
    for rec in killed:
        if (row := by_id.get(rec.run_id)) is not None:
            rec.__dict__.update(row.__dict__)


def _resumes(workspace: Workspace, rec: RunRecord) -> str:
    """What resumes killed run ``rec``, from which step: its backend's newest complete checkpoint
    (:func:`arctl.launch.job.resume_step`)."""
    from arctl.launch.job import found_resume_step  # (the job module imports the backends: only when needed)

    step = found_resume_step(workspace.run_dir(rec.run_id))
    resume = f"`arctl resume {rec.run_id}{workdir_arg(workspace.root)}`"
    if step is None:
        return f"{resume} resumes from its last checkpoint"
    return f"{resume} resumes from step {step}" if step else f"{resume} starts it over (it has no checkpoint yet)"


def _mark_cancelled(reg: Registry, workspace: Workspace, rec: RunRecord) -> None:
    """status.json of a run this cancel ended at once: "cancelled" (and its executor, which a never-started
    run's "submitted" does not name), so that the folder says what the registry does. From a hunt: a queued run
    cancelled before it started kept "submitted", and `arctl repair`, which rebuilds the registry from the
    folders, made it FAILED with SLURM's advice for a local run.

    Written after the registry's conditional write won (the row was still waiting, or its job gone): no job of
    this attempt starts after it (the local queue starts only a row still PENDING under it; scancel stopped a
    SLURM one). A job that was starting right then (the queue, or scancel, stops it) finds the cancel's request
    and writes "cancelled" too (:func:`arctl.launch.job._start_attempt`); the registry, which every other command
    reads, says CANCELLED. Nothing is written where the folder is gone or cannot be written (the registry holds the cancel), nor where a launch took the
    run again meanwhile (its "submitted" is that attempt's; the row is read again just before).
    :func:`arctl.launch.status_file.mark_cancelled` writes it."""
    row = reg.get(rec.run_id)
    if row is None or (row.state, row.claim, row.cancel_requested) != (states.CANCELLED, None, rec.cancel_requested):
        return
    mark_cancelled(workspace.run_dir(rec.run_id), rec.ended_at, rec.executor)


def _silent(workspace: Workspace, rec: RunRecord) -> bool:
    """Has nothing the run's job writes changed for :data:`SILENT_S`: the files of its folder (status,
    metrics, checkpoints, W&B) and its job's logs (in jobs/, linked from the folder)?"""
    newest = 0.0
    for root, _dirs, files in os.walk(workspace.run_dir(rec.run_id)):  # links to jobs/ are not followed
        for name in files:
            if name == CANCEL_FILE and root == str(workspace.run_dir(rec.run_id)):  # this cancel's own request
                continue
            with contextlib.suppress(OSError):
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
    for path in log_files(workspace, rec):
        with contextlib.suppress(OSError):
            newest = max(newest, path.stat().st_mtime)
    return time.time() - newest > SILENT_S


def log_files(workspace: Workspace, record: RunRecord) -> list[Path]:
    """stdout/stderr files of the run's current job (newest attempt first within a job). Where that job has none
    (still queued, its folder gone), the newest earlier job's, both of one job: never shown as the current job's
    (from a hunt: a resubmitted run waiting in the queue showed its previous job's "completed" as its own);
    :func:`is_current_log` says which."""
    run_dir = workspace.run_dir(record.run_id)
    candidates: list[Path] = []
    job = record.job_id or ""
    for base in (workspace.jobs_dir / job, run_dir / "job" / job):  # SLURM (linked from job/) or local
        if job and base.is_dir():
            candidates += sorted(base.glob("*_log.out")) + sorted(base.glob("*_log.err"))
            break
    if not candidates:  # the newest job's files (a debug run's lie in job/ itself), of one job only
        by_job: dict[str, list[Path]] = {}
        for folder in [run_dir / "job", *_job_dirs(run_dir)]:
            for path in folder.glob("*_log.*"):
                if path.suffix in (".out", ".err") and path.is_file():
                    by_job.setdefault(log_job(path), []).append(path)
        if by_job:
            newest = max(by_job.values(), key=lambda paths: max(_mtime(p) for p in paths))
            candidates = sorted(p for p in newest if p.suffix == ".out") + sorted(p for p in newest if p.suffix == ".err")
    return candidates


def log_job(path: Path) -> str:
    """The job whose log file ``path`` is: submitit names them ``<job id>_<task>_log.out`` (``.err``)."""
    return path.name.rsplit("_", 2)[0]


def is_current_log(record: RunRecord, path: Path) -> bool:
    """Is log file ``path`` (:func:`log_files`) the run's current job's, not an earlier attempt's? A debug run's job
    (the registry says "debug") writes submitit's ``DEBUG_<n>`` files into job/ itself: the newest are its own once
    it has started."""
    if record.executor == "debug":
        return path.name.startswith("DEBUG_") and record.state not in (states.SUBMITTING, states.PENDING)
    return log_job(path) == (record.job_id or "")


def earlier_job_dirs(workspace: Workspace, record: RunRecord) -> list[Path]:
    """The run's job folders (``job/<job id>/``, SLURM's linked to jobs/) other than its current job's: its earlier
    attempts' (a resume, a requeue, a --force rerun), the most recent first."""
    run_dir = workspace.run_dir(record.run_id)
    found = [d for d in _job_dirs(run_dir) if d.name != (record.job_id or "")]
    return sorted(found, key=lambda d: max([_mtime(d), *(_mtime(p) for p in d.glob("*_log.*"))]), reverse=True)


def _job_dirs(run_dir: Path) -> list[Path]:
    """The job folders in ``run_dir``/job (a link to one in jobs/ too), not submitit's unexpanded ``%j``."""
    with contextlib.suppress(OSError):
        return [p for p in (run_dir / "job").iterdir() if p.is_dir() and "%" not in p.name]
    return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


ERROR_LINE = re.compile(r"(Traceback|Error|ERROR|Exception|Killed|CANCELLED|DUE TO TIME LIMIT|oom)", re.I)


def error_summary(workspace: Workspace, record: RunRecord) -> str | None:
    """One line saying why the run failed: the job's own report, else the last error line of stderr."""
    status = read_status(workspace.run_dir(record.run_id))
    if status.get("error"):  # a hint in it names the workspace as reached now (a copy of it: the copy)
        return in_workspace(str(status["error"]), workspace.root)
    for path in reversed(log_files(workspace, record)):
        if path.suffix != ".err":
            continue
        # the last attempt's lines only: SLURM appends a requeued task's attempts to one file, and an earlier
        # attempt's requeue ("CANCELLED ... DUE TO JOB REQUEUE") was given as this failure's reason (a hunt)
        for line in reversed(last_attempt_lines(path) or []):
            if ERROR_LINE.search(line) and "submitit WARNING" not in line:
                return line.strip()
    return record.error


def open_existing(workdir, reading: bool = False) -> tuple[Workspace, Registry]:
    """The workspace and its registry, opened read-only where the workspace cannot be written (and,
    for a command that only ``reading``, where its disk is full): such a command still works.
    LaunchError if there is no workspace there yet, or its layout cannot be used
    (:meth:`Workspace.open`)."""
    workspace = Workspace.open(workdir)
    if not workspace.exists():
        if workspace.is_export():  # runs for reports, never a registry (a review: repair was suggested, which refuses)
            raise LaunchError(f"{workspace.root} is an arctl export: reports read it (`arctl report"
                              f"{workdir_arg(workspace.root, stored=True)}`); it has no registry of runs to show, cancel or resume")
        folders = sorted(p.name for p in workspace.runs_dir.iterdir() if p.is_dir()) if workspace.runs_dir.is_dir() else []
        if folders:  # the registry was deleted: the README promises these are pointed out (from an audit)
            raise LaunchError(f"{workspace.registry_path} is missing, and {workspace.runs_dir} holds {len(folders)} run "
                              f"folder(s) (e.g. {folders[0]}) — `arctl repair{workdir_arg(workspace.root, stored=True)}` rebuilds the "
                              "registry from them")
        came = {"ARCTL_HOME": " (from ARCTL_HOME)", "default": " (the default ./arctl-runs)"}.get(workspace.origin, "")
        raise LaunchError(
            f"no arctl workspace at {workspace.root}{came} — launch runs with `arctl run`/`arctl sweep`, "
            "or point --workdir/ARCTL_HOME at an existing workspace"
        )
    writable = os.access(workspace.root, os.W_OK) and os.access(workspace.registry_path, os.W_OK)
    try:
        return workspace, Registry(workspace.registry_path, readonly=not writable)
    except RegistryError as err:
        if reading and err.kind in ("full", "readonly"):
            return workspace, Registry(workspace.registry_path, readonly=True)
        raise


def select_runs(reg: Registry, targets: list[str], prefixes: bool = False) -> list[RunRecord]:
    """Runs named by ``targets``: run ids (or a prefix of one only), sweep or experiment names. An empty
    or blank target is an error, never "everything" (``arctl cancel "$RUN"`` with RUN unset). Each hint's
    command names the workspace (:func:`arctl.launch.workspace.workdir_arg`: from a hunt, a bare `arctl status`
    after ``--workdir ws`` listed ./arctl-runs)."""
    where = workdir_arg(reg.path.parent)
    if not targets:
        raise LaunchError(f"no run, sweep or experiment named — give at least one (`arctl status{where}` lists them)")
    chosen: dict[str, RunRecord] = {}
    for target in targets:
        if not str(target).strip():
            raise LaunchError("an empty run, sweep or experiment name names nothing — give a run id (prefix), "
                              f"sweep or experiment (`arctl status{where}` lists them)")
        _check_text(target, "run, sweep or experiment", where)
        by_name = reg.list(target)
        if by_name:
            chosen.update((r.run_id, r) for r in by_name)
            continue
        # a sweep or experiment without runs names none, never the runs its name is a prefix of (sweep
        # `baselines` is a prefix of baselines-l1's runs: from a review, they were cancelled)
        kind = None if reg.get(target) is not None else _known_spec(target)
        if kind is not None:
            if gap := _missing_rows(reg, None, where):  # not "launch them": they may be there, unregistered
                raise LaunchError(f"{kind} {target!r} has no runs in the registry of {reg.path.parent}; {gap}")
            raise LaunchError(f"{kind} {target!r} has no runs in {reg.path.parent} — launch them with "
                              f"`arctl {'sweep' if kind == 'sweep' else 'run'} {target}{where}`, or "
                              f"`arctl status{where}` lists what is there")
        if prefixes and (found := reg.find(target)):  # what reads only (status): every run the prefix starts
            chosen.update((r.run_id, r) for r in found)
            continue
        one = select_one(reg, target, "run, sweep or experiment")
        chosen[one.run_id] = one
    return list(chosen.values())


def _missing_rows(reg: Registry, target: str | None, where: str) -> str | None:
    """Where the registry has no row for run folders of the workspace (a registry emptied, replaced or cut to zero
    bytes), the line that names `arctl repair`: of the folders ``target`` starts (None: any, where the registry has
    no run at all); else None. From a hunt: after ``: > registry.sqlite``, `arctl logs RUN` said "no run" and
    `arctl status SWEEP` "launch them", retraining what was there."""
    runs = reg.path.parent / "runs"
    if target is None and reg.list():
        return None
    try:
        folders = [p.name for p in runs.glob(f"{glob.escape(target or '')}*") if (p / "config.yaml").is_file()]
    except OSError:
        return None
    if target is not None:
        folders = [f for f in folders if reg.get(f) is None]
    if not folders:
        return None
    some = ", ".join(sorted(folders)[:2]) + (f" and {len(folders) - 2} more" if len(folders) > 2 else "")
    lead = f"no row for {target!r} in the registry, but {runs} holds {some}" if target is not None else \
        f"the registry has no run, but {runs} holds {some}"
    return f"{lead}: the registry was damaged or replaced — `arctl repair{where}` rebuilds it from the run folders"


def _check_text(target: str, what: str, where: str) -> None:
    """LaunchError for a name that is not UTF-8 text (a byte the shell passed as a lone surrogate): no run,
    sweep or experiment has it, and SQLite cannot be asked (from a hunt: a traceback, exit 1). ``where``: the
    workspace's ``--workdir`` for the hint's command (:func:`arctl.launch.workspace.workdir_arg`)."""
    try:
        str(target).encode("utf-8")
    except UnicodeEncodeError:
        raise LaunchError(f"the {what} name {ascii(target)} is not UTF-8 text — no run id has it "
                          f"(`arctl status{where}` lists them)") from None


def _known_spec(name: str) -> str | None:
    """"sweep" or "experiment" where ``name`` is a spec of that kind (sweeps first), else None."""
    from arctl.compose.experiment import NAME_RE
    from arctl.compose.paths import find_spec

    if not NAME_RE.match(str(name)):  # a run id prefix, a path: no spec is looked up
        return None
    for folder, kind in (("sweeps", "sweep"), ("experiments", "experiment")):
        try:
            if find_spec(folder, name) is not None:
                return kind
        except OSError:  # a name too long for the file system
            return None
    return None


def select_one(reg: Registry, target: str, what: str = "run") -> RunRecord:
    """The run whose id is ``target`` or the only one it starts: a prefix of several is an error, never
    all of them (``..._s1`` starts the ids of seeds 10-19 too). ``what``: what the command takes ("run": one
    run only, never a sweep or experiment name)."""
    where = workdir_arg(reg.path.parent)  # a hint's command names the workspace (select_runs)
    if not str(target).strip():
        raise LaunchError(f"an empty run id names no run — `arctl status{where}` lists run ids")
    _check_text(target, what, where)
    found = reg.find(target)
    if not found:
        raise LaunchError(_missing_rows(reg, target, where) or
                          f"no {what} {target!r} in {reg.path.parent} — `arctl status{where}` lists them")
    if len(found) > 1:
        some = ", ".join(r.run_id for r in found[:3])
        # one run only (`arctl logs`): a sweep or experiment name is no way out (from a hunt: it was suggested)
        out = (", or the sweep or experiment name" if what != "run" else
               f" (`arctl status {shlex.quote(str(target))}{where}` lists them)")
        raise LaunchError(f"{target!r} starts {len(found)} run ids ({some}{', ...' if len(found) > 3 else ''}) — "
                          f"give the whole run id, or more of it{out}")
    return found[0]
