"""Open the W&B run of one arctl run with the project's conventions (trainers call this).

Conventions (docs/metrics.md): ``dir = run_dir/wandb``, project from ``config.wandb.project``,
group = experiment (or ``config.wandb.group``, e.g. a sweep name), name = ``{arm}-s{seed}``, the
resolved config as W&B config, every metric stepped by ``trainer/global_step``, offline by default,
and the .wandb file flushed every ``flush_interval_s`` seconds instead of wandb's 15 s so a killed
job loses at most that much history.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from arctl.track.identity import RESUME, WandbIdentity, run_name, set_environment  # noqa: F401 - run_name: API
from arctl.track.identity import wandb_dir as identity_wandb_dir
from arctl.track.metrics_schema import STEP_KEY

DEFAULT_FLUSH_INTERVAL_S = 2.0
CLOSE_WAIT_S = 60.0  # how long close_run waits for a W&B service it does not own to complete the file
CLOSE_DEADLINE_S = 300.0  # how long close_run lets W&B finish the run and stop its service (wandb waits for ever)
METRICS_FILE = "metrics.jsonl"  # a run's own record of the rows it logged, in run_dir (trainers write it)
VERL_METRICS_FILE = "verl_metrics.jsonl"  # verl's FileLogger output in run_dir (VERL_FILE_LOGGER_PATH)
CLOSE_DEADLINE_ENV = "ARCTL_WANDB_CLOSE_DEADLINE_S"  # seconds, overriding CLOSE_DEADLINE_S (tests: a small one)


def wandb_init_kwargs(config: dict, run_dir: str | Path, *, mode: str | None = None,
                      flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S) -> dict:
    """The ``wandb.init`` keyword arguments for ``config`` (without importing wandb): those of its
    :class:`~arctl.track.identity.WandbIdentity`, ``mode`` overriding ``wandb.mode``."""
    return WandbIdentity.from_config(config, run_dir, mode=mode).init_kwargs(config)


def logged_steps(run_dir: str | Path) -> list[int]:
    """The ``trainer/global_step`` values in the run's own offline W&B files (rewinds applied), in order."""
    from arctl.track.runs import stitch_fragments
    from arctl.track.wandbfile import read_wandb_file

    frags = []
    for path in sorted((Path(run_dir) / "wandb").rglob("run-*.wandb")):
        try:
            frags.append(read_wandb_file(path, summary=False))
        except Exception:  # noqa: BLE001 - an unreadable fragment holds nothing we can count on
            continue
    wide, _ = stitch_fragments(frags) if frags else (None, None)
    return sorted(int(s) for s in wide.index) if wide is not None else []


def last_logged_step(run_dir: str | Path) -> int | None:
    """The last ``trainer/global_step`` in the run's own offline W&B files (rewinds applied), or
    None when they hold no history."""
    steps = logged_steps(run_dir)
    return steps[-1] if steps else None


def history_gap(config: dict, run_dir: str | Path, resume_at: int, history: list[dict] | tuple = (),
                first: int | None = None) -> int | None:
    """The first step of ``first..resume_at`` that the run's W&B history would lack after a resume from the
    checkpoint of ``resume_at`` (:func:`open_run` keeps the W&B files' steps up to its rewind and re-logs the rows
    of ``history``, the run's metrics file, after it), or None where it would hold every one. ``first``: the
    run's first logged step (None: 0 where a record holds a step 0, else 1). With W&B disabled, ``history`` alone.

    Checked before W&B is opened: a checkpoint is durable, the rows it covers were not (a job's metrics file
    unsynced, wandb-core's last rows unwritten), and from a hunt a node lost right after the step-4 checkpoint
    left metrics.jsonl and the .wandb file ending at step 2; the resume logged from step 5 and the run
    COMPLETED with steps 3..4 missing, no warning anywhere. The caller resumes from a checkpoint before the gap."""
    n = int(resume_at)
    rows = {int(r[STEP_KEY]) for r in history}
    logged = [] if (config.get("wandb") or {}).get("mode") == "disabled" else logged_steps(run_dir)
    rewind = min(logged[-1], n) if logged else -1  # as open_run rewinds
    kept = {s for s in logged if s <= rewind} | {s for s in rows if rewind < s <= n}
    if first is None:
        first = 0 if 0 in rows or 0 in logged else 1
    return next((s for s in range(int(first), n + 1) if s not in kept), None)


