"""The job entry point: every run, on every executor, runs ``RunJob()(run_dir)``.

``python -m arctl.launch.job RUN_DIR`` does the same outside submitit. The job reads the frozen
config from ``RUN_DIR/config.yaml`` — never from pickled arguments (the pickle holds only the
run directory) — so a requeued or resubmitted job always starts from the run's latest state.

Signals: SIGUSR1/SIGUSR2 (preemption / time limit) and SIGTERM set the backend's ``stop_event``;
the backend checkpoints, flushes W&B and returns ``"preempted"``. SIGTERM also sets
``stop_event.abandon = True``: the kill follows within seconds, so a backend whose step takes long
(verl) abandons the step in progress and keeps its last checkpoint instead of finishing it (the job's last line and
status.json's ``resume_step`` say which step the next attempt resumes from: :func:`resume_step`). After a USR signal the job
then requeues itself through submitit's checkpointing: submitit calls ``RunJob.checkpoint``,
which returns a ``DelayedSubmission`` of the same callable on the same run directory, dumps it and
runs ``scontrol requeue`` (SLURM) or exits with the requeue code (local). The restarted job resumes
from the checkpoint with the same run id and W&B run id, unless it and the attempt before it both ran to their
time limit without logging a step after the one they resumed from: a step that hangs would be requeued again and
again, each attempt for a whole time limit (:func:`_no_step_streak`; it ends FAILED: :func:`hung_line`). After
SIGTERM (cancel, node shutdown) it just exits (under SLURM with :data:`PREEMPTED_EXIT_CODE`, as every attempt that
ends unfinished and is not requeued, so that SLURM starts no run that waits for it: :func:`_ended_unfinished`);
``arctl sweep`` resumes it later (a stop `arctl cancel` asked for, which leaves its request in the
run's folder first, is "preempted" with ``cancelled: true``: :data:`arctl.launch.status_file.CANCEL_FILE`; a job that
finds that request as it starts trains nothing: "cancelled", no requeue). A debug
run (in the arctl process) takes SIGINT and SIGHUP (Ctrl-C, a closed session) as it takes SIGTERM, then ends its
launch with a KeyboardInterrupt; a second Ctrl-C stops it at once, without the checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import socket
import stat
import sys
import threading
import time
import traceback
from pathlib import Path

from submitit.helpers import Checkpointable, DelayedSubmission

from arctl.backends.base import PREEMPTED_EXIT_CODE
from arctl.config.files import atomic_write, nearest_existing
from arctl.launch.backends import backend_name, get_backend, resolve_backend
from arctl.launch.executors import LOCAL_GPUS_ENV, LOCAL_GPUS_UNSET, MAX_REQUEUES
from arctl.launch.joblog import (
    LINE_START,
    LOG_TAIL_BYTES,
    attempt_message,
    last_attempt_lines,
    log_line,
    stderr_logs,
)
from arctl.launch.progress import ProgressTap, file_marks, run_progress, schedule, watch_pace
from arctl.launch.provenance import record_attempt
from arctl.launch.rundir import read_run_config
from arctl.launch.status_file import cancel_requested_at, read_status, write_status
from arctl.launch.workspace import workdir_arg, workspace_root
from arctl.track.identity import API_KEY_ENV, recorded_secrets
from arctl.track.phase import read_phase, write_phase

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)
REQUEUE_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
# a debug run trains inside the arctl process, in the user's terminal: Ctrl-C and a closed session stop it too
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGHUP)
USER_STOPS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)  # a debug run's stop by the user: the launch ends too
FLUSH_ENV = "WANDB__TRANSACTION_LOG_FLUSH_INTERVAL"  # W&B's x_transaction_log_flush_interval


def heeded(signals) -> tuple[int, ...]:
    """The signals among ``signals`` that this process was not started ignoring: a background job of a shell
    script (``cmd &``: SIGINT ignored) or a ``nohup`` one (SIGHUP ignored) was told by whoever started it not
    to stop on them, and a handler of ours must not undo that. From a review: a debug run started as
    ``arctl run ... --executor debug &`` in a script was CANCELLED by a Ctrl-C meant for the script's
    foreground; under nohup, by the closed terminal's SIGHUP."""
    return tuple(s for s in signals if signal.getsignal(s) != signal.SIG_IGN)


