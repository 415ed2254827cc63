"""The job entry: frozen config from the run dir, stop on signals with a checkpoint, resume, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from submitit.core.utils import DelayedSubmission

from arctl.launch.job import PREEMPTED_EXIT_CODE, RunJob
from arctl.launch.progress import ProgressTap
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status


def _run_dir(tmp_path: Path, steps: int = 3) -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": "e_a_s0_0123456789",
              "trainer": {"total_steps": steps}, "wandb": {"mode": "disabled", "id": "e_a_s0_0123456789"}}
    return prepare_run_dir(tmp_path / "runs" / config["run_id"], config)


def _steps(run_dir: Path) -> list[tuple[int, int]]:
    rows = [line.split() for line in (run_dir / "steps.log").read_text().splitlines()]
    return [(int(a), int(s)) for a, s, _pid in rows]


@pytest.fixture(autouse=True)
def _count_backend(monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")


def test_the_job_reads_the_config_from_the_run_dir_not_from_the_pickle(tmp_path):
    run_dir = _run_dir(tmp_path, steps=3)
    pickled = tmp_path / "submitted.pkl"
    DelayedSubmission(RunJob(), str(run_dir)).dump(pickled)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["trainer"]["total_steps"] = 5  # e.g. edited between submission and (re)start
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    assert DelayedSubmission.load(pickled).result() == "completed"
    received = json.loads((run_dir / "received_config.json").read_text())
    assert received["trainer"]["total_steps"] == 5 and received["run_dir"] == str(run_dir.resolve())
    assert [s for _, s in _steps(run_dir)] == [1, 2, 3, 4, 5]
    assert read_status(run_dir)["state"] == "completed"


def test_checkpoint_resubmits_the_same_callable_on_the_same_run_dir(tmp_path):
    job = RunJob()
    delayed = job.checkpoint(str(tmp_path))
    assert isinstance(delayed.function, RunJob) and delayed.args == (str(tmp_path),)


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM])
def test_a_signal_stops_with_a_checkpoint_and_the_next_start_resumes(tmp_path, monkeypatch, sig, waiter):
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.1")
    gate = tmp_path / "go"  # the job pauses after step 3 until this exists: the signal comes before its end
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    monkeypatch.setenv("ARCTL_TEST_PAUSE_AFTER", "3")
    run_dir = _run_dir(tmp_path, steps=30)
    cmd = [sys.executable, "-m", "arctl.launch.job", str(run_dir)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    waiter(lambda: (run_dir / "steps.log").exists() and len(_steps(run_dir)) >= 3, 60, "3 steps")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == PREEMPTED_EXIT_CODE, err
    status = read_status(run_dir)
    assert status["state"] == "preempted" and status["signal"] == sig.name
    stopped_at = json.loads((run_dir / "checkpoints" / "state.json").read_text())["step"]
    assert stopped_at == 3
    gate.touch()
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    steps = _steps(run_dir)
    assert [s for _, s in steps] == list(range(1, 31))  # continuous: no step lost or repeated
    assert {a for a, s in steps if s <= stopped_at} == {1} and {a for a, s in steps if s > stopped_at} == {2}
    assert read_status(run_dir)["state"] == "completed"


def test_a_new_attempt_starts_without_the_previous_attempts_step(tmp_path, monkeypatch, waiter):
    """The job entry's first write of an attempt clears the previous attempt's step and metric and
    records the marks of the metrics files it finds (what `arctl status` then skips until the
    backend writes them: tests/launch/test_registry.py)."""
    from arctl.launch.progress import file_marks, tail_progress
    from arctl.launch.status_file import write_status

    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.3")
    gate = tmp_path / "go"  # the job waits before its first step until this exists: it is running when read
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    run_dir = _run_dir(tmp_path, steps=4)
    write_status(run_dir, state="preempted", attempt=1, step=57, metric_name="train/loss", metric_value=0.1,
                 first_step=0, first_step_at=1.0)
    (run_dir / "metrics.jsonl").write_text("".join(
        json.dumps({"trainer/global_step": i, "train/loss": 1 / (i + 1)}) + "\n" for i in range(58)))
    marks = file_marks(run_dir)
    assert set(marks) == {"metrics.jsonl"}
    proc = subprocess.Popen([sys.executable, "-m", "arctl.launch.job", str(run_dir)], stderr=subprocess.PIPE, text=True)
    try:
        waiter(lambda: read_status(run_dir).get("attempt") == 2, 60, "attempt 2 starts")
        status = read_status(run_dir)
        assert status["state"] == "running"
        assert (status["step"], status["metric_name"], status["metric_value"]) == (None, None, None)
        assert (status["first_step"], status["first_step_at"]) == (None, None)  # attempt 1's pace is not its own
        assert (status["total_steps"], status.get("test_freq")) == (4, None)  # the schedule, from the config
        assert status["metric_files"] == marks
        assert tail_progress(run_dir, status["metric_files"]) == {}  # only attempt 1's rows in it
        assert tail_progress(run_dir)["step"] == 57
    finally:
        gate.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_a_failing_backend_is_reported_in_status_and_stderr(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "arctl.launch.no_such_module:train")
    run_dir = _run_dir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "arctl.launch.job", str(run_dir)], capture_output=True, text=True)
    assert proc.returncode != 0
    status = read_status(run_dir)
    assert status["state"] == "failed" and "no_such_module" in status["error"]
    assert "ERROR" in proc.stderr and "no_such_module" in proc.stderr


def test_missing_run_dir_is_one_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "arctl.launch.job", str(tmp_path / "nope")],
                          capture_output=True, text=True, env={**os.environ})
    assert proc.returncode != 0 and "not an arctl run directory" in proc.stderr


def test_progress_tap_records_step_and_headline_metric(tmp_path):
    tap = ProgressTap(tmp_path, interval_s=0.0)
    tap.observe({"trainer/global_step": 7, "train/loss": 0.5, "train/anytime_score": 0.25}, "wid")
    tap.observe({"perf/step_time_s": 1.0})
    status = read_status(tmp_path)
    assert (status["step"], status["metric_name"], status["metric_value"], status["wandb_id"]) == (
        7, "train/anytime_score", 0.25, "wid")
    assert "first_step" not in status  # where the attempt's pace starts is watch_pace's to say


def test_a_diverged_run_shows_its_nan_not_its_last_finite_metric(tmp_path):
    """From a review: a NaN (or inf) headline value was skipped, so `arctl status` went on showing the last
    finite one of a run whose loss had diverged (a GPU job running on, looking healthy). A headline key
    that logged a number that is not finite comes first (here train/loss over the finite score); a later
    finite row clears it; the metrics files' tail says the same."""
    from arctl.launch.progress import shown_metric, tail_progress

    tap = ProgressTap(tmp_path, interval_s=0.0)
    tap.observe({"trainer/global_step": 7, "train/loss": 0.5, "train/anytime_score": 0.25})
    tap.observe({"trainer/global_step": 8, "train/loss": float("nan"), "train/anytime_score": 0.0})
    status = read_status(tmp_path)
    assert (status["step"], status["metric_name"], status["metric_value"], status["metric_nonfinite"]) == (
        8, "train/loss", None, "nan")
    assert json.loads((tmp_path / "status.json").read_text())["metric_nonfinite"] == "nan"  # strict JSON: no NaN
    tap.observe({"trainer/global_step": 9, "train/loss": float("-inf"), "train/anytime_score": 0.0})
    assert read_status(tmp_path)["metric_nonfinite"] == "-inf"
    tap.observe({"trainer/global_step": 10, "train/loss": 0.4, "train/anytime_score": 0.3})
    status = read_status(tmp_path)
    assert (status["metric_name"], status["metric_value"], status["metric_nonfinite"]) == ("train/anytime_score", 0.3, None)
    assert shown_metric("train/loss", None, "nan") == "train/loss=nan"
    assert shown_metric("train/loss", 0.51234) == "train/loss=0.5123" and shown_metric(None, None) == ""
    rows = [{"trainer/global_step": 1, "train/anytime_score": 0.5},
            {"trainer/global_step": 2, "train/anytime_score": 0.5, "train/loss": float("inf")}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes Infinity
    assert tail_progress(tmp_path) == {"step": 2, "metric_name": "train/loss", "metric_value": None,
                                       "metric_nonfinite": "inf"}


def test_the_attempts_pace_starts_at_the_first_step_its_metrics_files_show_past_the_first_seen(tmp_path, monkeypatch,
                                                                                               waiter):
    """Where the time left in `arctl status` counts from, for every backend (verl logs to W&B from a Ray
    actor, which the tap never sees): the metrics files' first step past the first one seen. Attempt 1
    left steps 0-57 (its marks skip them); attempt 2 restores the checkpoint at 40 (the backend rewrites
    the file: 40 is seen first, at restore time, minutes before Ray runs a step), then logs 41: from there.
    (From a review: a resume's W&B repair logs kept rows again at once, and a tap on W&B took them for
    the attempt's start: resumed at 40, one step later it said "<1 min left" of 60 steps.)"""
    import threading

    from arctl.launch import progress
    from arctl.launch.progress import file_marks, watch_pace

    seen: list = []  # what each of the watcher's reads found (it polls every 0.02 s: under load, seconds)

    def tail(*args, **kwargs):
        out = real_tail(*args, **kwargs)
        seen.append(out.get("step"))
        return out

    real_tail = progress.tail_progress
    monkeypatch.setattr(progress, "tail_progress", tail)

    def rows(steps) -> str:
        return "".join(json.dumps({"trainer/global_step": i, "train/loss": 1 / (i + 1)}) + "\n" for i in steps)

    (tmp_path / "metrics.jsonl").write_text(rows(range(58)))
    marks = file_marks(tmp_path)
    tap, stop = ProgressTap(tmp_path, interval_s=0.0), threading.Event()
    watcher = threading.Thread(target=watch_pace, args=(tmp_path, marks, tap, stop, 0.02), daemon=True)
    watcher.start()
    try:
        waiter(lambda: len(seen) >= 3, 30, "three reads of the metrics")
        assert "first_step" not in read_status(tmp_path) and set(seen) == {None}  # only attempt 1's rows
        (tmp_path / "metrics.tmp").write_text(rows(range(41)))
        (tmp_path / "metrics.tmp").replace(tmp_path / "metrics.jsonl")  # the restore: a new file
        waiter(lambda: 40 in seen, 30, "the watcher to read step 40")
        assert "first_step" not in read_status(tmp_path)  # 40: seen first, not a step of this attempt's pace
        before = time.time()
        with open(tmp_path / "metrics.jsonl", "a") as fh:
            fh.write(rows([41]))
        waiter(lambda: "first_step" in read_status(tmp_path), 30, "the pace to begin")
        status = read_status(tmp_path)
        assert status["first_step"] == 41 and before <= status["first_step_at"] <= time.time()
        assert status.get("last_step") is None  # no step after it yet
        # every later step, with when the job saw it: the pace is two readings of the job's clock (the hunt of clocks)
        with open(tmp_path / "metrics.jsonl", "a") as fh:
            fh.write(rows([42, 43]))
        waiter(lambda: read_status(tmp_path).get("last_step") == 43, 30, "the watcher to record step 43")
        status = read_status(tmp_path)
        assert status["first_step"] == 41 and status["first_step_at"] <= status["last_step_at"] <= time.time()
    finally:
        stop.set()
    watcher.join(timeout=30)
    assert not watcher.is_alive()
    # stopped before it saw a second step: nothing recorded
    other = tmp_path / "other"
    other.mkdir()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_pace, args=(other, {}, ProgressTap(other, interval_s=0.0), stop, 0.02))
    watcher.start()
    (other / "metrics.jsonl").write_text(rows([0]))
    time.sleep(0.1)
    stop.set()
    watcher.join(timeout=5)
    assert not watcher.is_alive() and "first_step" not in read_status(other)


