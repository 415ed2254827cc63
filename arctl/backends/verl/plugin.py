"""verl plugin entry point: makes arctl's verl extensions known to every process that imports verl.

``pyproject.toml`` declares ``[project.entry-points."verl.plugins"] arctl =
"arctl.backends.verl.plugin:register"``. ``import verl`` *loads* that entry point (it imports this
module and fetches ``register``; it does not call it), so this module calls :func:`register` at
import time. Ray workers import verl too, so the registrations reach every worker.

Registration is cheap and idempotent: it imports nothing heavy. Each registry lives in a verl module
that costs seconds to import (Ray, TransferQueue, vLLM glue), so instead of importing it,
:func:`register` installs a post-import hook: the moment verl itself imports the registry module,
arctl's names are added to it. Registries already imported are filled in immediately.

Names registered (see :data:`NAMES`):

- agent loop ``arctl_tree`` (:class:`arctl.backends.verl.agent_loop.TreeAgentLoop`)
- v1 trainer mode ``arctl`` (:class:`arctl.backends.verl.trainer_v1.ArctlPPOTrainer`)
- policy losses ``arctl_drgrpo`` and ``arctl_drgrpo_dual`` (:mod:`arctl.backends.verl.policy_loss`;
  the second when the spec turns dual clip on)
- the tree attention mask in verl's FSDP engine (:func:`arctl.backends.verl.tree_forward.patch_fsdp_engine`)
- verl on a CPU (``verl.device=cpu``, :mod:`arctl.backends.verl.cpu_platform`,
  :mod:`arctl.backends.verl.cpu_rollout`): the ``cpu`` platform (selected only by
  ``VERL_PLATFORM=cpu``), the FSDP engines for device ``cpu``, plain gloo for the process group on
  that platform, and the rollout ``arctl_cpu`` (replica registry + adapter)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable

from arctl.backends.verl.names import AGENT_LOOP_NAME, POLICY_LOSS_DUAL_NAME, POLICY_LOSS_NAME, TRAINER_MODE

NAMES = {"agent_loop": AGENT_LOOP_NAME, "trainer": TRAINER_MODE, "policy_loss": POLICY_LOSS_NAME}

AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
TRAINER_MODULE = "verl.trainer.ppo.v1.trainer_base"
POLICY_LOSS_MODULE = "verl.trainer.ppo.core_algos"
FSDP_ENGINE_MODULE = "verl.workers.engine.fsdp.transformer_impl"
PLATFORM_MODULE = "verl.plugin.platform.platform_manager"
DISTRIBUTED_MODULE = "verl.utils.distributed"
REPLICA_MODULE = "verl.workers.rollout.replica"
ROLLOUT_BASE_MODULE = "verl.workers.rollout.base"

_lock = threading.RLock()
_done: set[str] = set()
_failed: dict[str, str] = {}  # verl module -> why arctl could not extend it (the module itself imported)


def _register_agent_loop(module) -> None:
    # The registry stores a fully qualified name that hydra instantiates later: no import needed.
    module._agent_loop_registry[AGENT_LOOP_NAME] = {
        "_target_": "arctl.backends.verl.agent_loop.TreeAgentLoop"
    }


def _register_trainer(module) -> None:
    pending = sys.modules.get("arctl.backends.verl.trainer_v1")
    if pending is not None and not hasattr(pending, "ArctlPPOTrainer"):
        return  # trainer_v1 itself is being imported (and imports verl's v1): it registers at its end
    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer


    module.TRAINER_REGISTRY[TRAINER_MODE] = ArctlPPOTrainer


def _register_policy_loss(module) -> None:
    from arctl.backends.verl.policy_loss import compute_policy_loss_drgrpo, compute_policy_loss_drgrpo_dual

    module.POLICY_LOSS_REGISTRY[POLICY_LOSS_NAME] = compute_policy_loss_drgrpo
    module.POLICY_LOSS_REGISTRY[POLICY_LOSS_DUAL_NAME] = compute_policy_loss_drgrpo_dual


def _patch_fsdp_engine(module) -> None:
    from arctl.backends.verl.cpu_platform import register_cpu_engines, unpin_offload_policy
    from arctl.backends.verl.tree_forward import patch_fsdp_engine

    patch_fsdp_engine(module)
    register_cpu_engines(module)
    unpin_offload_policy(module)


def _register_platform(module) -> None:
    from arctl.backends.verl.cpu_platform import register_platform

    register_platform(module)


def _patch_distributed(module) -> None:
    from arctl.backends.verl.cpu_platform import patch_distributed

    patch_distributed(module)


def _register_replica(module) -> None:
    from arctl.backends.verl.cpu_rollout import register_replica

    register_replica(module)


def _register_adapter(module) -> None:
    from arctl.backends.verl.cpu_rollout import register_adapter

    register_adapter(module)


_ACTIONS: dict[str, Callable] = {
    AGENT_LOOP_MODULE: _register_agent_loop,
    TRAINER_MODULE: _register_trainer,
    POLICY_LOSS_MODULE: _register_policy_loss,
    FSDP_ENGINE_MODULE: _patch_fsdp_engine,
    PLATFORM_MODULE: _register_platform,
    DISTRIBUTED_MODULE: _patch_distributed,
    REPLICA_MODULE: _register_replica,
    ROLLOUT_BASE_MODULE: _register_adapter,
}
_READY_ATTR = {
    AGENT_LOOP_MODULE: "_agent_loop_registry",
    TRAINER_MODULE: "TRAINER_REGISTRY",
    POLICY_LOSS_MODULE: "POLICY_LOSS_REGISTRY",
    FSDP_ENGINE_MODULE: "FSDPEngineWithValueHead",
    PLATFORM_MODULE: "PlatformRegistry",
    DISTRIBUTED_MODULE: "initialize_global_process_group_ray",
    REPLICA_MODULE: "RolloutReplicaRegistry",
    ROLLOUT_BASE_MODULE: "_ROLLOUT_REGISTRY",
}


def _apply(name: str, module) -> None:
    with _lock:
        if name in _done:
            return
        _done.add(name)
    try:
        _ACTIONS[name](module)
    except Exception:
        with _lock:
            _done.discard(name)
        raise


def _apply_kept(name: str, module) -> None:
    """:func:`_apply`, its failure kept (:func:`failures`) and logged, not raised: raised from the hook, it
    would fail the import of verl's module for every program of the environment, arctl's or not. verl works
    without arctl's names, and arctl's runs refuse to start without them (:func:`check_registered`)."""
    try:
        _apply(name, module)
    except Exception as err:  # noqa: BLE001 - kept for arctl's runs
        with _lock:
            _failed[name] = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
        logging.getLogger(__name__).warning("arctl could not extend %s (verl works without it; arctl's runs "
                                            "will not start): %s", name, _failed[name])
    else:
        with _lock:
            _failed.pop(name, None)


class _PostImportLoader(importlib.abc.Loader):
    """Wraps a module's real loader and registers arctl's names once the module has executed."""

    def __init__(self, name: str, loader: importlib.abc.Loader):
        self._name = name
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _apply_kept(self._name, module)

    def __getattr__(self, item):  # get_source, get_filename, ... of the wrapped loader
        return getattr(self._loader, item)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder that only intercepts the verl modules arctl extends."""

    def __init__(self):
        self._busy: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _ACTIONS or fullname in _done or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PostImportLoader(fullname, spec.loader)
        return spec