class JobError(RuntimeError):
    """The backend did not return "completed" or "preempted"."""


def interruption(stop: BaseException | int) -> str:
    """How a stop by the user is named in a run's reason: ``"Ctrl-C"`` (SIGINT, or a KeyboardInterrupt that names
    no signal), ``"signal SIGHUP"`` (a signal number, or the launcher's KeyboardInterrupt("signal SIGHUP"))."""
    if isinstance(stop, int):
        return "Ctrl-C" if stop == signal.SIGINT else f"signal {signal.Signals(stop).name}"
    said = next((str(a) for a in getattr(stop, "args", ()) if str(a).startswith("signal ")), None)
    return "Ctrl-C" if said in (None, "signal SIGINT") else said


def user_stop(signum: int) -> KeyboardInterrupt:
    """The KeyboardInterrupt a debug run's stop by ``signum`` ends its launch with: Python's own for SIGINT,
    ``KeyboardInterrupt("signal SIGHUP")`` for the others, as the launcher raises them."""
    return KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def interrupted_line(how: str, saved: bool) -> str:
    """A run's reason once the user stopped it (``how``: :func:`interruption`); ``saved``: whether its stop
    checkpoint was written."""
    return f"interrupted ({how})" if saved else (f"interrupted ({how}) before its stop checkpoint was saved: "
                                                 "`arctl resume` goes on from its last one")


# submitit's own markers first: a local or debug job launched from a shell inside a SLURM allocation (salloc,
# srun --pty) has SLURM_JOB_ID too, and was recorded as that allocation's SLURM job (from a review: a repair
# rebuilt it as one)
_JOB_ENV = (("SUBMITIT_LOCAL_JOB_ID", "local"), ("SUBMITIT_DEBUG_JOB_ID", "debug"), ("SLURM_JOB_ID", "slurm"))


def current_job_id() -> str:
    env = os.environ
    key, kind = next(((k, name) for k, name in _JOB_ENV if env.get(k)), (None, None))
    if kind in (None, "slurm") and env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env[key] if key else f"pid{os.getpid()}"


def restore_gpus() -> str | None:
    """Give a local job the launching shell's ``CUDA_VISIBLE_DEVICES`` back: submitit's local controller sets
    it to its own ``gpus_per_node`` (none: ``""``), which hid every GPU from a verl run on a GPU workstation
    (from a review). :func:`arctl.launch.executors.local_executor` kept the shell's value (or its absence)."""
    kept = os.environ.pop(LOCAL_GPUS_ENV, None)
    if kept is not None and os.environ.get("SUBMITIT_EXECUTOR") == "local":
        if kept == LOCAL_GPUS_UNSET:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = kept
    return os.environ.get("CUDA_VISIBLE_DEVICES")  # what the job sees now


def current_executor() -> str | None:
    """The executor running this job (recorded in status.json: `arctl repair` rebuilds a registry row
    from it)."""
    return next((name for key, name in _JOB_ENV if os.environ.get(key)), None)


def _log(message: str) -> None:
    with contextlib.suppress(OSError):  # the log on a full disk: never an error of its own over the job's
        print(log_line(message), file=sys.stderr, flush=True)


ERROR_MARK = "ERROR "  # the job log's line that says why the attempt failed (:func:`reported_failure` reads it)
NOT_RECORDED = " (status.json could not be written)"
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
RECORD_TRIES = (0.5, 1.0, 2.0, 4.0)  # seconds between the tries to record a failure (a disk full for seconds)


def failure_line(err: BaseException, run_dir: Path) -> str:
    """The one line that says why the attempt failed (status.json's ``error``, the run's reason in `arctl
    status`). A full disk says so, where (the path the failed write names) and how much is free there (an exceeded
    quota says that instead, without the disk's free space, which contradicted "full": from a hunt): from a
    hunt, a checkpoint on a full disk failed as "RuntimeError: [enforce fail at inline_container.cc:672]
    unexpected pos 128 vs 0" and a warm-up cache as "SafetensorError: ... No space left on device", naming no
    path (the tiny backend now raises OSError(ENOSPC) with its path for both)."""
    line = " ".join(f"{type(err).__name__}: {err}".split())[:500]
    full = next((e for e in _causes(err) if isinstance(e, OSError) and e.errno in FULL_ERRNOS), None)
    if full is None:
        return f"{line}; {_thread_limit_hint()}" if _out_of_threads(err) else line
    where = f" at {full.filename}" if full.filename else ""
    # the job's own text, read in the user's shell (`arctl status`): it names the workspace, whatever the job's cwd
    then = (f"`arctl resume {run_dir.name}{workdir_arg(workspace_root(run_dir), stored=True)}` resumes the run "
            "from its last checkpoint")
    if full.errno == errno.EDQUOT:  # the user's share is spent, not the disk: its free space would contradict it
        return (f"your disk quota is exceeded{where} ({full.strerror or os.strerror(full.errno)}; see `quota`): "
                f"free some of your space there (or ask for a larger quota), then {then}")
    return (f"the disk is full{where} ({full.strerror or os.strerror(full.errno)}{_free_there(full.filename)}): "
            f"free some space, then {then}")


