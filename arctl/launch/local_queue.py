"""The local queue: a detached process that runs local jobs N at a time (submitit LocalExecutor).

``python -m arctl.launch.local_queue WORKSPACE --parallelism N RUN_ID...``. Started by the
launcher; it starts each run only if the registry still says it is waiting in this queue (a
cancelled run is skipped), records the submitit job id (the controller's pid), and exits when all
its runs are done. Preemption/requeue of a local job is handled by submitit's local controller.

Every queue of a workspace shares its slots (:func:`take_slot`): a run starts only while it holds one of
N ``flock``ed files of the workspace's ``local-slots`` folder, N being its queue's parallelism, so two
launches in a row (each sized to the cores and free memory it saw, ``executors.local_parallelism``) run
at most the larger N at a time, not both at once; a run waiting for a slot says so in ``arctl status``.
A queue that waits leaves a ``waiting-PID-N`` marker there (N: its slots), and a queue that frees a slot the
waiting one can take starts nothing more while that slot stays free (at most :data:`HOLD_S`), so the two take
turns instead of the first running all its runs first.
Slots count runs, not cores (a run of several threads holds one), per workspace.
A registry or disk that fails the queue (a full disk), from its first look at the registry on (while it waits for
its launch to record it), is tried again, waiting longer each time (:class:`Trouble`);
a damaged registry is closed while the queue waits (so that `arctl repair` can replace it) and opened again for the
next pass; a queue that gives up records why in the runs it never started, and ends with that line.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import socket
import sys
import time
from pathlib import Path

from arctl.config.files import machine_identity, open_lock
from arctl.launch import states
from arctl.launch.executors import local_executor
from arctl.launch.refresh import pid_alive
from arctl.launch.registry import Registry, RegistryError
from arctl.launch.rundir import read_run_config, run_starts_from
from arctl.launch.status_file import name_job_process, write_status
from arctl.launch.workspace import Workspace
from arctl.track.phase import is_slot_queued, read_phase, slot_phase, waiting_phase, write_phase

POLL_S = 0.5
WAIT_FOR_REGISTRY_S = 30.0
RETRY_S, RETRY_MAX_S = 1.0, 60.0  # the wait after a pass that failed on the registry or the disk, doubled each time
GIVE_UP_S = 900.0  # passes that fail this long (a disk nobody frees): the queue gives up (Trouble)
SLOTS_DIR = "local-slots"  # in the workspace: one flock'ed file per local run at a time (take_slot)
HOLD_S = 10.0  # after freeing a slot another queue waits for, start nothing while it is free, at most this long
QUEUE_MODULE = "arctl.launch.local_queue"  # in a live queue's command line (``python -m`` this module)


def slots_folder(workspace_root: Path) -> Path:
    """The slot files of this host's local runs: a workspace on a shared disk used from two hosts has
    each host's cores (from a review: host B's queue waited for the slots of host A's runs). Named by the host's
    :func:`machine_identity` where it has one (a Mac, whose name changes with its network: a queue started before
    the change shares its slots with one started after it), else by its name."""
    return Path(workspace_root) / SLOTS_DIR / (machine_identity() or socket.gethostname())


def take_slot(folder: Path, slots: int):
    """One of the ``slots`` slot files of ``folder``, open and exclusively ``flock``ed (a :class:`Slot`,
    released when closed, or by the kernel when the process ends), or None while other processes hold them all. The
    files are tried from the highest, so a queue of fewer slots (which tries only the lowest) is not the
    last to find one free. Where the folder cannot lock (a file system without locks), a stand-in slot:
    the queue runs as if alone, as before slots."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return _Unlocked()
    for k in reversed(range(slots)):
        try:
            handle = _try_lock(folder / f"slot-{k}")
        except OSError:  # e.g. ENOLCK: no locks here
            return _Unlocked()
        if handle is not None:
            return Slot(handle, k)
    return None


def _try_lock(path: Path):
    """``path`` open and exclusively ``flock``ed, or None while another process holds it. Raises OSError
    where it cannot be opened or locked."""
    handle = open_lock(path)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return handle
    except BlockingIOError:
        handle.close()
        return None
    except BaseException:
        handle.close()
        raise


class Slot:
    """A held slot: the ``flock``ed file ``slot-<index>``, open until :meth:`close`."""

    def __init__(self, handle, index: int) -> None:
        self.handle, self.index = handle, index

    def close(self) -> None:
        self.handle.close()


class _Unlocked:
    """A slot where the workspace's folder cannot lock."""

    index = None

    def close(self) -> None:
        pass