def gap_line(run_dir: str | Path, gap: int, resume_at: int) -> str:
    """What :func:`history_gap` found, in words (the start of a resume's warning or error line)."""
    return (f"step {gap}'s row is in neither {Path(run_dir) / METRICS_FILE} nor the W&B files "
            f"{Path(run_dir) / 'wandb'} (lost with the machine after the step-{resume_at} checkpoint?)")


def open_run(config: dict, run_dir: str | Path, *, mode: str | None = None,
             flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S, resume_at: int | None = None,
             history: list[dict] | tuple = (), restart: bool = False):
    """Start the W&B run for ``config`` and declare ``trainer/global_step`` as the step of every
    metric. Returns the ``wandb`` Run; log with :func:`log_row` (``_step`` = the global step).

    Resuming (``resume_at``: the last step the run keeps, its checkpoint's): the run's W&B history
    must hold every step exactly once, however the last attempt ended (kill -9 after logging steps
    past the checkpoint, or a W&B service killed before it wrote the last rows). The new fragment
    rewinds the run (``resume_from="<id>?_step=r"``) to ``r = min(last step in the W&B files,
    resume_at)`` and re-logs the rows ``r < step <= resume_at`` from ``history`` (the run's own
    metrics file); the caller logs from ``resume_at + 1``. ``restart``: the run starts over (an
    attempt that kept nothing); W&B files of earlier attempts are moved aside to
    ``run_dir/wandb-discarded/`` first, so they are not synced into the run."""
    import wandb

    kwargs = wandb_init_kwargs(config, run_dir, mode=mode, flush_interval_s=flush_interval_s)
    Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
    relog: list[dict] = []
    wandb_dir = Path(kwargs["dir"])
    if restart and kwargs.get("id") and any(wandb_dir.rglob("run-*.wandb")):
        discard = Path(run_dir) / "wandb-discarded" / time.strftime("%Y%m%d-%H%M%S")
        discard.mkdir(parents=True, exist_ok=True)
        for item in wandb_dir.iterdir():
            item.rename(discard / item.name)
    elif resume_at is not None and kwargs.get("id"):
        last = last_logged_step(run_dir)
        rewind = -1  # the W&B files hold no history (the service died before writing any): re-log it all
        if last is not None:
            rewind = min(last, int(resume_at))
            kwargs.pop("resume", None)
            kwargs["resume_from"] = f"{kwargs['id']}?_step={rewind}"
        relog = [row for row in history if rewind < int(row[STEP_KEY]) <= int(resume_at)]
    settings = wandb.Settings(
        x_transaction_log_flush_interval=float(flush_interval_s),
        silent=True,
        console="off",
    )
    # the process's environment while wandb sets itself up for this run (WandbIdentity.process_env): an offline
    # run sends nothing, and no shell variable gives the run what its config does not; a verl job exports
    # WANDB_RESUME=allow for verl's own tracker, which W&B refuses beside resume_from ("`fork_from`, `resume`, or
    # `resume_from` are mutually exclusive"): not for this init
    environ = WandbIdentity.from_config(config, run_dir, mode=mode).process_env(os.environ)
    if "resume_from" in kwargs and "WANDB_RESUME" in os.environ:
        environ["WANDB_RESUME"] = None
    environ = set_environment(environ)  # what it was: put back below
    argv, sys.argv = sys.argv, sys.argv[:1]  # W&B records the process's arguments in the run (see below)
    try:
        try:
            run = wandb.init(settings=settings, **kwargs)
        except Exception as err:  # noqa: BLE001 - what a server without rewind answers is not documented
            if kwargs.get("mode") != "online" or "resume_from" not in kwargs:
                raise
            # W&B's rewind is a private preview (not on self-managed servers): without it an online run
            # resumes where the server has it, and W&B drops the re-logged steps at or below that, in the
            # run's local files too: those steps keep the killed attempt's values (metrics.jsonl has the
            # redone ones). From a review: the resumed run failed at its first line on every requeue
            message = (f"W&B refused to rewind run {kwargs['id']} to step {kwargs['resume_from'].rsplit('=', 1)[1]} "
                       f"({type(err).__name__}: {' '.join(str(err).split())[:200]}): rewind is a W&B preview your "
                       "server may not have; resumed without it, W&B keeps the killed attempt's values of the steps "
                       "this attempt redoes (online and in the run's files; metrics.jsonl has the redone ones)")
            warnings.warn(message, stacklevel=2)
            print(f"arctl: WARNING {message}", flush=True)
            kwargs.pop("resume_from")
            kwargs["resume"] = RESUME
            run = wandb.init(settings=settings, **kwargs)
    finally:
        # W&B writes sys.argv[1:] into the run's metadata (its .wandb file, and W&B's server online): a debug
        # job trains inside the `arctl` command, whose arguments are what the user typed (from an audit: a
        # secret given in an override that a later one replaced). The run's config is what it ran with.
        sys.argv = argv
        set_environment(environ)
    run.define_metric(STEP_KEY)
    run.define_metric("*", step_metric=STEP_KEY)
    for row in relog:
        log_row(run, row)
    return run


