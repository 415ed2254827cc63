"""verl backend: AnytimeReasoner as a plugin on verl 0.9.1 for GPU clusters.

Importing this package is cheap (no verl, no torch). Modules:

- ``plugin``       verl.plugins entry point: registers the agent loop, trainer mode and policy loss
- ``overrides``    resolved arctl config -> verl override list, checked against verl's own config
- ``ray_job``      the multi-node Ray-on-SLURM job body
- ``run_config``   the verl config of a run (eval-only overrides, W&B env), shared by trainer and smoke
- ``trainer``      ``train(config, run_dir, stop_event)``: runs verl's main_ppo in-process
- ``trainer_v1``   the v1 ``PPOTrainer`` subclass (tree advantages, arctl metrics)
- ``advantage``    tree advantages from rollout rows (pure; maths from ``arctl.algo``)
- ``agent_loop``   tree rollout: thinking once, one prefix request group per distinct cut
- ``reward``       rule reward with the authors' formatting rule (through ``arctl.algo.verify``)
- ``policy_loss``  Dr. GRPO constant-normalised PPO-clip loss
- ``tree_forward`` actor log-probs on packed trees (FlexAttention BlockMask / dense / duplicated)
- ``data``         DeepScaleR + eval sets -> verl parquet
- ``evaluate``     anytime evaluation of a checkpoint on the 32-budget grid
"""


class VerlBackend:
    """The :class:`arctl.backends.base.Backend` of verl (imports verl, torch and Ray only when used)."""

    name = "verl"

    def train(self, config, run_dir, stop_event=None):
        from arctl.backends.verl.trainer import train

        return train(config, run_dir, stop_event)

    def config_problem(self, config):
        from arctl.backends.verl.overrides import config_problem

        return config_problem(config)

    def local_problem(self, config):
        from arctl.backends.verl.overrides import local_gpu_problem

        return local_gpu_problem(config)

    def job_script(self, config, run_dir):
        from arctl.backends.verl.ray_job import job_script

        return job_script(config, run_dir)

    def prepare_data(self, out, datasets, sources, use_hub):
        from arctl.backends.verl.data import prepare

        return prepare(out, datasets, sources, use_hub=use_hub)

    def datasets(self):
        from arctl.backends.verl.data import DATASETS

        return tuple(DATASETS)


BACKEND = VerlBackend()
