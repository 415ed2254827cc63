"""The job entry's and the local queue's behaviour that no test pinned (from the hunt "mutation9", whose mutants of
arctl/launch/job.py and arctl/launch/local_queue.py survived the whole suite):

- which stop signal abandons the step in progress: TERM (scancel, `arctl cancel`: the kill follows soon) abandons
  it, the time limit's warning (USR1, USR2) gives it its grace (a mutant swapped them: a time-limit stop threw
  the step away, a TERM kept training into SLURM's SIGKILL);
- a backend whose train() returns neither "completed" nor "preempted" fails the run (a mutant ended it
  "preempted", and under SLURM exit 0: its dependents started);
- a queue that gives up on a registry that does not reopen says why in every run it never started, in one line
  (a mutant raised an AttributeError there and left the second run "submitted");
- a waiting run whose source has no registry row fails saying so (a mutant crashed the queue);
- a run with W&B disabled has no W&B run id in status.json or `arctl status --json`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
from queued_runs import queued_runs  # tests/support/queued_runs.py

from arctl.launch import states
from arctl.launch.job import PREEMPTED_EXIT_CODE, JobError, RunJob, run_job
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status

RUN_ID = "e_a_s0_0123456789"
WARNING_S = 120  # the run's cluster.preempt_warning_s


def _run_dir(tmp_path: Path) -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 3}, "cluster": {"preempt_warning_s": WARNING_S},
              "wandb": {"mode": "disabled", "id": RUN_ID}}
    return prepare_run_dir(tmp_path / "runs" / RUN_ID, config)


def _backend(monkeypatch, obj) -> None:
    """``obj`` as the job's backend (``ARCTL_TEST_BACKEND=module:attribute``, through a module of this process)."""
    module = types.ModuleType("jobpins_backend")
    module.backend = obj
    monkeypatch.setitem(sys.modules, "jobpins_backend", module)
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "jobpins_backend:backend")


@pytest.fixture(autouse=True)
def _not_in_a_job(monkeypatch):
    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SUBMITIT_LOCAL_JOB_ID",
                "SUBMITIT_DEBUG_JOB_ID"):
        monkeypatch.delenv(key, raising=False)


class _StopProbe:
    """A backend that sends its own process ``sig`` (what SLURM, `arctl cancel` or the local controller sends
    the job), waits for the job entry's stop, and records what the stop asks of the step in progress."""

    def __init__(self, sig: int):
        self.sig = sig
        self.seen: dict | None = None

    def train(self, config, run_dir, stop_event):
        from arctl.backends.verl.trainer import save_wait_s, step_grace_s

        os.kill(os.getpid(), self.sig)
        deadline = time.monotonic() + 30
        while not stop_event.wait(0.05):  # (a short wait, again: a signal never left it blocked)
            assert time.monotonic() < deadline, "the job entry never set the stop"
        self.seen = {"abandon": getattr(stop_event, "abandon", None), "step_grace_s": step_grace_s(config, stop_event),
                     "save_wait_s": save_wait_s(config, stop_event)}
        return "preempted"


@pytest.mark.parametrize("sig, abandon", [(signal.SIGUSR1, False), (signal.SIGUSR2, False), (signal.SIGTERM, True)],
                         ids=["USR1-time-limit", "USR2-time-limit", "TERM-cancel"])
def test_term_abandons_the_step_in_progress_and_the_time_limit_s_warning_gives_it_its_grace(
        tmp_path, monkeypatch, sig, abandon):
    from arctl.backends.verl.stop_request import SAVE_WAIT_FRACTION
    from arctl.backends.verl.trainer import STEP_GRACE_FRACTION

    probe = _StopProbe(sig)
    _backend(monkeypatch, probe)
    run_dir = _run_dir(tmp_path)
    assert run_job(run_dir) == ("preempted", [sig])
    if abandon:  # the scheduler kills soon after a TERM: the step is given up at once, the checkpoint saved
        assert probe.seen == {"abandon": True, "step_grace_s": 0.0, "save_wait_s": 0.0}
    else:  # the time limit's warning: the step may finish within its share of the warning
        assert probe.seen == {"abandon": False, "step_grace_s": STEP_GRACE_FRACTION * WARNING_S,
                              "save_wait_s": SAVE_WAIT_FRACTION * WARNING_S}
    status = read_status(run_dir)
    assert (status["state"], status["signal"]) == ("preempted", signal.Signals(sig).name)


def test_a_term_during_the_time_limit_s_grace_abandons_the_step_from_then_on(tmp_path, monkeypatch):
    """`arctl cancel` (TERM) while the step finishes within the time limit's grace: the step is given up."""
    seen = []

    class Probe:
        def train(self, config, run_dir, stop_event):
            os.kill(os.getpid(), signal.SIGUSR1)
            deadline = time.monotonic() + 30
            while not stop_event.wait(0.05):
                assert time.monotonic() < deadline, "the job entry never set the stop"
            seen.append(stop_event.abandon)
            os.kill(os.getpid(), signal.SIGTERM)
            while not stop_event.abandon:
                assert time.monotonic() < deadline, "the TERM never abandoned the step"
                time.sleep(0.05)
            seen.append(stop_event.abandon)
            return "preempted"

    _backend(monkeypatch, Probe())
    assert run_job(_run_dir(tmp_path)) == ("preempted", [signal.SIGUSR1, signal.SIGTERM])
    assert seen == [False, True]