def _others_wait(folder: Path, index: int | None, root: Path | None = None) -> bool:
    """Whether another live queue of the workspace waits for a slot it can take: its ``waiting-PID-N``
    marker, with N above ``index`` (a queue of N slots tries only slot files 0..N-1). A dead queue's
    marker (killed before it could remove it; its pid gone, reused or a zombie) is removed, and so is, given the
    workspace's ``root``, a marker of another workspace's queue (a `cp -r` copy of the workspace has the markers
    of the original's queues, which wait for the original's slots). Another user's queue that /proc hides from
    this process (``hidepid=2``: a group's workspace on a hardened machine) is taken for live
    (:func:`arctl.launch.refresh.pid_alive`): its marker, which that queue made, is its user's."""
    if index is None:
        return False
    for marker in folder.glob("waiting-*"):
        try:
            pid, slots = (int(part) for part in marker.name.split("-")[1:3])
            owner = marker.stat().st_uid  # the user of the queue that made it
        except (ValueError, OSError):  # (OSError: removed meanwhile)
            continue
        if pid == os.getpid() or index >= slots:
            continue
        if pid_alive(pid, QUEUE_MODULE, root, owner=owner):
            return True
        with contextlib.suppress(OSError):
            marker.unlink()
    return False


def _slot_free(folder: Path, index: int) -> bool:
    """Whether no process holds slot file ``index`` now (a non-blocking lock, released at once)."""
    try:
        handle = _try_lock(folder / f"slot-{index}")
    except OSError:
        return False
    if handle is None:
        return False
    handle.close()
    return True


def _still_held(folder: Path, held: set[int], root: Path | None = None) -> bool:
    """Whether one of the slots this queue freed for others (``held``, pruned in place) is still free and
    wanted by another live queue (of the workspace at ``root``, when given) that can take it: then this queue
    starts nothing yet."""
    for index in sorted(held):
        if not (_slot_free(folder, index) and _others_wait(folder, index, root)):
            held.discard(index)  # taken (by the waiting queue, or by anyone), or wanted by none that can
    return bool(held)


