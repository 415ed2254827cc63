"""Before the first update every actor worker proves that it trains packed trees with arctl's tree
mask (verl's FSDP engine patched in its process, no other engine); otherwise the job fails with one
clear message instead of training with plain causal attention."""

from __future__ import annotations

import types

import pytest


def _fsdp_engine():
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    import arctl.backends.verl.plugin  # noqa: F401 - the patch, as `import verl` applies it

    return object.__new__(FSDPEngineWithLMHead)


class MegatronLikeEngine:
    """Stands in for an engine of another strategy (a verl engine class without the tree mask)."""

    __module__ = "verl.workers.engine.megatron.transformer_impl"

    def forward_backward_batch(self, *args):
        raise NotImplementedError


def _worker(engine):
    """A fused worker the way verl nests it: worker_dict -> actor-rollout worker -> actor -> engine."""
    inner = types.SimpleNamespace(actor=types.SimpleNamespace(engine=engine, config={"x": 1}))
    return types.SimpleNamespace(worker_dict={"actor_rollout": inner})


def test_a_patched_fsdp_worker_passes():
    from arctl.backends.verl.tree_forward import tree_patch_report

    report = tree_patch_report(_worker(_fsdp_engine()))
    assert report["ok"] and report["patched"] and report["engines"] == ["FSDPEngineWithLMHead"]


def test_a_worker_training_with_another_engine_fails():
    from arctl.backends.verl.tree_forward import tree_patch_report

    report = tree_patch_report(_worker(MegatronLikeEngine()))
    assert not report["ok"] and "MegatronLikeEngine" in report["problem"] and "strategy=fsdp" in report["problem"]


def test_an_unpatched_engine_class_fails(monkeypatch):
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    from arctl.backends.verl.tree_forward import tree_patch_report

    engine = _fsdp_engine()
    monkeypatch.setattr(FSDPEngineWithLMHead, "prepare_model_inputs", lambda self, mb: (mb, {}))  # what verl ships
    report = tree_patch_report(_worker(engine))
    assert not report["ok"] and "no tree mask" in report["problem"]


class Handle:
    """A Ray actor handle's ``__ray_call__.remote(fn)`` run in place."""

    def __init__(self, worker):
        self.__ray_call__ = types.SimpleNamespace(remote=lambda fn: fn(worker))


def test_the_trainer_fails_with_one_clear_line_when_any_worker_lacks_the_patch():
    from arctl.backends.verl.tree_forward import prove_tree_patch

    good, bad = Handle(_worker(_fsdp_engine())), Handle(_worker(MegatronLikeEngine()))
    assert len(prove_tree_patch([good, good], get=list)) == 2
    with pytest.raises(RuntimeError) as info:
        prove_tree_patch([good, bad, good], get=list)
    msg = str(info.value)
    assert "\n" not in msg and "1 of 3 actor workers" in msg and "plain causal attention" in msg

    def broken(_refs):
        raise ModuleNotFoundError("No module named 'arctl'")

    with pytest.raises(RuntimeError, match="the check itself failed: ModuleNotFoundError"):
        prove_tree_patch([good], get=broken)


@pytest.mark.slow  # starts a local Ray
def test_the_check_runs_inside_real_ray_actors(monkeypatch):
    """``__ray_call__`` runs the report in the actor's own process, on the actor object."""
    ray = pytest.importorskip("ray")
    from arctl.backends.verl.tree_forward import prove_tree_patch

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a local Ray must not write ~/.ray/auth_token
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    import sys

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # test modules are not importable in workers

    @ray.remote(num_cpus=0)
    class Worker:
        def __init__(self, strategy):
            from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

            import arctl.backends.verl.plugin  # noqa: F401

            other = type("MegatronLikeEngine", (), {"__module__": "verl.workers.engine.megatron.transformer_impl",
                                                     "forward_backward_batch": lambda self: None})
            engine = object.__new__(FSDPEngineWithLMHead) if strategy == "fsdp" else other()
            self.worker_dict = {"actor_rollout": types.SimpleNamespace(actor=types.SimpleNamespace(engine=engine))}

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    # detached: owned by the (test's own, shut down below) cluster, not by the handle's reference count.
    # Two clean-clone CI runs under load saw an actor 'cancelled before it started running' because
    # 'all references to the actor were removed', with its handle still held in a variable
    Detached = Worker.options(lifetime="detached")
    try:
        # the actors have finished their constructors (each imports verl: seconds) before they are asked
        workers = [Detached.remote("fsdp"), Detached.remote("fsdp")]
        ray.get([w.__ray_ready__.remote() for w in workers], timeout=300)
        reports = prove_tree_patch(workers)
        assert len({r["pid"] for r in reports}) == 2 and all(r["ok"] for r in reports)
        mixed = [Detached.remote("fsdp"), Detached.remote("megatron")]
        ray.get([w.__ray_ready__.remote() for w in mixed], timeout=300)
        with pytest.raises(RuntimeError, match="1 of 2 actor workers"):
            prove_tree_patch(mixed)
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