_finder = _PostImportFinder()


def register() -> dict[str, str]:
    """Register arctl's agent loop, v1 trainer mode and policy loss with verl (cheap, idempotent).

    Returns the registered names. Safe to call any number of times, from any process.
    """
    with _lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    for name in _ACTIONS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, _READY_ATTR[name]):
            _apply_kept(name, module)  # already imported: fill it in now
    return dict(NAMES)


def failures() -> dict[str, str]:
    """The verl modules of this process that arctl could not extend, with why (empty when all went in)."""
    with _lock:
        return dict(_failed)


CPU_ONLY_MODULES = (PLATFORM_MODULE, DISTRIBUTED_MODULE, REPLICA_MODULE, ROLLOUT_BASE_MODULE)  # verl.device=cpu's


def check_registered(cpu: bool = False) -> None:
    """Import verl's registries arctl extends in this process and raise one RuntimeError naming what
    failed (:func:`failures`; the CPU platform's modules only for a ``cpu`` run) or which name is
    missing; arctl's verl runs call it before they start."""
    names = registered()
    failed = {m: why for m, why in failures().items() if cpu or m not in CPU_ONLY_MODULES}
    missing = [k for k, ok in names.items() if not ok]
    if failed or missing:
        said = "; ".join(f"{m}: {why}" for m, why in failed.items()) or f"not registered: {', '.join(missing)}"
        raise RuntimeError(f"arctl's verl plugin could not extend verl in this process ({said}); is this the verl "
                           "version arctl pins (pip show verl)?")


def registered() -> dict[str, bool]:
    """Which of arctl's names are present in verl's registries right now (imports the registries)."""
    agent_loop = importlib.import_module(AGENT_LOOP_MODULE)
    trainer = importlib.import_module(TRAINER_MODULE)
    core_algos = importlib.import_module(POLICY_LOSS_MODULE)
    return {
        "agent_loop": AGENT_LOOP_NAME in agent_loop._agent_loop_registry,
        "trainer": TRAINER_MODE in trainer.TRAINER_REGISTRY,
        "policy_loss": {POLICY_LOSS_NAME, POLICY_LOSS_DUAL_NAME} <= set(core_algos.POLICY_LOSS_REGISTRY),
    }


register()