def repair_history(config: dict, run_dir: str | Path, resume_at: int | None, history: list[dict] | tuple = ()) -> None:
    """Make the run's W&B files hold exactly the steps the run keeps before a trainer that opens its
    own W&B run with ``resume="allow"`` (verl's tracker) continues it: rewind to the checkpoint
    ``resume_at`` and re-log lost rows from ``history`` (:func:`open_run`, in a short fragment of its
    own), or move the files of an attempt that kept nothing aside (``resume_at`` None). Nothing is
    written when the files already end at ``resume_at``. Without W&B files (earlier attempts ran with
    ``wandb.mode=disabled``, or their service wrote none) the kept rows are logged into a new run: had
    they not been, the history would start after the checkpoint (from a hunt: steps 1..checkpoint lost
    on a resume that turned W&B on, though ``metrics.jsonl`` had them)."""
    wandb_dir = identity_wandb_dir(run_dir)
    if (config.get("wandb") or {}).get("mode") == "disabled":
        return
    if not any(wandb_dir.rglob("run-*.wandb")) and (resume_at is None or not history):
        return  # nothing logged, nothing to log
    if resume_at is not None and last_logged_step(run_dir) == int(resume_at):
        return
    run = open_run(config, run_dir, resume_at=resume_at, history=history, restart=resume_at is None)
    close_run(run)


def close_deadline_s() -> float:
    """Seconds :func:`close_run` gives W&B to finish a run: ``$ARCTL_WANDB_CLOSE_DEADLINE_S``, else
    :data:`CLOSE_DEADLINE_S` (also, with a warning, where the variable is not a positive number: the run is
    closing, an error now would lose its close)."""
    value = os.environ.get(CLOSE_DEADLINE_ENV)
    if not value:
        return CLOSE_DEADLINE_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if seconds > 0:
        return seconds
    message = f"{CLOSE_DEADLINE_ENV}={value!r} is not a positive number of seconds; {CLOSE_DEADLINE_S:g} s used"
    warnings.warn(message, stacklevel=3)
    print(f"arctl: WARNING {message}", flush=True)
    return CLOSE_DEADLINE_S


def _own_service():
    """This process's wandb-core (a ``subprocess.Popen``), or None where it uses another process's service
    (``WANDB_SERVICE`` inherited) or has none. W&B exposes it only through private attributes: None too
    where a W&B version moved them."""
    try:
        from wandb.sdk import wandb_setup

        setup = wandb_setup._singleton  # noqa: SLF001 - not wandb_setup.singleton(): that would set W&B up
        proc = setup._connection._proc if setup is not None and setup._connection is not None else None  # noqa: SLF001
        return getattr(proc, "_process", None)
    except Exception:  # noqa: BLE001 - a W&B whose internals differ: no service to stop
        return None


