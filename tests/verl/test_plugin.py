"""The verl.plugins entry point: loaded by ``import verl`` in a fresh process, cheap, idempotent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

SCRIPT = r"""
import json, sys
import arctl.backends.verl.plugin as plugin_direct
cheap = {m: m in sys.modules for m in ("verl", "ray", "transfer_queue", "verl.trainer.ppo.v1")}
del sys.modules["arctl.backends.verl.plugin"]  # let `import verl` load it through the entry point
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_PostImportFinder"]
import verl
loaded = "arctl.backends.verl.plugin" in sys.modules
from arctl.backends.verl import plugin
again = plugin.register(); again2 = plugin.register()
finders = sum(type(f).__name__ == "_PostImportFinder" for f in sys.meta_path)
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
import verl.workers.engine.fsdp.transformer_impl as ti
print(json.dumps({
    "cheap": cheap, "loaded": loaded, "names": again, "same": again == again2, "finders": finders,
    "trainer": get_trainer_cls("arctl").__qualname__,
    "loss": get_policy_loss_fn("arctl_drgrpo").__name__,
    "loop": _agent_loop_registry["arctl_tree"]["_target_"],
    "engine_patched": getattr(ti.FSDPEngineWithLMHead.prepare_model_inputs, "_arctl_tree_patched", False),
    "offload_unpinned": getattr(ti.CPUOffloadPolicy, "__arctl_cpu__", False),
    "registered": plugin.registered(),
}))
"""


def test_entry_point_is_declared():
    eps = [ep for ep in entry_points(group="verl.plugins") if ep.name == "arctl"]
    assert eps and eps[0].value == "arctl.backends.verl.plugin:register"


def test_import_verl_loads_plugin_and_registers_names():
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "auto"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cheap"] == {"verl": False, "ray": False, "transfer_queue": False, "verl.trainer.ppo.v1": False}
    assert out["loaded"] is True
    assert out["names"] == {"agent_loop": "arctl_tree", "trainer": "arctl", "policy_loss": "arctl_drgrpo"}
    assert out["same"] is True and out["finders"] == 1  # idempotent: one hook, same names
    assert out["trainer"] == "ArctlPPOTrainer"
    assert out["loss"] == "compute_policy_loss_drgrpo"
    assert out["loop"] == "arctl.backends.verl.agent_loop.TreeAgentLoop"
    assert out["engine_patched"] is True and out["offload_unpinned"] is True
    assert out["registered"] == {"agent_loop": True, "trainer": True, "policy_loss": True}


def test_drgrpo_loss_divides_the_token_sum_by_the_constant():
    import torch
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.workers.config import ActorConfig

    from arctl.backends.verl.policy_loss import compute_policy_loss_drgrpo

    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, loss_scale_factor=1000,
                      clip_ratio=0.2)
    g = torch.Generator().manual_seed(0)
    old, new = torch.randn(3, 7, generator=g), torch.randn(3, 7, generator=g)
    adv = torch.randn(3, 7, generator=g)
    mask = torch.rand(3, 7, generator=g) > 0.3
    loss, _ = compute_policy_loss_drgrpo(old, new, adv, mask, config=cfg)
    total, _ = compute_policy_loss_vanilla(old, new, adv, mask, loss_agg_mode="token-sum", config=cfg)
    # by hand: clipped PPO per token, summed over valid tokens, / 1000
    ratio = torch.exp(new - old)
    per_tok = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    per_tok = torch.where(adv < 0, torch.minimum(per_tok, -adv * 3.0), per_tok)
    assert torch.allclose(loss, (per_tok * mask).sum() / 1000, atol=1e-6)
    assert torch.allclose(loss, total / 1000)


def test_drgrpo_loss_is_scaled_by_the_data_parallel_ranks_verl_averages_over():
    """verl's FSDP averages the ranks' gradients, so a rank's token-sum loss is multiplied by dp_size to make the
    average the sum over every rank's tokens / loss_scale_factor (what one rank holding them all computes). Found by
    mutation: dividing by dp_size (1/16 at dp 4), or dropping it, passed every test, which ran at dp_size 1: on 8 GPUs
    the policy gradient against verl's KL term (added apart, scaled by verl) would have been off by dp_size^2."""
    from types import SimpleNamespace

    import torch

    from arctl.backends.verl.policy_loss import compute_policy_loss_drgrpo

    old, new = torch.tensor([[-1.0, -2.0, -0.5]]), torch.tensor([[-0.9, -2.1, -0.5]])
    adv, mask = torch.tensor([[1.0, -1.0, 0.5]]), torch.ones(1, 3)

    def loss(dp: int | None) -> float:
        cfg = SimpleNamespace(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0,
                              loss_scale_factor=8.0, global_batch_info={} if dp is None else {"dp_size": dp})
        return float(compute_policy_loss_drgrpo(old, new, adv, mask, config=cfg)[0])

    # by hand at dp 1: ratios e^0.1, e^-0.1, 1; token losses -e^0.1 (under 1.28), +e^-0.1 (inside), -0.5; / 8
    by_hand = (-torch.exp(torch.tensor(0.1)) + torch.exp(torch.tensor(-0.1)) - 0.5) / 8
    assert loss(1) == pytest.approx(float(by_hand), abs=1e-6) and loss(None) == loss(1)
    assert loss(4) == pytest.approx(4 * loss(1), rel=1e-6) and loss(8) == pytest.approx(8 * loss(1), rel=1e-6)


