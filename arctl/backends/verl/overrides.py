"""Resolved arctl config -> verl 0.9.1 Hydra override list, checked against verl's own config.

:func:`verl_overrides` maps the spec onto verl's keys (``ppo_trainer.yaml``) plus arctl's own
settings under a new top-level ``arctl`` node (``+arctl.<key>=...``) that the agent loop, the
trainer and the reward read from the full config every verl process receives.
:func:`check_overrides` composes ``pkg://verl.trainer.config`` ppo_trainer with the list (Hydra
compose API, the same composition ``python -m verl.trainer.main_ppo`` does) and checks every value's
type against verl's default; a wrong key or type raises :class:`VerlConfigError` with one line.

Numbers of the paper (1.5B / 8k): response length 10,176 = 8,000 thinking + 4 budgets x 4
summaries x 128 + 128 block padding (packed-tree layout).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arctl.algo.methods import control as bc
from arctl.algo.settings import DEFAULT_BLOCK_SIZE, BudgetControl, Objective, loss_normaliser
from arctl.algo.tree_loss import summary_trained
from arctl.algo.verify import GRADER_BEFORE_THE_KEY, answer_at
from arctl.backends.verl.data import dataset_path
from arctl.backends.verl.names import POLICY_LOSS_DUAL_NAME, POLICY_LOSS_NAME
from arctl.backends.verl.settings import CPU_ROLLOUT, EVAL_MODEL, TREE_LAYOUTS, VERL_DEFAULTS
from arctl.backends.verl.stop_request import STOP_FILE
from arctl.config.hydra_text import override_value
from arctl.config.schema import MODEL_BUILD_KEYS
from arctl.track.identity import WandbIdentity

ATTN_IMPLEMENTATION = {"flex": "flex_attention", "dense": "sdpa", "duplicate": "sdpa"}


TREE_STRATEGIES = ("fsdp", "fsdp2")  # engines with arctl's tree-attention patch (tree_forward.py)


# verl's router keeps a request id on its replica in an LRU of this many ids
# (verl.workers.rollout.router.DEFAULT_ROUTING_CACHE_SIZE; a test checks they agree). A tree's summaries
# reach the replica holding its thinking's KV only while the tree's id is still in it, so at most half
# as many trees are in flight: validation goes in batches of VAL_TREES_IN_FLIGHT // eval.n_samples
# questions (verl's default submits the whole validation set at once: ~50k trees in eval-only mode).
ROUTER_STICKY_IDS = 10_000
VAL_TREES_IN_FLIGHT = ROUTER_STICKY_IDS // 2


def val_batch_size(config: dict) -> int:
    """Questions per validation batch: at most :data:`VAL_TREES_IN_FLIGHT` trees in flight."""
    return max(1, VAL_TREES_IN_FLIGHT // int(config["eval"]["n_samples"]))


ALLOW_CPU_ENV = "ARCTL_VERL_ALLOW_CPU"  # tests: let the verl trainer start without CUDA


def runs_without_gpu(config: dict) -> bool:
    """Whether this verl run does its work without a GPU: the smoke run (plumbing only), the CPU
    rehearsal of the training loop (``verl.rehearsal_steps``) and verl's real loop on a CPU
    (``verl.device=cpu``)."""
    return (bool(verl_setting(config, "smoke")) or int(verl_setting(config, "rehearsal_steps") or 0) > 0
            or on_cpu(config))


def on_cpu(config: dict) -> bool:
    """``verl.device=cpu``: verl's real loop on a CPU (:mod:`arctl.backends.verl.cpu_platform`)."""
    return verl_setting(config, "device") == "cpu"


CPU_LAYOUTS = ("dense", "duplicate")  # FlexAttention has no backward on a CPU
CPU_RAY_CPUS = 8  # logical: TransferQueue's storage and controller actors, the rollout server, the workers


def gpus_per_node(config: dict) -> int:
    """verl's ``trainer.n_gpus_per_node``: the GPUs SLURM gives each node (``cluster.gpus_per_node``),
    else ``verl.n_gpus_per_node``; under ``verl.device=cpu``, the FSDP ranks per node (logical GPUs)."""
    return int((config.get("cluster") or {}).get("gpus_per_node") or 0) or int(verl_setting(config, "n_gpus_per_node"))


def cpu_ray_resources(config: dict) -> dict[str, int]:
    """The logical Ray resources of a node under ``verl.device=cpu``: at least :data:`CPU_RAY_CPUS`
    CPUs, one GPU per FSDP rank (verl's resource pools count GPU bundles)."""
    return {"num_cpus": CPU_RAY_CPUS, "num_gpus": gpus_per_node(config)}


def cpu_overrides(config: dict) -> dict[str, Any]:
    """What ``verl.device=cpu`` changes in verl's config: FSDP2 (FSDP1 syncs module states through a
    GPU), float32 parameters, no torch.compile, the ``arctl_cpu`` rollout, logical Ray GPUs (one per
    FSDP rank) and CPUs for the Ray that verl starts itself (the SLURM job body starts its head with
    them), one TransferQueue storage unit (8 starve a 2-core machine), data loading in the trainer's
    process, one agent-loop and one reward-loop worker."""
    a = "actor_rollout_ref"
    resources = cpu_ray_resources(config)
    return {
        f"{a}.actor.strategy": "fsdp2",
        f"{a}.ref.strategy": "fsdp2",
        "critic.strategy": "fsdp2",
        # fp32 compute: verl's FSDP engine reads mixed_precision only (fsdp_config.dtype alone left it bf16)
        **{f"{a}.{role}.fsdp_config.dtype": "float32" for role in ("actor", "ref")},
        **{f"+{a}.{role}.fsdp_config.mixed_precision.{k}": "fp32" for role in ("actor", "ref")
           for k in ("param_dtype", "reduce_dtype", "buffer_dtype")},
        f"{a}.actor.use_torch_compile": False,
        f"{a}.actor.fsdp_config.use_torch_compile": False,
        f"{a}.rollout.name": CPU_ROLLOUT,
        "trainer.device": "cpu",
        "ray_kwargs.ray_init.num_cpus": resources["num_cpus"],
        "+ray_kwargs.ray_init.num_gpus": resources["num_gpus"],
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "data.dataloader_num_workers": 0,  # verl's 8 loader processes: memory, and killed noisily at shutdown
        f"{a}.rollout.agent.num_workers": 1,  # verl's 8 agent-loop actors each import verl: ~40 s on 2 cores
        "reward.num_workers": 1,  # the same for its 8 reward-loop actors
    }


