"""The tiny CPU backend: the whole AnytimeReasoner loop on a ~1M-parameter Qwen2 and a toy task.

Entry point: :func:`arctl.backends.tiny.trainer.train`. One module per concept: ``task`` (problems,
traces, verifier), ``tokenizer``, ``model``, ``warmup`` (cached supervised warm-up), ``rollout``
(KV-cached thinking and branching summaries), ``update`` (tree-packed PPO-clip), ``evaluate``,
``checkpoint``, ``trainer``.
"""