NO_THREAD = "can't start new thread"  # CPython's RuntimeError where the OS refuses a thread (EAGAIN)
# what wandb-core (Go) writes to the job log where the OS refuses it a thread; its own exit is then all W&B says
# ("wandb-core exited with code 2"): from the hunt of limits
GO_NO_THREAD = ("pthread_create failed: 11", "failed to create new OS thread")


def _out_of_threads(err: BaseException) -> bool:
    """Did the attempt fail because the OS gave it no more threads (the user's process limit, ``ulimit -u``)?
    CPython's "can't start new thread" in ``err`` or what it was raised from, or W&B's service gone with the
    Go runtime's "pthread_create failed: 11" at the end of this job's log (its stderr)."""
    texts = [str(e) for e in _causes(err)]
    if any(NO_THREAD in text for text in texts):
        return True
    return any("wandb-core" in text for text in texts) and any(mark in _own_log_tail() for mark in GO_NO_THREAD)


def _own_log_tail() -> str:
    """This attempt's lines at the end of the file this process's stderr writes to (the job log, which
    wandb-core's stderr shares), or "" where it is no readable file (a terminal, no /proc)."""
    try:
        if not stat.S_ISREG(os.fstat(2).st_mode):  # a pipe opened for reading here would wait for its writer
            return ""
    except (OSError, ValueError):
        return ""
    return "\n".join(last_attempt_lines(Path("/proc/self/fd/2"), LOG_TAIL_BYTES) or [])


def _thread_limit_hint() -> str:
    """What to do when the OS gives the job no more threads: the user's process limit, with its value."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        now = "" if soft == resource.RLIM_INFINITY else f", now {soft}"
    except (ImportError, OSError, ValueError, AttributeError):
        now = ""
    return (f"`ulimit -u` (the user's process limit{now}) reached: raise it, or run fewer at once "
            "(--array-parallelism)")


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from or during, outermost first."""
    seen: list[BaseException] = []
    while err is not None and not any(err is e for e in seen):
        seen.append(err)
        err = err.__cause__ or err.__context__
    return seen


def _free_there(path) -> str:
    """", N MiB free there" for the disk of ``path`` (its nearest existing folder), or "" where unknown."""
    if not path:
        return ""
    try:
        return f", {shutil.disk_usage(nearest_existing(os.fsdecode(path))).free / 2**20:.1f} MiB free there"
    except OSError:
        return ""


def _record_failure(run_dir: Path, line: str, step: int | None = None) -> bool:
    """status.json's "failed" with ``line`` and ``step``, the step its next attempt resumes from (:func:`resume_step`),
    tried again for a few seconds where the disk is full (from a hunt: the write raised ENOSPC itself, nothing was
    recorded, and the run later read "the job process died without reporting (killed?)"). Returns whether it was
    written."""
    for wait in (*RECORD_TRIES, None):
        try:
            write_status(run_dir, state="failed", error=line, ended_at=time.time(), resume_step=step)
            return True
        except OSError:
            if wait is None:
                return False
            time.sleep(wait)
    return False


def reported_failure(folders: list[Path]) -> str | None:
    """The reason the job's last attempt gave in its log (its last :data:`ERROR_MARK` line in a ``*_log.err`` of
    ``folders``, the first folder that has one), or None: what a run's reason is where status.json could not
    be written (a full disk)."""
    for folder in folders:
        logs = stderr_logs(folder)
        for path in reversed(logs):
            for text in reversed(last_attempt_lines(path) or []):
                if (m := _ERROR_LINE.match(text)) is not None:
                    return m.group(1).removesuffix(NOT_RECORDED)
        if logs:
            return None
    return None