def kl_overrides(objective: Objective, loss_scale: int, config: dict) -> dict[str, Any]:
    """The KL term (``optim.kl_coef``, ``optim.kl_type``) in verl: verl's own KL loss against its
    reference worker (``model.path``: the weights RL starts from), which verl aggregates with the
    actor's ``loss_agg_mode`` (token-sum, times the data-parallel size) and adds times
    ``kl_loss_coef``. With ``kl_loss_coef = kl_coef / C`` (C = ``loss_scale``, the constant the arctl
    policy loss divides by) the term is :func:`arctl.algo.tree_loss.kl_loss`, as the tiny backend adds
    it (the equivalence test checks both). No KL, or an eval-only run (``verl.eval_only``: nothing is
    trained, so a reference would only take a second copy of the model's memory and start-up time):
    no reference worker."""
    a = "actor_rollout_ref"
    kl = float(objective.loss.kl_coef)
    if not kl or bool(verl_setting(config, "eval_only")):
        return {f"{a}.actor.use_kl_loss": False}
    return {
        f"{a}.actor.use_kl_loss": True,
        f"{a}.actor.kl_loss_coef": kl / loss_scale,
        f"{a}.actor.kl_loss_type": objective.loss.kl_type,
        # the reference's log-prob pass takes the actor's micro-batches and offload setting
        f"{a}.ref.log_prob_micro_batch_size_per_gpu": int(verl_setting(config, "micro_batch_size_per_gpu")),
        f"{a}.ref.fsdp_config.param_offload": bool(verl_setting(config, "param_offload")),
    }


def local_gpu_problem(config: dict) -> str | None:
    """Why this verl run cannot run on *this* machine (the local executor), or None: it trains on
    GPUs and none is visible (and ``ARCTL_VERL_ALLOW_CPU`` is not set)."""
    if runs_without_gpu(config) or os.environ.get(ALLOW_CPU_ENV) == "1":
        return None
    try:
        import torch
    except ImportError:
        return "the verl backend needs torch with CUDA, and torch is not installed here"
    if torch.cuda.is_available():
        return None
    return "the paper scale (verl backend) trains on GPUs and this machine has none"


def slurm_gpu_problem(config: dict) -> str | None:
    """Why this verl run cannot go to SLURM as its ``cluster`` asks, or None: it trains on GPUs
    (``verl.n_gpus_per_node`` of them per node) and ``cluster.gpus_per_node`` is 0, so the job would
    get no GPU (``cluster=auto`` picks SLURM with the defaults of a CPU job: 2 CPUs, 8 GB, 60 min).
    Smoke and rehearsal runs use no GPU."""
    if runs_without_gpu(config) or int((config.get("cluster") or {}).get("gpus_per_node") or 0) > 0:
        return None
    return (f"it trains on {int(verl_setting(config, 'n_gpus_per_node'))} GPUs per node (verl.n_gpus_per_node) "
            "but cluster.gpus_per_node=0 asks SLURM for none")


def _extra_problem(extra) -> str | None:
    """What is wrong with ``verl.overrides`` as a list of ``KEY=VALUE`` texts (one text: one entry), or None. From
    an audit: ``verl.overrides='[KEY=VALUE]'`` reached Hydra as one text, accepted until the job's verl config was
    composed, where verl's message named another entry."""
    if extra is None:
        return None
    if not isinstance(extra, (list, tuple, str)):
        return f"verl.overrides={extra!r} is not a list of KEY=VALUE entries"
    for item in [extra] if isinstance(extra, str) else extra:
        if not isinstance(item, str) or "=" not in item or item.lstrip("+~").startswith("["):
            return f"verl.overrides entry {item!r} is not KEY=VALUE"
    return None


def config_problem(config: dict) -> tuple[str, str, str] | None:
    """(what, key, hint) of the first problem of a resolved config the verl backend cannot run
    (checked at validation, before anything is written), or None. The types and ranges of the
    ``verl`` keys are the schema's (``arctl.backends.verl.settings.VerlConfig``), checked before this."""
    block = verl_setting(config, "block_size")
    if isinstance(block, int) and block % DEFAULT_BLOCK_SIZE:  # it reaches FlexAttention's kernels now (a review)
        return (f"verl.block_size={block}: the tree mask's FlexAttention block must be a multiple of "
                f"{DEFAULT_BLOCK_SIZE}, FlexAttention's default block: its GPU kernels need block sizes their tiles divide, "
                "and another size would be found wanting only at the first GPU step (none was tried on a GPU here)", "verl.block_size",
                f"leave it at {DEFAULT_BLOCK_SIZE}, or a multiple of it")
    if not (config.get("model") or {}).get("path"):
        return ("the verl backend needs model.path", "model.path",
                "choose model=r1-distill-qwen-1.5b or set model.path=...")
    if sized := [key for key in MODEL_BUILD_KEYS if (config.get("model") or {}).get(key) is not None]:
        return (f"model.{sized[0]}={config['model'][sized[0]]!r} would be ignored: the verl backend loads model.path "
                f"({config['model']['path']}), whose config sets the model's sizes", f"model.{sized[0]}",
                f"leave model.{'/'.join(sized)} out (null) with a checkpoint, e.g. model=r1-distill-qwen-1.5b "
                "model.path=DIR")
    if (problem := _extra_problem(verl_setting(config, "overrides"))) is not None:
        return problem, "verl.overrides", "write each entry quoted inside the list: \"verl.overrides=['trainer.save_freq=5']\""
    problem = strategy_problem(config)
    if problem:
        return problem, "verl.overrides", "the tree mask exists for the FSDP engine only"
    if on_cpu(config) and verl_setting(config, "tree_attention") not in CPU_LAYOUTS:
        return (f"verl.device=cpu trains packed trees with a dense mask: verl.tree_attention="
                f"{verl_setting(config, 'tree_attention')} (FlexAttention) has no backward pass on a CPU",
                "verl.tree_attention", "add verl.tree_attention=dense (or duplicate)")
    if on_cpu(config) and int((config.get("cluster") or {}).get("gpus_per_node") or 0) > 0:
        return (f"verl.device=cpu uses no GPU, but cluster.gpus_per_node={config['cluster']['gpus_per_node']} "
                "would request GPUs from SLURM", "cluster.gpus_per_node",
                "set cluster.gpus_per_node=0 and verl.n_gpus_per_node=N for N FSDP ranks on the CPU")
    if on_cpu(config) and verl_setting(config, "rollout_name") not in (VERL_DEFAULTS["rollout_name"], CPU_ROLLOUT):
        return (f"verl.device=cpu generates with the {CPU_ROLLOUT} server, not verl.rollout_name="
                f"{verl_setting(config, 'rollout_name')}", "verl.rollout_name", "leave verl.rollout_name out")
    inserted = (config.get("summary") or {}).get("inserted")
    layout = verl_setting(config, "tree_attention")
    if inserted == "think_end" and layout != "duplicate" and branch_rows_per_tree(config) > 1:
        # a packed row reads each token's log-prob at the token before it in the row; only an inserted
        # token (never trained) may follow a branch boundary, and think_end inserts nothing after a
        # finished thinking: a second such branch would be trained on the first one's answer
        return (f"summary.inserted=think_end with {branch_rows_per_tree(config)} summary branches per thinking "
                f"and verl.tree_attention={layout}: an answer after a finished thinking has no inserted tokens, "
                "so in a packed row every branch but the first would be read after another branch's answer",
                "summary.inserted", "use one budget and one summary per thinking (Elastic's arm), or "
                "verl.tree_attention=duplicate")
    if (config.get("eval") or {}).get("num_problems") is not None:
        return (f"eval.num_problems={config['eval']['num_problems']} is the tiny backend's (problems it generates): "
                "the verl backend evaluates every problem of the eval datasets' files", "eval.num_problems",
                "leave it out (null), or point data.val_files at a smaller file")
    ckpt = verl_setting(config, "eval_checkpoint")
    if bool(verl_setting(config, "eval_only")) and not ckpt:
        # resume_mode=auto in the eval-only run's own (new, empty) run dir would evaluate model.path and log it
        # as the arm's final evaluation
        return ("verl.eval_only=true needs verl.eval_checkpoint: an eval-only run has a run id and run dir of its "
                "own, so it has no checkpoint to evaluate", "verl.eval_checkpoint",
                f"give the trained run's RUN_DIR/checkpoints/global_step_N, or verl.eval_checkpoint={EVAL_MODEL} "
                "to evaluate model.path itself")
    if ckpt and ckpt != EVAL_MODEL and not re.fullmatch(r"global_step_\d+", Path(str(ckpt)).name):
        return (f"verl.eval_checkpoint={ckpt} is not a checkpoint folder: verl resumes from a global_step_N folder",
                "verl.eval_checkpoint", "e.g. verl.eval_checkpoint=RUN_DIR/checkpoints/global_step_40")
    args = (config.get("verl") or {}).get("ray_start_args") or []
    bad = [a for a in args if not str(a).startswith("-")]
    if bad:
        return (f"verl.ray_start_args holds {bad[0]!r}, which is not a `ray start` flag", "verl.ray_start_args",
                "e.g. verl.ray_start_args=['--object-store-memory=10000000000']")
    return None