def test_progress_from_the_tail_of_a_metrics_file(tmp_path):
    from arctl.launch.progress import tail_progress

    assert tail_progress(tmp_path) == {}
    rows = [{"step": i, "data": {"trainer/global_step": i, "train/reward/mean": i / 100}} for i in range(1, 2000)]
    text = "\n".join(json.dumps(r) for r in rows) + '\n{"step": 2000, "da'  # verl's format, last line partial
    (tmp_path / "verl_metrics.jsonl").write_text(text)
    assert tail_progress(tmp_path) == {"step": 1999, "metric_name": "train/reward/mean", "metric_value": 19.99,
                                       "metric_nonfinite": None}
    (tmp_path / "metrics.jsonl").write_text('{"trainer/global_step": 2001, "train/anytime_score": 0.5}\n')
    assert tail_progress(tmp_path) == {"step": 2001, "metric_name": "train/anytime_score", "metric_value": 0.5,
                                       "metric_nonfinite": None}


def test_progress_from_rows_longer_than_the_first_read(tmp_path):
    """A paper-scale verl row (hundreds of metrics, per budget and per worker) is longer than the first
    read of the file's end: the last row is still found, whole, not the row before it and not none (it
    once read 16 KB only, and such a run showed no step in `arctl status`)."""
    from arctl.launch.progress import TAIL_BYTES, tail_progress

    def row(step):
        data = {f"perf/worker_{k}/time_{j}": 0.125 for k in range(40) for j in range(60)}
        return json.dumps({"step": step, "data": {**data, "train/reward/mean": step / 10}})

    assert len(row(1)) > 4 * TAIL_BYTES
    (tmp_path / "verl_metrics.jsonl").write_text("\n".join(row(s) for s in range(1, 4)) + '\n{"step": 4, "data": {"pe')
    assert tail_progress(tmp_path) == {"step": 3, "metric_name": "train/reward/mean", "metric_value": 0.3,
                                       "metric_nonfinite": None}
    (tmp_path / "verl_metrics.jsonl").write_text(row(7))  # one row, the file's first line
    assert tail_progress(tmp_path)["step"] == 7