_ERROR_LINE = re.compile(LINE_START + re.escape(ERROR_MARK) + "(.+)$")


CANCELLED = "cancelled"  # what run_job returns for an attempt `arctl cancel` stopped before it started (_start_attempt)


def _start_attempt(run_dir: Path) -> tuple[dict, int, dict, bool]:
    """Read the run's config and record this attempt as running; returns (config, attempt, metrics marks,
    cancelled). cancelled: `arctl cancel` asked the run to stop after this attempt was submitted (its request,
    :data:`arctl.launch.status_file.CANCEL_FILE`, is in the run's folder: the attempt's "submitted" removed any
    earlier one), and status.json says "cancelled" instead of "running": the attempt trains nothing. From a hunt: a
    job that caught the cancel's TERM as it started wrote "running" over the cancel's "cancelled", trained to its
    first checkpoint and wrote "preempted", beside the relaunch the CANCELLED run allowed. The cancel writes its
    request before it signals the job and then reads its status.json: a job that found no request here has its
    "running" read, or is a live job the cancel signalled, whose run it leaves active until the job has ended
    (:func:`arctl.launch.control.cancel_runs`)."""
    config = read_run_config(run_dir)
    attempt = int(read_status(run_dir).get("attempt", 0)) + 1
    marks = file_marks(run_dir)
    whose = {"job_id": current_job_id(), "executor": current_executor(), "host": socket.gethostname(),
             "pid": os.getpid()}
    asked = cancel_requested_at(run_dir)
    if asked is not None:  # (its attempt number stays the last one's: this one ran nothing)
        write_status(run_dir, state=CANCELLED, **whose, ended_at=time.time(), error=None, signal=None, cancelled=None)
        _log(f"run {config.get('run_id')} not started on {socket.gethostname()} (job {current_job_id()}): `arctl "
             f"cancel` asked it to stop at {time.strftime('%H:%M:%S', time.localtime(asked))}")
        return config, attempt, marks, True
    write_status(
        run_dir, state="running", **whose,
        started_at=time.time(), ended_at=None, error=None, attempt=attempt, signal=None, cancelled=None,  # (the last attempt's)
        # this attempt has logged nothing yet: the previous one's step is not its progress (it may
        # redo those steps from an earlier checkpoint), and metrics files that still hold what
        # earlier attempts logged are known by their marks
        step=None, metric_name=None, metric_value=None, metric_nonfinite=None, metric_files=marks, first_step=None,
        first_step_at=None, last_step=None, last_step_at=None, resume_step=None, **schedule(config),
        wandb_id=None if config.get("wandb", {}).get("mode") == "disabled" else config.get("wandb", {}).get("id"),
    )
    _log(attempt_message(config.get("run_id"), attempt, socket.gethostname(), current_job_id()))
    write_phase(run_dir, None)  # e.g. "waiting for <run>": the launcher's, while it was pending
    _record_code(run_dir, attempt)
    return config, attempt, marks, False


def _record_code(run_dir: Path, attempt: int) -> None:
    """provenance.json's record of the code this attempt starts with (:func:`record_attempt`: a job that waited
    in a queue runs the code on disk now, not the launch's). Best effort: a run is never failed for it (a full
    disk: a line in the job log)."""
    try:
        record_attempt(run_dir, attempt)
    except Exception as err:  # noqa: BLE001 - the record of the code, not the training: never the job's failure
        _log(f"the code this attempt runs was not recorded in provenance.json: {' '.join(str(err).split())[:300]}")


