"""Bring registry states up to date: the job's status.json + the scheduler (one sacct call for all).

Only active runs (SUBMITTING/PENDING/RUNNING) are looked at, so refreshing a workspace of
thousands of finished runs costs nothing. SLURM runs: ``sacct`` once for every job id at hand,
parsed by submitit's SlurmInfoWatcher; when some are queued or running, one ``squeue`` call for the
controller's own view: why a job is pending, so a job that SLURM will never start (it asks more than any
node has) says so instead of pending forever, and which jobs the controller no longer has (a runaway
accounting record says RUNNING for ever).
Local runs: is the submitit controller (or the local queue) still alive? A job that died without
reporting (kill -9) becomes FAILED and is resumed by the next sweep from its last checkpoint.
"""

from __future__ import annotations

import calendar
import contextlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from arctl.config.files import is_this_host
from arctl.launch import states
from arctl.launch.executors import release_quietly, sbatch_job_name, scancel_failed, scancel_quietly
from arctl.launch.job_ids import array_master
from arctl.launch.joblog import LOG_TAIL_BYTES, last_attempt_lines, stderr_logs
from arctl.launch.progress import last_row_written, run_progress
from arctl.launch.registry import Registry, RegistryError, RunRecord, claim_is_stale, new_claim_token
from arctl.launch.rundir import claimed_archive, restore_previous
from arctl.launch.status_file import (
    JOB_PROCESS_FILE,
    STATUS_FILE,
    killed_at,
    named_job_process,
    note_resume_step,
    process_identity,
    read_status,
    start_ticks,
)
from arctl.launch.workspace import Workspace, queued_job, workdir_arg, workspace_root
from arctl.track.phase import is_queued, is_waiting, read_phase, read_warning, waiting_phase, write_warning

SACCT_TIMEOUT_S = 60
GRACE_S = 30.0  # a just-submitted job may not be in sacct yet
# squeue's answer is awaited this long: it takes ~18 s to fail where the controller is down, which every
# `arctl status` of queued or running jobs would wait (sacct's slurmdbd answers apart from the controller); a
# controller slower than that gives no pending reasons and finds no runaway in that refresh, nothing worse
CONTROLLER_TIMEOUT_S = 10
# A stopped job is active until it reports its stop checkpoint complete ("preempted"): while it says
# "stopping" (up to STOP_TIMEOUT_S since it last wrote), and for TERM_GRACE_S after its scheduler says
# CANCELLED while it still says "running" (the TERM has not reached it yet). `arctl resume` and a sweep
# skip an active run, so a new attempt never starts while the old one still writes its checkpoint.
STOP_TIMEOUT_S = 900.0
TERM_GRACE_S = 30.0
# a SLURM job `arctl cancel` killed (:func:`arctl.launch.status_file.mark_killed`) saves nothing: once SLURM says it
# ended, it is active only this long after the KILL (its processes die at once; SLURM's word may come first)
KILL_GRACE_S = 10.0
# squeue(1)'s pending reasons that no wait resolves, and which setting to change
NEVER_STARTS = {
    "BadConstraints": "no node of its partition has what it asks (cluster.mem_gb, cluster.cpus_per_task, "
                      "cluster.gpus_per_node)",
    "PartitionNodeLimit": "it asks more nodes than its partition allows (cluster.nodes)",
    "PartitionTimeLimit": "its time limit exceeds its partition's (cluster.time_min)",
    "DependencyNeverSatisfied": "the job it waits for ended in a way that never satisfies its dependency",
    "InvalidAccount": "its account is not valid (cluster.account)",
    "InvalidQOS": "its QOS is not valid (cluster.qos)",
}
# squeue(1)'s pending reasons of a per-job limit of the job's QOS or association (sacctmgr's MaxWall, MaxTRES):
# they never clear while the job asks what it asks (from a hunt: shown as plain PENDING for ever), unlike the
# limits other jobs' ends lift (QOSGrp*, AssocGrp*, QOSMaxJobsPerUserLimit), which are a wait like Resources.
# (QOS reason, association reason, what the job asks, settings): a job's GPUs, CPUs and memory are per node
# times cluster.nodes (one task per node)
PER_JOB_LIMITS = (
    ("QOSMaxWallDurationPerJobLimit", "AssocMaxWallDurationPerJobLimit", "time", "cluster.time_min"),
    ("QOSMaxGRESPerJob", "AssocMaxGRESPerJob", "GPUs", "cluster.gpus_per_node, cluster.nodes"),
    ("QOSMaxCpuPerJobLimit", "AssocMaxCpuPerJobLimit", "CPUs", "cluster.cpus_per_task, cluster.nodes"),
    ("QOSMaxNodePerJobLimit", "AssocMaxNodePerJobLimit", "nodes", "cluster.nodes"),
    ("QOSMaxMemoryPerJob", "AssocMaxMemPerJob", "memory", "cluster.mem_gb, cluster.nodes"),
)
NEVER_STARTS.update({reason: f"it asks more {what} than its {whose} allows one job ({settings})"
                     for qos, assoc, what, settings in PER_JOB_LIMITS
                     for reason, whose in ((qos, "QOS"), (assoc, "association"))})
# the per-node memory limit never clears either (from a review; SLURM's job_state_reason.c spells both so)
NEVER_STARTS.update({reason: f"it asks more memory per node than its {whose} allows (cluster.mem_gb)"
                     for reason, whose in (("QOSMaxMemoryPerNode", "QOS"), ("AssocMaxMemPerNode", "association"))})
# squeue(1)'s pending reasons of a held job: it waits until released (from a hunt: shown as plain PENDING for ever)
HELD = {
    "JobHeldUser": "`scontrol release {job}` releases it (a launch that died before its release leaves it held)",
    "JobHoldMaxRequeue": "it was requeued more times than the site allows; `scontrol release {job}` lets it go on",
    "JobHeldAdmin": "an administrator holds it: ask them to release it",
}
STOPPING = "stopping: saving its checkpoint"
CANCELLING = "cancelling: saving its checkpoint"
KILLED = "cancelling: killed, its checkpoint not saved"  # a job `arctl cancel --now` killed, until SLURM says it ended
LAUNCH_CANCELS = "its launch cancels the job it submits"  # a run cancelled while its launch submits it
CANCEL_ASKED = f"cancel requested: {LAUNCH_CANCELS}"  # such a run in `arctl status`


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    """Raw SLURM state per job id (``"123_4"`` or ``"123"``), from ONE sacct call (squeue fallback)."""
    return scheduler_states(job_ids)[0]


def _masters(job_ids: list[str]) -> list[str]:
    """The jobs (arrays) that ``job_ids`` (``"123_4"`` or ``"123"``) belong to, for one ``-j`` list."""
    return sorted({array_master(j) for j in job_ids})


def scheduler_states(job_ids: list[str]) -> tuple[dict[str, str], str | None]:
    """(raw state per job id, source) where source is "sacct", "squeue" or None (no answer).

    One ``sacct`` call for all the jobs' array ids; without accounting, one ``squeue`` call
    (which only knows queued and running jobs).
    """
    if not job_ids:
        return {}, None
    from submitit.slurm.slurm import SlurmInfoWatcher

    masters = _masters(job_ids)
    info: dict = {}
    source = None
    if shutil.which("sacct"):
        cmd = ["sacct", "-X", "-P", "-o", "JobID,State", "-j", ",".join(masters)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=SACCT_TIMEOUT_S, check=True).stdout
            info, source = SlurmInfoWatcher().read_info(out), "sacct"
        except (subprocess.SubprocessError, OSError):
            info = {}
    if source is None:  # no accounting: only queued/running jobs are known
        info, source = _squeue_info(masters)
    return {j: info[j]["State"] for j in job_ids if j in info and info[j].get("State")}, source


SQUEUE_FIELDS = {"JobID": "%i", "State": "%T", "User": "%u", "JobName": "%j", "Reason": "%r"}


