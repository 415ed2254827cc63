"""The local queue: a detached process that runs local jobs N at a time (submitit LocalExecutor).

``python -m arctl.launch.local_queue WORKSPACE --parallelism N RUN_ID...``. Started by the
launcher; it starts each run only if the registry still says it is waiting in this queue (a
cancelled run is skipped), records the submitit job id (the controller's pid), and exits when all
its runs are done. Preemption/requeue of a local job is handled by submitit's local controller.

Every queue of a workspace shares its slots (:func:`take_slot`): a run starts only while it holds one of
N ``flock``ed files of the workspace's ``local-slots`` folder, N being its queue's parallelism, so two
launches in a row (each sized to the cores and free memory it saw, ``executors.local_parallelism``) run
at most the larger N at a time, not both at once; a run waiting for a slot says so in ``arctl status``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path

from arctl.launch import states
from arctl.launch.executors import local_executor
from arctl.launch.registry import Registry
from arctl.launch.rundir import RunDirError, read_run_config
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace
from arctl.track.phase import read_phase, slot_phase, waiting_phase, write_phase

POLL_S = 0.5
WAIT_FOR_REGISTRY_S = 30.0
SLOTS_DIR = "local-slots"  # in the workspace: one flock'ed file per local run at a time (take_slot)


def take_slot(folder: Path, slots: int):
    """One of the ``slots`` slot files of ``folder``, open and exclusively ``flock``ed (released when
    closed, or by the kernel when the process ends), or None while other processes hold them all."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(slots):
        handle = open(folder / f"slot-{k}", "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            handle.close()
    return None


def run_queue(root: Path, run_ids: list[str], parallelism: int) -> None:
    from arctl.launch.job import RunJob
    from arctl.launch.refresh import refresh

    workspace = Workspace(Path(root))
    me = f"queue:{os.getpid()}"
    with Registry(workspace.registry_path) as reg:
        deadline = time.monotonic() + WAIT_FOR_REGISTRY_S  # the launcher records our pid after starting us
        while time.monotonic() < deadline:
            # settled: recorded under this queue, or no longer the launch's to record (cancelled, taken over)
            if all((r := reg.get(rid)) is None or r.job_id == me or r.state != states.SUBMITTING for rid in run_ids):
                break
            time.sleep(0.1)
        pending, running, slots = list(run_ids), {}, {}
        after = {rid: _after(workspace, rid) for rid in run_ids}
        asked: dict[str, float] = {}  # parent run id -> when its job was last asked (_parent_done)
        while pending or running:
            for run_id in list(pending):
                if len(running) >= parallelism:
                    break
                rec = reg.get(run_id)
                if rec is None or rec.job_id != me or rec.state != states.PENDING:
                    pending.remove(run_id)
                    print(f"skip {run_id}: {rec.state if rec else 'gone'}", flush=True)
                    continue
                if after[run_id] and not _parent_done(reg, workspace, run_id, after[run_id], asked):
                    if reg.get(run_id).state != states.PENDING:  # the run it starts from failed: so did it
                        pending.remove(run_id)
                    continue  # waits for the run it starts from; later runs may go first
                run_dir = workspace.run_dir(run_id)
                slot = take_slot(workspace.root / SLOTS_DIR, parallelism)
                if slot is None:  # another queue of the workspace runs as many: the head of this one waits
                    if read_phase(run_dir) != slot_phase(parallelism):
                        write_phase(run_dir, slot_phase(parallelism))
                        reg.update(run_id, phase=slot_phase(parallelism))
                    break
                pending.remove(run_id)
                if after[run_id] or read_phase(run_dir):
                    write_phase(run_dir, None)  # no longer waiting
                executor = local_executor(run_dir / "job" / "%j", read_run_config(run_dir).get("cluster", {}))
                job = executor.submit(RunJob(), str(run_dir))
                if not reg.update_if(run_id, {"state": states.PENDING, "job_id": me},  # not cancelled meanwhile
                                     {"job_id": str(job.job_id), "state": states.RUNNING, "started_at": time.time(),
                                      "phase": None}):
                    job.cancel(check=False)
                    slot.close()
                    print(f"skip {run_id}: cancelled as it started (local job {job.job_id} stopped)", flush=True)
                    continue
                print(f"started {run_id} as local job {job.job_id}", flush=True)
                running[run_id] = job
                slots[run_id] = slot
            time.sleep(POLL_S)
            for run_id, job in list(running.items()):
                if job.done():
                    del running[run_id]
                    slots.pop(run_id).close()
                    with contextlib.suppress(OSError):  # submitit's local controller mkdirs the raw "%j"
                        (workspace.run_dir(run_id) / "job" / "%j").rmdir()
                    rec = reg.get(run_id)
                    if rec is not None:
                        refresh(reg, workspace, [rec])
                    print(f"finished {run_id}: {rec.state if rec else '?'}", flush=True)


def _after(workspace: Workspace, run_id: str) -> str | None:
    """The run ``run_id`` starts from (its frozen ``trainer.init_run``), or None."""
    try:
        return (read_run_config(workspace.run_dir(run_id)).get("trainer") or {}).get("init_run") or None
    except RunDirError:
        return None  # the job itself reports an unreadable config


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
    run_queue(args.workspace, args.run_ids, max(1, args.parallelism))
    return 0


if __name__ == "__main__":
    sys.exit(main())