def run_job(run_dir: Path) -> tuple[str, list[int]]:
    """Train the run in ``run_dir``; return (result, signals received). result: the backend's ("completed",
    "preempted"), or :data:`CANCELLED` where `arctl cancel` asked the run to stop before this attempt started."""
    restore_gpus()  # before anything asks CUDA
    run_dir = Path(run_dir).resolve()
    stop_event = threading.Event()
    received: list[int] = []
    # a debug run (in the arctl process, in the user's terminal): Ctrl-C and a closed session (SIGHUP) stop it as
    # a TERM does, with a checkpoint; a second Ctrl-C stops at once, without it. From a hunt: a Ctrl-C printed a
    # 25-line traceback and the run was FAILED "KeyboardInterrupt:"
    debug = current_executor() == "debug"
    handled = STOP_SIGNALS + (heeded(TERMINAL_SIGNALS) if debug else ())  # (not those it was started ignoring)

    def on_signal(signum, _frame):  # no file written here: see write_stopping
        if signum in TERMINAL_SIGNALS and any(s in USER_STOPS for s in received):
            raise user_stop(signum)  # again: at once (the user will not wait for the step to end)
        received.append(signum)
        stop_event.at = getattr(stop_event, "at", None) or time.time()  # when the first stop signal came
        stop_event.abandon = getattr(stop_event, "abandon", False) or signum == signal.SIGTERM
        again = " (Ctrl-C again stops at once, without it)" if signum == signal.SIGINT else ""
        _log(f"caught {signal.Signals(signum).name}: asking the backend to checkpoint and stop{again}")
        stop_event.set()

    ended = threading.Event()
    ordered = threading.Lock()  # "stopping" is written, or never will be, before the attempt's last write

    def write_stopping() -> None:
        """status.json's "stopping" (the run stays active, not resumable, until "preempted"), written from this
        thread and not from the signal handler: a handler's write landed inside a write of the main thread's (the
        progress tap's) that then put its stale "running" back (from a review; status_file's lock orders the
        threads' writes, which a handler interrupting its own thread could not)."""
        while not ended.is_set():
            if stop_event.wait(0.1):
                with ordered:
                    if not ended.is_set():
                        with contextlib.suppress(OSError):
                            write_status(run_dir, state="stopping", signal=signal.Signals(received[0]).name)
                return

    stopping = threading.Thread(target=write_stopping, name="arctl-stopping", daemon=True)

    def end_stopping() -> None:
        """Before the attempt's last write: a "stopping" being written finishes first, and none comes after.
        Not a join of the thread, which polls every 0.1 s: every job's end waited ~0.05-0.1 s for it (the
        signal handler cannot wake it: it takes no lock, as a handler that interrupts its own thread must not)."""
        with ordered:
            ended.set()

    # first thing: submitit's own handler ignores TERM until here (a cancel that came this early was lost;
    # from a review)
    previous = {s: signal.signal(s, on_signal) for s in handled}
    try:
        config, attempt, marks, cancelled = _start_attempt(run_dir)
    except BaseException:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise
    if cancelled:  # cancelled after its submission: it ends here, trains nothing, is never requeued (RunJob)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        return CANCELLED, received
    tap = ProgressTap(run_dir)
    pace_stop = threading.Event()  # where the attempt's pace starts, for the time left in `arctl status`
    hidden: dict[str, str] = {}
    # everything after "running" fails the attempt as training does, recorded (from the hunt of limits: a thread
    # that could not start under `ulimit -u`, before this `try`, left "running" and read "died without reporting")
    try:
        stopping.start()  # after "running": a stop that came before it still ends up "stopping"
        mode = str(config.get("wandb", {}).get("mode", "offline"))
        os.environ.setdefault(FLUSH_ENV, "1")
        if mode != "online":
            os.environ.pop(API_KEY_ENV, None)  # not needed offline: keep it out of every child process
        # a W&B service inherited from the launching process (a notebook, a test run) is not ours: its
        # teardown would not wait for our files, and it may be gone before the job ends
        os.environ.pop("WANDB_SERVICE", None)
        hidden = hide_recorded_secrets(config)
        if mode != "disabled":
            tap.install()
        threading.Thread(target=watch_pace, args=(run_dir, marks, tap, pace_stop), daemon=True).start()
        check_init_run(config)
        train = resolve_backend(config)
        result = train(config, run_dir, stop_event)
    except BaseException as err:
        end_stopping()
        with contextlib.suppress(OSError):  # (its files on the full disk: the failure is what matters)
            tap.flush()
        stopped = isinstance(err, KeyboardInterrupt)  # the user's stop, not a failure: no traceback
        line = interrupted_line(interruption(err), saved=False) if stopped else failure_line(err, run_dir)
        # where its next attempt resumes (from a hunt: `arctl status` showed a failed verl run at the step it
        # reached, 14, where its newest complete checkpoint is 10)
        recorded = _record_failure(run_dir, line, resume_step(config, run_dir))
        if not (stopped and debug):  # a debug run's: said by its launch, in one line
            _log(f"{ERROR_MARK}{line}")
        if not stopped:
            with contextlib.suppress(OSError):
                traceback.print_exc()
        if not recorded:  # refresh takes the reason from this line (reported_failure), the job log's last
            _log(f"{ERROR_MARK}{line}{NOT_RECORDED}")
        raise
    finally:
        pace_stop.set()
        tap.uninstall()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.environ.update(hidden)  # (a debug run's process goes on: its next run, or launch, may name one)
    end_stopping()
    tap.flush()
    if result == "completed":
        write_status(run_dir, state="completed", ended_at=time.time())
        _log("completed")
        return result, received
    if result != "preempted":
        message = f"backend returned {result!r}, expected 'completed' or 'preempted'"
        write_status(run_dir, state="failed", error=message, ended_at=time.time())
        raise JobError(message)
    names = ",".join(signal.Signals(s).name for s in received) or "none"
    step = resume_step(config, run_dir)
    # a stop `arctl cancel` asked for (it left its request before the signal) says so: still "preempted" (what the
    # readers of before it take for a stop with a checkpoint), and `arctl repair` rebuilds it CANCELLED
    asked = {"cancelled": True} if cancel_requested_at(run_dir) is not None else {}
    write_status(run_dir, state="preempted", ended_at=time.time(), signal=names, resume_step=step, **asked)
    _log(preempted_line(names, step))
    return result, received