def test_progress_is_the_furthest_step_of_the_metrics_files(tmp_path):
    """A resumed verl run: metrics.jsonl holds the steps earlier attempts kept (0-2), verl's file log
    the running attempt's (3). Before, metrics.jsonl was read first and `arctl status` showed step 2
    for a run that had completed step 3."""
    from arctl.launch.progress import tail_progress

    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"trainer/global_step": i, "train/anytime_score": i / 10}) + "\n" for i in range(3)))
    (tmp_path / "verl_metrics.jsonl").write_text(json.dumps({"step": 3, "data": {"train/anytime_score": 0.3}}) + "\n")
    assert tail_progress(tmp_path) == {"step": 3, "metric_name": "train/anytime_score", "metric_value": 0.3,
                                       "metric_nonfinite": None}


def test_the_count_backend_rewinds_its_log_to_the_checkpoint_a_kill_left(tmp_path):
    """A job killed after logging step 3 but before its checkpoint said 3: the resume does step 3 again
    and the log keeps it once (the order of the two writes once lost a step in the kill -9 tests)."""
    from arctl.launch.testing import train

    run_dir = _run_dir(tmp_path, steps=4)
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    (run_dir / "checkpoints" / "state.json").write_text(json.dumps({"step": 2}))
    (run_dir / "steps.log").write_text("".join(f"0 {s} 1\n" for s in (1, 2, 3)))
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert train(config, run_dir) == "completed"
    assert [s for _, s in _steps(run_dir)] == [1, 2, 3, 4]


