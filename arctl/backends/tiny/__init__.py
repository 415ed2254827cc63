"""The tiny CPU backend: the whole AnytimeReasoner loop on a ~1M-parameter Qwen2 and a toy task.

Entry point: :func:`arctl.backends.tiny.trainer.train`. One module per concept: ``task`` (problems,
traces, verifier), ``tokenizer``, ``model``, ``warmup`` (cached supervised warm-up), ``rollout``
(KV-cached thinking and branching summaries), ``update`` (tree-packed PPO-clip), ``evaluate``,
``checkpoint``, ``trainer``.
"""


class TinyBackend:
    """The :class:`arctl.backends.base.Backend` of the tiny testbed (imports torch only to train)."""

    name = "tiny"

    def train(self, config, run_dir, stop_event=None):
        from arctl.backends.tiny.trainer import train

        return train(config, run_dir, stop_event)

    def config_problem(self, config):
        return None

    def local_problem(self, config):
        return None

    def job_script(self, config, run_dir):
        return None

    def prepare_data(self, out, datasets, sources, use_hub):
        return None  # the toy task is generated, never downloaded

    def datasets(self):
        return ()


BACKEND = TinyBackend()
