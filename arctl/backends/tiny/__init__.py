"""The tiny CPU backend: the whole AnytimeReasoner loop on a ~1M-parameter Qwen2 and a toy task.

Entry point: :func:`arctl.backends.tiny.trainer.train`. One module per concept: ``task`` (problems,
traces, verifier), ``tokenizer``, ``model``, ``warmup`` (cached supervised warm-up), ``rollout``
(KV-cached thinking and branching summaries), ``update`` (tree-packed PPO-clip), ``evaluate``,
``checkpoint``, ``trainer``.
"""

from arctl.backends.base import BackendDefaults


class TinyBackend(BackendDefaults):
    """The :class:`arctl.backends.base.Backend` of the tiny testbed (imports torch only to train; the
    toy task is generated, so there is no data to prepare and no job body beyond the plain entry)."""

    name = "tiny"

    def train(self, config, run_dir, stop_event=None):
        from arctl.backends.tiny.trainer import train

        return train(config, run_dir, stop_event)


BACKEND = TinyBackend()
