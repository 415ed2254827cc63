"""``train(config, run_dir, stop_event)``: run one arctl config on verl 0.9.1, in this process.

The job entry calls it on the Ray head node (``RAY_ADDRESS`` set by the job body of
:mod:`arctl.backends.verl.ray_job` on SLURM, one node or many; verl starts a local Ray otherwise;
with ``RAY_ADDRESS`` it first waits for the head's port). It builds the verl
override list, composes and checks verl's own config, points W&B at ``run_dir/wandb`` (project,
group = experiment, name = ``{arm}-s{seed}``, resumable id), then runs ``verl.trainer.main_ppo``'s
``run_ppo`` with the v1 task runner (trainer mode ``arctl``). Checkpoints go to
``run_dir/checkpoints``; ``trainer.resume_mode=auto`` resumes from the one verl's tracker names: the newest
complete one whose steps' rows the run holds (:func:`arctl.backends.verl.history.prepare_resume`).

``stop_event`` set (SLURM's time-limit warning USR1, ``cluster.preempt_warning_s`` before the limit)
-> the file ``run_dir/STOP`` appears; the trainer finishes the step in progress, checkpoints and
ends. If the step is still running after half of the warning (:data:`STEP_GRACE_FRACTION`), or at
once when the job entry asks to abandon (``stop_event.abandon``: SIGTERM, seconds before a kill),
the step is abandoned: the run is interrupted, the last checkpoint is kept, and the requeued job
resumes from it. Either way ``train`` returns ``"preempted"``.

Eval-only mode (``verl.eval_only=true``, optional ``verl.eval_checkpoint``): anytime evaluation of a
checkpoint on the ``eval.grid`` budgets (32 by default) for ``eval.final_datasets``, logged as
``eval/{dataset}/acc@{budget}``, ``anytime_acc``, ``final_acc``.

Smoke mode (``verl.smoke=true``): the plumbing checks of :mod:`arctl.backends.verl.smoke` (plugin,
verl config, Ray on every node, data, model, GPUs) instead of training; ``run_dir/smoke.json``.
Rehearsal mode (``verl.rehearsal_steps=N``): :mod:`arctl.backends.verl.rehearsal` runs N sleeping
steps in place of verl's ``run_ppo`` (no data, no GPU) through this same stop, checkpoint and
abandonment path.

``python -m arctl.backends.verl.trainer RUN_DIR`` runs ``RUN_DIR/config.yaml``.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from arctl.backends.base import stop_follows
from arctl.backends.verl import stop_request
from arctl.backends.verl.overrides import (  # noqa: F401 - ALLOW_CPU_ENV: tests set it through this module
    ALLOW_CPU_ENV,
    VerlConfigError,
    data_dir,
    on_cpu,
    verl_setting,
)
from arctl.backends.verl.ray_connect import task_failure
from arctl.backends.verl.run_config import platform_env, verl_run_config, with_wandb_env
from arctl.track.phase import scan_warning


class VerlRunFailed(RuntimeError):
    """verl's loop raised in a Ray actor: the message names the remote calls and the original error."""
STEP_GRACE_FRACTION = 0.5  # of cluster.preempt_warning_s: the step in progress may finish; the rest saves and exits


def _check_inputs(config: dict, cfg: Any) -> None:
    from arctl.backends.verl.run_config import inputs_problem

    if problem := inputs_problem(config, cfg):
        raise VerlConfigError(problem)
    import torch

    if not torch.cuda.is_available() and os.environ.get(ALLOW_CPU_ENV) != "1" and not on_cpu(config):
        raise VerlConfigError(
            "the verl backend needs CUDA GPUs (vLLM rollout, FSDP actor) and this machine has none — "
            "use --scale tiny (CPU backend) or submit to a GPU cluster"
        )


def _of_warning(fraction: float, config: dict, stop_event: threading.Event | None) -> float:
    """``fraction`` of the run's warning before its time limit (``cluster.preempt_warning_s``, 60 s
    where unset); none when the job entry asks to abandon (``stop_event.abandon``, SIGTERM: the
    scheduler kills soon after)."""
    if stop_event is not None and getattr(stop_event, "abandon", False):
        return 0.0
    return fraction * float((config.get("cluster") or {}).get("preempt_warning_s") or 60)


def step_grace_s(config: dict, stop_event: threading.Event | None) -> float:
    """Seconds the step in progress may take after a stop request before it is abandoned: half of the
    warning (none under SIGTERM)."""
    return _of_warning(STEP_GRACE_FRACTION, config, stop_event)


def save_wait_s(config: dict, stop_event: threading.Event | None) -> float:
    """Seconds after a stop request up to which a checkpoint save in progress (and then its step) is
    waited for before the step is abandoned: :data:`~arctl.backends.verl.stop_request.SAVE_WAIT_FRACTION`
    of the warning (none under SIGTERM)."""
    return _of_warning(stop_request.SAVE_WAIT_FRACTION, config, stop_event)