def test_the_count_backend_never_checkpoints_a_step_it_has_not_logged(tmp_path, monkeypatch):
    """The job dies as it logs step 2 (a kill between the two writes): the checkpoint still says 1, so
    the resume logs step 2 (checkpointing first had lost it: CI's kill -9 test saw 1-4, 6-40)."""
    import builtins

    import arctl.launch.testing as count

    run_dir = _run_dir(tmp_path, steps=4)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())

    class Dies:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            if text.split()[1] == "2":
                raise KeyboardInterrupt("killed as it logs step 2")
            return self.f.write(text)

        def flush(self):
            self.f.flush()

    monkeypatch.setattr(count, "open", lambda *a, **k: Dies(builtins.open(*a, **k)), raising=False)
    with pytest.raises(KeyboardInterrupt):
        count.train(config, run_dir)
    monkeypatch.undo()
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    assert count.train(config, run_dir) == "completed"
    assert [s for _, s in _steps(run_dir)] == [1, 2, 3, 4]


def test_a_local_job_launched_inside_a_slurm_allocation_is_the_local_job(monkeypatch):
    """From a review: `arctl run --executor local` from an salloc shell recorded executor slurm and the
    allocation's job id (SLURM's variables were read first); a repair then rebuilt it as a SLURM run."""
    from arctl.launch.job import current_executor, current_job_id

    for key, value in {"SLURM_JOB_ID": "4242", "SLURM_ARRAY_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": "0",
                       "SUBMITIT_LOCAL_JOB_ID": "777"}.items():
        monkeypatch.setenv(key, value)
    assert (current_job_id(), current_executor()) == ("777", "local")
    monkeypatch.delenv("SUBMITIT_LOCAL_JOB_ID")
    assert (current_job_id(), current_executor()) == ("4242_0", "slurm")


def _job_under_submitit(run_dir: Path, submitit, signals) -> str:
    """``RunJob()(run_dir)`` with ``submitit``'s bound ``handler`` as the requeue signal's handler (as submitit's
    checkpoint_and_try_requeue is: RunJob calls it to requeue), ``signals()`` run beside it in a thread; the
    handler is put back after."""
    import threading

    from submitit.core.job_environment import JobEnvironment

    usr = JobEnvironment._usr_sig()
    before = signal.signal(usr, submitit.handler)
    thread = threading.Thread(target=signals)
    thread.start()
    try:
        return RunJob()(str(run_dir))
    finally:
        thread.join()
        signal.signal(usr, before)