def hide_recorded_secrets(config: dict) -> dict[str, str]:
    """Remove from this process's environment, before the backend opens W&B, every secret W&B would record in the
    run's files (:func:`arctl.track.identity.recorded_secrets`: ``SLURM_JWT``, ...) that the run's
    ``cluster.secrets`` does not name; name -> value of those removed. From a hunt: a local or debug job (which
    gets the launching shell's whole environment) put the shell's ``SLURM_JWT`` into its .wandb file. The other
    secrets stay (W&B records none of them): a local job may need one it does not name (``HF_TOKEN`` for a
    gated model; cluster.secrets is for SLURM submissions), and Ray workers and verl's tracker inherit this
    environment. One the run names is its job's to use, and W&B records it."""
    named = {str(n) for n in (config.get("cluster") or {}).get("secrets") or []}
    return {name: os.environ.pop(name) for name in recorded_secrets(os.environ, named)}


def resume_step(config: dict, run_dir: Path) -> int | None:
    """The step the run's next attempt resumes from, as its backend finds its newest complete checkpoint
    (:meth:`arctl.backends.base.Backend.resume_step`; 0: none, it starts over); None where the backend cannot say
    (it has no such method, or its answer fails or is no step): a line about it is never the job's failure."""
    try:
        ask = getattr(get_backend(backend_name(config)), "resume_step", None)
        step = ask(config, run_dir) if callable(ask) else None
    except Exception:  # noqa: BLE001 - the run ended preempted all the same; only the line says less
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def found_resume_step(run_dir: Path) -> int | None:
    """:func:`resume_step` of the run in ``run_dir`` as its frozen config has it, for a job that could not record it
    (killed); None where the config cannot be read either."""
    from arctl.launch.rundir import RunDirError

    try:
        config = read_run_config(run_dir)
    except (RunDirError, OSError):
        return None
    return resume_step(config, run_dir)


def preempted_line(signals: str, step: int | None) -> str:
    """The job log's line of an attempt that ended preempted (``signals``: the names of those it received): where
    its next attempt resumes. Never "checkpoint written" (from a hunt: a verl step abandoned after a TERM writes
    none, and the line said so all the same, with only an older checkpoint on disk)."""
    if step is None:
        return f"preempted (signals: {signals})"
    if step == 0:
        return f"preempted (signals: {signals}); no checkpoint yet: the next attempt starts over"
    return f"preempted (signals: {signals}); resumes from step {step} (its newest complete checkpoint)"


def check_init_run(config: dict) -> None:
    """A run that starts from another run's final weights (``trainer.init_from``) needs that run
    completed: JobError (one line, in status.json and ``arctl logs``) otherwise. The run's folder
    is ``config["init_dir"]`` (:func:`arctl.launch.rundir.read_run_config`)."""
    init_dir = config.get("init_dir")
    if not init_dir:
        return
    state = read_status(Path(init_dir)).get("state")
    if state != "completed":
        raise JobError(f"starts from run {Path(init_dir).name}, which is {state or 'not started'} "
                       f"({init_dir}): `arctl run` launches it first")


