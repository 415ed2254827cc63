"""A run whose step hangs is not requeued for ever. From a hunt: a verl run whose step 13 hung (its last checkpoint
12) was stopped by SLURM's time-limit warning (USR1), ended "preempted ... resumes from step 12" and was requeued;
the next attempt hung at step 13 again, and so on up to 20 requeues, each attempt a whole time limit (48 h on 8
GPUs). Now a job stopped at its time limit that logged no step after the one it resumed from, where the attempt
before it did the same from that step, ends FAILED with one line; a preemption, or an attempt that got further,
is requeued as before."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from arctl.backends.base import BackendDefaults
from arctl.config.files import atomic_write
from arctl.launch import job
from arctl.launch.executors import MAX_REQUEUES
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status
from arctl.track.metrics_schema import STEP_KEY, TRAIN_LOSS

STUBS = "arctl_test_hung_attempts_stubs"
HANG = "hang"  # in the run's folder: the stub's step (or its start-up, where it says "start") hangs while it exists
HANGING = "hanging"  # the stub writes it once it hangs
HANG_AT = 13


class Hangs(BackendDefaults):
    """A counting backend whose step ``HANG_AT`` and later hang (a blocked W&B log, filesystem or collective) while
    the file ``HANG`` is in the run's folder (``HANGING`` says it hangs); with "start" in it, a resume's start-up
    hangs, before it restores its checkpoint. It checkpoints every step; a stop between steps saves the step it reached, a stop in a hang
    abandons the step (as verl's does) and saves nothing. On a resume it rewrites ``metrics.jsonl`` to its
    checkpoint's rows, as both real backends do."""

    name = "hangs"

    def resume_step(self, config, run_dir):
        ckpt = Path(run_dir) / "checkpoints" / "state.json"
        return json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0

    def train(self, config, run_dir, stop_event=None):
        run_dir = Path(run_dir)
        ckpt = run_dir / "checkpoints" / "state.json"
        ckpt.parent.mkdir(exist_ok=True)
        step = self.resume_step(config, run_dir)

        def hang():
            (run_dir / HANGING).touch()
            while not stop_event.is_set():
                time.sleep(0.02)
            return "preempted"  # the step abandoned: no checkpoint

        hang_file = run_dir / HANG
        if step and hang_file.exists() and hang_file.read_text() == "start":
            return hang()
        atomic_write(run_dir / "metrics.jsonl", "".join(json.dumps({STEP_KEY: s, TRAIN_LOSS: 1 / s}) + "\n"
                                                        for s in range(1, step + 1)))
        with open(run_dir / "metrics.jsonl", "a") as log:
            while step < int(config["trainer"]["total_steps"]):
                if stop_event.is_set():
                    atomic_write(ckpt, json.dumps({"step": step}))
                    return "preempted"
                if step + 1 >= HANG_AT and hang_file.exists():
                    return hang()
                time.sleep(0.01)
                step += 1
                log.write(json.dumps({STEP_KEY: step, TRAIN_LOSS: 1 / step}) + "\n")
                log.flush()
                atomic_write(ckpt, json.dumps({"step": step}))
        return "completed"


@pytest.fixture
def run_dir(tmp_path, monkeypatch) -> Path:
    module = types.ModuleType(STUBS)
    module.HANGS = Hangs()
    monkeypatch.setitem(sys.modules, STUBS, module)
    monkeypatch.setenv("ARCTL_TEST_BACKEND", f"{STUBS}:HANGS")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": "e_a_s0_0123456789",
              "trainer": {"total_steps": 100_000}, "wandb": {"mode": "disabled", "id": "e_a_s0_0123456789"}}
    return prepare_run_dir(tmp_path / "ws" / "runs" / config["run_id"], config)


class Submitit:
    """submitit's JobEnvironment, as its bound checkpoint_and_try_requeue shows it: ``timed_out``: whether it takes
    the stop for the time limit's (else a preemption); its handler records the requeue instead of exiting."""

    class _delayed:  # noqa: N801 - submitit's attribute
        _timeout_countdown = MAX_REQUEUES

    def __init__(self):
        self.timed_out, self.requeued = True, 0

    def has_timed_out(self):
        return self.timed_out

    def handler(self, signum, frame):
        self.requeued += 1