def strategy_problem(config: dict) -> str | None:
    """Why the run's verl overrides cannot train packed trees, or None: a ``*.strategy`` other
    than FSDP with ``verl.tree_attention=flex|dense`` would train the packed trees with plain causal
    attention (only verl's FSDP engine carries arctl's tree mask)."""
    layout = verl_setting(config, "tree_attention")
    if layout == "duplicate":
        return None
    extra = verl_setting(config, "overrides") or []
    for item in [extra] if isinstance(extra, str) else extra:
        key, sep, value = str(item).partition("=")
        name = key.strip().lstrip("+~")
        if sep and (name == "strategy" or name.endswith(".strategy")) and value.strip() not in TREE_STRATEGIES:
            return (f"verl.overrides sets {name}={value.strip()}, but verl.tree_attention={layout} trains packed trees "
                    f"with the tree-attention patch of verl's FSDP engine only ({'/'.join(TREE_STRATEGIES)}); use "
                    "strategy=fsdp, or verl.tree_attention=duplicate (one row per branch, any engine)")
    return None


# Keys of verl 0.9.1's config with the meaning of a key arctl sets (a deprecated alias, a copy made by interpolation, a
# field declared and read nowhere): a verl.overrides entry naming one would change what arctl set, or be ignored while
# the user thinks it changed it, so it is refused like an entry naming arctl's key (verl_overrides), where arctl sets one
# of the keys it stands for. alias -> (the verl keys arctl sets that it stands for, what to do instead (the arctl setting),
# what verl does with it: file:line under site-packages/verl). From a hunt: actor.grad_clip=0.5 was accepted, and verl
# clipped at optim.clip_grad=1.0. Checked and left out: the deprecated global micro-batch keys (actor.ppo_micro_batch_size,
# rollout/ref.log_prob_micro_batch_size: verl's validate_config refuses them beside arctl's *_per_gpu keys,
# workers/config/actor.py:200, utils/config.py:166-180; unused under use_dynamic_bsz), the Ulysses size
# (actor.ulysses_sequence_parallel_size: run_config.parallel_problem), the log-prob passes' own dynamic-batch flags and
# token budgets (interpolated from the actor's; parallel_problem checks them), rollout.nnodes/n_gpus_per_node (a
# standalone rollout pool: read by trainer_separate_async.py only), the critic's and distillation's keys of the same
# names (no critic or distillation in an arctl run), optim.warmup_style (an alias of lr_scheduler_type, which arctl
# does not set).
_A = "actor_rollout_ref"
VERL_ALIASES: dict[str, tuple[tuple[str, ...], str, str]] = {
    f"{_A}.actor.grad_clip": (
        (f"{_A}.actor.optim.clip_grad",), "set optim.grad_clip",
        "declared only (trainer/config/actor/dp_actor.yaml:29, workers/config/actor.py:308); the engine clips with "
        "optim.clip_grad (workers/engine/fsdp/transformer_impl.py:806-811)"),
    f"{_A}.actor.optim.grad_clip": (
        (f"{_A}.actor.optim.clip_grad",), "set optim.grad_clip",
        "a deprecated alias copied over optim.clip_grad (workers/config/optimizer.py:54-61)"),
    f"{_A}.actor.optim.lr_warmup_steps_ratio": (
        (f"{_A}.actor.optim.lr_warmup_steps",), "set optim.warmup_steps",
        "read in place of optim.lr_warmup_steps where that is 0, ignored otherwise "
        "(workers/engine/fsdp/transformer_impl.py:509-516)"),
    f"{_A}.actor.optim.total_training_steps": (
        ("trainer.total_training_steps", "trainer.total_epochs"), "set trainer.total_steps (or trainer.total_epochs)",
        "overwritten from trainer.total_training_steps or total_epochs (trainer/ppo/v1/trainer_base.py:768-782)"),
    f"{_A}.actor.rollout_n": (
        (f"{_A}.rollout.n",), "set rollout.n", "a copy of rollout.n (trainer/config/actor/actor.yaml:11)"),
    f"{_A}.ref.rollout_n": (
        (f"{_A}.rollout.n",), "set rollout.n", "a copy of rollout.n (trainer/config/ref/ref.yaml:2)"),
    f"{_A}.actor.use_remove_padding": (
        (f"{_A}.model.use_remove_padding",), "leave it out: arctl turns remove-padding off, as flash-attn is not installed",
        "a copy of model.use_remove_padding (trainer/config/actor/dp_actor.yaml:66); the engine reads the model's "
        "(workers/engine_workers.py:114)"),
    f"{_A}.rollout.response_length": (
        ("data.max_response_length",), "set thinking.budgets / summary.max_tokens, which the response length follows",
        "a copy of data.max_response_length (trainer/config/rollout/rollout.yaml:39)"),
    "custom_reward_function.path": (
        ("reward.custom_reward_function.path",), "set verl.grader",
        "legacy (trainer/config/legacy_reward_impl.yaml:1-3), moved to reward.custom_reward_function only by "
        "experimental/fully_async_policy/fully_async_main.py:237, never on main_ppo's path"),
    "custom_reward_function.name": (
        ("reward.custom_reward_function.name",), "set verl.grader",
        "legacy (trainer/config/legacy_reward_impl.yaml:1-3), moved to reward.custom_reward_function only by "
        "experimental/fully_async_policy/fully_async_main.py:237, never on main_ppo's path"),
    "reward_model.num_workers": (
        ("reward.num_workers",), "leave it out: verl.device=cpu runs one reward worker",
        "legacy (trainer/config/legacy_reward_impl.yaml:6), moved to reward.num_workers only by "
        "experimental/fully_async_policy/fully_async_main.py:237"),
}