def run_queue(root: Path, run_ids: list[str], parallelism: int) -> None:
    from arctl.launch.job import RunJob
    from arctl.launch.refresh import refresh

    workspace = Workspace(Path(root))
    me = f"queue:{os.getpid()}"
    reg: Registry | None = None  # opened by the first pass; None again: closed after it was found damaged (reopened)
    try:
        # the launcher records our pid after starting us: the passes start no run before it has (settled), for at
        # most WAIT_FOR_REGISTRY_S; a registry that fails meanwhile is the passes' (from a hunt: damaged during this
        # wait, the queue died with a traceback, its runs left waiting for it)
        settle_by, settled = time.monotonic() + WAIT_FOR_REGISTRY_S, False
        pending, running, stopping = list(run_ids), {}, []  # running: run id -> (its job, its slot)
        after = {rid: run_starts_from(workspace.run_dir(rid)) for rid in run_ids}
        asked: dict[str, float] = {}  # parent run id -> when its job was last asked (_parent_done)
        folder = slots_folder(workspace.root)
        waiting = folder / f"waiting-{os.getpid()}-{parallelism}"  # there while this queue's head waits for a slot
        held: set[int] = set()  # slots this queue freed while it had runs to start (_still_held)
        hold_until = 0.0
        # jobs started and runs ended that the registry has not been told of yet: kept across a pass that failed
        # on the registry (a full disk), so the next pass tells it; none is lost, and no slot
        starting: list[tuple] = []  # (run id, its job, its slot)
        ended: list[str] = []

        def record_started() -> None:
            while starting:
                run_id, job, slot = starting[0]
                if reg.update_if(run_id, {"state": states.PENDING, "job_id": me},  # not cancelled meanwhile
                                 {"job_id": str(job.job_id), "state": states.RUNNING, "started_at": time.time(),
                                  "phase": None}):
                    print(f"started {run_id} as local job {job.job_id}", flush=True)
                    running[run_id] = job, slot
                else:
                    job.cancel(check=False)
                    stopping.append((job, slot))  # its slot is freed once it has stopped
                    print(f"skip {run_id}: cancelled as it started (local job {job.job_id} stopped)", flush=True)
                starting.pop(0)

        def record_ended() -> None:
            while ended:
                rec = reg.get(ended[0])
                if rec is not None:
                    refresh(reg, workspace, [rec])
                print(f"finished {ended[0]}: {rec.state if rec else '?'}", flush=True)
                ended.pop(0)

        def one_pass() -> None:
            """Start what can start, then note the runs that ended (their registry rows refreshed)."""
            nonlocal hold_until
            record_started()
            record_ended()
            wants = False
            if held and time.monotonic() >= hold_until:
                held.clear()
            holding = bool(held) and _still_held(folder, held, workspace.root)  # once a pass
            for run_id in list(pending):
                if len(running) + len(starting) >= parallelism:
                    break
                rec = reg.get(run_id)
                run_dir = workspace.run_dir(run_id)
                if rec is None or rec.job_id != me or rec.state != states.PENDING:
                    pending.remove(run_id)
                    if is_slot_queued(read_phase(run_dir)):  # cancelled while it waited for a slot
                        write_phase(run_dir, None)
                    print(f"skip {run_id}: {rec.state if rec else 'gone'}", flush=True)
                    continue
                if after[run_id] and not _parent_done(reg, workspace, run_id, after[run_id], asked):
                    if reg.get(run_id).state != states.PENDING:  # the run it starts from failed: so did it
                        pending.remove(run_id)
                    continue  # waits for the run it starts from; later runs may go first
                if holding:
                    break  # another queue waits for a slot this one freed: it takes it first
                slot = take_slot(folder, parallelism)
                if slot is None:  # another queue of the workspace runs as many: the head of this one waits
                    wants = True
                    if read_phase(run_dir) != slot_phase(parallelism):
                        write_phase(run_dir, slot_phase(parallelism))
                        reg.update(run_id, phase=slot_phase(parallelism))
                    break
                try:
                    if after[run_id] or read_phase(run_dir):
                        write_phase(run_dir, None)  # no longer waiting
                    executor = local_executor(run_dir / "job" / "%j", read_run_config(run_dir).get("cluster", {}))
                    job = executor.submit(RunJob(), str(run_dir))
                    name_job_process(run_dir, str(job.job_id), int(job.job_id))  # before the registry has it
                except BaseException:
                    slot.close()  # (still pending: a later pass starts it)
                    raise
                pending.remove(run_id)
                starting.append((run_id, job, slot))
                record_started()
            with contextlib.suppress(OSError):  # the marker says whether this queue waits now
                if wants:
                    waiting.touch()
                else:
                    waiting.unlink(missing_ok=True)
            time.sleep(POLL_S)
            freed = []
            for job, slot in list(stopping):
                if job.done():
                    stopping.remove((job, slot))
                    freed.append(slot)
            for run_id, (job, slot) in list(running.items()):
                if job.done():
                    del running[run_id]
                    freed.append(slot)
                    with contextlib.suppress(OSError):  # submitit's local controller mkdirs the raw "%j"
                        (workspace.run_dir(run_id) / "job" / "%j").rmdir()
                    ended.append(run_id)
            for slot in freed:
                slot.close()
                if pending and slot.index is not None:  # a queue that waits for it takes it first (above)
                    held.add(slot.index)
                    hold_until = time.monotonic() + HOLD_S
            record_ended()

        trouble = Trouble()
        try:
            while pending or running or stopping or starting or ended:
                try:
                    if reg is None:  # closed on damage: `arctl repair` may have put a new file in place meanwhile
                        reg = Registry(workspace.registry_path)
                    # settled: each run recorded under this queue, or no longer the launch's to record (cancelled,
                    # taken over)
                    settled = settled or time.monotonic() >= settle_by or all(
                        (r := reg.get(rid)) is None or r.job_id == me or r.state != states.SUBMITTING for rid in run_ids)
                    if not settled:
                        trouble.clear()
                        time.sleep(0.1)
                        continue
                    one_pass()
                except (RegistryError, OSError) as err:  # e.g. a full disk: the registry cannot be written
                    if isinstance(err, RegistryError) and err.kind == "damaged" and reg is not None:
                        # its connection and the folder's lock let go: a repair (which refuses while a process
                        # has the file open) can replace it while this queue waits (from a hunt: refused for 15 min)
                        reg.close()
                        reg = None
                        if not (pending or running or stopping or starting):  # only telling it of ended runs
                            print(f"not recorded in the registry: {', '.join(ended)} ended ({err}); the local "
                                  "queue has no run left and stops", flush=True)
                            return
                    if not trouble.wait(err):  # it slept; False: gave up, and the runs it never started say why
                        reason = trouble.reason(err)
                        if reg is None:
                            with contextlib.suppress(RegistryError, OSError):
                                reg = Registry(workspace.registry_path)
                        _give_up(reg, workspace, me, pending, reason)
                        raise GaveUp(reason, getattr(err, "kind", "damaged")) from err
                    continue
                trouble.clear()
        finally:
            with contextlib.suppress(OSError):
                waiting.unlink()
    finally:
        if reg is not None:
            reg.close()