class _NoResult:
    """A plugin backend whose train() forgets its ``return``."""

    def train(self, config, run_dir, stop_event):
        pass


NO_RESULT_LINE = "backend returned None, expected 'completed' or 'preempted'"


def test_a_backend_that_returns_no_result_fails_the_run(tmp_path):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "jobpins_none.py").write_text(textwrap.dedent("""\
        class _NoResult:  # a plugin backend whose train() forgets its return
            def train(self, config, run_dir, stop_event):
                pass
        backend = _NoResult()
        """))
    run_dir = _run_dir(tmp_path)
    env = {**os.environ, "ARCTL_TEST_BACKEND": "jobpins_none:backend",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "arctl.launch.job", str(run_dir)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode not in (0, PREEMPTED_EXIT_CODE), proc.stderr  # failed: neither completed nor preempted
    status = read_status(run_dir)
    assert (status["state"], status["error"]) == ("failed", NO_RESULT_LINE)
    assert NO_RESULT_LINE in proc.stderr


def test_under_slurm_a_backend_that_returns_no_result_fails_the_job_not_exit_0(tmp_path, monkeypatch):
    """SLURM records the job by its exit: a job that returned (exit 0) reads COMPLETED, and a run that starts from
    it (``--dependency=afterok``) would start."""
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    _backend(monkeypatch, _NoResult())
    run_dir = _run_dir(tmp_path)
    with pytest.raises(JobError, match="backend returned None, expected 'completed' or 'preempted'"):
        RunJob()(str(run_dir))
    status = read_status(run_dir)
    assert (status["state"], status["error"], status["job_id"]) == ("failed", NO_RESULT_LINE, "4242")


def test_a_queue_that_gives_up_on_a_registry_that_never_reopens_says_why_in_each_run(specs, tmp_path, monkeypatch,
                                                                                      capsys):
    """The registry file is overwritten and nobody repairs it: the queue cannot even reopen it when it gives up,
    and still ends with one line, each run it never started failed with the reason."""
    import arctl.launch.local_queue as local_queue
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    ids = queued_runs(ws, monkeypatch, 2)
    ws.registry_path.write_bytes(b"this is not a database" * 100)
    monkeypatch.setattr(local_queue, "RETRY_S", 0.01)
    monkeypatch.setattr(local_queue, "GIVE_UP_S", 0.2)
    monkeypatch.setattr(local_queue, "WAIT_FOR_REGISTRY_S", 0.0)
    assert local_queue.main([str(ws.root), *ids]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the local queue gave up after 0.2 s of failing to use the workspace (")
    assert err.count("\n") == 1 and "Traceback" not in err
    for run_id in ids:
        status = read_status(ws.run_dir(run_id))
        assert status["state"] == "failed"
        assert status["error"].startswith("the local queue gave up after 0.2 s of failing to use the workspace (")


def test_a_run_whose_source_is_not_in_the_registry_fails_saying_so(specs, tmp_path, monkeypatch, capsys):
    import arctl.launch.local_queue as local_queue
    from arctl.launch.registry import Registry
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    (run_id,) = queued_runs(ws, monkeypatch, 1)
    gone = "chain_r1_s0_gone"
    said = f"starts from run {gone}, which is not in the registry: `arctl run` again relaunches both"
    with Registry(ws.registry_path) as reg:
        assert reg.get(gone) is None
        assert local_queue._parent_done(reg, ws, run_id, gone, {}) is False
        rec = reg.get(run_id)
    assert (rec.state, rec.error, rec.phase) == (states.FAILED, said, None)
    status = read_status(ws.run_dir(run_id))
    assert (status["state"], status["error"]) == ("failed", said)
    assert f"failed {run_id}: {said}" in capsys.readouterr().out


def test_a_local_run_with_wandb_disabled_has_no_wandb_run_id(specs, tmp_path, cli, statuses, waiter):
    """Experiment lt runs with wandb.mode=disabled: it writes no W&B files, so `arctl status` shows no W&B run."""
    ws = tmp_path / "ws"
    cli("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws), check=True)
    records = waiter(lambda: [r for r in statuses(ws) if r["state"] in states.TERMINAL] or None, 120, "the run ends")
    (record,) = records
    assert record["state"] == states.COMPLETED, record
    assert record["wandb_id"] is None
    status = read_status(ws / "runs" / record["run_id"])
    assert status["state"] == "completed" and "wandb_id" in status and status["wandb_id"] is None


def test_a_run_that_logs_to_wandb_records_its_wandb_run_id(tmp_path):
    """The other side of the line above: offline (or online), the run's W&B id is in status.json."""
    from arctl.launch.job import _start_attempt

    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 3}, "wandb": {"mode": "offline", "id": RUN_ID}}
    run_dir = prepare_run_dir(tmp_path / "runs" / RUN_ID, config)
    _start_attempt(run_dir)
    assert read_status(run_dir)["wandb_id"] == RUN_ID