# The arctl setting each verl key arctl sets is a copy of (verl_overrides), for the refusal of a verl.overrides entry that
# would replace it: "set optim.lr" where it said "set the arctl key it comes from". Keys computed from several settings
# (the response length, the loss constant, the layout's) have none. tests/verl/test_overrides_arctl_sources.py changes
# each setting and sees its verl key change.
ARCTL_SOURCE: dict[str, str] = {
    "data.train_batch_size": "data.train_batch_size",
    "data.max_prompt_length": "data.max_prompt_length",
    "data.seed": "seed",
    f"{_A}.model.path": "model.path",
    f"{_A}.model.enable_gradient_checkpointing": "verl.gradient_checkpointing",
    f"{_A}.actor.ppo_mini_batch_size": "data.ppo_mini_batch_size",
    f"{_A}.actor.ppo_micro_batch_size_per_gpu": "verl.micro_batch_size_per_gpu",
    f"{_A}.actor.use_dynamic_bsz": "verl.use_dynamic_bsz",
    f"{_A}.actor.ppo_max_token_len_per_gpu": "verl.max_token_len_per_gpu",
    f"{_A}.rollout.log_prob_micro_batch_size_per_gpu": "verl.micro_batch_size_per_gpu",
    f"{_A}.actor.ppo_epochs": "optim.ppo_epochs",
    f"{_A}.actor.clip_ratio": "optim.clip_ratio",
    f"{_A}.actor.clip_ratio_low": "optim.clip_ratio",
    f"{_A}.actor.clip_ratio_high": "optim.clip_ratio_high",
    f"{_A}.actor.clip_ratio_c": "optim.dual_clip",
    f"{_A}.actor.optim.lr": "optim.lr",
    f"{_A}.actor.optim.betas": "optim.betas",
    f"{_A}.actor.optim.weight_decay": "optim.weight_decay",
    f"{_A}.actor.optim.clip_grad": "optim.grad_clip",
    f"{_A}.actor.optim.lr_warmup_steps": "optim.warmup_steps",
    f"{_A}.actor.fsdp_config.param_offload": "verl.param_offload",
    f"{_A}.actor.fsdp_config.optimizer_offload": "verl.optimizer_offload",
    f"{_A}.actor.kl_loss_type": "optim.kl_type",
    f"{_A}.ref.log_prob_micro_batch_size_per_gpu": "verl.micro_batch_size_per_gpu",
    f"{_A}.ref.fsdp_config.param_offload": "verl.param_offload",
    f"{_A}.rollout.name": "verl.rollout_name",
    f"{_A}.rollout.n": "rollout.n",
    f"{_A}.rollout.temperature": "rollout.temperature",
    f"{_A}.rollout.seed": "seed",
    f"{_A}.rollout.tensor_model_parallel_size": "verl.tensor_model_parallel_size",
    f"{_A}.rollout.gpu_memory_utilization": "verl.gpu_memory_utilization",
    f"{_A}.rollout.val_kwargs.temperature": "eval.temperature",
    f"{_A}.rollout.val_kwargs.n": "eval.n_samples",
    f"{_A}.rollout.full_determinism": "trainer.deterministic",
    "trainer.nnodes": "cluster.nodes",
    "trainer.total_epochs": "trainer.total_epochs",
    "trainer.total_training_steps": "trainer.total_steps",
    "trainer.save_freq": "trainer.save_freq",
    "trainer.test_freq": "trainer.test_freq",
    "trainer.resume_mode": "verl.resume_mode",
    "trainer.val_before_train": "verl.val_before_train",
    "trainer.logger": "verl.logger",
}


def alias_problem(key: str, derived: Sequence[str] | set[str]) -> str | None:
    """Why a ``verl.overrides`` key is refused as an alias of a key arctl sets (:data:`VERL_ALIASES`), or as a section
    holding one (``custom_reward_function={path:...}``: Hydra merges the mapping into the section), or None."""
    for alias in ([key] if key in VERL_ALIASES else sorted(a for a in VERL_ALIASES if a.startswith(key + "."))):
        stands_for, setting, why = VERL_ALIASES[alias]
        hit = next((k for k in stands_for if k in derived), None)
        if hit is not None:
            what = alias if alias == key else f"{key} holds {alias}, which"
            return f"{what} stands for {hit}, which arctl sets ({why}); {setting}"
    return None


class VerlConfigError(ValueError):
    """A verl override that verl's own config rejects (unknown key, wrong type, bad value)."""


def verl_setting(config: dict, key: str) -> Any:
    """``config['verl'][key]`` or arctl's default for it."""
    section = config.get("verl") or {}
    value = section.get(key, None) if isinstance(section, dict) else None
    return VERL_DEFAULTS[key] if value is None else value


def wandb_identity(config: dict, run_dir: Any) -> WandbIdentity:
    """Who the run is in W&B: an eval-only run (``verl.eval_only``) is named ``{arm}-s{seed}-eval`` with job type
    ``eval`` (by default), not a second ``{arm}-s{seed}`` beside its cell's training run in the same group."""
    return WandbIdentity.from_config(config, run_dir, arm_default=None, evaluates=bool(verl_setting(config, "eval_only")))


