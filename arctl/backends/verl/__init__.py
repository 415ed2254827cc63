"""verl backend: AnytimeReasoner as a plugin on verl 0.9.1 for GPU clusters.

Importing this package is cheap (no verl, no torch). Modules:

- ``settings``         the ``verl`` config section (types, defaults, ranges, choices)
- ``plugin``           verl.plugins entry point: registers the agent loop, trainer mode and policy loss
- ``names``            the names arctl registers with verl (one home: the plugin registers, overrides select)
- ``overrides``        resolved arctl config -> verl override list, checked against verl's own config
- ``run_config``       the verl config of a run (eval-only mode, W&B env), shared by trainer and smoke
- ``ray_job``          the multi-node Ray-on-SLURM job body
- ``ray_connect``      joining the Ray cluster the job body started
- ``trainer``          ``train(config, run_dir, stop_event)``: runs verl's main_ppo in-process
- ``trainer_v1``       the v1 ``PPOTrainer`` subclass (tree advantages, arctl metrics)
- ``advantage``        tree advantages from rollout rows (the maths in ``arctl.algo.tree_loss``)
- ``agent_loop``       tree rollout: thinking once, one prefix request group per distinct cut
- ``rollout_failures`` a rollout group that failed in a worker fails the step with the worker's error
- ``reward``           rule reward with the authors' formatting rule (through ``arctl.algo.verify``)
- ``policy_loss``      Dr. GRPO constant-normalised PPO-clip loss
- ``tree_forward``     actor log-probs on packed trees (FlexAttention BlockMask / dense / duplicated)
- ``stop_request``     the stop request between the job entry and verl's trainer (STOP, SAVING files)
- ``checkpoints``      checkpoints a resume can trust (each step once, marked complete after it is written)
- ``disk``             the disk one checkpoint takes, from the model's config.json (a dry run checks the room)
- ``init_model``       ``trainer.init_from``: another run's final checkpoint, merged, as this run's model
- ``history``          the steps a run keeps, the checkpoint a resume starts from, its W&B history made to match
- ``data``             DeepScaleR + eval sets -> verl parquet
- ``smoke``            ``verl.smoke=true``: a real run's plumbing without GPU work
- ``rehearsal``        ``verl.rehearsal_steps=N``: the training loop rehearsed on a CPU
- ``cpu_platform``, ``cpu_rollout``: verl on a CPU (platform, process group, a token-in/out rollout server)

The anytime evaluation of a checkpoint on the budget grid is verl's validation in eval-only mode
(``verl.eval_only``, :mod:`run_config`).

Its config section ``verl`` is typed by ``settings`` (:class:`settings.VerlConfig`), and its scale
profile is ``conf/scale/paper.yaml``.
"""

import hashlib
import json
import time
from pathlib import Path

from arctl.backends.base import BackendDefaults

CONF = Path(__file__).resolve().parent / "conf"
# the files of a model folder that make the model an eval-only run of ``verl.eval_checkpoint=model`` evaluates
MODEL_FILES = ("config.json",)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".index.json")


def saved_identity(folder: Path, files: list[Path]) -> dict | None:
    """What identifies a save of ``files`` in ``folder`` (a checkpoint, a model), cheaply and surely: a hash of
    every file's (name, size, mtime_ns), their count and the newest time one was written (a retrained run
    writes the same names, often the same sizes, never at the same times). None: no file, or they cannot be read."""
    try:
        stats = sorted((str(f.relative_to(folder)), (st := f.stat()).st_size, st.st_mtime_ns) for f in files)
    except OSError:
        return None
    if not stats:
        return None
    newest = max(mtime for _, _, mtime in stats) / 1e9
    return {"path": str(folder), "files": str(len(stats)),
            "saved": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(newest)),
            "stat_sha256": hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:16]}


