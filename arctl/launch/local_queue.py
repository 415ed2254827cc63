"""The local queue: a detached process that runs local jobs N at a time (submitit LocalExecutor).

``python -m arctl.launch.local_queue WORKSPACE --parallelism N RUN_ID...``. Started by the
launcher; it starts each run only if the registry still says it is waiting in this queue (a
cancelled run is skipped), records the submitit job id (the controller's pid), and exits when all
its runs are done. Preemption/requeue of a local job is handled by submitit's local controller.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from arctl.launch import states
from arctl.launch.executors import local_executor
from arctl.launch.registry import Registry
from arctl.launch.rundir import read_run_config
from arctl.launch.workspace import Workspace

POLL_S = 0.5
WAIT_FOR_REGISTRY_S = 30.0


def run_queue(root: Path, run_ids: list[str], parallelism: int) -> None:
    from arctl.launch.job import RunJob
    from arctl.launch.refresh import refresh

    workspace = Workspace(Path(root))
    me = f"queue:{os.getpid()}"
    with Registry(workspace.registry_path) as reg:
        deadline = time.monotonic() + WAIT_FOR_REGISTRY_S  # the launcher records our pid after starting us
        while time.monotonic() < deadline:
            if all((r := reg.get(rid)) is not None and r.job_id == me for rid in run_ids):
                break
            time.sleep(0.1)
        pending, running = list(run_ids), {}
        while pending or running:
            while pending and len(running) < parallelism:
                run_id = pending.pop(0)
                rec = reg.get(run_id)
                if rec is None or rec.job_id != me or rec.state != states.PENDING:
                    print(f"skip {run_id}: {rec.state if rec else 'gone'}", flush=True)
                    continue
                run_dir = workspace.run_dir(run_id)
                executor = local_executor(run_dir / "job" / "%j", read_run_config(run_dir).get("cluster", {}))
                job = executor.submit(RunJob(), str(run_dir))
                reg.update(run_id, job_id=str(job.job_id), state=states.RUNNING, started_at=time.time())
                print(f"started {run_id} as local job {job.job_id}", flush=True)
                running[run_id] = job
            time.sleep(POLL_S)
            for run_id, job in list(running.items()):
                if job.done():
                    del running[run_id]
                    with contextlib.suppress(OSError):  # submitit's local controller mkdirs the raw "%j"
                        (workspace.run_dir(run_id) / "job" / "%j").rmdir()
                    rec = reg.get(run_id)
                    if rec is not None:
                        refresh(reg, workspace, [rec])
                    print(f"finished {run_id}: {rec.state if rec else '?'}", flush=True)


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
