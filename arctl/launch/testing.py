"""TEST-ONLY backend "count": a CPU job with the backend contract, for testing the launch layer.

Selected inside the job by ``ARCTL_TEST_BACKEND=count`` (never by a config). It counts
``trainer.total_steps`` steps, sleeping ``$ARCTL_TEST_STEP_S`` seconds (default 0.2) per step;
after every step it appends a line to ``steps.log`` (``attempt step pid``), then writes
``checkpoints/state.json`` (step, W&B run id); on start it resumes from the checkpoint and rewinds
``steps.log`` to it, as a trainer rewinds its history (a kill between the two writes neither loses
nor repeats a step). When
``wandb.mode`` is not ``disabled`` it logs each step to W&B (``dir=run_dir/wandb``, id from
``wandb.id``) with ``trainer/global_step``. ``stop_event`` set -> checkpoint (taking ``$ARCTL_TEST_STOP_S`` seconds, or until the file
``$ARCTL_TEST_STOP_GATE`` exists if that is set, whichever comes first), finish W&B, return
"preempted". With ``$ARCTL_TEST_GATE`` set, a job pauses after step ``$ARCTL_TEST_PAUSE_AFTER`` (default 0:
before its first) until that file exists or it is told to stop, so a test acts on a running job
without racing it to the end. A run of the arm ``$ARCTL_TEST_FAIL_ARM`` raises after its first step. It also writes ``received_config.json`` (the config exactly as the job got it), and, for
a run that starts from another's weights (``init_dir``), ``init.json`` (that run's id and final step).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from arctl.backends.base import BackendDefaults
from arctl.config.files import atomic_write
from arctl.launch.rundir import PATH_KEYS
from arctl.launch.status_file import read_status
from arctl.track.identity import WandbIdentity, set_environment
from arctl.track.metrics_schema import STEP_KEY, TRAIN_LOSS

ENV_STEP_S = "ARCTL_TEST_STEP_S"
ENV_STOP_S = "ARCTL_TEST_STOP_S"  # seconds the stop checkpoint takes (at most, with a gate)
ENV_STOP_GATE = "ARCTL_TEST_STOP_GATE"  # a file whose creation ends the stop checkpoint early
ENV_FAIL_ARM = "ARCTL_TEST_FAIL_ARM"  # the runs of this arm raise after their first step
ENV_GATE = "ARCTL_TEST_GATE"  # a file: jobs pause after step $ARCTL_TEST_PAUSE_AFTER until it exists
ENV_PAUSE_AFTER = "ARCTL_TEST_PAUSE_AFTER"
PAUSE_MAX_S = 300.0


def _stop_checkpoint_delay() -> None:
    """The time a stop checkpoint takes: $ARCTL_TEST_STOP_S seconds, cut short by the gate file."""
    deadline = time.monotonic() + float(os.environ.get(ENV_STOP_S, "0"))
    gate = os.environ.get(ENV_STOP_GATE)
    while time.monotonic() < deadline and not (gate and Path(gate).exists()):
        time.sleep(0.05)


def _pause(step: int, stop_event) -> None:
    """After step ``$ARCTL_TEST_PAUSE_AFTER`` (0: before the first), wait for the file ``$ARCTL_TEST_GATE``
    (if set) or a stop request, at most :data:`PAUSE_MAX_S` (a test that failed before opening its gate
    leaves no job behind for long)."""
    gate = os.environ.get(ENV_GATE)
    if not gate or step != int(os.environ.get(ENV_PAUSE_AFTER, "0")):
        return
    deadline = time.monotonic() + PAUSE_MAX_S
    while not Path(gate).exists() and not (stop_event is not None and stop_event.is_set()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"${ENV_GATE} ({gate}) was not created within {PAUSE_MAX_S:g} s")
        time.sleep(0.05)


def _save(path: Path, state: dict) -> None:
    atomic_write(path, json.dumps(state))


def _rewind_log(log: Path, step: int) -> None:
    """Drop the lines of ``log`` past ``step`` (logged by a job killed before its checkpoint), in place:
    a job of an earlier attempt still running appends to the same file, so an overlap stays visible. A
    line that does not read as ``attempt step pid`` is kept as it is."""
    if not log.exists():
        return
    lines = log.read_text().splitlines(keepends=True)

    def past(line: str) -> bool:
        fields = line.split()
        return len(fields) >= 2 and fields[1].isdigit() and int(fields[1]) > step

    kept = [line for line in lines if not past(line)]
    if kept != lines:
        with open(log, "r+") as f:
            f.write("".join(kept))
            f.truncate()


def train(config: dict, run_dir: Path, stop_event=None) -> str:
    run_dir = Path(run_dir)
    ckpt_dir = run_dir / "checkpoints"
    ckpt_dir.mkdir(exist_ok=True)
    ckpt = ckpt_dir / "state.json"
    (run_dir / "received_config.json").write_text(json.dumps(config, sort_keys=True))
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"step": 0}
    _rewind_log(run_dir / "steps.log", state["step"])
    if not ckpt.exists() and config.get("init_dir"):  # trainer.init_from: what it starts from, as tiny keeps it
        parent = json.loads((Path(config["init_dir"]) / "checkpoints" / "state.json").read_text())
        atomic_write(run_dir / "init.json", json.dumps({"run_id": Path(config["init_dir"]).name, "step": parent["step"]}))
    wandb_cfg = config.get("wandb", {})
    state.setdefault("wandb_id", wandb_cfg.get("id") or config["run_id"])
    total = int(config.get("trainer", {}).get("total_steps") or 10)
    step_s = float(os.environ.get(ENV_STEP_S, "0.2"))
    attempt = read_status(run_dir).get("attempt", 0)
    run = None
    # the W&B identity from its one builder (arctl.track.identity), with the checkpoint's run id
    identity = WandbIdentity.from_config({**config, "wandb": {**wandb_cfg, "id": state["wandb_id"]}}, run_dir)
    if identity.mode != "disabled":
        import wandb

        saved = set_environment(identity.process_env(os.environ))  # as open_run: an offline run sends nothing
        try:
            run = wandb.init(**identity.init_kwargs({k: v for k, v in config.items() if k not in PATH_KEYS}))
        finally:
            set_environment(saved)
        run.define_metric(STEP_KEY)
        run.define_metric("*", step_metric=STEP_KEY)
    try:
        with open(run_dir / "steps.log", "a") as log:
            while state["step"] < total:
                _pause(state["step"], stop_event)
                if stop_event is not None and stop_event.is_set():
                    _stop_checkpoint_delay()  # a stop checkpoint that takes time
                    _save(ckpt, state)
                    return "preempted"
                time.sleep(step_s)
                state["step"] += 1
                log.write(f"{attempt} {state['step']} {os.getpid()}\n")
                log.flush()
                _save(ckpt, state)
                if os.environ.get(ENV_FAIL_ARM) == config.get("arm"):
                    raise RuntimeError(f"arm {config.get('arm')} fails on purpose (${ENV_FAIL_ARM})")
                if run is not None:
                    run.log({STEP_KEY: state["step"], TRAIN_LOSS: 1.0 / state["step"]})
        return "completed"
    finally:
        if run is not None:
            run.finish()


class CountBackend(BackendDefaults):
    """The test-only ``count`` backend (:func:`train`), as the registry loads every backend."""

    name = "count"

    def train(self, config, run_dir, stop_event=None):
        return train(config, run_dir, stop_event)


BACKEND = CountBackend()
