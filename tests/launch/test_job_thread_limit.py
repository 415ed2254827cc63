"""From the hunt of limits: a job that hit the user's process limit (``ulimit -u``).

- A thread that could not start before training (the stop writer, the pace watcher) raised outside the part of the
  job entry that records failures: status.json stayed "running", no ERROR line was logged, and the run read "the job
  process died without reporting (killed?)". It fails as training does now, recorded, with the real line.
- The line says what was reached: CPython's "can't start new thread", and W&B's "wandb-core exited with code 2" where
  its Go runtime logged "pthread_create failed: 11", name `ulimit -u` and what to do."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from arctl.launch import job
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status

HINT = "`ulimit -u` (the user's process limit"
WHAT_TO_DO = ") reached: raise it, or run fewer at once (--array-parallelism)"


def _run_dir(tmp_path: Path) -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": "e_a_s0_0123456789",
              "trainer": {"total_steps": 3}, "wandb": {"mode": "disabled", "id": "e_a_s0_0123456789"}}
    return prepare_run_dir(tmp_path / "runs" / config["run_id"], config)


@pytest.mark.parametrize("refused", ["arctl-stopping", "watch_pace"])
def test_a_thread_that_cannot_start_fails_the_attempt_recorded(tmp_path, monkeypatch, capsys, refused):
    run_dir = _run_dir(tmp_path)
    start = threading.Thread.start

    def no_thread(self):
        if refused in (self.name, getattr(getattr(self, "_target", None), "__name__", None)):
            raise RuntimeError("can't start new thread")
        return start(self)

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    handlers = {s: signal.getsignal(s) for s in job.STOP_SIGNALS}
    with pytest.raises(RuntimeError, match="can't start new thread"):
        job.run_job(run_dir)
    status = read_status(run_dir)
    assert status["state"] == "failed"
    assert status["error"].startswith(f"RuntimeError: can't start new thread; {HINT}")
    assert status["error"].endswith(WHAT_TO_DO)
    errors = [line for line in capsys.readouterr().err.splitlines() if f"] {job.ERROR_MARK}" in line]
    assert errors and errors[-1].endswith(f"{job.ERROR_MARK}{status['error']}")
    assert {s: signal.getsignal(s) for s in job.STOP_SIGNALS} == handlers  # the job's handlers are gone


def test_other_failures_get_no_such_hint(tmp_path):
    assert job.failure_line(RuntimeError("boom"), tmp_path) == "RuntimeError: boom"


PROBE = """
import sys
from pathlib import Path
from arctl.launch.job import failure_line
print(failure_line(Exception("ServicePollForTokenError: wandb-core exited with code 2"), Path(sys.argv[1])))
"""


@pytest.mark.parametrize(("logged", "hinted"), [
    ("fakecgo: pthread_create failed: 11\nSIGABRT: abort\nPC=0x4c8c1 m=0 sigcode=18446744073709551610\n", True),
    ("runtime: failed to create new OS thread (have 12 already; errno=11)\n", True),
    ("wandb: some other trouble\n", False),
    # SLURM appends a requeued task's attempts to one file: an earlier attempt's line says nothing of this one's
    ("fakecgo: pthread_create failed: 11\n[arctl job 10:00:00] run e_a_s0_0123456789 attempt 2 on node1 (job 101)\n"
     "wandb: some other trouble\n", False),
], ids=["fakecgo", "go-runtime", "other", "earlier-attempt"])
def test_wandb_core_out_of_threads_says_the_limit(tmp_path, logged, hinted):
    """The job log is the job's stderr, which wandb-core shares: its Go runtime's line is read back from there."""
    log = tmp_path / "101_0_log.err"
    log.write_text(logged)
    with log.open("a") as err:
        out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], stdout=subprocess.PIPE, stderr=err,
                             text=True, check=True).stdout.strip()
    assert out.startswith("Exception: ServicePollForTokenError: wandb-core exited with code 2")
    assert (HINT in out and out.endswith(WHAT_TO_DO)) is hinted, out