def answer_at_of(config: dict) -> str:
    """Where the run's grader reads a summary's answer (:func:`arctl.algo.verify.answer_at` of ``summary.inserted``):
    the agent loop's, the reward function's and the smoke run's tokenizer check's."""
    return answer_at((config.get("summary") or {}).get("inserted"))


def grader_of(config: dict) -> str:
    """``verl.grader``; a config written before the key existed graded with math-verify
    (:data:`arctl.algo.verify.GRADER_BEFORE_THE_KEY`), so its resume keeps grading so."""
    section = config.get("verl") or {}
    value = section.get("grader") if isinstance(section, dict) else None
    return GRADER_BEFORE_THE_KEY if value is None else str(value)


def data_dir(config: dict) -> Path:
    """Where ``arctl data prepare`` writes parquet files and the trainer reads them."""
    value = verl_setting(config, "data_dir") or os.environ.get("ARCTL_DATA_DIR") or "~/data/arctl"
    return Path(str(value)).expanduser()


def dataset_file(config: dict, name: str, split: str = "test") -> Path:
    return dataset_path(data_dir(config), name, split)


def branch_rows_per_tree(config: dict) -> int:
    """Summary branches per thinking sample: m budgets x A summaries."""
    return len(config["thinking"]["budgets"]) * int(config["summary"]["group_size"])


def trained_branches_per_tree(config: dict) -> int:
    """Summary branches per thinking sample that the loss trains: every budget's A summaries when
    decoupled, the largest budget's when coupled (:func:`arctl.algo.tree_loss.summary_trained`)."""
    return sum(summary_trained(Objective.from_config(config))) * int(config["summary"]["group_size"])


def rows_per_tree(config: dict) -> int:
    """Rows verl trains per sampled tree: 1 packed row, or 1 thinking row + every trained summary
    branch (``duplicate``; a coupled arm's other summaries send no row): the actor's mini-batch in rows
    is ``ppo_mini_batch_size x rollout.n x`` this."""
    return 1 + trained_branches_per_tree(config) if verl_setting(config, "tree_attention") == "duplicate" else 1


def max_response_length(config: dict) -> int:
    """Longest response verl must hold.

    Packed tree: b_m thinking + m*A branches of ``summary.max_tokens`` (inserted text included)
    + one FlexAttention block of padding (10,176 for the paper). Duplicated branches: the longest
    row is b_m thinking + one branch. Validation rows hold a thinking up to the largest eval
    budget (above the training budget for Elastic Reasoning) and one branch.
    """
    budgets = [int(b) for b in config["thinking"]["budgets"]]
    branch = int(config["summary"]["max_tokens"])
    ev = config.get("eval") or {}
    validation = max(int(b) for b in [*(ev.get("budgets") or []), *(ev.get("grid") or []), *budgets]) + branch
    if verl_setting(config, "tree_attention") == "duplicate":
        return max(max(budgets) + branch, validation)
    block = int(verl_setting(config, "block_size"))
    return max(max(budgets) + branch_rows_per_tree(config) * branch + block, validation)


def fmt_value(value: Any) -> str:
    """A Python value in Hydra's override grammar (:func:`arctl.config.hydra_text.override_value`)."""
    try:
        return override_value(value)
    except ValueError as err:
        raise VerlConfigError(f"verl {err}") from None


def arctl_settings(config: dict) -> dict[str, Any]:
    """What arctl's agent loop, trainer and reward need, stored under the ``arctl`` config node:
    the run's identity, the objective (:meth:`arctl.algo.settings.Objective.to_dict`, read back by
    :func:`arctl.backends.verl.advantage.objective_of`), the tree layout and the evaluation."""
    ev = config["eval"]
    return {
        "experiment": config.get("experiment"),
        "arm": config.get("arm"),
        "seed": int(config.get("seed", 0)),
        "objective": Objective.from_config(config).to_dict(),
        "budget_control": BudgetControl.from_config(config).to_config(),
        "tree_attention": verl_setting(config, "tree_attention"),
        "rows_per_tree": rows_per_tree(config),
        "block_size": int(verl_setting(config, "block_size")),
        "eval_budgets": [int(b) for b in ev["budgets"]],
        "eval_grid": [int(b) for b in ev.get("grid") or ev["budgets"]],
        "eval_datasets": list(ev["datasets"]),
        "eval_only": False,
        "stop_file": None,  # set by train(): run_dir/STOP (a shared filesystem path)
        "redo_validation_at": None,  # set by train(): the resumed step whose validation a stop skipped
        "keep_checkpoints": int(verl_setting(config, "keep_checkpoints")),  # checkpoints.prune after each save
        "grader": grader_of(config),  # the agent loop's leaf_reward
        "answer_at": answer_at_of(config),  # ... and where it reads the answer
    }


def user_path(value: Any) -> str:
    """A file or folder the user named, as verl must get it: ``~`` expanded (verl passes a path on as
    written: ``datasets`` and Hugging Face resolve ``~/data`` against the working directory, while
    arctl's launch checks expanded it and found the file). An HF model id is unchanged."""
    text = str(value)
    return str(Path(text).expanduser()) if text.startswith("~") else text


def _val_files(config: dict) -> list[str]:
    if config["data"].get("val_files"):
        files = config["data"]["val_files"]
        return [user_path(f) for f in (files if isinstance(files, (list, tuple)) else [files])]
    return [str(dataset_file(config, name, "test")) for name in config["eval"]["datasets"]]


# the eval-only mode's own trainer entries (run_config.eval_only_overrides writes them), which arctl sets only for an
# eval-only run: a training run's verl.overrides may not set them either (from a hunt: trainer.val_only=true ended a
# training run after its first validation; trainer.resume_from_path was accepted and never read, verl.resume_mode
# being auto)
VAL_ONLY_KEY, RESUME_PATH_KEY = "trainer.val_only", "trainer.resume_from_path"