def _attempt(run_dir: Path, submitit: Submitit, stop_when) -> str:
    """One attempt, ``RunJob()(run_dir)`` under ``submitit``, stopped by the requeue signal (the time limit's
    warning) once ``stop_when()``."""
    from submitit.core.job_environment import JobEnvironment

    usr = JobEnvironment._usr_sig()
    (run_dir / HANGING).unlink(missing_ok=True)  # the last attempt's

    def stop():
        deadline = time.monotonic() + 60
        while not stop_when() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), usr)

    before = signal.signal(usr, submitit.handler)
    thread = threading.Thread(target=stop)
    thread.start()
    try:
        return job.RunJob()(str(run_dir))
    finally:
        thread.join()
        signal.signal(usr, before)


def _hangs(run_dir: Path):
    return lambda: (run_dir / HANGING).exists()


def _logged(run_dir: Path, step: int):
    def reached() -> bool:
        try:
            lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        except OSError:
            return False
        return any(json.loads(line)[STEP_KEY] >= step for line in lines[-1:] if line.endswith("}"))
    return reached


@pytest.mark.parametrize("where", ["step", "start"], ids=["hangs-in-its-step", "hangs-in-its-start-up"])
def test_two_attempts_in_a_row_that_logged_no_step_end_the_run_failed(run_dir, capsys, where):
    submitit = Submitit()
    (run_dir / HANG).write_text("step")
    # attempt 1 got from 0 to 12, then step 13 hung to the time limit: requeued
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"
    assert submitit.requeued == 1 and read_status(run_dir)["resume_step"] == HANG_AT - 1
    (run_dir / HANG).write_text(where)
    # attempt 2 resumed from 12 and logged no step after it: requeued, a long start-up may have taken its time
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"
    assert submitit.requeued == 2 and read_status(run_dir)["state"] == "requeued"
    # attempt 3, the same: not requeued; FAILED, saying why
    with pytest.raises(job.JobError) as raised:
        _attempt(run_dir, submitit, _hangs(run_dir))
    line = job.hung_line(run_dir, 2, HANG_AT - 1)
    assert line == (f"hung: 2 attempts in a row logged no step after 12 (each stopped at its time limit); "
                    f"`arctl resume {run_dir.name} --workdir {run_dir.parent.parent}` tries again")
    assert str(raised.value) == line and submitit.requeued == 2
    status = read_status(run_dir)
    assert (status["state"], status["error"], status["resume_step"]) == ("failed", line, HANG_AT - 1)
    assert f"{job.ERROR_MARK}{line}" in capsys.readouterr().err


def test_a_preemption_or_an_attempt_that_got_further_is_requeued_as_before(run_dir):
    submitit = Submitit()
    (run_dir / HANG).write_text("step")
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"  # 0 -> 12, then hangs
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"  # no step after 12: one
    submitit.timed_out = False  # a preemption, not the time limit: counts none (a long start-up's, say)
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"
    submitit.timed_out = True
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"  # one again
    (run_dir / HANG).unlink()  # the next attempt gets further: 12 -> 16 or more, saved as it stops
    assert _attempt(run_dir, submitit, _logged(run_dir, HANG_AT + 3)) == "preempted"
    further = read_status(run_dir)["resume_step"]
    assert further >= HANG_AT + 3
    (run_dir / HANG).write_text("step")  # then its next step hangs: one, from the new step
    assert _attempt(run_dir, submitit, _hangs(run_dir)) == "preempted"
    assert submitit.requeued == 6 and read_status(run_dir)["state"] == "requeued"
    assert json.loads((run_dir / job.NO_STEP_FILE).read_text())["streak"] == 1


def test_a_start_up_longer_than_the_time_limit_is_said_with_its_phase(run_dir):
    """From a hunt of the warm-up cache: a tiny warm-up longer than cluster.time_min started over at every attempt
    and the run ended "hung" with nothing of why; the line names the phase the last attempt was in and the setting."""
    from arctl.track.phase import write_phase

    write_phase(run_dir, "warming up 36/3000")
    assert job.hung_line(run_dir, 2, 0) == (
        'hung: 2 attempts in a row logged no step after 0 (each stopped at its time limit, the last while "warming up '
        '36/3000": a start-up longer than the time limit starts over at each attempt; raise cluster.time_min); '
        f"`arctl resume {run_dir.name} --workdir {run_dir.parent.parent}` tries again")
