"""verl on a CPU: the platform, the process group and the engine registration (``verl.device=cpu``).

verl 0.9.1 runs its real training loop on CUDA/NPU platforms; three seams carry it onto a CPU, all
through verl's own extension points except one patch, and all applied by arctl's plugin
(:mod:`arctl.backends.verl.plugin`) in every process that imports verl:

- **platform** (:class:`PlatformCPU`, registered in ``verl.plugin.platform.PlatformRegistry`` as
  ``cpu``): device ``cpu``, communication backend ``gloo``, no-op synchronize / empty_cache, a
  device module with the memory queries verl calls (``max_memory_allocated`` ...). It is never
  auto-detected: only ``VERL_PLATFORM=cpu`` selects it (set by the verl backend for
  ``verl.device=cpu``, in the trainer's environment and Ray's runtime env). Ray resources stay
  ``GPU`` (logical GPUs, ``ray_init.num_gpus``): verl's resource pools count GPU bundles.
- **process group** (the one patch): ``verl.utils.distributed.initialize_global_process_group_ray``
  builds the backend string ``cpu:gloo,{device}:{comm}``, which on a CPU is ``cpu:gloo,cpu:gloo``
  and torch refuses ("Duplicate device type cpu"). :func:`patch_distributed` wraps it so that on
  the CPU platform the backend is plain ``gloo``; elsewhere it is unchanged.
- **engine** (:func:`register_cpu_engines`): verl registers its FSDP engines for cuda/npu only;
  the same classes are registered for device ``cpu``; its forward-only engines (the KL term's
  reference model) offload without pinned memory (:func:`unpin_offload_policy`).

What verl itself cannot run on a CPU is listed in docs/verl-backend.md ("Checked on CPU").
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

PLATFORM = "cpu"
PLATFORM_ENV = "VERL_PLATFORM"


def on_cpu_platform() -> bool:
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _device_module() -> Any:
    """What verl calls on ``get_torch_device()``: no-ops and process memory for the CUDA queries."""
    import torch

    def total() -> int:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    return SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 1,
        current_device=lambda: "cpu",
        set_device=lambda *_a, **_k: None,
        synchronize=lambda *_a, **_k: None,
        empty_cache=lambda: None,
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        get_rng_state=torch.get_rng_state,  # verl's checkpoints save and restore the "device" RNG
        set_rng_state=torch.set_rng_state,
        get_device_name=lambda *_a: "cpu",
        get_device_properties=lambda *_a: SimpleNamespace(name="cpu", total_memory=total()),
        memory_allocated=lambda *_a: _rss_bytes(),
        memory_reserved=lambda *_a: _rss_bytes(),
        max_memory_allocated=lambda *_a: _rss_bytes(),
        max_memory_reserved=lambda *_a: _rss_bytes(),
        reset_peak_memory_stats=lambda *_a: None,
        mem_get_info=lambda *_a: (max(0, total() - _rss_bytes()), total()),
        memory_stats=lambda *_a: {},
        is_initialized=lambda: True,
        Stream=None,
        Event=None,
    )


def make_platform_class():
    """The ``PlatformCPU`` class (verl imported on first use, so importing this module stays cheap)."""
    import torch
    from verl.plugin.platform.platform_base import PlatformBase

    class PlatformCPU(PlatformBase):
        @property
        def device_name(self) -> str:
            return "cpu"

        @property
        def vendor_name(self) -> str:
            return "cpu"

        @property
        def device_module(self):
            return _device_module()

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            return False  # never auto-detected: VERL_PLATFORM=cpu selects it

        def current_device(self):
            return "cpu"  # verl uses it as a torch device (model.to(device=get_device_id()))

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index) -> None:
            pass

        def synchronize(self, device_index=None) -> None:
            pass

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            pass

        def empty_cache(self) -> None:
            pass

        def get_device_capability(self, device_index: int = 0):
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"  # Ray sets it for its logical GPUs; torch's CPU build ignores it

        @contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            pass

        def profiler_stop(self) -> None:
            pass

        def ray_resource_name(self) -> str:
            return "GPU"  # logical GPUs: verl's resource pools and checks count GPU bundles

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self):
            return None

    return PlatformCPU


def register_platform(manager_module) -> None:
    """Register the ``cpu`` platform in ``verl.plugin.platform.platform_manager``."""
    manager_module.PlatformRegistry.register(platform=PLATFORM)(make_platform_class())


def patch_distributed(module) -> None:
    """On the CPU platform, ``initialize_global_process_group_ray`` initialises plain gloo (verl's
    ``cpu:gloo,cpu:gloo`` is refused by torch); elsewhere verl's function runs unchanged."""
    original = module.initialize_global_process_group_ray
    if getattr(original, "__arctl_cpu__", False):
        return

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        if backend is None and on_cpu_platform():
            backend = "gloo"
        return original(timeout_second=timeout_second, backend=backend)

    initialize_global_process_group_ray.__arctl_cpu__ = True
    initialize_global_process_group_ray.__wrapped__ = original
    module.initialize_global_process_group_ray = initialize_global_process_group_ray


def unpin_offload_policy(module) -> None:
    """On the CPU platform, verl's FSDP engine module (``transformer_impl``) builds its
    ``CPUOffloadPolicy`` with ``pin_memory=False``: verl gives every forward-only engine (the KL
    term's reference model) ``CPUOffloadPolicy(pin_memory=True)``, and pinning host memory needs an
    accelerator ("Cannot access accelerator device when none is available"). On a CPU the offloaded
    parameters already sit where the forward runs. Elsewhere verl's policy is unchanged."""
    original = getattr(module, "CPUOffloadPolicy", None)
    if original is None or getattr(original, "__arctl_cpu__", False):
        return

    def policy(*args, **kwargs):  # CPUOffloadPolicy's one field is pin_memory
        return original(pin_memory=False) if on_cpu_platform() else original(*args, **kwargs)

    policy.__arctl_cpu__ = True
    policy.__wrapped__ = original
    module.CPUOffloadPolicy = policy


def register_cpu_engines(module) -> None:
    """Register verl's FSDP engines (``transformer_impl``) for device ``cpu`` too."""
    from verl.workers.engine.base import EngineRegistry

    for model_type, cls in (("language_model", module.FSDPEngineWithLMHead),
                            ("value_model", module.FSDPEngineWithValueHead)):
        registry = EngineRegistry._engines.setdefault(model_type, {})
        for backend in ("fsdp", "fsdp2"):
            registry.setdefault(backend, {}).setdefault(PLATFORM, cls)