def close_run(run, wait_s: float | None = None, exit_code: int = 0) -> bool:
    """Finish ``run`` (W&B's exit record with ``exit_code``: non-zero for a run ending on an error, which
    W&B and arctl's reader call failed) and stop this process's W&B service, and return when its .wandb
    file is complete (ends with the exit record), as a resume in the same process reads it next.

    W&B's ``finish`` and ``teardown`` wait for wandb-core without a limit: a service that never answers (W&B
    online over a flaky network; a stopped wandb-core) held a finished job RUNNING for ever, which no cancel
    ended (from a hunt). They run in a thread given :func:`close_deadline_s` seconds; past that a warning
    line says so, this process's own wandb-core is killed (its file then lacks the run's close, maybe its last
    rows: it would otherwise be left stopped or hung after the job, a service of another process is left
    alone) and False is returned.

    ``finish`` returns before wandb-core has flushed and closed the file; ``wandb.teardown()`` waits for
    that only when this process started the service. A process that inherited ``WANDB_SERVICE`` from
    a parent (a job started by a process that runs W&B; a test suite run by a test) uses the parent's
    wandb-core, which writes the file a moment later (seconds on a loaded machine), so the file is
    polled for its exit record for up to ``wait_s`` seconds (default :data:`CLOSE_WAIT_S`); a warning says
    when it never came. Returns whether the file is complete (True also without a file to wait for): False
    where the exit record never came, as after wandb-core's first write error (ENOSPC: it writes nothing
    more, even once there is space again), or the close ran past its deadline, so the caller checks what the
    file holds (:func:`complete_history`) instead of taking the run for logged."""
    import wandb

    settings = getattr(run, "settings", None)
    sync_file = None if settings is None or settings.mode == "disabled" else Path(settings.sync_file)
    deadline_s = close_deadline_s()
    core = _own_service()
    failed: list[BaseException] = []

    def finish() -> None:
        try:
            try:
                run.finish(exit_code=exit_code)
            finally:
                wandb.teardown()
        except BaseException as err:  # noqa: BLE001 - raised in the caller's thread below
            failed.append(err)

    closer = threading.Thread(target=finish, name="arctl-wandb-close", daemon=True)
    closer.start()
    closer.join(deadline_s)
    if closer.is_alive():
        what = f"wandb-core (pid {core.pid}) killed" if core is not None and core.poll() is None else \
            "its service (not this process's) left as it is"
        message = (f"W&B did not finish the run within {deadline_s:g} s ({CLOSE_DEADLINE_ENV}); {what}; its "
                   f"files {sync_file.parent if sync_file else 'of the run'} may lack their last rows and the run's close")
        warnings.warn(message, stacklevel=2)
        print(f"arctl: WARNING {message}", flush=True)
        if core is not None and core.poll() is None:
            # W&B's own teardown (the thread's, once its connection breaks) then forgets the dead service, so
            # a later wandb.init in this process (complete_history's re-log) starts a new one
            core.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                core.wait(timeout=10.0)
            closer.join(10.0)
        return False
    if failed:
        raise failed[0]
    if sync_file is None or not sync_file.exists():
        return True
    from arctl.track import wandbfile

    wait_s = CLOSE_WAIT_S if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    while not wandbfile.has_exit_record(sync_file):
        if time.monotonic() > deadline:
            warnings.warn(f"{sync_file}: W&B's service has not completed the run's file {wait_s:g} s after "
                          "the run finished; its last rows may be missing when it is read now", stacklevel=2)
            return False
        time.sleep(0.05)
    return True


def complete_history(config: dict, run_dir: str | Path, history: list[dict] | tuple, closed: bool = True) -> str | None:
    """After a run's close (``closed``: :func:`close_run`'s answer): make its W&B files hold every row of
    ``history`` (the run's metrics.jsonl, the record of what it logged) and end with the run's exit record.
    wandb-core takes rows it then never writes: after its first write error (a disk full for a few seconds)
    it writes nothing more, and the run "completed" with a .wandb file of no history, which no resume
    repairs (from a hunt: `arctl report` read no run, only `--force` retraining recovered it). The steps the
    files lack (read back as a resume reads them, :func:`last_logged_step`) are re-logged into a new fragment
    (:func:`open_run`, rewound to the last step they hold); a close that never completed gets one too (its
    end may be lost). Returns None when the files are complete (now), else what they still lack in words
    ("steps 3..6", "the run's close"): the caller must not end the run completed, so that its next attempt
    re-logs it (a resume's :func:`open_run` does, from metrics.jsonl, training nothing)."""
    if (config.get("wandb") or {}).get("mode") == "disabled":
        return None
    steps = sorted({int(r[STEP_KEY]) for r in history})
    if not steps:
        return None if closed else "the run's close"
    last = last_logged_step(run_dir)
    if closed and last is not None and last >= steps[-1]:
        return None
    try:
        closed = close_run(open_run(config, run_dir, resume_at=steps[-1], history=history))
    except Exception as err:  # noqa: BLE001 - any failure leaves the history to the next attempt
        closed = False
        print(f"arctl: WARNING re-logging the run's W&B history failed ({type(err).__name__}: "
              f"{' '.join(str(err).split())[:200]})", flush=True)
    last = last_logged_step(run_dir)
    missing = [s for s in steps if last is None or s > last]
    if missing:
        return f"step {missing[0]}" if len(missing) == 1 else f"steps {missing[0]}..{missing[-1]}"
    return None if closed else "the run's close"


def log_row(run, row: dict) -> None:
    """``run.log`` with W&B's own ``_step`` equal to ``row[trainer/global_step]``, so a later
    fragment can rewind the run to a global step."""
    run.log(row, step=int(row[STEP_KEY]))