def test_the_clip_diagnostics_by_hand():
    """actor/pg_clipfrac, actor/ppo_kl and actor/pg_clipfrac_lower of verl's PPO (from arctl.algo's clip_stats),
    hand-worked: ratios e^0.5 (A=1: clipped at 1.28), e^-0.1 (A=-1: inside), 1; the dual clip (c=3) caps none. Found
    by mutation: the log-probs swapped (a run that clips shown as never clipping, its KL of the other sign) passed."""
    from types import SimpleNamespace

    import torch

    from arctl.backends.verl.policy_loss import compute_policy_loss_drgrpo_dual

    cfg = SimpleNamespace(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0,
                          loss_scale_factor=8.0, global_batch_info={"dp_size": 1})
    old, new = torch.tensor([[-1.0, -2.0, -0.5]]), torch.tensor([[-0.5, -2.1, -0.5]])
    _, metrics = compute_policy_loss_drgrpo_dual(old, new, torch.tensor([[1.0, -1.0, 0.5]]), torch.ones(1, 3),
                                                 config=cfg)
    got = {k: float(v) for k, v in metrics.items()}
    assert got == pytest.approx({"actor/pg_clipfrac": 1 / 3, "actor/ppo_kl": (-0.5 + 0.1 + 0.0) / 3,
                                 "actor/pg_clipfrac_lower": 0.0}, abs=1e-6)


def test_on_the_cpu_platform_the_reference_model_offloads_without_pinned_memory(monkeypatch):
    """verl gives a forward-only FSDP2 engine (the KL term's reference) CPUOffloadPolicy(pin_memory=True),
    and pinning needs an accelerator: on the CPU platform the policy is built unpinned, elsewhere as verl asks."""
    from types import SimpleNamespace

    from torch.distributed.fsdp import CPUOffloadPolicy

    from arctl.backends.verl.cpu_platform import PLATFORM_ENV, unpin_offload_policy

    module = SimpleNamespace(CPUOffloadPolicy=CPUOffloadPolicy)
    unpin_offload_policy(module)
    unpin_offload_policy(module)  # idempotent: wrapped once
    assert module.CPUOffloadPolicy.__wrapped__ is CPUOffloadPolicy
    monkeypatch.setenv(PLATFORM_ENV, "cpu")
    policy = module.CPUOffloadPolicy(pin_memory=True)
    assert isinstance(policy, CPUOffloadPolicy) and policy.pin_memory is False
    monkeypatch.delenv(PLATFORM_ENV)
    assert module.CPUOffloadPolicy(pin_memory=True).pin_memory is True


BROKEN = r"""
import json, sys
from arctl.backends.verl import plugin

def broken(module):
    raise AttributeError("verl moved POLICY_LOSS_REGISTRY")

plugin._ACTIONS[plugin.POLICY_LOSS_MODULE] = broken
import verl.trainer.ppo.core_algos as core_algos  # verl's own import goes through
try:
    plugin.check_registered()
    refused = None
except RuntimeError as err:
    refused = str(err)
print(json.dumps({"imported": hasattr(core_algos, "POLICY_LOSS_REGISTRY"), "failures": plugin.failures(),
                  "refused": refused}))
"""


def _environ() -> dict:
    """This process's environment for a fresh interpreter, without VERL_PLATFORM: a verl trainer entry tested
    in-process earlier in the same worker sets it (arctl.backends.verl.trainer: VERL_PLATFORM=cpu), and with
    it verl's first import asks for the CPU platform whose registration these tests break (CI failed so, by
    test order)."""
    return {**{k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}, "VERL_USE_EXTERNAL_PLUGINS": "auto"}


def test_a_registration_that_fails_leaves_verl_importable_and_arctls_runs_refuse_to_start():
    """A registration that raises (another verl than the one arctl pins) used to fail the import of verl's
    module itself, for every program of the environment: now the module imports, the failure is kept, and
    the check arctl's runs make before they start names it."""
    proc = subprocess.run([sys.executable, "-c", BROKEN], capture_output=True, text=True, timeout=300,
                          env=_environ())
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["imported"] is True
    assert out["failures"] == {"verl.trainer.ppo.core_algos": "AttributeError: verl moved POLICY_LOSS_REGISTRY"}
    assert "verl.trainer.ppo.core_algos: AttributeError: verl moved POLICY_LOSS_REGISTRY" in out["refused"]
    assert "arctl could not extend verl.trainer.ppo.core_algos" in proc.stderr  # said where it happens


AGAIN = r"""
import json
from arctl.backends.verl import plugin

def broken(module):
    raise AttributeError("verl moved it")

plugin._ACTIONS[plugin.PLATFORM_MODULE] = broken
import verl.plugin.platform.platform_manager  # imported: its registration failed, kept
again = plugin.register()  # "safe to call any number of times": the direct path keeps the failure too
plugin.check_registered()  # a GPU run needs none of the CPU platform's modules
try:
    plugin.check_registered(cpu=True)
    refused = None
except RuntimeError as err:
    refused = str(err)
print(json.dumps({"again": again, "failures": sorted(plugin.failures()), "refused": refused}))
"""


def test_a_failed_registration_stays_kept_through_register_and_only_the_runs_that_need_it_refuse():
    proc = subprocess.run([sys.executable, "-c", AGAIN], capture_output=True, text=True, timeout=300,
                          env=_environ())
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["again"]["agent_loop"] == "arctl_tree"
    assert out["failures"] == ["verl.plugin.platform.platform_manager"]
    assert "platform_manager: AttributeError: verl moved it" in out["refused"]