def verl_overrides(config: dict, run_dir: Path | str | None = None, mode: Sequence[str] = ()) -> list[str]:
    """The Hydra override list (``key=value``) that runs this arctl config on verl's v1 trainer: what arctl
    derives from the config, then ``mode`` (arctl's own entries of a mode: the eval-only run's), then the
    user's ``verl.overrides`` (refused where they replace what arctl set)."""
    layout = verl_setting(config, "tree_attention")
    if layout not in TREE_LAYOUTS:
        raise VerlConfigError(
            f"verl.tree_attention={layout!r} is not a tree layout; use one of {', '.join(TREE_LAYOUTS)}"
        )
    data, optim, trainer = config["data"], config["optim"], config["trainer"]
    cluster, wandb = config.get("cluster") or {}, config.get("wandb") or {}
    model_path = config["model"].get("path")
    if not model_path:
        raise VerlConfigError("model.path is empty: the verl backend needs an HF model id or a local directory")
    n = int(config["rollout"]["n"])
    resp_len = max_response_length(config)
    mini = int(data["ppo_mini_batch_size"])
    gpus = gpus_per_node(config)
    logger = verl_setting(config, "logger")
    if logger is None:
        # the file logger always: run_dir/verl_metrics.jsonl is what a resume re-logs W&B rows from
        logger = ["console", "file"] + ([] if wandb.get("mode") == "disabled" else ["wandb"])
    train_files = data.get("train_files") or str(dataset_file(config, data["train_dataset"], "train"))
    train_files = [user_path(f) for f in train_files] if isinstance(train_files, (list, tuple)) else user_path(train_files)
    ev = config["eval"]
    prompt_len = int(data["max_prompt_length"]) + bc.prompt_tokens(BudgetControl.from_config(config))
    identity = wandb_identity(config, run_dir)
    a = "actor_rollout_ref"
    ov: dict[str, Any] = {
        # data
        "data.train_files": train_files,
        "data.val_files": _val_files(config),
        "data.train_batch_size": int(data["train_batch_size"]),
        "data.max_prompt_length": int(data["max_prompt_length"]),
        "data.max_response_length": resp_len,
        "data.val_batch_size": val_batch_size(config),
        "data.filter_overlong_prompts": True,
        "data.truncation": "error",
        "data.seed": int(config.get("seed", 0)),
        # model
        f"{a}.model.path": user_path(model_path),
        # padded rows in every layout: remove-padding packs rows into one sequence and needs
        # flash-attn's varlen kernels, which verl[vllm]==0.9.1 does not install
        f"{a}.model.use_remove_padding": False,
        f"{a}.model.enable_gradient_checkpointing": bool(verl_setting(config, "gradient_checkpointing")),
        # actor: one PPO-clip loss over thinking and summary tokens, Dr. GRPO constant normalisation
        # in prompts, as verl checks it (train_batch_size >= it): the duplicated layout's extra rows
        # per tree are counted by the trainer (arctl.rows_per_tree, ArctlPPOTrainer.rows_scaled)
        f"{a}.actor.ppo_mini_batch_size": mini,
        f"{a}.actor.ppo_micro_batch_size_per_gpu": int(verl_setting(config, "micro_batch_size_per_gpu")),
        f"{a}.actor.use_dynamic_bsz": bool(verl_setting(config, "use_dynamic_bsz")),
        f"{a}.actor.ppo_max_token_len_per_gpu": int(verl_setting(config, "max_token_len_per_gpu")),
        # the old-log-prob pass takes the same micro-batches (its budget follows the actor's in verl's config)
        f"{a}.rollout.log_prob_micro_batch_size_per_gpu": int(verl_setting(config, "micro_batch_size_per_gpu")),
        f"{a}.actor.ppo_epochs": int(optim["ppo_epochs"]),
        f"{a}.actor.clip_ratio": float(optim["clip_ratio"]),
        f"{a}.actor.clip_ratio_low": float(optim["clip_ratio"]),
        f"{a}.actor.clip_ratio_high": float(optim["clip_ratio_high"]),
        f"{a}.actor.entropy_coeff": 0,  # verl default is the int 0
        f"{a}.actor.optim.lr": float(optim["lr"]),
        f"{a}.actor.optim.betas": [float(b) for b in optim["betas"]],
        f"{a}.actor.optim.weight_decay": float(optim["weight_decay"]),
        f"{a}.actor.optim.clip_grad": float(optim["grad_clip"]),
        f"{a}.actor.optim.lr_warmup_steps": int(optim["warmup_steps"]),
        f"{a}.actor.fsdp_config.param_offload": bool(verl_setting(config, "param_offload")),
        f"{a}.actor.fsdp_config.optimizer_offload": bool(verl_setting(config, "optimizer_offload")),
        # rollout: vLLM with prefix caching so summary branches reuse the thinking's KV cache
        f"{a}.rollout.name": verl_setting(config, "rollout_name"),
        f"{a}.rollout.mode": "async",
        f"{a}.rollout.n": n,
        f"{a}.rollout.temperature": float(config["rollout"]["temperature"]),
        f"{a}.rollout.enable_prefix_caching": True,
        # a method's prompt change (L1's target instruction) is appended after verl filtered the prompts by length
        f"{a}.rollout.prompt_length": prompt_len,
        # a request never needs more: the model's own limit (131,072 for R1-Distill) made vLLM size its KV cache
        # for it (from an audit of the mapping: left null)
        f"{a}.rollout.max_model_len": prompt_len + resp_len,
        # vLLM's engine seed (+ the replica's rank): verl's default 42 made every seed of an arm sample with one
        # stream, so replicates differed by their data order alone (from an audit of the mapping)
        f"{a}.rollout.seed": int(config.get("seed", 0)),
        f"{a}.rollout.calculate_log_probs": False,
        f"{a}.rollout.tensor_model_parallel_size": int(verl_setting(config, "tensor_model_parallel_size")),
        f"{a}.rollout.gpu_memory_utilization": float(verl_setting(config, "gpu_memory_utilization")),
        f"{a}.rollout.val_kwargs.temperature": float(ev["temperature"]),
        f"{a}.rollout.val_kwargs.n": int(ev["n_samples"]),
        f"{a}.rollout.val_kwargs.do_sample": True,
        f"{a}.rollout.val_kwargs.top_p": 1.0,
        f"{a}.rollout.agent.default_agent_loop": "arctl_tree",
        # reward: the authors' rule through arctl.algo.verify (the agent loop scores every leaf)
        "reward.custom_reward_function.path": str(Path(__file__).with_name("reward.py")),
        "reward.custom_reward_function.name": "compute_score",
        "+reward.custom_reward_function.reward_kwargs.grader": grader_of(config),
        "+reward.custom_reward_function.reward_kwargs.answer_at": answer_at_of(config),
        # algorithm: advantages are arctl's (trainer mode arctl); no KL, no std normalisation
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": False,
        "algorithm.use_kl_in_reward": False,
        # trainer
        "trainer.use_v1": True,
        "trainer.v1.trainer_mode": "arctl",
        "trainer.project_name": identity.project,
        "trainer.experiment_name": identity.name,
        "trainer.logger": list(logger),
        "trainer.nnodes": int(cluster.get("nodes") or 1),
        "trainer.n_gpus_per_node": gpus,
        "trainer.total_epochs": int(trainer["total_epochs"]),
        "trainer.save_freq": int(trainer["save_freq"]),
        "trainer.test_freq": int(trainer["test_freq"]),
        "trainer.resume_mode": verl_setting(config, "resume_mode"),
        "trainer.val_before_train": bool(verl_setting(config, "val_before_train")),
        "trainer.critic_warmup": 0,
    }
    # the tree loss of arctl.algo.tree_loss: PPO clip (dual clip only if the spec asks), token sum
    # divided by the Dr. GRPO constant trees per mini-batch x optim.loss_norm_len (policy_loss.py)
    objective = Objective.from_config(config)
    dual = objective.loss.dual_clip is not None
    ov[f"{a}.actor.policy_loss.loss_mode"] = POLICY_LOSS_DUAL_NAME if dual else POLICY_LOSS_NAME
    if dual:
        ov[f"{a}.actor.clip_ratio_c"] = float(objective.loss.dual_clip)
    ov[f"{a}.actor.loss_agg_mode"] = "token-sum"
    ov[f"{a}.actor.loss_scale_factor"] = scale = int(loss_normaliser(mini * n, objective))
    ov.update(kl_overrides(objective, scale, config))
    if trainer.get("total_steps"):
        ov["trainer.total_training_steps"] = int(trainer["total_steps"])
    if run_dir is not None:
        ov["trainer.default_local_dir"] = str(Path(run_dir) / "checkpoints")
    # an attention implementation every layout can load (verl's default, flash_attention_2, needs
    # flash-attn, which verl[vllm]==0.9.1 does not install): packed trees take the FlexAttention
    # BlockMask (flex) or a dense 4-D mask (dense); duplicated rows are plain padded sequences (sdpa)
    ov[f"+{a}.model.override_config.attn_implementation"] = ATTN_IMPLEMENTATION[layout]
    if trainer.get("deterministic"):
        ov[f"{a}.rollout.full_determinism"] = True
    if on_cpu(config):
        ov.update(cpu_overrides(config))
    items = [f"{k}={fmt_value(v)}" for k, v in ov.items()]
    settings = arctl_settings(config)
    if run_dir is not None:
        settings["stop_file"] = str(Path(run_dir) / STOP_FILE)
    items += [f"+arctl.{k}={fmt_value(v)}" for k, v in settings.items()]
    extra = verl_setting(config, "overrides") or []
    if isinstance(extra, str):
        extra = [extra]
    # what arctl sets from its own config, and the mode's own entries (a later value would win over either)
    derived = {k.lstrip("+") for k in ov}
    by_mode = {_split(m)[0].lstrip("+") for m in mode} - derived
    eval_only_keys = set() if mode else {VAL_ONLY_KEY, RESUME_PATH_KEY} - derived  # a training run's
    for item in extra:
        if not isinstance(item, str) or "=" not in item:
            raise VerlConfigError(f"verl.overrides entry {item!r} is not KEY=VALUE; write e.g. trainer.log_val_generations=10")
        key = item.split("=", 1)[0].strip().lstrip("+~")
        if (problem := _replaces_problem(key, derived, by_mode, eval_only_keys)) is not None:
            raise VerlConfigError(f"verl.overrides entry {item!r} {problem}")
        if (alias := alias_problem(key, derived)) is not None:
            raise VerlConfigError(f"verl.overrides entry {item!r} is refused: {alias}")
    return items + list(mode) + list(extra)