class _WallClock:
    """The watcher's time: the wall clock, and an event waited for up to a timeout (whether it was set). Tests
    pass a clock of their own that moves time itself (tests/verl/test_stop_request.py)."""

    @staticmethod
    def time() -> float:
        return time.time()

    @staticmethod
    def wait(event: threading.Event, timeout: float) -> bool:
        return event.wait(timeout=timeout)


def _watch(stop_event: threading.Event, stop_file: Path, done: threading.Event, config: dict,
           abandoned: threading.Event, lock: threading.Lock, clock: Any = _WallClock) -> None:
    """On a stop request: ask the trainer to checkpoint after its step (STOP file, with the time it
    will be abandoned); when the step outlives its grace, abandon it (interrupt the run in the main
    thread), unless a checkpoint save is in progress (SAVING file): that is waited for, up to
    :func:`save_wait_s` after the request. ``clock``: its time and waits (:class:`_WallClock`)."""
    while not done.is_set():
        if clock.wait(stop_event, 1.0):
            # from the signal (the job entry's stop_event.at), not from now: a warning that came while the
            # attempt was starting (a merge, Ray's head) has used part of the time before the scheduler's kill
            asked, grace = float(getattr(stop_event, "at", None) or clock.time()), step_grace_s(config, stop_event)
            stop_request.request(stop_file, asked + grace)
            if clock.wait(done, max(0.0, asked + grace - clock.time())):
                return
            # a save in progress at the end of the grace is waited for, and then the rest of its step (the
            # trainer logs the step's row after the save): abandoned at once, the row would be lost
            marker, saw, wait = stop_request.saving_marker(stop_file), False, save_wait_s(config, stop_event)
            while marker is not None and (saw or marker.exists()) and clock.time() < asked + wait:
                if not saw:
                    print(f"arctl: a checkpoint save is in progress at the end of the step's grace ({grace:g} s); "
                          f"waiting for it and its step, up to {wait:g} s after the stop request",
                          file=sys.stderr, flush=True)
                    saw = True
                if clock.wait(done, 0.5):
                    return
            with lock:
                if done.is_set():
                    return
                print(f"arctl: the step in progress did not end within {grace:g} s of the stop request; "
                      "abandoning it (the last checkpoint is kept)", file=sys.stderr, flush=True)
                abandoned.set()
                _thread.interrupt_main()
            return