def _requeues_spent(environment) -> bool:
    """Whether submitit's requeue handler (of ``environment``, its JobEnvironment) would give up instead of
    requeueing: its countdown of time-limit requeues (``max_num_timeout``) is spent. It would raise "timed-out too
    many times" after the job had written "requeued" (from a hunt of paper-scale runs: a status no requeue
    followed). Unknown (another submitit): False, as before."""
    countdown = getattr(getattr(environment, "_delayed", None), "_timeout_countdown", None)
    try:
        timed_out = bool(environment.has_timed_out())
    except Exception:  # noqa: BLE001 - submitit's own check: without it, requeue as before
        return False
    return isinstance(countdown, int) and countdown - timed_out < 0


HUNG_ATTEMPTS = 2  # attempts in a row, each to its time limit, that logged no step after the one they resumed from
NO_STEP_FILE = "no_step_attempts.json"  # in the run's folder: :func:`_no_step_streak`'s record of the last attempt


def hung_line(run_dir: Path, attempts: int, step: int) -> str:
    """The reason of a run ended FAILED for ``attempts`` in a row that logged no step after ``step``, each stopped by
    its time limit (:func:`_no_step_streak`), with the phase the last was in where it had one before its first step
    (from a hunt: a tiny warm-up longer than ``cluster.time_min`` started over at each attempt, and the line said only
    "hung")."""
    where = workdir_arg(workspace_root(run_dir), stored=True)  # always: a job knows no shell's
    phase = read_phase(run_dir)
    during = (f", the last while \"{' '.join(str(phase).split())}\": a start-up longer than the time limit starts over at each "
              "attempt; raise cluster.time_min" if phase else "")
    return (f"hung: {attempts} attempts in a row logged no step after {step} (each stopped at its time limit{during}); "
            f"`arctl resume {run_dir.name}{where}` tries again")


def _timed_out(environment) -> bool:
    """Whether submitit (``environment``, its JobEnvironment) takes this job's stop for its time limit, not a
    preemption; False where it cannot say (another submitit)."""
    try:
        return bool(environment.has_timed_out())
    except Exception:  # noqa: BLE001 - submitit's own check: without it, no stop counts as the time limit's
        return False


def _no_step_streak(run_dir: Path, timed_out: bool) -> tuple[int, int] | None:
    """Record in :data:`NO_STEP_FILE` how the attempt that just ended preempted after a requeue signal went:
    ``attempt``, ``resumes`` (the step its next attempt resumes from) and ``streak``, the attempts in a row up to it
    that were stopped by their time limit (``timed_out``: submitit's word) having logged no step after the one they
    resumed from (the previous attempt's ``resumes``) and saved no later checkpoint. Returns (streak, that step) once
    the streak is :data:`HUNG_ATTEMPTS` or more, else None. From a hunt: a verl step that hung was abandoned at each
    time limit and requeued, up to 20 times, each attempt 48 h on 8 GPUs. Conservative: a stop by a preemption,
    and an attempt whose previous one did not end so here (killed, failed, stopped by a TERM: the step it resumed
    from is unknown), count none. The record is never the job's failure (a full disk: none, no streak)."""
    status = read_status(run_dir)
    attempt, resumes = _count(status.get("attempt")), _count(status.get("resume_step"))
    if attempt is None:
        return None
    try:
        before = json.loads((run_dir / NO_STEP_FILE).read_text())
    except (OSError, ValueError):
        before = {}
    if not isinstance(before, dict) or _count(before.get("attempt")) != attempt - 1:
        before = {}  # an earlier attempt's record, or none: the step this one resumed from is unknown
    start = _count(before.get("resumes"))  # the step this attempt resumed from
    logged = run_progress(run_dir, status, active=True).get("step")  # the furthest step it logged
    none = (timed_out and start is not None and resumes is not None and resumes <= start
            and (logged is None or logged <= start))
    streak = (_count(before.get("streak")) or 0) + 1 if none else 0
    with contextlib.suppress(OSError):
        atomic_write(run_dir / NO_STEP_FILE, json.dumps({"attempt": attempt, "resumes": resumes, "streak": streak}))
    return (streak, start) if streak >= HUNG_ATTEMPTS else None


