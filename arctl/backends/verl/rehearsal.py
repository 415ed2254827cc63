"""CPU rehearsal of a verl run's training loop (``verl.rehearsal_steps=N``): the job body, the stop
and checkpoint path, abandonment, requeue and resume, without a GPU.

``train()`` runs :func:`rehearse` in place of verl's ``run_ppo``; everything around it is the real
run's: the SLURM job body (Ray head, per-job token), the job entry and its signal handling, the stop
watcher of :mod:`arctl.backends.verl.trainer` (STOP file, the deadline for the step in progress,
abandonment), W&B through the same identity and resumable id, checkpoints where verl writes them.
Each step is a Ray task of ``verl.rehearsal_step_s`` seconds on every node of the job's Ray cluster
(pinned to each, as verl's workers span the nodes; a plain sleep without ``RAY_ADDRESS``), so
abandoning a step interrupts a blocking ``ray.get`` as it would in ``run_ppo``, and a node that dies
fails the run as it would fail verl's. The loop mirrors verl's v1 trainer with arctl's hooks: resume from the newest
complete ``global_step_N`` (:mod:`arctl.backends.verl.checkpoints`), log ``trainer/global_step``, save every
``trainer.save_freq`` steps and at the end, and at the end of a step with the STOP file present save
and stop (:meth:`arctl.backends.verl.trainer_v1.ArctlPPOTrainer.on_step_end`).

``run_dir/rehearsal.json`` tells the step in progress (tests and users watch it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from arctl.backends.verl import checkpoints
from arctl.backends.verl.history import VERL_LOG
from arctl.config.files import atomic_write

PROGRESS_FILE = "rehearsal.json"


def save_checkpoint(checkpoint_dir: Path, step: int) -> None:
    """A checkpoint the way verl lays it out (``global_step_N/``, then the tracker file), marked
    complete as :class:`arctl.backends.verl.checkpoints.SaveOnce` marks verl's."""
    step_dir = checkpoints.folder(checkpoint_dir, step)
    (step_dir / "actor").mkdir(parents=True, exist_ok=True)
    (step_dir / "data.pt").write_text(json.dumps({"step": step}))
    (Path(checkpoint_dir) / checkpoints.TRACKER).write_text(str(step))
    checkpoints.mark_complete(checkpoint_dir, step)


def _progress(run_dir: Path, **fields: Any) -> None:
    atomic_write(run_dir / PROGRESS_FILE, json.dumps({**fields, "time": time.time(), "pid": os.getpid()}))


def _sleep_task(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _job_nodes(ray, expected: int) -> list[str]:
    """The ids of the job's Ray nodes, once ``expected`` (``cluster.nodes``) are alive (at most 300 s)."""
    from arctl.backends.verl.ray_connect import wait_for_nodes

    alive = wait_for_nodes(ray, expected, 300.0)
    if len(alive) < expected:
        raise RuntimeError(f"Ray has {len(alive)} of the job's {expected} nodes (cluster.nodes): a `ray start` "
                           "did not join; see the job log")
    return sorted(n["NodeID"] for n in alive)


def rehearse(cfg: Any, config: dict, run_dir: Path, stop_file: Path) -> None:
    """Run ``verl.rehearsal_steps`` sleeping steps with verl's checkpoint and stop semantics."""
    from arctl.backends.verl.overrides import verl_setting
    from arctl.track import metrics_schema as ms
    from arctl.track import writer

    run_dir = Path(run_dir)
    steps, step_s = int(verl_setting(config, "rehearsal_steps")), float(verl_setting(config, "rehearsal_step_s"))
    ckpt = Path(str(cfg.trainer.default_local_dir))
    save_freq = max(1, int(cfg.trainer.save_freq))
    start, _ = checkpoints.newest_complete(ckpt)  # where train() pointed verl's tracker
    run = None if (config.get("wandb") or {}).get("mode") == "disabled" else writer.open_run(config, run_dir)
    file_log = open(run_dir / VERL_LOG, "w")  # noqa: SIM115 - verl's FileLogger truncates it per attempt too
    ray = None
    if os.environ.get("RAY_ADDRESS"):
        import ray

        from arctl.backends.verl.ray_connect import ray_init_kwargs

        ray.init(**ray_init_kwargs(cfg), log_to_driver=False, logging_level="WARNING")
        sleep = ray.remote(num_cpus=0)(_sleep_task)
        nodes = _job_nodes(ray, int((config.get("cluster") or {}).get("nodes") or 1))

        def task(seconds: float):  # one task pinned to each node of the job, as verl's workers span them
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            return [sleep.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(seconds)
                    for n in nodes]
    failed = False
    try:
        print(f"arctl rehearsal: steps {start + 1}..{steps} of {step_s:g} s, checkpoints every {save_freq}", flush=True)
        for step in range(start + 1, steps + 1):
            _progress(run_dir, step=step, phase="running", resumed_from=start)
            if ray is not None:
                ray.get(task(step_s))
            else:
                time.sleep(step_s)
            row = {ms.STEP_KEY: step, ms.TRAIN_LOSS: 1.0 / step, ms.PERF_STEP_TIME_S: step_s}
            file_log.write(json.dumps({"step": step, "data": row}) + "\n")  # verl's FileLogger line
            file_log.flush()
            if run is not None:
                writer.log_row(run, row)  # verl's tracker: wandb.log(data, step=step)
            stop = stop_file.exists()
            if step % save_freq == 0 or step == steps or stop:
                save_checkpoint(ckpt, step)
                _progress(run_dir, step=step, phase="saved", resumed_from=start)
            if stop:
                print(f"arctl rehearsal: stop requested; checkpoint at step {step}", flush=True)
                break
    except BaseException:
        failed = True  # W&B's exit record says so, as verl's task runner does for a run that raised
        raise
    finally:
        file_log.close()
        if run is not None:
            try:
                writer.close_run(run, exit_code=1 if failed else 0)
            except Exception as err:  # noqa: BLE001 - e.g. the W&B service died with the job's TERM (scancel)
                # reported, not raised: raised here it would replace the stop in flight (a preempted run
                # would be marked failed); the logged steps are in the offline file and in VERL_LOG
                print(f"arctl rehearsal: W&B could not close the run ({type(err).__name__}: {err}); the "
                      f"checkpoint stands and the steps logged so far are in {VERL_LOG}", flush=True)
        if ray is not None:
            ray.shutdown()
