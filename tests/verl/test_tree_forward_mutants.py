"""The tree-mask proof (arctl/backends/verl/tree_forward.py: tree_patch_report) counts as training engines only
verl engine objects that train (``forward_backward_batch``), found by a mutation hunt: a worker also holds other
objects of verl's engine modules (helpers, registries), and counting them as engines without the tree mask
would refuse a correctly patched FSDP worker before its first step."""

from __future__ import annotations

import types


class EngineModuleHelper:
    """An object of a verl engine module that is not an engine (it trains nothing)."""

    __module__ = "verl.workers.engine.utils"


class TrainsButNotVerl:
    """Something with a ``forward_backward_batch`` outside verl's engines (a user's wrapper, a test double)."""

    def forward_backward_batch(self, *args):
        raise NotImplementedError


def test_only_verl_engines_that_train_count_as_engines():
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    import arctl.backends.verl.plugin  # noqa: F401 - the patch, as `import verl` applies it
    from arctl.backends.verl.tree_forward import tree_patch_report

    engine = object.__new__(FSDPEngineWithLMHead)
    actor = types.SimpleNamespace(engine=engine, helper=EngineModuleHelper(), wrapper=TrainsButNotVerl())
    worker = types.SimpleNamespace(worker_dict={"actor_rollout": types.SimpleNamespace(actor=actor)})
    report = tree_patch_report(worker)
    assert report["ok"] and report["engines"] == ["FSDPEngineWithLMHead"], report