def eval_inputs_identity(config: dict) -> dict | None:
    """:meth:`VerlBackend.inputs_identity`: for an eval-only run, :func:`saved_identity` of what it evaluates:
    the ``global_step_N`` folder of ``verl.eval_checkpoint`` (every file in it: the actor's shards, verl's
    ``data.pt``, the Hugging Face files, arctl's completion marker), or for ``verl.eval_checkpoint=model``
    the local ``model.path`` folder's ``config.json`` and weight files (with their index). None: not an
    eval-only run, a model named by its hub id (Hugging Face resolves it; not compared), or a folder that is
    not there now (removed, e.g. pruned by ``verl.keep_checkpoints``: nothing to compare with)."""
    from arctl.backends.verl.overrides import user_path, verl_setting
    from arctl.backends.verl.settings import EVAL_MODEL

    ckpt = verl_setting(config, "eval_checkpoint") if verl_setting(config, "eval_only") else None
    if not ckpt:
        return None
    try:
        if ckpt == EVAL_MODEL:
            model = (config.get("model") or {}).get("path") if isinstance(config.get("model"), dict) else None
            folder = Path(user_path(model)).resolve() if model else None
            if folder is None or not folder.is_dir():
                return None
            files = [f for f in folder.iterdir() if f.is_file()
                     and (f.name in MODEL_FILES or f.name.endswith(WEIGHT_SUFFIXES))]
        else:
            folder = Path(user_path(ckpt)).resolve()
            if not folder.is_dir():
                return None
            files = [f for f in folder.rglob("*") if f.is_file()]
    except OSError:
        return None
    return saved_identity(folder, files)


class VerlBackend(BackendDefaults):
    """The :class:`arctl.backends.base.Backend` of verl (imports verl, torch and Ray only when used)."""

    name = "verl"

    def settings_type(self):
        from arctl.backends.verl.settings import VerlConfig

        return VerlConfig

    def added_keys(self):
        return ()  # VerlConfig declares every key arctl's verl backend reads; verl's own keys: verl.overrides

    def conf_dir(self):
        return CONF  # scale/paper.yaml: the paper's scale

    def train(self, config, run_dir, stop_event=None):
        from arctl.backends.verl.trainer import train

        return train(config, run_dir, stop_event)

    def resume_step(self, config, run_dir):
        from arctl.backends.verl.history import resume_step

        return resume_step(config, run_dir)

    def resume_problem(self, config, run_dir):
        """Why the run's next attempt cannot resume (:func:`arctl.backends.verl.run_config.resume_problem`), or
        None: what a dry run says where :meth:`resume_step` names no step."""
        from arctl.backends.verl.run_config import resume_problem

        return resume_problem(config, run_dir)

    def inputs_identity(self, config):
        return eval_inputs_identity(config)

    def checkpoint_gb(self, config):
        from arctl.backends.verl.disk import checkpoint_gb

        return checkpoint_gb(config)

    def checkpoints_kept(self, config):
        from arctl.backends.verl.overrides import verl_setting

        return "verl.keep_checkpoints", int(verl_setting(config, "keep_checkpoints"))

    def config_problem(self, config):
        from arctl.backends.verl.overrides import config_problem

        return config_problem(config)

    def local_problem(self, config):
        from arctl.backends.verl.overrides import local_gpu_problem

        return local_gpu_problem(config)

    def slurm_problem(self, config):
        from arctl.backends.verl.overrides import slurm_gpu_problem
        from arctl.backends.verl.run_config import ray_cpus_problem

        return slurm_gpu_problem(config) or ray_cpus_problem(config)

    def launch_problem(self, config, run_dir):
        from arctl.backends.verl.run_config import launch_problem

        return launch_problem(config, run_dir)

    def job_setup(self, config, run_dir):
        from arctl.backends.verl.ray_job import job_setup

        return job_setup(config, run_dir)

    def prepare_data(self, out, datasets, sources, use_hub):
        from arctl.backends.verl.data import prepare

        return prepare(out, datasets, sources, use_hub=use_hub)

    def datasets(self):
        from arctl.backends.verl.data import DATASETS

        return tuple(DATASETS)


BACKEND = VerlBackend()