def _count(value) -> int | None:
    """``value`` where it is an int of at least 0 (not a bool), else None: a record read back is input."""
    return value if type(value) is int and value >= 0 else None


class RunJob(Checkpointable):
    """The submitit callable: ``RunJob()(run_dir)``; requeues itself after a preemption signal, unless the run
    hangs (:func:`_no_step_streak`: it ends FAILED)."""

    def __call__(self, run_dir: str) -> str:
        from submitit.core.job_environment import JobEnvironment

        usr = JobEnvironment._usr_sig()
        submitit_handler = signal.getsignal(usr)  # submitit's checkpoint_and_try_requeue, if any
        result, received = run_job(Path(run_dir))
        stops = [s for s in received if s in USER_STOPS]
        if stops and current_executor() == "debug":  # the user stopped the arctl process: its launch ends too
            raise user_stop(stops[0])
        # a local job's TERM beside the requeue signal is `arctl cancel` during the time limit's checkpoint: no
        # requeue, or the local controller started the run again and the cancel was lost. On SLURM a TERM then is
        # the time limit's own (a checkpoint that overran the warning), and SLURM requeues no cancelled job
        cancelled = signal.SIGTERM in received and current_executor() != "slurm"
        if result == "preempted" and any(s in REQUEUE_SIGNALS for s in received) and not cancelled:
            if callable(submitit_handler) and hasattr(submitit_handler, "__self__"):
                hung = _no_step_streak(Path(run_dir), _timed_out(submitit_handler.__self__))
                if hung is not None:  # requeued, it would hang again to its time limit: FAILED, one line why
                    line = hung_line(Path(run_dir), *hung)
                    recorded = _record_failure(Path(run_dir), line, read_status(Path(run_dir)).get("resume_step"))
                    _log(f"{ERROR_MARK}{line}{'' if recorded else NOT_RECORDED}")
                    raise JobError(line)
                if _requeues_spent(submitit_handler.__self__):
                    where = workdir_arg(workspace_root(Path(run_dir)), stored=True)  # always: a job knows no shell's
                    _log(f"not requeued: the time limit came {MAX_REQUEUES + 1} times (submitit requeues a job at "
                         f"most {MAX_REQUEUES}); `arctl resume {Path(run_dir).name}{where}` goes on")
                    return _ended_unfinished(result)  # ends preempted, as the job's last write says
                write_status(Path(run_dir), state="requeued")
                _log("requeueing through submitit")
                submitit_handler(usr, None)  # calls self.checkpoint(run_dir), requeues, exits
                return result  # (a task of rank > 0: its handler returns; the first one requeues the job)
        return _ended_unfinished(result)

    def checkpoint(self, run_dir: str) -> DelayedSubmission:  # type: ignore[override]
        """Resubmit the same callable on the same run directory (the state is on disk)."""
        return DelayedSubmission(RunJob(), run_dir)


def _ended_unfinished(result: str) -> str:
    """``result``, the attempt's end where no requeue follows; under SLURM, an attempt that did not complete
    ("preempted", or "cancelled" as it started) exits :data:`PREEMPTED_EXIT_CODE` instead (status.json already says
    how it ended), as ``python -m arctl.launch.job`` does: SLURM records the job FAILED, not COMPLETED, so a run that
    starts from this one (``--dependency=afterok``) is not started but cancelled (``--kill-on-invalid-dep``). From a
    hunt: a source stopped by a bare TERM (``scancel --signal=TERM``) exited 0, its dependent started, took its
    allocation and failed ("starts from run ..., which is preempted"). A refresh keeps status.json's end over SLURM's
    FAILED (:func:`arctl.launch.refresh.merge_state`). Local and debug jobs return it, as before."""
    if result not in ("preempted", CANCELLED) or current_executor() != "slurm":
        return result
    _log(f"exit code {PREEMPTED_EXIT_CODE}, not 0: the run did not complete, so SLURM records the job FAILED and starts "
         "no run that starts from it")
    raise SystemExit(PREEMPTED_EXIT_CODE)  # (not an Exception: submitit records no error and prints no traceback)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arctl.launch.job", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="the run directory (holding config.yaml)")
    args = parser.parse_args(argv)
    result, _ = run_job(args.run_dir)
    return 0 if result == "completed" else PREEMPTED_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