def test_a_cancel_during_a_time_limit_checkpoint_is_not_requeued(tmp_path, monkeypatch, waiter):
    """From a review: `arctl cancel` (TERM) landing while a local run saved its time-limit checkpoint (after
    USR1/USR2) was requeued all the same: the controller started the run again and the cancel was lost."""


    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.05")
    monkeypatch.setenv("ARCTL_TEST_STOP_S", "1.0")  # the stop checkpoint takes a second: the TERM comes in it
    run_dir = _run_dir(tmp_path, steps=200)
    requeued = []

    class Submitit:  # submitit's checkpoint_and_try_requeue is a bound method; RunJob calls it to requeue
        def handler(self, signum, frame):
            requeued.append(signum)

    def signals():
        waiter(lambda: (run_dir / "steps.log").exists() and len(_steps(run_dir)) >= 2, 60, "2 steps")
        os.kill(os.getpid(), signal.SIGUSR1)  # the time limit's warning
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGTERM)  # the cancel

    assert _job_under_submitit(run_dir, Submitit(), signals) == "preempted"
    assert requeued == [] and read_status(run_dir)["state"] == "preempted"


def test_the_stopping_state_is_written_outside_the_signal_handler_in_order(tmp_path, monkeypatch, waiter):
    """From a review: the signal handler wrote "stopping" itself; landing inside a write of the progress tap's (the
    same thread), that write then put its stale "running" back, and a cancelled SLURM run was taken for stopped
    before its checkpoint was saved. The handler only sets the stop; a thread writes "stopping", every write of
    the process is one at a time, and "stopping" comes before the attempt's last write."""
    import threading

    from arctl.launch import job

    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.05")
    monkeypatch.setenv("ARCTL_TEST_STOP_S", "0.5")
    run_dir = _run_dir(tmp_path, steps=200)
    writes = []
    real = job.write_status

    def recorded(path, **fields):
        if "state" in fields:
            writes.append((fields["state"], threading.current_thread().name))
        return real(path, **fields)

    monkeypatch.setattr(job, "write_status", recorded)

    def stop():
        waiter(lambda: (run_dir / "steps.log").exists() and len(_steps(run_dir)) >= 2, 60, "2 steps")
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=stop)
    thread.start()
    try:
        result, received = job.run_job(run_dir)
    finally:
        thread.join()
    assert (result, received) == ("preempted", [signal.SIGTERM])
    assert [state for state, _ in writes] == ["running", "stopping", "preempted"]
    assert writes[1][1] == "arctl-stopping" and read_status(run_dir)["state"] == "preempted"


@pytest.mark.parametrize("spent", [False, True], ids=["requeued", "requeues-spent"])
def test_a_time_limit_after_the_last_requeue_ends_the_job_preempted_saying_so(tmp_path, monkeypatch, waiter, capsys,
                                                                              spent):
    """From a hunt of paper-scale runs: submitit requeues a job at most MAX_REQUEUES times after its time limit; at
    the next one its handler raises "timed-out too many times", and the job had written "requeued" first (a
    status no requeue followed). Now such a job does not call it: it ends preempted and says how to go on."""

    from submitit.core.job_environment import JobEnvironment

    from arctl.launch.executors import MAX_REQUEUES

    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.05")
    run_dir = _run_dir(tmp_path, steps=200)
    requeued = []

    class Delayed:
        _timeout_countdown = 0 if spent else MAX_REQUEUES

    class Submitit:  # submitit's JobEnvironment, as its bound checkpoint_and_try_requeue shows it
        _delayed = Delayed()

        def has_timed_out(self):
            return True

        def handler(self, signum, frame):
            requeued.append(signum)

    usr = JobEnvironment._usr_sig()

    def time_limit():
        waiter(lambda: (run_dir / "steps.log").exists() and len(_steps(run_dir)) >= 2, 60, "2 steps")
        os.kill(os.getpid(), usr)

    assert _job_under_submitit(run_dir, Submitit(), time_limit) == "preempted"
    if spent:
        assert requeued == [] and read_status(run_dir)["state"] == "preempted"
        said = capsys.readouterr()
        assert (f"not requeued: the time limit came {MAX_REQUEUES + 1} times (submitit requeues a job at most "
                f"{MAX_REQUEUES}); `arctl resume {run_dir.name} --workdir ") in said.out + said.err
    else:
        assert requeued == [usr] and read_status(run_dir)["state"] == "requeued"


def test_a_new_attempt_does_not_carry_the_last_one_s_signal(tmp_path):
    """From a hunt: status.json of a new attempt kept the previous attempt's "signal": "SIGTERM", which the debug
    launch's stop line reads."""
    from arctl.launch.job import _start_attempt
    from arctl.launch.status_file import write_status

    run_dir = _run_dir(tmp_path)
    write_status(run_dir, state="preempted", signal="SIGTERM")
    _start_attempt(run_dir)
    assert read_status(run_dir)["state"] == "running" and read_status(run_dir).get("signal") is None