def _replaces_problem(key: str, derived: set[str], by_mode: set[str], eval_only_keys: set[str] = frozenset()) -> str | None:
    """How a ``verl.overrides`` entry of ``key`` would replace what arctl sets (``derived``: from the run's config;
    ``by_mode``: the eval-only mode's own entries), or None: ``key`` itself, a section holding such keys (Hydra merges a
    mapping into the section: ``actor_rollout_ref.actor.optim={lr:0.001}`` trained at 0.001 while the run's config and
    run id said optim.lr=1e-06), a part of one (``actor_rollout_ref.actor.optim.betas.0``: a list's item), or arctl's
    own node; or, in a training run, one of the eval-only mode's own entries (``eval_only_keys``)."""
    if key in eval_only_keys:
        return (f"sets {key}, which arctl sets only for an eval-only run (validation of one checkpoint); to evaluate one, "
                "run with verl.eval_only=true verl.eval_checkpoint=PATH; a training run resumes from its own newest "
                "checkpoint by itself")
    why = ("which arctl sets from the run's config or as its layout needs (other values are computed from the same "
           "keys: the loss constant from rollout.n, the response length from the budgets)")
    advice = "set the arctl key it comes from (`arctl show EXP --scale paper`)"

    def said(verl_key: str) -> str:  # what arctl sets it from, and what to set instead
        src = ARCTL_SOURCE.get(verl_key)
        return f"{why}; {advice}" if src is None else f"which arctl sets from {src}; set {src} instead"

    if key in derived or key.split(".", 1)[0] == "arctl":
        return f"replaces {key}, {said(key)}"
    if key in by_mode:
        return (f"replaces {key}, which arctl sets for an eval-only run (verl.eval_only=true: validation only, of "
                "verl.eval_checkpoint); set verl.eval_checkpoint (the checkpoint evaluated), or verl.eval_only=false to train")
    if (whole := next((k for k in sorted(derived | by_mode) if key.startswith(k + ".")), None)) is not None:
        return f"replaces part of {whole}, {said(whole)}"
    held = sorted(k for k in derived | by_mode if k.startswith(key + "."))
    if not held:
        return None
    names = [k[len(key) + 1:] for k in held]
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    sources = sorted({ARCTL_SOURCE[k] for k in held if k in ARCTL_SOURCE})
    setting = (f"set the arctl settings they come from instead ({', '.join(sources[:6])}"
               + (f" and {len(sources) - 6} more" if len(sources) > 6 else "") + ")") if sources else (
        "set the arctl keys that arctl's come from (`arctl show EXP --scale paper`)")
    return (f"replaces the section {key}, which holds keys arctl sets ({shown}) from the run's config or as its layout "
            f"needs, and Hydra merges the entry over them; name the section's other keys one by one ({key}.KEY=VALUE) "
            f"and {setting}")


# ----------------------------------------------------------------------------------------------
# checking against verl's own composed config


@functools.lru_cache(maxsize=1)
def _base_config() -> Any:
    return _compose_with_hydra(())


