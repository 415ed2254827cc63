"""A stand-in for the local executor whose jobs have ended, completed, as soon as they are submitted: for tests of the
local queue's passes (tests/launch/test_local_queue_damaged.py, test_repair_more.py)."""

from __future__ import annotations

from pids import unused_pid  # tests/support/pids.py


class EndedJob:
    """A job that has ended; its id a pid no process has."""

    def __init__(self, n: int):
        self.job_id = str(unused_pid() - n)

    def done(self):
        return True


class EndedExecutor:
    """Starts a stand-in job that has ended, completed (``started``: the run folders, in order)."""

    def __init__(self):
        self.started = []

    def submit(self, fn, run_dir):
        from arctl.launch.status_file import write_status

        self.started.append(run_dir)
        write_status(run_dir, state="completed", executor="local")  # what the job reports as it ends
        return EndedJob(len(self.started))
