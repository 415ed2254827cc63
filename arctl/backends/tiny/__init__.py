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

    def config_ranges(self):
        from arctl.backends.tiny.settings import RANGES

        return RANGES

    def config_problem(self, config):
        from arctl.backends.tiny.settings import NEEDS_VALUE

        for key, hint in NEEDS_VALUE.items():
            section, _, leaf = key.partition(".")
            if (config.get(section) or {}).get(leaf) is None:
                return (f"{key} is null, which means 'a dataset's size' to verl; the tiny task is generated "
                        "and needs a number", key, hint)
        control = config.get("budget_control") or {}
        if control.get("method") == "l1":
            targets = control.get("l1_targets") or []
            if not 1 <= len(targets) <= 9:
                return ("the tiny task writes an L1 target as one word, its rank among budget_control.l1_targets, "
                        f"so it needs 1 to 9 fixed targets (got {targets or 'null'})", "budget_control.l1_targets",
                        "e.g. budget_control.l1_targets=[16,32,48,64]")
        from arctl.backends.tiny.tasks import toy_task

        try:
            toy = toy_task((config.get("tiny") or {}).get("task") or {})
        except ValueError as err:
            return str(err), "tiny.task", "see arctl/conf/scale/tiny.yaml for the tasks and their knobs"
        if int(control.get("forcing_extensions") or 0) > 0:
            cue = str(control.get("forcing_cue", ""))
            if cue not in toy.vocabulary() or cue in ("</think>", "<think>"):
                return (f"the tiny task's budget-forcing cue must be one word of the toy vocabulary, not {cue!r}",
                        "budget_control.forcing_cue", "e.g. budget_control.forcing_cue=chk (the toy's re-check word)")
        return None

    def train(self, config, run_dir, stop_event=None):
        from arctl.backends.tiny.trainer import train

        return train(config, run_dir, stop_event)


BACKEND = TinyBackend()