def _squeue_info(masters: list[str], owners: bool = False, reasons: bool = False, every_state: bool = False,
                 timeout: float = SACCT_TIMEOUT_S) -> tuple[dict, str | None]:
    """squeue's (slurmctld's live) view of jobs ``masters``, one line per array task (``-r``: a pending array's
    folded id list can be cut short), read as submitit reads sacct (``owners``: with each job's user and name;
    ``reasons``: why each is pending; ``every_state``: ended jobs the controller still holds too), and "squeue";
    ({}, None) where squeue cannot answer."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    if not masters or not shutil.which("squeue"):
        return {}, None
    names = ["JobID", "State", *(["Reason"] if reasons else []), *(["User", "JobName"] if owners else [])]
    fields, header = "|".join(SQUEUE_FIELDS[n] for n in names), "|".join(names)
    cmd = ["squeue", "-h", "-r", *(["-t", "all"] if every_state else []), "-o", fields, "-j", ",".join(masters)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode == 0 or "Invalid job id" in proc.stderr:
            return SlurmInfoWatcher().read_info(f"{header}\n" + proc.stdout), "squeue"
    except (subprocess.SubprocessError, OSError):
        pass
    return {}, None


BACK_AGAIN = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RUNNING", "SUSPENDED")
REVIVE_WINDOW_S = 7 * 24 * 3600.0  # an ended SLURM run is asked whether SLURM brought its job back this long


def _user() -> str | None:
    """This process's user name, as squeue prints a job's owner."""
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


def revive_requeued(registry: Registry, records: list[RunRecord]) -> list[RunRecord]:
    """``records`` with the ended SLURM runs whose job slurmctld has queued or running again made active again
    (:func:`_revived`), as the registry now has them. Asked by a launch and a cancel, which act on the run, not by
    every `arctl status`: squeue takes ~20 s to fail where the controller cannot be reached."""
    if registry.readonly or not (revived := _revived(records, time.time())):
        return records
    registry.update_many_if(revived)  # (a row a launch took meanwhile is left to it)
    ids = {u[0] for u in revived}
    return [(registry.get(r.run_id) or r) if r.run_id in ids else r for r in records]


def _revived(records: list[RunRecord], now: float) -> list[tuple[str, dict, dict]]:
    """Updates for the ended SLURM runs among ``records`` whose job slurmctld has queued or running again: a
    finished task requeued (`scontrol requeue` takes finished jobs), a node failure's requeue that accounting
    first reported NODE_FAIL. Ended, such a run could not be cancelled and a launch submitted a second job for
    it, two jobs training one run (from a hunt). squeue (the controller's live view, one call), not sacct, whose
    runaway records say RUNNING for jobs the controller no longer has; runs that ended within
    :data:`REVIVE_WINDOW_S` only."""
    ended = [r for r in records if r.state in (states.FAILED, states.PREEMPTED, states.CANCELLED)
             and r.executor == "slurm" and r.job_id and not r.cancel_requested
             and (r.ended_at or r.updated_at or 0) > now - REVIVE_WINDOW_S]
    if not ended:
        return []
    info, _ = _squeue_info(_masters([str(r.job_id) for r in ended]), owners=True)
    me = _user()
    out = []
    for r in ended:
        job = info.get(str(r.job_id)) or {}
        raw = str(job.get("State") or "").split(" ")[0].rstrip("+").upper()
        # queued or running again, not ending (COMPLETING: an ended job's epilog), and arctl's job, not one
        # that took its id (a job id reused after slurmctld lost its state: from a review)
        ours = job.get("User") == me and job.get("JobName") in {sbatch_job_name(n) for n in (r.sweep, r.experiment) if n}
        if raw in BACK_AGAIN and ours and (state := states.slurm_state(raw)) in states.SUBMITTED:
            out.append((r.run_id, {k: getattr(r, k) for k in ATTEMPT_KEYS},
                        {"state": state, "error": None, "ended_at": None}))
    return out


def controller_jobs(job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """slurmctld's own view of ``job_ids`` (``"123_4"`` or ``"123"``): {job id: (state, reason)} from ONE
    ``squeue`` call, array tasks one by one (``-r``), ended jobs the controller still holds too (``-t all``: an
    end that accounting has not recorded yet); a job id it does not list, it no longer has. None where squeue
    cannot answer (not installed, the controller down, a timeout)."""
    info, source = _squeue_info(_masters(job_ids), owners=True, reasons=True, every_state=True,
                                timeout=CONTROLLER_TIMEOUT_S)
    if source is None:
        return None
    me = _user()  # another user's job under a reused id is not ours: ours is lost (from a review)
    return {j: (str(v.get("State") or ""), str(v.get("Reason") or "")) for j, v in info.items()
            if not (me and v.get("User") and v["User"] != me)}


def pending_reasons(view: dict[str, tuple[str, str]] | None) -> dict[str, str]:
    """SLURM's reason per pending job of a :func:`controller_jobs` view."""
    return {j: reason for j, (state, reason) in (view or {}).items() if states.slurm_state(state) == states.PENDING}


def asked_again(view: dict[str, tuple[str, str]] | None, queued_or_running: list[str]) -> dict[str, str]:
    """sacct's state, asked again, of the jobs of ``queued_or_running`` (so said sacct) that slurmctld does not have
    (not in its ``view``): one that ended between the two calls says how; one still queued or running is a
    runaway record (the controller lost it, e.g. its state after a crash), which showed RUNNING for ever, kept
    ``logs --follow`` from ending and a sweep from relaunching the run (from a hunt). {} without squeue's answer."""
    gone = [j for j in queued_or_running if view is not None and j not in view]
    if not gone:
        return {}
    again, source = scheduler_states(gone)
    return again if source == "sacct" else {}


def runaway_error(job_id: str, raw: str, run_id: str, root: Path | None = None) -> str:
    """What a run whose job is a runaway record says (``root``: its workspace, named in the command)."""
    where = workdir_arg(root) if root is not None else ""
    return (f"SLURM's controller no longer has job {job_id} (squeue does not list it), though its accounting still "
            f"says {raw.split(' ')[0]}: a runaway record (the controller lost the job, e.g. its state after a crash; "
            f"`sacctmgr show runawayjobs` mends the record); `arctl resume {run_id}{where}` restarts it from its last "
            "checkpoint")


OUT_OF_MEMORY = "OUT_OF_MEMORY"


NODE_GONE = ("NODE_FAIL", "BOOT_FAIL")  # SLURM's words for a job whose node is gone: none of its processes is left


def slurm_word(raw: str | None) -> str:
    """The state word of a sacct/squeue state (``"CANCELLED by 0"``: ``CANCELLED``; ``"OUT_OF_MEMORY+"``: without the
    ``+``)."""
    return (raw or "").strip().split(" ")[0].rstrip("+").upper()


def slurm_end(raw: str | None, rec: RunRecord, status: dict, run_dir: Path, root: Path) -> str | None:
    """What SLURM's word for how the job of ``rec`` ended (``raw``, sacct's state) says where it says more than
    :data:`arctl.launch.states.SLURM_STATES` keeps (FAILED, PREEMPTED), else None: the error of a job that wrote none
    (killed: a SIGKILL writes nothing). From the hunt of limits: a job SLURM killed for its memory read "job failed or
    was killed", and `arctl resume`, which keeps the frozen config's memory, would run out of it again; the same
    run id relaunched with a larger ``cluster.mem_gb`` (launch-only: the same run) resumes it with more."""
    word, job = slurm_word(raw), rec.job_id
    resume = f"`arctl resume {rec.run_id}{workdir_arg(root, stored=True)}`"
    if word == OUT_OF_MEMORY:
        mem = _cluster_setting(run_dir, "mem_gb")
        at = f"its cluster.mem_gb={mem:g} GB" if mem else "its memory (cluster.mem_gb)"
        more = _launched_again(rec, root=root, extra="cluster.mem_gb=<GB>", stored=True)
        # (a sweep's command resumes its other failed, preempted or cancelled runs of that seed too: from a review)
        others = (f", and, with that memory, the sweep's other failed, preempted or cancelled runs of seed {rec.seed}"
                  if rec.sweep else "")
        return (f"out of memory: SLURM killed job {job} at {at} (OUT_OF_MEMORY); relaunch it with more: {more} "
                f"resumes it from {LAST_CHECKPOINT}{others} ({resume} keeps "
                f"{f'{mem:g} GB' if mem else 'its memory'})")
    if word == "NODE_FAIL":
        return f"the node running job {job} failed (NODE_FAIL), not the run; {resume} resumes it from {LAST_CHECKPOINT}"
    if word == "BOOT_FAIL":
        return f"the node given job {job} failed to boot (BOOT_FAIL), not the run; {resume} submits it again"
    if word == "DEADLINE":
        return (f"SLURM ended job {job} at its deadline (DEADLINE: sbatch --deadline) before it completed; {resume} "
                f"resumes it from {LAST_CHECKPOINT}")
    if word == "TIMEOUT" and status.get("state") in ("running", "stopping"):  # (a stop checkpoint saved: "preempted")
        time_min = _cluster_setting(run_dir, "time_min")
        warning = _cluster_setting(run_dir, "preempt_warning_s")
        limit = f" (cluster.time_min={time_min:g})" if time_min else ""
        given = f"cluster.preempt_warning_s={warning:g}" if warning else "cluster.preempt_warning_s"
        # (what to change: from a review; the warning is launch-only, below the time limit: the same run resumed)
        longer = _launched_again(rec, root=root, extra="cluster.preempt_warning_s=<seconds>", stored=True)
        return (f"SLURM's time limit{limit} ended job {job} before it saved its stop checkpoint (TIMEOUT): saving it "
                f"took longer than SLURM's warning before the limit ({given}); {longer} gives it longer and resumes "
                f"it from {LAST_CHECKPOINT} ({resume} keeps {f'{warning:g} s' if warning else 'its warning'})")
    return None


LAST_CHECKPOINT = "its last checkpoint, where it has one"  # (a job killed before its first one starts over)


def _cluster_setting(run_dir: Path, key: str) -> float | None:
    """``cluster.<key>`` of the run's frozen config (a number), or None where it cannot be read."""
    from arctl.launch.rundir import RunDirError, read_run_config

    try:
        value = (read_run_config(run_dir).get("cluster") or {}).get(key)
    except (RunDirError, OSError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def never_starts(reason: str | None, job_id: str, run_id: str, root: Path | None = None) -> str | None:
    """The warning for a job SLURM will not start (``reason`` in :data:`NEVER_STARTS`) or holds (:data:`HELD`),
    else None (``root``: the run's workspace, named in the command)."""
    if (held := HELD.get(reason or "")) is not None:
        return f"SLURM holds job {job_id} ({reason}): it will not start until released; {held.format(job=job_id)}"
    why = NEVER_STARTS.get(reason or "")
    if why is None:
        return None
    where = workdir_arg(root) if root is not None else ""
    return (f"SLURM will not start job {job_id} ({reason}): {why}; `arctl cancel {run_id}{where}`, change it and run "
            "again")


def pid_alive(pid: int, needle: str | None = None, argument: Path | None = None, under: bool = False,
              fresh: bool = False, owner: int | None = None) -> bool:
    """Is ``pid`` alive (and, if given, does its command line contain ``needle`` and have ``argument`` as one of
    its arguments, or with ``under`` an argument that is a path inside ``argument``)? ``argument`` tells the
    process of this workspace from the same process of a copy of it, whose registry has the same pids (from a
    hunt: `arctl cancel` in a `cp -r` copy stopped the original's job). An argument spelled otherwise that is the
    same folder (:func:`_same_place`: a bind mount, a symlinked or relative path) is ``argument``; one that cannot
    be looked at from here (another mount namespace's path) is taken for it where ``fresh`` (the run's
    status.json says it trains, written lately), else not.

    Another user's process (``os.kill`` says EPERM: it exists) whose /proc folder this process cannot see (/proc
    mounted ``hidepid=2`` or ``invisible``, the usual hardening of a shared machine) is not gone but hidden: where
    its command line cannot be read, it cannot be told from the process meant, and is taken for it. From a hunt: in
    a group workspace, a member's `arctl status` recorded another member's live local job FAILED ("died without
    reporting") for good, and `arctl cancel` said "not active" and left it training. Where the process meant is
    this user's (``owner``: the user who started it, where known), EPERM says it is gone: this user may signal its
    own processes, so the pid is another user's process now (from a review: a dead job's pid reused by root's)."""
    try:
        os.kill(pid, 0)
        theirs = False
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: its command line still says whether it is the one meant
        if owner is not None and owner in (os.getuid(), os.geteuid()):  # the one meant is this user's: not it
            return False
        theirs = True
    if needle or argument is not None:
        try:
            found = _command_line(pid, theirs)
        except ProcessLookupError:
            return False
        if found is None:  # cannot tell
            return True
        cmdline, sep = found
        if cmdline.strip(sep + " ") and (  # empty right after spawn: still exec'ing
                (needle and needle not in cmdline) or (argument is not None and not _has_argument(cmdline, sep,
                                                                                                str(argument), under)
                                                       and not _same_or_fresh(pid, cmdline, sep, argument, under,
                                                                              fresh))):
            return False
        try:  # a zombie (exited, not yet reaped by its parent) is dead for us
            return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
        except (OSError, IndexError):
            return True
    return True


def _has_argument(cmdline: str, sep: str, path: str, under: bool) -> bool:
    """Is ``path`` one of the arguments of ``cmdline`` (separated by ``sep``), or with ``under`` is one of them a
    path inside it? Whole arguments only: /a/ws is not /a/ws_copy, nor is /a/ws/runs/X inside /a/ws/runs/X.bak."""
    words = f"{sep}{cmdline.rstrip(sep)}{sep}"
    path = path.rstrip("/") or "/"
    return f"{sep}{path}{sep}" in words or (under and f"{sep}{path.rstrip('/')}/" in words)


def _same_or_fresh(pid: int, cmdline: str, sep: str, argument: Path, under: bool, fresh: bool) -> bool:
    """:func:`_same_place`'s answer, and where it cannot say, ``fresh``."""
    same = _same_place(pid, cmdline, sep, argument, under)
    return fresh if same is None else same


def _same_place(pid: int, cmdline: str, sep: str, argument: Path, under: bool) -> bool | None:
    """Is one of the path arguments of process ``pid``'s ``cmdline`` the folder ``argument`` (with ``under``: the
    folder itself or a path inside it), compared as files (device and inode), not as strings? From a hunt: `arctl
    status --workdir` through a bind mount of the workspace (an Apptainer --bind, an automounter's second name, a
    collaborator's read-only mount) found the job's command line naming the workspace by its other path, took
    the live job for another workspace's and recorded its run FAILED for good. Paths are looked up as the
    process sees them (/proc/PID/root, and /proc/PID/cwd for relative ones: another mount namespace's, another
    working folder), where this process may look there (its own user's processes); a `cp -r` copy's files are
    other inodes, so a copy's job is still not this workspace's. None where it cannot say: ``argument`` cannot
    be looked at, or, the process's view being closed to us (another user's), one of its path arguments cannot
    be found here (a path inside its container?)."""
    try:
        target = os.stat(argument)
    except OSError:
        return None
    try:
        os.stat(f"/proc/{pid}/root")
        view: Path | None = Path(f"/proc/{pid}")
    except OSError:
        view = None
    unsure = False
    for word in cmdline.split(sep):
        if "/" not in word or word.startswith("-"):
            continue
        path = Path(word)
        found = False
        for place in [path, *path.parents] if under else [path]:
            if str(place) in (".", "/"):  # the process's own folders: never this workspace's run folder
                break
            st = _stat_as_seen(view, place)
            if st is None:
                continue
            found = True
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                return True
        unsure = unsure or (not found and view is None)
    return None if unsure else False


def _stat_as_seen(view: Path | None, path: Path) -> os.stat_result | None:
    """``path`` (an argument of a process) stat'ed as that process sees it: in ``view`` (its /proc folder: through
    its root, or its working folder for a relative path), else here as it is (a relative path: not at all);
    None where it is not there."""
    if view is not None:
        candidate = view / "root" / str(path).lstrip("/") if path.is_absolute() else view / "cwd" / path
    elif path.is_absolute():
        candidate = path
    else:
        return None
    for place in (candidate, path) if view is not None and path.is_absolute() else (candidate,):
        try:  # (here too: an absolute link inside the path is followed in this process's root)
            return os.stat(place)
        except (OSError, ValueError):
            continue
    return None


def _command_line(pid: int, theirs: bool = False) -> tuple[str, str] | None:
    """Process ``pid``'s command line and what separates its arguments there: /proc's (NUL), else ``ps``'s (a
    space; macOS has no /proc: from a review, every pid was alive there); None where neither can say, as for
    another user's process (``theirs``: ``os.kill`` said EPERM, it exists) that neither shows (/proc's
    ``hidepid=2``; BSD's ``see_other_uids=0``): ProcessLookupError only where a process not hidden so is gone. Decoded as
    this process decodes paths (``os.fsdecode``), so that an argument compares with a workspace path as the file
    system names it: from a hunt, UTF-8 with replacement under a latin-1 locale (or for a path with a byte that
    is not UTF-8) took a live job of a non-ASCII workspace for another workspace's, and its run was marked
    FAILED for good."""
    try:
        return os.fsdecode(Path(f"/proc/{pid}/cmdline").read_bytes()), "\0"
    except FileNotFoundError:
        if Path("/proc/self").exists():  # /proc is there and the process is not: gone meanwhile, or hidden
            if theirs:
                return None
            raise ProcessLookupError(pid) from None
    except OSError:
        return None
    try:  # -ww: never cut to a terminal's width (the paths a job's process is told by come last)
        out = subprocess.run(["ps", "-ww", "-o", "command=", "-p", str(pid)], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    text = os.fsdecode(out.stdout).strip()
    if out.returncode == 1 and not text:  # ps lists no such process: it ended meanwhile (or is hidden)
        if theirs:
            return None
        raise ProcessLookupError(pid)
    return (text, " ") if out.returncode == 0 else None


def _process_start(pid: int) -> float | None:
    """When process ``pid`` of this machine started (epoch seconds), from /proc, else, where there is no /proc
    (macOS), from ``ps`` (:func:`_ps_start`); None where neither can say."""
    try:
        ticks = start_ticks(pid)
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        pass
    return None if Path("/proc/self").exists() else _ps_start(pid)


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _ps_start(pid: int) -> float | None:
    """When process ``pid`` started, as ``ps`` says (``lstart``: "Mon Dec  7 10:11:12 2026", asked in UTC and the C
    locale; else ``etimes``, the seconds since, where ps has it), the earliest second it may have been (ps says
    whole seconds); None where ps cannot say. From a hunt: without /proc (macOS) every pid counted as not reused,
    and a debug run whose arctl process died stayed RUNNING while an unrelated process held its pid. In UTC, not
    local time (from the hunt of clocks): in the hour a daylight-saving change repeats, local time named two
    instants and a process's start read 1 h late, so its live run was taken for dead."""
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC0"}
    for field in ("lstart", "etimes"):
        try:
            out = subprocess.run(["ps", "-o", f"{field}=", "-p", str(pid)], capture_output=True, text=True,
                                 env=env, timeout=10)
        except (OSError, subprocess.SubprocessError, UnicodeError):
            return None
        words = out.stdout.split()
        try:
            if out.returncode == 0 and field == "lstart" and len(words) == 5:
                hour, minute, second = (int(x) for x in words[3].split(":"))
                return float(calendar.timegm((int(words[4]), _MONTHS.index(words[1]) + 1, int(words[2]), hour,
                                              minute, second, 0, 0, 0)))
            if out.returncode == 0 and field == "etimes" and len(words) == 1:
                return time.time() - int(words[0]) - 1.0
        except (ValueError, OverflowError):
            continue
    return None


def debug_process_alive(status: dict, run_dir: Path | None = None) -> bool:
    """Is the arctl process that trains a debug run (status.json's ``pid`` on its ``host``) alive? One on
    another host cannot be asked here: taken for alive. A pid that a process started after the run's
    ``started_at`` holds is reused: dead (where there is no /proc, as on macOS, ``ps`` says when it started; from a
    hunt: a dead debug run's pid, taken by an unrelated process, kept it RUNNING there, and `arctl cancel` named that
    process as the one to Ctrl-C). Where status.json names the process as no other (``pid_start``:
    :func:`arctl.launch.status_file.process_identity`) and /proc says the pid's, they must be equal, and no time is
    compared (a clock step moves /proc's start times; from the hunt of clocks). Its command line is not asked: a
    debug launch runs in its caller's process, which may be a notebook's or a script's, not an ``arctl`` command.
    Where status.json's ``uid`` (the launching user, written beside ``pid``) or, for a run launched before it was
    written, the run's folder (``run_dir``: :func:`_debug_started_by`) says this user started it, a pid another user's
    process holds is not its process, hidden or not (:func:`pid_alive`'s ``owner``; from a review: under hidepid=2
    this user's dead debug run whose pid another user's process took stayed RUNNING for ever)."""
    pid = status.get("pid")
    if not isinstance(pid, int):
        return False
    if _another_host(status):
        return True
    owner = status.get("uid") if isinstance(status.get("uid"), int) else (
        _debug_started_by(run_dir) if run_dir is not None else None)
    return pid_alive(pid, owner=owner) and _not_reused(pid, status.get("started_at"), 1.0, status.get("pid_start"))


def _debug_started_by(run_dir: Path) -> int | None:
    """The user whose process trains debug run ``run_dir`` (so the user it runs as): the owner of its status.json,
    which that process writes itself (its pid when it starts, then at each step; written by an atomic replace, the
    file is its last writer's). While the run is active, no other process writes it (`arctl cancel` and a refresh
    write it once it has ended), so the owner is the launch's; status.json records no uid of its own. None where it
    cannot be read."""
    try:
        return (Path(run_dir) / STATUS_FILE).stat().st_uid
    except OSError:
        return None


def _another_host(status: dict) -> bool:
    """Did the process that wrote status.json run on another host (a workspace on a shared disk)? Its ``host``
    is another host's name, and no ``host_id`` says it is this machine all the same (a Mac renamed by the network
    it joined: :func:`arctl.config.files.is_this_host`)."""
    return status.get("host") is not None and not is_this_host(status.get("host"), status.get("host_id"))


def _not_reused(pid: int, since: float | None, slack_s: float, named: str | None = None) -> bool:
    """Is process ``pid`` the process meant? Where that was named as no other (``named``:
    :func:`arctl.launch.status_file.process_identity`) and /proc names ``pid``'s, they must be equal, and no time is
    compared (a clock step moves /proc's start times; from the hunt of clocks). Else: did it start by ``since``
    (+ ``slack_s``), when the process meant started? One that started later holds a reused pid. True where neither
    /proc nor ``ps`` (:func:`_process_start`), or ``since``, can say: another user's process that /proc hides from
    this one (``hidepid=2``) is not known to be another; but one named in an earlier boot of this machine is gone."""
    if named is not None and (now := process_identity(pid)) is not None:
        return now == named
    if named is not None and (mine := process_identity(os.getpid())) is not None:
        if named.rsplit(":", 1)[0] != mine.rsplit(":", 1)[0]:  # (the boot it ran in: <boot_id>:<ticks>)
            return False
    began = _process_start(pid)
    return began is None or not isinstance(since, (int, float)) or began <= since + slack_s


def _last_sign_of_life(run_dir: Path, status: dict, now: float) -> float:
    """When an attempt that ended without saying when (killed: a node lost, SLURM's KILL) ended, as near as can be
    told: where it had started, its last sign of life (status.json's last write, its last logged step), else (it never
    started) ``now``, when a refresh first saw it ended; never later than ``now``. From the hunt of clocks: ``now``
    for a started one made its elapsed time the time until someone next ran `arctl status` (a job killed on Saturday,
    seen on Monday: 2 days), and with the job's node an hour behind this host's clock, an hour too long."""
    if status.get("state") not in ("running", "stopping") or not isinstance(status.get("started_at"), (int, float)):
        return now
    signs = [t for t in (status.get("updated_at"), last_row_written(run_dir, status.get("metric_files")))
             if isinstance(t, (int, float))]
    return min(now, max(signs, default=now))


REUSED_AFTER_S = 60.0  # a local job's process that started this long after its submission holds a reused pid


def _job_process(rec: RunRecord, workspace: Workspace) -> tuple[int, str, Path, bool] | None:
    """(pid, what its command line contains, the path among its arguments, whether that argument lies inside the
    path) of the process of local run ``rec``'s job in ``workspace``, or None where its job id names none."""
    job = rec.job_id or ""
    if job.startswith("queue:") and job[6:].isdigit():  # the launcher's python -m arctl.launch.local_queue <root> ...
        return int(job[6:]), "arctl.launch.local_queue", workspace.root, False
    if job.isdigit():  # python -m submitit.local._local <run folder>/job/%j (made absolute by submitit)
        return int(job), "submitit", workspace.run_dir(rec.run_id).absolute(), True
    return None


def _job_since(rec: RunRecord) -> float | None:
    """When the process of local run ``rec``'s job started: at its submission, or, for one that waited in the local
    queue, when the queue started it (started_at: from a review, a run that waited was taken for dead while it
    trained)."""
    return max((t for t in (rec.submitted_at, rec.started_at) if isinstance(t, (int, float))), default=None)


def local_job_alive(rec: RunRecord, status: dict, workspace: Workspace) -> bool | None:
    """Is the process of local run ``rec``'s job (its submitit controller, or the local queue it waits in) alive,
    and ``workspace``'s? None where it runs on another host (status.json's ``host``: a workspace on a shared disk),
    which cannot be asked here. A pid whose process started after the job's submission is reused: False (from a
    review: taken for the job, it kept a dead run RUNNING, and `arctl cancel` signalled it). So is another
    workspace's process: the local queue is told its workspace's folder, the controller its run's job folder
    (from a hunt: in a `cp -r` copy of a live workspace, whose registry has the same pids, the original's jobs
    were the copy's, RUNNING for ever, and `arctl cancel` there stopped them)."""
    if _another_host(status):
        return None
    if (process := _job_process(rec, workspace)) is None:
        return False
    pid, needle, path, under = process
    run_dir = workspace.run_dir(rec.run_id)
    # (named as no other where its job id was recorded: :func:`arctl.launch.status_file.name_job_process`)
    return (pid_alive(pid, needle, path, under, fresh=_trains_lately(status, time.time()),
                      owner=_started_by(run_dir, rec.job_id))
            and _not_reused(pid, _job_since(rec), REUSED_AFTER_S, named_job_process(run_dir, rec.job_id)))


def _started_by(run_dir: Path, job_id: str | None) -> int | None:
    """The user who started local job ``job_id`` of the run in ``run_dir`` (so the user its process runs as): the
    owner of the file that names its process, which whoever started it wrote
    (:func:`arctl.launch.status_file.name_job_process`); None where none names it."""
    if named_job_process(run_dir, job_id) is None:
        return None
    try:
        return (Path(run_dir) / JOB_PROCESS_FILE).stat().st_uid
    except OSError:
        return None


FRESH_S = 300.0  # a status.json that says "running" and was written this recently: its job trains now


def _trains_lately(status: dict, now: float) -> bool:
    """Does the run's status.json say its job trains (or saves its stop checkpoint), written within
    :data:`FRESH_S`? What decides for a live job whose folder argument cannot be looked at from here
    (:func:`_same_place`): a live job writes it at its steps, a copy's stops changing."""
    updated = status.get("updated_at")
    return (status.get("state") in ("running", "stopping") and isinstance(updated, (int, float))
            and now - updated < FRESH_S)


def _job_of_another_workspace(rec: RunRecord, workspace: Workspace) -> str | None:
    """Why local run ``rec`` of ``workspace``, whose job's process is not alive here, is not running: its job's
    pid is held by the same kind of process of another workspace (this one a copy of that one, made while the
    job ran?); else None."""
    if (process := _job_process(rec, workspace)) is None:
        return None
    pid, needle, _path, _under = process
    run_dir = workspace.run_dir(rec.run_id)
    if not (pid_alive(pid, needle, owner=_started_by(run_dir, rec.job_id))
            and _not_reused(pid, _job_since(rec), REUSED_AFTER_S, named_job_process(run_dir, rec.job_id))):
        return None
    what = "the local queue it waited in" if needle == "arctl.launch.local_queue" else "its job"
    return (f"{what} (process {pid}) is another workspace's (is this one a copy of it?): nothing runs it here; "
            f"`arctl resume {rec.run_id}{workdir_arg(workspace.root)}` launches it here")


def _from_status(status: dict) -> dict:
    values = {}
    for key in ("wandb_id", "started_at", "ended_at"):  # the step and metric: run_progress
        if status.get(key) is not None:
            values[key] = status[key]
    return values


def _still_stopping(status: dict, scheduler: str | None, now: float, killed: float | None = None) -> bool:
    """Has the job been asked to stop and not yet said its checkpoint is complete? A job killed at ``killed``
    (`arctl cancel --now`) saves none: only :data:`KILL_GRACE_S` after its KILL."""
    if killed is not None:
        return now - killed < KILL_GRACE_S
    age = now - (status.get("updated_at") or 0.0)
    if status.get("state") == "stopping":
        return age < STOP_TIMEOUT_S
    return status.get("state") == "running" and scheduler == states.CANCELLED and age < TERM_GRACE_S


def _still_starting(record: RunRecord, status: dict, scheduler: str | None, now: float) -> bool:
    """Was the job, which SLURM ran (the row RUNNING), scancel'ed by `arctl cancel` as it started (its status.json
    still "submitted") less than :data:`TERM_GRACE_S` ago? SLURM says CANCELLED at once, while the job may still be
    starting (submitit ignores a TERM until the job's own handler is there); it ends "cancelled" when it finds the
    cancel's request (:func:`arctl.launch.job._start_attempt`), or is killed by then. Taken for ended, the run could
    be relaunched meanwhile, and the relaunch's "submitted" takes the request away: the old job would train beside
    it (from a hunt)."""
    asked = record.cancel_requested
    return (record.state == states.RUNNING and status.get("state") == "submitted" and scheduler == states.CANCELLED
            and isinstance(asked, (int, float)) and now - asked < TERM_GRACE_S)


def merge_state(record: RunRecord, status: dict, scheduler: str | None, now: float,
                where: str = "", killed: float | None = None, ended: str | None = None,
                node_gone: bool = False) -> tuple[str, str | None]:
    """(new state, error) from the job's own report and the scheduler's state. A job stopped by a
    signal (TERM: ``scancel``, a preemption; USR1: the time limit) that saved its checkpoint is
    PREEMPTED, or CANCELLED when ``arctl cancel`` asked for the stop; until it has saved it, it is
    active (RUNNING). ``where``: what names the run's workspace in the commands an error says
    (:func:`arctl.launch.workspace.workdir_arg`). ``killed``: when `arctl cancel` killed the job
    (:func:`arctl.launch.status_file.killed_at`), which then saves no checkpoint. ``ended``: what the scheduler's own word for the end says
    (:func:`slurm_end`), the error of a job that said nothing of its own. ``node_gone``: the scheduler says the job's
    node failed or never booted (NODE_FAIL, BOOT_FAIL): no process of it is left to save a stop checkpoint (from a
    hunt: such a job stayed RUNNING, "stopping: saving its checkpoint", and `arctl resume` refused it, for 15 min)."""
    logs, resume = f"`arctl logs {record.run_id}{where}`", f"`arctl resume {record.run_id}{where}`"
    reported = status.get("state")
    if reported == "completed":
        return states.COMPLETED, None
    # a stop `arctl cancel` asked for: its request in the registry, or the job's own word (status.json's ``cancelled``:
    # a cancel interrupted between its scancel and its registry write left only that; from a hunt of interrupted commands)
    asked = record.cancel_requested or (reported == "preempted" and status.get("cancelled") is True)
    stopped = states.CANCELLED if asked else states.PREEMPTED
    if scheduler is not None:
        if scheduler in states.TERMINAL:
            if reported == "preempted":
                return stopped, None
            if reported == "cancelled":  # its job found `arctl cancel`'s request as it started: it trained nothing
                return states.CANCELLED, None
            if not node_gone and _still_stopping(status, scheduler, now, killed):
                return states.RUNNING, None
            if _still_starting(record, status, scheduler, now):
                return states.RUNNING, None
        if scheduler == states.COMPLETED:  # the job ended without saying "completed"
            return states.FAILED, status.get("error") or f"job ended without completing (see {logs})"
        if scheduler == states.FAILED:
            return states.FAILED, status.get("error") or ended or f"job failed or was killed (see {logs})"
        if scheduler == states.CANCELLED and reported in ("running", "stopping"):
            return states.CANCELLED, f"stopped before its checkpoint was saved; {resume} resumes from the last one"
        if scheduler == states.PREEMPTED:
            return stopped, status.get("error") or (None if asked else ended)
        if scheduler == states.RUNNING and reported in ("preempted", "requeued"):
            return states.PENDING, None  # requeue in progress
        return scheduler, status.get("error") if scheduler in states.TERMINAL else None
    return record.state, record.error


def orphaned_job(rec: RunRecord, run_dir: Path, now: float) -> dict | None:
    """The job a dead launch submitted for ``rec`` before it could record it (killed between sbatch
    and the registry; its claim is stale), as registry values, or None. From the run folder: a SLURM
    job queued for it (:func:`arctl.launch.workspace.queued_job`: PENDING), or a job that has started
    and reported under a job id the row does not have (RUNNING: the scheduler is asked next). Taken
    over as a new claim instead, such a run would get a second job training it."""
    if rec.state != states.SUBMITTING or not claim_is_stale(rec, now):
        return None
    values = {"claim": None, "before_claim": None, "attempts": rec.attempts + 1, "ended_at": None, "error": None}
    if (job := queued_job(run_dir)) and job != rec.job_id:  # the row's own: an earlier attempt's, never started
        return {**values, "state": states.PENDING, "executor": "slurm", "job_id": job,
                "submitted_at": (run_dir / "job" / job).lstat().st_mtime}
    status = read_status(run_dir)
    job = status.get("job_id")
    # SLURM only: the local queue starts no job whose registry row names another (a dead launch's)
    if (status.get("state") not in (None, "submitted") and status.get("executor") == "slurm"
            and isinstance(job, str) and states.SLURM_JOB_ID.match(job) and job != rec.job_id):
        return {**values, "state": states.RUNNING, "executor": "slurm", "job_id": job,
                "submitted_at": status.get("started_at")}
    return None


def settled(rec: RunRecord | None, run_dir: Path, now: float) -> RunRecord | None:
    """``rec`` as a launch decides on it: a dead launch's claim given the job it had submitted
    (:func:`orphaned_job`), else undone (the run as it was; None: a run the dead launch made, which a
    launch takes for a new one). Any other record as it is. Nothing is written (the dry run's view) but, for
    another host's claim, this host's note of when it first saw it so (:func:`claim_is_stale`)."""
    if rec is None or rec.state != states.SUBMITTING or not claim_is_stale(rec, now):
        return rec
    if job := orphaned_job(rec, run_dir, now):
        return replace(rec, **job)
    return rec.unclaimed()


def interrupted_launch(rec: RunRecord, run_dir: Path, now: float) -> str | None:
    """What to say of a run whose launch died before it submitted it and that no refresh settles: one the
    dead launch made and gave no job (:func:`settled`: None), whose row stays SUBMITTING until the next
    launch takes it for a new run. None for any other run: a live launch's claim is being submitted, and a
    dead launch's claim on an existing run or with a job is settled by a refresh (:func:`_settle_dead_claims`)."""
    if (rec.state != states.SUBMITTING or not claim_is_stale(rec, now)
            or settled(rec, run_dir, now) is not None):
        return None
    return interrupted_note(rec, workspace_root(run_dir))


INTERRUPTED_BEFORE = "its launch was interrupted before it submitted it"


def interrupted_note(rec: RunRecord, root: Path | None = None) -> str:
    """:func:`interrupted_launch`'s words for a new run whose dead launch gave it no job (``root``: its
    workspace, named in the command unless a bare command means it)."""
    return f"{INTERRUPTED_BEFORE}, so no job runs for it: {_launched_again(rec, root=root)} submits it"


def _launched_again(rec: RunRecord, force: bool = False, root: Path | None = None, extra: str = "",
                    stored: bool = False) -> str:
    """The command that launches ``rec`` again (its run id holds its overrides: only the same ones name it; the
    scale and seed are the row's). ``force``: a completed run, alone: its one cell with ``--force`` (``--force`` on
    its sweep would rerun the sweep's other completed runs too). ``root``: its workspace, named (:func:`workdir_arg`;
    from a hunt: without it the command launched the run in ./arctl-runs; ``stored``: named always). ``extra``:
    overrides added (launch-only ones, ``cluster.*``, which name the same run)."""
    sweep = rec.sweep if not force else None
    again = f"arctl sweep {sweep}" if sweep else f"arctl run {rec.experiment} --arm {rec.arm}"
    given = "the overrides it was launched with" + (", its sweep's included" if force and rec.sweep else "")
    where = workdir_arg(root, stored=stored) if root is not None else ""
    return (f"`{again}{f' --scale {rec.scale}' if rec.scale else ''} --seeds {rec.seed}{' --force' if force else ''}"
            f"{where}{f' {extra}' if extra else ''}` (with {given})")


def rerun_one(rec: RunRecord, root: Path | None = None) -> str:
    """What runs completed run ``rec`` again, and it alone (:func:`_launched_again` with ``--force``), in
    workspace ``root``."""
    return f"{_launched_again(rec, force=True, root=root)} runs it again from the start"


def folder_gone(rec: RunRecord, run_dir: Path) -> str | None:
    """The warning for a run whose folder is gone (deleted by hand), else None. A pending or running run's job
    reads its config there when it starts (so it fails) and writes its checkpoints and status there; the run
    is launched afresh once it has ended. An ended run's results and checkpoints went with it: reports cannot
    read it, and a completed one is launched again only with --force (from a hunt: it showed COMPLETED without
    a word). Shown, never stored: a stored warning outlives the attempt it is about (nothing rewrites it once
    the run has ended: a relaunch that completes would still say it)."""
    if rec.state not in (states.PENDING, states.RUNNING, *states.TERMINAL) or run_dir.exists():
        return None
    root = workspace_root(run_dir)  # named in the commands (from a hunt: they relaunched it in ./arctl-runs)
    if rec.state == states.COMPLETED:
        return f"its run folder {run_dir} is gone (deleted?): reports cannot read it; {rerun_one(rec, root)}"
    if rec.state in states.TERMINAL:
        return (f"its run folder {run_dir} is gone (deleted?), its checkpoints with it: "
                f"{_launched_again(rec, root=root)} launches it again from the start")
    what = "fails when it starts (it reads its config there)" if rec.state == states.PENDING else \
        "cannot save its checkpoints or progress there"
    return (f"its run folder {run_dir} is gone (deleted?): its job {rec.job_id} {what}; "
            f"`arctl cancel {rec.run_id}{workdir_arg(root)}`, then {_launched_again(rec, root=root)} launches it "
            "again from the start")


def _settle_dead_claims(registry: Registry, workspace: Workspace, records: list[RunRecord],
                        now: float) -> list[RunRecord]:
    """The claims among ``records`` whose launch died: given the job it had submitted
    (:func:`orphaned_job`), else undone: this process takes the claim over (one process only), puts
    back what a --force rerun of it had moved aside (the archive its manifest names it in) and gives the
    run what it was before. A run the dead launch made is left to the next launch (which takes it for
    a new run). A run cancelled while the dead launch held it has the job it was given cancelled (the
    run stays active, with the request, until the scheduler says the job ended).
    Returns the records as they are now (read-only: as they would be)."""
    out = []
    for rec in records:
        run_dir = workspace.run_dir(rec.run_id)
        view = settled(rec, run_dir, now)
        if view is rec or view is None or registry.readonly:  # not a dead claim, a new run's, or shown only
            out.append(view or rec)
            continue
        given_job = view.state in states.ACTIVE  # an undone claim's run is never active (claims take no active run)
        if given_job and registry.settle_claim(rec.run_id, rec.claim,
                                               {k: v for k, v in view.as_dict().items() if getattr(rec, k) != v}):
            # cancelled meanwhile: the job is asked to stop; it may have started, so the run stays active with
            # the request until SLURM says the job ended (merge_state: CANCELLED), as a launch leaves it
            if rec.cancel_requested is not None and not scancel_quietly([str(view.job_id)]):
                write_warning(run_dir, scancel_failed(str(view.job_id)))  # arctl status shows it
            elif view.state == states.PENDING:  # the dead launch may have died before releasing it (held for ever)
                release_quietly(str(view.job_id))  # its task only: a sibling cancelled meanwhile stays held (a hunt)
            out.append(view)
            continue
        mine = None if given_job else registry.take_over(rec.run_id, rec.claim, new_claim_token())
        if mine is not None:
            if archive := claimed_archive(run_dir, rec.claim):
                restore_previous(run_dir, archive)
            registry.unclaim([mine], mine.claim)
        out.append(registry.get(rec.run_id) or rec)  # whoever settled it: as it is now
    return out


def fresh_view(workspace: Workspace, records: list[RunRecord]) -> list[RunRecord]:
    """``records`` as a refresh finds them now (the scheduler asked), written nowhere: :func:`refresh` on a
    read-only registry (as they are where the registry cannot be opened so)."""
    if not records:
        return []
    try:
        with Registry(workspace.registry_path, readonly=True) as ro:
            return refresh(ro, workspace, records)
    except RegistryError:
        return records


UNSAVED_NOTE = "the states shown were found now and not saved ({why})"
"""What a reading command says where its refresh could not write the registry (:func:`refresh`)."""


def refresh(registry: Registry, workspace: Workspace, records: list[RunRecord] | None = None,
            reading: bool = False) -> list[RunRecord]:
    """Update the active runs among ``records`` (default: all) and return them refreshed. A dead
    launch's claim is settled first (:func:`_settle_dead_claims`). ``reading``: for a command that only shows the
    runs (`arctl status`, `arctl logs`): where the registry cannot be written (a full disk, an exceeded quota, a
    file made read-only meanwhile), the runs are refreshed again without writing, as in a read-only workspace, and
    ``registry.unsaved`` says why (from a hunt: on the full disk a run had died of, both commands refused to say
    which runs had died, and why); the next refresh tries to write again. A writer (a launch, the local queue, a
    cancel) gets the RegistryError, as before (from the review of that change: a queue whose registry turned
    read-only for good never recorded the jobs it started)."""
    records = registry.list() if records is None else records
    if registry.readonly or not reading:
        return _refresh(registry, workspace, records)
    kept = [replace(r) for r in records]  # as read: the refresh sets what it finds on the records it returns
    from arctl.launch.registry import READ_WRITE_WAIT_S

    waits, registry.write_wait_s = registry.write_wait_s, min(registry.write_wait_s, READ_WRITE_WAIT_S)
    try:  # (a process holding the write lock: shown unsaved after a few seconds, not a minute's wait and an error)
        return _refresh(registry, workspace, records)
    except RegistryError as err:
        if err.kind not in ("full", "readonly", "locked"):
            raise
        registry.unsaved = str(err)
        registry.readonly = True  # this pass only
        try:
            return _refresh(registry, workspace, kept)
        finally:
            registry.readonly = False
    finally:
        registry.write_wait_s = waits


def _refresh(registry: Registry, workspace: Workspace, records: list[RunRecord]) -> list[RunRecord]:
    now = time.time()
    records = _settle_dead_claims(registry, workspace, records, now)
    active = [r for r in records if r.state in states.ACTIVE and r.state != states.SUBMITTING]
    if not active:
        return records
    phases = {r.run_id: read_phase(workspace.run_dir(r.run_id)) for r in active}
    known = {r.run_id: r for r in records}
    active = _sources_first(registry, workspace, active, phases, known)
    judged = {r.run_id: r for r in active}  # each one's state as this refresh finds it, once judged (sources first)
    slurm_ids = [r.job_id for r in active if r.executor == "slurm" and r.job_id]
    raw_states, source = scheduler_states(slurm_ids)
    scheduler = {jid: states.slurm_state(raw) for jid, raw in raw_states.items()}
    queued_or_running = [j for j, st in scheduler.items() if st in states.SUBMITTED]
    view = controller_jobs(queued_or_running)  # why pending; what the controller still has (one squeue call)
    reasons = pending_reasons(view)
    again = asked_again(view, queued_or_running) if source == "sacct" else {}
    lost = {j: raw for j, raw in again.items() if states.slurm_state(raw) in states.SUBMITTED}
    ended = [(j, raw) for j, (raw, _) in (view or {}).items()] + [(j, raw) for j, raw in again.items() if j not in lost]
    raw_of = dict(raw_states)  # SLURM's own word, which says more than the state it maps to (slurm_end)
    for jid, raw in ended:  # an end accounting had not recorded (the controller's), or recorded since
        if jid in scheduler and states.slurm_state(raw) in states.TERMINAL:
            scheduler[jid], raw_of[jid] = states.slurm_state(raw), raw
    updates, dead = [], []
    for rec in active:
        read = {k: getattr(rec, k) for k in ATTEMPT_KEYS}  # the attempt this refresh judges
        status = read_status(workspace.run_dir(rec.run_id))
        how = raw = None  # SLURM's word for the end of the job, and what it says (slurm_end)
        values = _from_status(status)
        values["phase"] = phases[rec.run_id]
        values["warning"] = read_warning(workspace.run_dir(rec.run_id))
        killed = killed_at(workspace.run_dir(rec.run_id)) if rec.cancel_requested else None  # `arctl cancel --now`'s
        if status.get("state") == "stopping" or rec.cancel_requested:
            values["phase"] = KILLED if killed is not None else CANCELLING if rec.cancel_requested else STOPPING
        if rec.executor == "slurm":
            sched = scheduler.get(rec.job_id or "")
            if sched is None and source == "squeue" and (rec.submitted_at or 0) < now - GRACE_S:
                # without accounting, a job that left the queue has ended (cancelled, if a cancel asked it)
                sched = states.CANCELLED if rec.cancel_requested else states.FAILED
            if (raw := lost.get(rec.job_id or "")) is not None:  # gone from the controller: ended, not said how
                sched = states.CANCELLED if rec.cancel_requested else states.FAILED
                said = runaway_error(str(rec.job_id), raw, rec.run_id, workspace.root)
                status = {**status, "error": status.get("error") or said}
            raw = raw_of.get(rec.job_id or "") if sched == scheduler.get(rec.job_id or "") else None
            if (sched == states.FAILED and slurm_word(raw) in ("", "FAILED") and rec.job_id not in lost
                    and _oom_logged(workspace, rec)):  # its srun step's OUT_OF_MEMORY, which its own line does not say
                raw = OUT_OF_MEMORY
            how = slurm_end(raw, rec, status, workspace.run_dir(rec.run_id), workspace.root) if raw else None
            new_state, error = merge_state(rec, status, sched, now, workdir_arg(workspace.root, stored=True), killed,
                                           ended=how, node_gone=slurm_word(raw) in NODE_GONE)
            if new_state == states.PENDING and (never := never_starts(reasons.get(rec.job_id or ""), rec.job_id,
                                                                      rec.run_id, workspace.root)):
                values["warning"] = never
        elif rec.executor == "local":
            new_state, error = _local_state(rec, status, workspace)
        elif status.get("state") == "cancelled":  # a debug run whose job found `arctl cancel`'s request as it started
            new_state, error = states.CANCELLED, None  # (it trained nothing; the launching process may run others)
        else:  # debug runs live in the launching process
            new_state, error = merge_state(rec, status, None, now, workdir_arg(workspace.root, stored=True))
            if (new_state in states.ACTIVE and isinstance(status.get("pid"), int)
                    and not debug_process_alive(status, workspace.run_dir(rec.run_id))):
                new_state, error = states.FAILED, "the process running it (debug executor) exited"
        if new_state == states.FAILED and status.get("state") in (None, "submitted", "running", "stopping"):
            error = _logged_failure(workspace, rec) or error  # status.json not written: the job's log says why
        if new_state == states.FAILED and how and error != how and slurm_word(raw) == OUT_OF_MEMORY:
            error = f"{how}; its job's own last error: {error}" if error else how  # (what the lack of memory did)
        # the step: this attempt's while it is active (decided by the state found now, not status.json's,
        # which a killed job never rewrote), how far the run got once it has ended
        values.update(run_progress(workspace.run_dir(rec.run_id), status, active=new_state in states.ACTIVE))
        if new_state in states.ACTIVE:
            if status.get("state") in ("submitted", "running", "stopping"):  # not the end of an earlier attempt
                values["ended_at"] = None  # (a requeued job's first write is ended_at None: kept out by _from_status)
        elif values.get("ended_at", rec.ended_at) is None:  # ended without saying when (killed)
            values["ended_at"] = _last_sign_of_life(workspace.run_dir(rec.run_id), status, now)
        if new_state in states.TERMINAL and is_waiting(values.get("phase")):  # SLURM's kill-on-invalid-dep, a scancel
            waited = _waited_for(values["phase"])  # (not `source`: sacct's or squeue's, above)
            row = judged.get(waited) or known.get(waited) or registry.get(waited)  # (judged: as found now)
            stopped = row is not None and _stopped(row, scheduler, workspace)
            error = error or waited_in_vain(rec, new_state, waited, row.state if row else None, workspace.root,
                                            stopped)
            values["phase"] = None
        if new_state in states.TERMINAL and is_queued(values.get("phase")):  # cancelled before its slot came
            values["phase"] = None
        if new_state in states.TERMINAL and values.get("phase") in (CANCELLING, KILLED, STOPPING):  # its stop has ended (a
            values["phase"] = None  # hunt: --json of a CANCELLED run still said "cancelling: saving its checkpoint")
        if (new_state in states.TERMINAL and status.get("state") in ("running", "stopping")
                and status.get("resume_step") is None and not registry.readonly):  # its job died: it recorded none
            dead.append((rec.run_id, status))
        if new_state != rec.state:
            values["state"] = new_state
        if error != rec.error and new_state in states.TERMINAL:
            values["error"] = error
        values = {k: v for k, v in values.items() if getattr(rec, k) != v}
        if values:
            updates.append((rec.run_id, read, values))
            for k, v in values.items():
                setattr(rec, k, v)
    if not registry.readonly:  # a read-only workspace: the states are shown, not saved
        # written only where the row is still the attempt read: a launch in another process that
        # resubmitted the run meanwhile (a resume) keeps its row, and this refresh shows that row
        stale = set(registry.update_many_if(updates))
        if stale:
            records = [(registry.get(r.run_id) or r) if r.run_id in stale else r for r in records]
        _note_resume_steps(workspace, [(run_id, status) for run_id, status in dead if run_id not in stale])
    return records


WAITING_FOR = waiting_phase("")  # how the phase of a run that waits for the run it starts from begins: "waiting for "


def _waited_for(phase: str | None) -> str | None:
    """The run a run whose phase is ``phase`` waits for (:func:`arctl.track.phase.waiting_phase`), else None."""
    return phase[len(WAITING_FOR):] if is_waiting(phase) else None


def _sources_first(registry: Registry, workspace: Workspace, active: list[RunRecord], phases: dict[str, str | None],
                   known: dict[str, RunRecord]) -> list[RunRecord]:
    """``active`` with the active runs those waiting among them wait for (the whole chain, where the refresh was not
    given them: `arctl logs` of a dependent alone), each run after the one it waits for: a run that ended while it
    waited is told by the state its source has now (:func:`waited_in_vain`). ``phases``: each run's phase, those of
    the runs added too; ``known``: the records at hand (the registry is asked for the others)."""
    by_id = {r.run_id: r for r in active}
    todo = list(active)
    while todo:
        source = _waited_for(phases.get(todo.pop().run_id))
        if source and source not in by_id and (row := known.get(source) or registry.get(source)) is not None \
                and row.state in states.ACTIVE and row.state != states.SUBMITTING:
            by_id[source] = row
            phases[source] = read_phase(workspace.run_dir(source))
            todo.append(row)

    def depth(run_id: str, seen: frozenset = frozenset()) -> int:
        source = _waited_for(phases.get(run_id))
        return 0 if source not in by_id or source in seen else 1 + depth(source, seen | {run_id})

    return sorted(by_id.values(), key=lambda r: depth(r.run_id))


def _stopped(rec: RunRecord, scheduler: dict[str, str | None], workspace: Workspace) -> bool:
    """Whether run ``rec``, active, will not complete though a refresh does not say it ended yet: `arctl cancel`
    stops it, its job has ended (``scheduler``: this refresh's states of the jobs) or its job said it stops or
    stopped (status.json), and it saves its stop checkpoint or its end is not in accounting yet. SLURM cancels the
    run that waits for it at once (``--kill-on-invalid-dep``)."""
    if rec.state not in states.ACTIVE:
        return False
    if rec.cancel_requested is not None:
        return True
    if rec.executor == "slurm" and scheduler.get(rec.job_id or "") in states.TERMINAL - {states.COMPLETED}:
        return True
    return read_status(workspace.run_dir(rec.run_id)).get("state") in ("stopping", "preempted", "failed", "cancelled")


def waited_in_vain(rec: RunRecord, state: str, source: str, source_state: str | None, root: Path,
                   stopped: bool = False) -> str:
    """The reason of run ``rec``, ended ``state`` while it waited for ``source``, the run it starts from
    (``source_state``: its state now; None: not in the registry; ``stopped``: still active, but its job has ended or
    is being cancelled, and it saves its stop checkpoint), with the command that goes on (``root``: the workspace).
    A source that ended without completing: the run never started (SLURM's ``--kill-on-invalid-dep`` cancelled it),
    and both are relaunched. A source that runs, waits or completed: the run was stopped by hand (a ``scancel``) and
    resumes alone. From a hunt: such a run said "the run it starts from did not complete" and to relaunch both while
    its source trained on, and still said so once that one had completed."""
    if source_state == states.COMPLETED or (source_state in states.ACTIVE and not stopped):
        how = "cancelled" if state == states.CANCELLED else f"ended {state}"
        return (f"{how} while it waited for {source} ({source_state}), before it started; "
                f"`arctl resume {rec.run_id}{workdir_arg(root, stored=True)}` submits it again")
    said = ("which was stopped before it completed" if source_state in states.ACTIVE else
            f"which ended {source_state}" if source_state else "which is not in this workspace's registry")
    return (f"never started: the run it starts from did not complete ({waiting_phase(source)}, {said}); "
            f"{_launched_again(rec, root=root, stored=True)} relaunches both")


def _note_resume_steps(workspace: Workspace, dead: list[tuple[str, dict]]) -> None:
    """Record in status.json, for the runs whose job this refresh found dead (run id, its status.json as read), the
    step their next attempt resumes from, as their job records it when it fails or stops itself
    (:func:`arctl.launch.status_file.note_resume_step`): `arctl status` shows it beside the step reached."""
    if not dead:
        return
    from arctl.launch.job import found_resume_step  # (the job module imports the backends: only when needed)

    for run_id, status in dead:
        run_dir = workspace.run_dir(run_id)
        if (step := found_resume_step(run_dir)) is not None:
            with contextlib.suppress(OSError):  # (a full disk: the registry has the run's end all the same)
                note_resume_step(run_dir, status, step)


def _logged_failure(workspace: Workspace, rec: RunRecord) -> str | None:
    """Why the job of ``rec`` failed, as its log says (:func:`arctl.launch.job.reported_failure`), for a job that
    could not write it into status.json: from a hunt, on a full disk that write raised ENOSPC itself and the run
    read "the job process died without reporting (killed?)"."""
    from arctl.launch.job import reported_failure  # (the job module imports the backends: only when needed)

    job = rec.job_id or ""
    if not job or job.startswith("queue:"):
        return None
    return reported_failure([workspace.jobs_dir / job, workspace.run_dir(rec.run_id) / "job" / job])


# what SLURM writes into a job's stderr where the OOM killer took one of its step's processes: slurmstepd's
# "Detected 1 oom_kill event in StepId=101.0" (older: "oom-kill event(s) in step 101.0 cgroup"), srun's
# "srun: error: node1: task 0: Out Of Memory"
OOM_LOGGED = re.compile(r"^(slurmstepd\S*: error: .*\boom[_-]kill event|srun: error: .*: Out Of Memory\b)", re.MULTILINE)


def _oom_logged(workspace: Workspace, rec: RunRecord) -> bool:
    """Whether the stderr log of the job of ``rec`` (its last attempt's lines, in the last :data:`LOG_TAIL_BYTES`)
    holds SLURM's word that the OOM killer took a process of its step (:data:`OOM_LOGGED`). From a review: arctl's
    jobs train in an srun step, and since SLURM 22.05.4 only that step is OUT_OF_MEMORY, the job FAILED (the
    line ``sacct -X`` gives), so the run read "job failed or was killed"; without accounting, nothing says it."""
    job = rec.job_id or ""
    if not job or job.startswith("queue:"):
        return False
    for folder in (workspace.jobs_dir / job, workspace.run_dir(rec.run_id) / "job" / job):
        logs = stderr_logs(folder)
        if any(OOM_LOGGED.search("\n".join(last_attempt_lines(path, LOG_TAIL_BYTES) or [])) for path in logs):
            return True
        if logs:
            return False
    return False


ATTEMPT_KEYS = ("state", "job_id", "generation", "attempts", "claim", "cancel_requested")
"""What identifies the attempt a refresh judged: its write applies only while the row still has them."""


def _local_state(rec: RunRecord, status: dict, workspace: Workspace) -> tuple[str, str | None]:
    reported = status.get("state")
    if reported == "completed":
        return states.COMPLETED, None
    stopped = states.CANCELLED if rec.cancel_requested else states.PREEMPTED
    job_id = rec.job_id or ""
    alive = local_job_alive(rec, status, workspace)  # None: another host's job, which cannot be asked here
    if alive is not None and job_id.startswith("queue:"):  # waiting in the local queue process
        if alive:
            return rec.state, None
        if reported == "failed" and status.get("error"):  # the queue said why (it gave up: local_queue._give_up)
            return states.FAILED, str(status["error"])  # (the launch wrote "submitted": not an earlier attempt's)
        return states.FAILED, _job_of_another_workspace(rec, workspace) or "the local queue stopped before starting this run"
    if alive and job_id.isdigit():  # alive: also while it saves a stop checkpoint
        return (states.PENDING if reported == "requeued" else states.RUNNING), None
    if reported == "preempted":
        return stopped, None
    if reported == "cancelled":  # its job found `arctl cancel`'s request as it started: it trained nothing
        return states.CANCELLED, None
    if reported == "failed":
        return states.FAILED, status.get("error")
    if alive is None:  # another host's job that has not reported its end: as the registry has it
        return rec.state, None
    resume = f"`arctl resume {rec.run_id}{workdir_arg(workspace.root, stored=True)}`"  # an error kept: named always
    if rec.cancel_requested and reported == "submitted":  # the cancel's TERM ended it as it started: nothing ran
        return states.CANCELLED, None
    if rec.cancel_requested:
        return states.CANCELLED, f"stopped before its checkpoint was saved; {resume} resumes from the last one"
    return states.FAILED, (_job_of_another_workspace(rec, workspace)
                           or f"the job process died without reporting (killed?); {resume} resumes it")