def _compose(overrides: Sequence[str]) -> Any:
    """verl's ppo_trainer config with ``overrides``, as Hydra's compose makes it. Hydra reads and merges
    verl's ~20 config files on every compose (0.8-0.95 s on the AVX2 machine, ~0.2 s this quick path);
    where no override chooses a config group (arctl's never do), this applies them, with Hydra's own
    override applier, to a copy of the config composed once: what Hydra does after its defaults list
    (tests/verl/test_overrides.py compares both on a paper run of each set of override keys and on
    refused, group, Hydra-group and sweep overrides)."""
    import copy

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    groups = _config_groups()
    if any(o.key_or_group in groups or o.key_or_group == "hydra" or o.is_hydra_override()  # hydra.x, hydra/x
           or o.package is not None or o.is_sweep_override() for o in parsed):
        return _compose_with_hydra(overrides)
    cfg = copy.deepcopy(_base_config())
    ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    return cfg


@functools.lru_cache(maxsize=1)
def _config_groups() -> frozenset[str]:
    """verl's config groups: the folders under verl/trainer/config, named as Hydra names them."""
    import importlib.resources

    found: set[str] = set()

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir() and not child.name.startswith("__"):
                found.add(prefix + child.name)
                walk(child, f"{prefix}{child.name}/")

    walk(importlib.resources.files("verl.trainer.config"), "")
    return frozenset(found)


def _compose_with_hydra(overrides: Sequence[str]) -> Any:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()  # keep any Hydra state of the caller (e.g. the spec layer) intact
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            return compose(config_name="ppo_trainer", overrides=list(overrides))
    finally:
        restore_gh_from_backup(backup)


def _split(item: str) -> tuple[str, str]:
    key, _, value = item.partition("=")
    return key.strip(), value


def _declared_type(base: Any, key: str) -> Any:
    """The field's annotation in verl's typed config class (the parent node's ``_target_``), if any."""
    import importlib
    import typing

    from omegaconf import OmegaConf

    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(base, parent_key, default=None) if parent_key else base
    target = parent.get("_target_") if OmegaConf.is_dict(parent) else None
    if not target:
        return None
    module_name, _, cls_name = str(target).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
        if not dataclasses.is_dataclass(cls):
            return None
        return typing.get_type_hints(cls).get(leaf)
    except Exception:
        return None


def _is_float_field(annotation: Any) -> bool:
    import types
    import typing

    if annotation is float:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return float in typing.get_args(annotation)
    return False


def _type_error(key: str, default: Any, value: Any, annotation: Any = None) -> str | None:
    from omegaconf import DictConfig, ListConfig

    if value is None:
        return None
    if _is_float_field(annotation):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        return f"verl override {key}={value!r} has the wrong type: verl declares a float, so give a number"
    if default is None:
        return None
    if isinstance(default, str) and (default.startswith("${") or default == "???"):
        return None
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "true/false"
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        want = "a number"
    elif isinstance(default, str):
        # verl's *_files keys take one path or a list of paths
        ok = isinstance(value, str) or (key.endswith("_files") and isinstance(value, list))
        want = "a string"
    elif isinstance(default, (list, ListConfig)):
        ok = isinstance(value, (list, ListConfig, str))  # verl accepts a single path for file lists
        want = "a list"
    elif isinstance(default, (dict, DictConfig)):
        ok = isinstance(value, (dict, DictConfig))
        want = "a mapping"
    else:
        return None
    if ok:
        return None
    return f"verl override {key}={value!r} has the wrong type: verl's default is {default!r}, so give {want}"


def check_overrides(overrides: Sequence[str]) -> Any:
    """Compose verl's ppo_trainer config with ``overrides``; return it, or raise VerlConfigError.

    Catches keys verl does not have (Hydra's struct check), unparsable values, and values whose
    type differs from verl's default (e.g. ``trainer.save_freq=often``).
    """
    from omegaconf import OmegaConf

    try:
        base = _base_config()
        cfg = _compose(overrides)
    except ImportError as err:
        raise VerlConfigError(f"verl is not importable ({err}); install arctl with the verl extra") from err
    except Exception as err:  # hydra's ConfigCompositionException / OverrideParseException
        msg = " ".join(str(err).split())
        cause = err.__cause__
        if cause is not None:
            msg = f"{msg} ({' '.join(str(cause).split())})"
        bad = next((o for o in overrides if _split(o)[0].lstrip("+~") and _split(o)[0].lstrip("+~") in msg), None)
        where = f" in {bad!r}" if bad else ""
        raise VerlConfigError(
            f"verl rejects an override{where}: {msg} — check the key against "
            "`python -m verl.trainer.main_ppo --cfg job`"
        ) from None
    for item in overrides:
        key, _ = _split(item)
        if key.startswith(("+", "~")):
            continue
        default = OmegaConf.select(base, key, default=None, throw_on_missing=False)
        value = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        default_plain = OmegaConf.to_container(default) if OmegaConf.is_config(default) else default
        err = _type_error(key, default_plain, value, _declared_type(base, key))
        if err:
            raise VerlConfigError(err)
    return cfg


def check_config_dataclasses(cfg: Any) -> None:
    """Let verl build its typed config objects (actor, rollout, data checks), as main_ppo does, and the
    rollout's, which verl builds only in ``RolloutReplica.__init__``, once its workers hold their GPUs (from a
    hunt: a rollout ``pipeline_model_parallel_size=2``, which ``RolloutConfig`` refuses for vLLM, passed the launch)."""
    import contextlib
    import io
    import warnings

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    try:
        # verl prints a success line and warns about the disabled critic: keep stdout clean
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            validate_config(
                config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
            )
    except Exception as err:  # verl raises AssertionError / ValueError / TypeError
        raise VerlConfigError(f"verl's config validation failed: {' '.join(str(err).split())}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    except Exception as err:  # noqa: BLE001 - Hydra's InstantiationException, the rollout's own error its cause
        why = err.__cause__ or err
        raise VerlConfigError(f"verl's rollout config (actor_rollout_ref.rollout) refuses it: "
                              f"{' '.join(str(why).split())}") from None


def build_verl_config(config: dict, run_dir: Path | str | None = None,
                      mode: Sequence[str] = ()) -> tuple[list[str], Any]:
    """Overrides and the composed, checked verl config for this arctl config (``mode``: :func:`verl_overrides`)."""
    overrides = verl_overrides(config, run_dir, mode)
    cfg = check_overrides(overrides)
    layout = verl_setting(config, "tree_attention")
    strategy = str(cfg.actor_rollout_ref.actor.get("strategy", "fsdp"))
    # before verl's own checks: an engine without the tree patch is the more useful line to read
    if layout != "duplicate" and strategy not in TREE_STRATEGIES:
        raise VerlConfigError(
            f"actor_rollout_ref.actor.strategy={strategy}: verl.tree_attention={layout} needs verl's FSDP engine "
            f"({'/'.join(TREE_STRATEGIES)}), the one with arctl's tree-attention patch; use verl.tree_attention=duplicate"
        )
    check_config_dataclasses(cfg)
    return overrides, cfg