class GaveUp(RegistryError):
    """The local queue gave up on a registry (or disk) that failed it for :data:`GIVE_UP_S`: one line, why."""


class Trouble:
    """The queue's registry (or disk) failing pass after pass, e.g. on a full disk: each pass that failed waits
    longer before the next (:data:`RETRY_S`, doubled up to :data:`RETRY_MAX_S`), and the queue gives up once
    they have failed for :data:`GIVE_UP_S`. From a hunt: the first RegistryError of a refresh killed the queue,
    and every run it had not started ended FAILED "the local queue stopped before starting this run"."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.delay = 0.0

    def wait(self, err: BaseException) -> bool:
        """Sleep before the next pass and return True, or return False: it is time to give up."""
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        if now - self.since >= GIVE_UP_S:
            return False
        self.delay = min(RETRY_MAX_S, self.delay * 2 or RETRY_S)
        print(f"registry or disk problem ({' '.join(str(err).split())[:300]}): trying again in {self.delay:g} s",
              flush=True)
        time.sleep(self.delay)
        return True

    def reason(self, err: BaseException) -> str:
        return (f"the local queue gave up after {GIVE_UP_S:g} s of failing to use the workspace "
                f"({type(err).__name__}: {' '.join(str(err).split())[:300]}): fix that, then `arctl resume` "
                "launches the run again")

    def clear(self) -> None:
        self.since, self.delay = None, 0.0


def _give_up(reg: Registry | None, workspace: Workspace, me: str, pending: list[str], reason: str) -> None:
    """Say why in the runs this queue never started (status.json, which :func:`arctl.launch.refresh._local_state`
    reads once the queue is gone, and the registry where it can still be written)."""
    for run_id in pending:
        with contextlib.suppress(OSError):
            write_status(workspace.run_dir(run_id), state="failed", error=reason, ended_at=time.time())
        if reg is not None:  # (None: it does not open)
            with contextlib.suppress(RegistryError, OSError):
                reg.update_if(run_id, {"state": states.PENDING, "job_id": me},
                              {"state": states.FAILED, "error": reason, "ended_at": time.time(), "phase": None})
        print(f"failed {run_id}: {reason}", flush=True)


def _parent_done(reg: Registry, workspace: Workspace, run_id: str, parent_id: str, asked: dict[str, float]) -> bool:
    """Whether the run ``run_id`` starts from has completed (``asked``: when this queue last asked
    each parent's job, at most every 5 s). While it is active, the run waits
    (``phase``: "waiting for ..."); when it ended otherwise (failed, cancelled, preempted) or is not
    in the registry, ``run_id`` is marked FAILED with the reason (``arctl run`` relaunches both)."""
    from arctl.launch.refresh import refresh

    parent = reg.get(parent_id)
    if parent is not None and parent.state in states.ACTIVE and time.monotonic() - asked.get(parent_id, 0) > 5:
        asked[parent_id] = time.monotonic()  # a run of another queue or launch: ask its job
        parent = next(iter(refresh(reg, workspace, [parent])), parent)
    if parent is not None and parent.state == states.COMPLETED:
        return True
    if parent is not None and parent.state in states.ACTIVE:
        phase = waiting_phase(parent_id)
        if read_phase(workspace.run_dir(run_id)) != phase:
            write_phase(workspace.run_dir(run_id), phase)
            reg.update(run_id, phase=phase)
        return False
    said = "is not in the registry" if parent is None else f"ended {parent.state}"
    error = f"starts from run {parent_id}, which {said}: `arctl run` again relaunches both"
    write_phase(workspace.run_dir(run_id), None)
    write_status(workspace.run_dir(run_id), state="failed", error=error, ended_at=time.time())
    reg.update(run_id, state=states.FAILED, error=error, ended_at=time.time(), phase=None)
    print(f"failed {run_id}: {error}", flush=True)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arctl.launch.local_queue")
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("run_ids", nargs="+")
    args = parser.parse_args(argv)
    try:
        run_queue(args.workspace, args.run_ids, max(1, args.parallelism))
    except GaveUp as err:  # its one line, not a traceback (the runs it never started say it too)
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