def train(config: dict, run_dir: Path, stop_event: threading.Event | None = None) -> str:
    """Run the config on verl; return ``"completed"`` or ``"preempted"``.

    ``verl.smoke=true``: only the plumbing checks of :mod:`arctl.backends.verl.smoke` (no GPU
    work), written to ``run_dir/smoke.json``; returns ``"completed"`` when they pass.
    """
    run_dir = Path(run_dir)
    from arctl.backends.verl.ray_connect import keep_stop_signals

    keep_stop_signals()  # before any ray.init in this process: SIGTERM stays the job entry's
    if bool(verl_setting(config, "smoke")):
        from arctl.backends.verl.smoke import run_smoke

        run_smoke(config, run_dir)
        return "completed"
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / "wandb").mkdir(parents=True, exist_ok=True)
    stop_file = run_dir / stop_request.STOP_FILE
    stop_file.unlink(missing_ok=True)
    stop_request.saving_marker(stop_file).unlink(missing_ok=True)  # left by a save an earlier attempt lost
    stop_request.finished_marker(stop_file).unlink(missing_ok=True)
    from arctl.backends.verl.init_model import init_model_path

    start_model = init_model_path(config, run_dir)  # trainer.init_from: that run's final weights, merged
    if start_model:
        config = {**config, "model": {**config["model"], "path": start_model}}
    _, cfg = verl_run_config(config, run_dir)
    rehearsal = int(verl_setting(config, "rehearsal_steps") or 0) > 0
    if not rehearsal:
        _check_inputs(config, cfg)

    with_wandb_env(cfg, config, run_dir)
    os.environ.update(platform_env(config))  # this process too (the driver), before verl picks its platform
    if on_cpu(config):  # logical Ray GPUs: Ray refuses num_gpus > 0 beside an empty CUDA_VISIBLE_DEVICES
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    from arctl.backends.verl.history import prepare_attempt, prepare_resume

    # the newest complete checkpoint whose steps' rows the run holds (else an older one, the newer set aside; none
    # kept: ValueError), verl's tracker pointed at it
    point = prepare_resume(config, run_dir, Path(str(cfg.trainer.default_local_dir)))
    for note in point.notes:  # a checkpoint whose save did not finish, damaged since, or past lost rows: not resumed from
        print(f"arctl: WARNING {note}", file=sys.stderr, flush=True)
    scan_warning(run_dir, point.notes)  # (or an earlier attempt's cleared)
    resume_at, redo = point.step or None, point.redo_validation
    if not redo:  # none, or stale: a resume from an earlier checkpoint redoes the step, its validation with it
        stop_request.clear_skipped_validation(stop_file)
    if resume_at:  # the checkpoint's model was validated when test_freq said so: not again on every requeue,
        cfg.trainer.val_before_train = redo  # unless a stop skipped that validation: then it comes first
        cfg.arctl.redo_validation_at = resume_at if redo else None
    if redo:
        print(f"arctl: step {resume_at}'s validation was skipped by the stop; validating it before training",
              file=sys.stderr, flush=True)
    # W&B history = the steps up to the checkpoint, once each (to the step before it, when it is logged again)
    prepare_attempt(config, run_dir, resume_at, redo_validation=redo)
    if os.environ.get("RAY_ADDRESS"):  # the job body started the Ray head in the background
        from arctl.backends.verl.ray_connect import joining_kwargs, wait_for_head

        joining_kwargs(cfg)  # the head has its resources; ray.init refuses them for a running cluster

        wait_for_head(os.environ["RAY_ADDRESS"])

    done, abandoned, lock = threading.Event(), threading.Event(), threading.Lock()

    def stopped() -> bool:
        return abandoned.is_set() or stop_file.exists() or (stop_event is not None and stop_event.is_set())

    def finished(how: str) -> bool:  # verl logged the run's last step: complete, whatever stop came during it
        if stop_request.finished(stop_file) and stopped():
            print(f"arctl: the run's last step is logged; it is complete ({how} after the stop request)",
                  file=sys.stderr, flush=True)
            return True
        return False

    previous_sigint = None
    if stop_event is not None:
        if threading.current_thread() is threading.main_thread():
            # abandonment interrupts the main thread with SIGINT (interrupt_main), which Ray's blocking
            # get turns into KeyboardInterrupt; a job started in the background by a non-interactive
            # shell (the SLURM batch shell's job runner) inherits SIGINT *ignored*, which would make
            # the interrupt a no-op: handle it for the duration of the run
            previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Thread(target=_watch, args=(stop_event, stop_file, done, config, abandoned, lock),
                         daemon=True).start()
    try:
        try:
            try:
                if rehearsal:
                    from arctl.backends.verl.rehearsal import rehearse

                    rehearse(cfg, config, run_dir, stop_file)
                else:
                    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
                    from verl.utils.device import auto_set_device

                    from arctl.backends.verl import plugin

                    plugin.check_registered(cpu=on_cpu(config))  # a failed registration is this run's error, not a later one's
                    auto_set_device(cfg)
                    run_ppo(cfg, task_runner_class=TaskRunnerV1)
            except Exception as err:  # Ray's error: the remote traceback, or what died, in one line
                line = task_failure(err)
                if stop_follows(stopped, None if stop_event is not None else 0):  # no job entry: no signal to wait for
                    # a scancel's TERM reaches every process of the job at once: the Ray nodes go down
                    # with the trainer's step, whose error follows (or, by a few ms, precedes) the stop
                    # request it answers
                    if finished(f"{type(err).__name__} in the shutdown"):  # after verl logged the last step
                        return "completed"
                    said = line or f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
                    print(f"arctl: after the stop request the run ended with {said}; it resumes from its last "
                          "checkpoint", file=sys.stderr, flush=True)
                    return "preempted"
                if line is None:
                    raise
                raise VerlRunFailed(line) from err
        finally:
            with lock:  # the watcher interrupts only while the run has not ended
                done.set()
    except KeyboardInterrupt:  # also when the interrupt lands in the finally above
        if not abandoned.is_set():
            raise
        if finished("abandoned"):
            return "completed"
        print("arctl: step abandoned after the stop request; the run resumes from its last checkpoint",
              file=sys.stderr, flush=True)
        return "preempted"
    finally:
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
    return "preempted" if stopped() and not finished("ended") else "completed"


def main(argv: list[str] | None = None) -> int:
    from arctl.config import safe_yaml

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m arctl.backends.verl.trainer RUN_DIR", file=sys.stderr)
        return 2
    from arctl.backends.verl.ray_connect import RayConnectError
    from arctl.backends.verl.smoke import SmokeError

    run_dir = Path(args[0])
    config_path = run_dir / "config.yaml"
    if not config_path.exists():
        print(f"error: {config_path} does not exist — is {run_dir} an arctl run directory?", file=sys.stderr)
        return 2
    try:
        config = safe_yaml.load(config_path.read_text(encoding="utf-8"))
    except (safe_yaml.YamlError, UnicodeDecodeError, OSError) as err:
        print(f"error: {config_path} cannot be read: {err}", file=sys.stderr)
        return 2
    try:
        result = train(config, run_dir)
    except (VerlConfigError, RayConnectError, SmokeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
