"""The run config's schema: one dataclass per section, registered in Hydra's ConfigStore.

This is the one home of every key's **type, default, range and choice list** (each field's metadata);
the algorithm's defaults and choice lists are taken from their own home, :mod:`arctl.algo.settings`.
``arctl/conf/config.yaml`` puts the schema first in its defaults list (``- arctl_schema``), so Hydra
types every value while it composes: a value of the wrong type is refused where it is written, and an
``int`` written for a ``float`` key reads as a float (``thinking.lam=1`` and ``=1.0`` are one run).
Validation (:mod:`arctl.compose.validate`) reads the ranges and choices from here
(:func:`field_ranges`, :func:`field_choices`); what the YAML files add is the options of the config
groups (a scale's numbers, a cluster profile, a model) and the backends' own sections.

``scale`` stays an open mapping (``dict[str, Any]``: its options set different keys, and a run's
identity hashes what they set; its ranges are in :mod:`arctl.compose.limits`). Each backend brings
its own section, named after it (``Backend.settings_type``: ``verl`` is typed by
``arctl.backends.verl.settings.VerlConfig``, ``tiny`` is an open mapping whose ranges the tiny backend
declares); :func:`run_config_type` adds them after the core sections, and ``+<backend>.x=...`` adds a
key to any of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from arctl.algo import settings as algo
from arctl.config.ranges import CORES, COUNT, PROB, SEED_MAX, TOKENS, F, I, Range

SCHEMA_NAME = "arctl_schema"
"""The schema's name in Hydra's ConfigStore (the first entry of config.yaml's defaults list)."""

EXECUTORS = ("auto", "slurm", "local", "debug")
"""``cluster.executor``: ``auto`` is SLURM when a controller answers, else local (arctl.launch.executors)."""
WANDB_MODES = ("offline", "online", "disabled")
"""``wandb.mode``."""
OPTIMIZERS = ("adamw",)
"""``optim.name``: the one optimizer both backends build."""


def setting(default: Any = MISSING, *, range: Range | None = None, items: Range | None = None,
            choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None) -> Any:
    """A config key: its default, and what validation checks (``range`` of a number, ``items``: the
    range of each entry of a list, ``choices`` of a string: a tuple, or a function returning the
    names registered when it is asked, e.g. the compared methods). A list default is copied per instance."""
    meta = {k: v for k, v in (("range", range), ("items", items), ("choices", choices)) if v is not None}
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def algo_setting(key: str, **checks: Any) -> Any:
    """A key whose default is the algorithm's (:func:`arctl.algo.settings.default`, its one home)."""
    return setting(algo.default(key), **checks)


@dataclass
class ThinkingConfig:
    """``thinking``: the budget support, the prior p_B and the BRPO baseline (arctl.algo.settings.Thinking)."""

    prior: str = algo_setting("thinking.prior", choices=algo.priors)  # p_B (set by the `prior` group)
    probs: list[float] | None = algo_setting("thinking.probs", items=PROB)  # explicit P_j for prior=custom
    budgets: list[int] = setting("${scale.budgets}", items=TOKENS)  # the support {b_1 < ... < b_m}
    baseline: str = algo_setting("thinking.baseline", choices=algo.BASELINES)  # brpo (V1 and V2) | v1 | v2 | none
    lam: float = algo_setting("thinking.lam", range=F(0, 1, lo_open=True))  # BRPO's lambda (V1's weights lam^(k-j))
    temperature: float = setting(1.0, range=F(0, 100, lo_open=True))


@dataclass
class SummaryConfig:
    """``summary``: how summaries are sampled and trained (arctl.algo.settings.Summary)."""

    decoupled: bool = algo_setting("summary.decoupled")  # every budget's summaries (GRPO per prefix) vs the final one only
    prior: str = algo_setting("summary.prior", choices=algo.priors)  # p'_B (weighs summaries under weighting=paper)
    probs: list[float] | None = algo_setting("summary.probs", items=PROB)
    weighting: str = algo_setting("summary.weighting", choices=algo.SUMMARY_WEIGHTINGS)  # authors (1) | paper (P'_j, Eq. 10)
    group_size: int = algo_setting("summary.group_size", range=I(1, 1024))  # A: summaries sampled per budget
    max_tokens: int = setting("${scale.summary_max_tokens}", range=I(1, 10**5))


@dataclass
class RewardConfig:
    """``reward``: the length-penalty shaping of the verifier's 0/1 reward (arctl.algo.settings.Reward)."""

    length_penalty: str = algo_setting("reward.length_penalty", choices=algo.LENGTH_PENALTIES)  # none | v1 | v2
    alpha: float = algo_setting("reward.alpha", range=PROB)


@dataclass
class BudgetControlConfig:
    """``budget_control``: the compared methods (docs/baselines.md; arctl.algo.settings.BudgetControl).
    Inactive (method none, no budget forcing) it changes nothing and is left out of a run's identity."""

    method: str = algo_setting("budget_control.method", choices=algo.control_methods)  # none | thinkprune | l1 | a plugin's
    thinkprune_limits: list[int] = algo_setting("budget_control.thinkprune_limits", items=TOKENS)  # ThinkPrune's rounds
    l1_mode: str = algo_setting("budget_control.l1_mode", choices=algo.L1_MODES)  # exact (Eq. 1) | max (Eq. 2)
    l1_alpha: float = algo_setting("budget_control.l1_alpha", range=F(0, 10))
    l1_delta: float = algo_setting("budget_control.l1_delta", range=PROB)
    l1_targets: list[int] | None = algo_setting("budget_control.l1_targets", items=TOKENS)  # null: uniform up to b_m
    forcing_extensions: int = algo_setting("budget_control.forcing_extensions", range=I(0, 1000))  # s1 forcing cues at eval
    forcing_cue: str = algo_setting("budget_control.forcing_cue")  # what replaces an early end of thinking


@dataclass
class RolloutConfig:
    """``rollout``: sampling of the thinking traces."""

    n: int = setting("${scale.rollout_n}", range=I(1, 1024))  # thinking samples per prompt (G)
    temperature: float = setting(1.0, range=F(0, 100, lo_open=True))


@dataclass
class OptimConfig:
    """``optim``: the optimizer, and the loss keys of arctl.algo.settings.Loss."""

    name: str = setting("adamw", choices=OPTIMIZERS)
    lr: float = setting(1.0e-6, range=F(0, 10, lo_open=True))
    betas: list[float] = setting([0.9, 0.999], items=F(0, 1, hi_open=True))
    weight_decay: float = setting(0.01, range=F(0, 10))
    grad_clip: float = setting(1.0, range=F(0, 10**6, lo_open=True))
    clip_ratio: float = algo_setting("optim.clip_ratio", range=F(0, 1, lo_open=True, hi_open=True))
    clip_ratio_high: float = algo_setting("optim.clip_ratio_high", range=F(0, 10, lo_open=True, hi_open=True))  # > clip_ratio: DAPO
    dual_clip: float | None = algo_setting("optim.dual_clip", range=F(1, 10**6, lo_open=True, nullable=True))  # null: plain PPO clip
    # Dr. GRPO constant, tokens per tree; null: the authors' rule b_m + 16 x summary.max_tokens + 128 (spec.resolve)
    loss_norm_len: int | None = algo_setting("optim.loss_norm_len", range=I(1, 10**8, nullable=True))
    ppo_epochs: int = setting(1, range=I(1, 1000))
    warmup_steps: int = setting(0, range=I(0, 10**7))


@dataclass
class DataConfig:
    """``data``: the training set and the batch."""

    train_dataset: str = "deepscaler"
    train_files: Any = None  # null: the prepared dataset's file; a path or a list of paths (verl)
    val_files: Any = None  # null: the eval datasets' files
    train_batch_size: int = setting(64, range=I(1, 10**6))  # prompts per policy iteration
    ppo_mini_batch_size: int = setting(32, range=I(1, 10**6))
    max_prompt_length: int = setting(1024, range=TOKENS)


@dataclass
class TrainerConfig:
    """``trainer``: length of training, evaluation and checkpoint cadence."""

    total_epochs: int = setting(1, range=I(1, 10**4))
    total_steps: int | None = setting(None, range=I(1, 10**7, nullable=True))  # null: dataset size x total_epochs
    test_freq: int = setting(20, range=COUNT)
    save_freq: int = setting(40, range=COUNT)
    deterministic: bool = False


@dataclass
class EvalConfig:
    """``eval``: accuracy at budgets during training, and the final anytime evaluation on a grid."""

    datasets: list[str] = setting("${scale.eval_datasets}")
    final_datasets: list[str] = setting("${scale.final_eval_datasets}")
    budgets: list[int] | None = setting(None, items=TOKENS)  # null: the scale's and the thinking budgets, up to b_m
    grid: list[int] | None = setting(None, items=TOKENS)  # null: grid_size budgets evenly spaced up to b_m
    grid_size: int = setting(32, range=I(1, 10**4))
    n_samples: int = setting(32, range=I(1, 10**4))
    temperature: float = setting(0.6, range=F(0, 100))
    num_problems: int | None = setting(None, range=I(1, 10**7, nullable=True))  # null: the whole dataset


def _model_dim(hi: int) -> Any:
    return setting(None, range=I(1, hi, nullable=True))  # null: the checkpoint's own value


@dataclass
class ModelConfig:
    """``model``: a checkpoint (``path``) or, with ``path: null``, a model built from these sizes."""

    name: str = MISSING
    path: str | None = None  # HF id or a local directory
    hidden_size: int | None = _model_dim(10**6)
    num_layers: int | None = _model_dim(1024)
    num_heads: int | None = _model_dim(1024)
    num_kv_heads: int | None = _model_dim(1024)
    intermediate_size: int | None = _model_dim(10**7)
    tie_embeddings: bool | None = None
    max_position_embeddings: int | None = _model_dim(10**7)


@dataclass
class ClusterConfig:
    """``cluster``: where and how a run is submitted (a profile of arctl/conf/cluster/ sets what differs)."""

    executor: str = setting("auto", choices=EXECUTORS)
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    nodes: int = setting(1, range=I(1, 10**4))
    gpus_per_node: int = setting(0, range=I(0, 64))
    cpus_per_task: int = setting("${oc.select:scale.cpus_per_task,2}", range=CORES)  # the scale's need (tiny: 1 core per run)
    mem_gb: float = setting(8, range=F(0.125, 10**5))  # at least 128 MB: SLURM reads --mem=0 as the whole node
    time_min: int = setting(60, range=I(1, 366 * 24 * 60))
    constraint: str | None = None
    array_parallelism: int = setting(64, range=I(1, 10**5))
    max_array_size: int = setting(1000, range=COUNT)
    sbatch_extra: list[str] = setting([])  # extra "#SBATCH" lines, e.g. ["--exclusive"]
    setup: list[str] = setting([])  # shell lines run before the job (module load ..., source venv)
    # SLURM sends USR1 this long before the time limit; the trainer finishes its step and checkpoints, or
    # abandons the step past half of it. null: the scale's (tiny 60 s, paper 1800 s), at most a quarter
    # of cluster.time_min (spec.resolve)
    preempt_warning_s: int | None = setting(None, range=I(1, 65535, nullable=True))


@dataclass
class WandbConfig:
    """``wandb``: where a run logs (launch-only: not part of a run's identity)."""

    project: str = "arctl"
    entity: str | None = None
    group: str = "${experiment}"
    name: str = "${arm}-s${seed}"
    mode: str = setting("offline", choices=WANDB_MODES)
    tags: list[str] = setting([])


@dataclass
class RunConfig:
    """A whole run config: the sections above, the open ones, and the run's names."""

    experiment: str = MISSING  # set from experiments/<name>.yaml
    arm: str = MISSING  # set from the experiment's arm
    seed: int = setting(0, range=I(0, SEED_MAX))
    backend: str = MISSING  # set by the scale; choices: the registered backends (arctl.backends.base)
    thinking: ThinkingConfig = field(default_factory=ThinkingConfig)
    summary: SummaryConfig = field(default_factory=SummaryConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    budget_control: BudgetControlConfig = field(default_factory=BudgetControlConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    scale: dict[str, Any] = field(default_factory=dict)  # open: set by the scale group (ranges: compose.limits)
    # then one section per registered backend, named after it, which the backend brings
    # (Backend.settings_type: a dataclass, or None for an open mapping): run_config_type() adds them


def run_config_type(sections: dict[str, type | None]) -> type:
    """:class:`RunConfig` with the backends' sections after its own: section name -> its dataclass
    (typed like the core sections), or None (an open mapping ``{}``). ``arctl.compose.plugins``
    builds it from the registered backends, in name order."""
    if not sections:
        return RunConfig
    extra = []
    for name, klass in sections.items():
        if klass is None:
            extra.append((name, dict[str, Any], field(default_factory=dict)))
        else:
            if not dataclasses.is_dataclass(klass):
                raise TypeError(f"the {name!r} section's settings type {klass!r} is not a dataclass")
            extra.append((name, klass, field(default_factory=klass)))
    return dataclasses.make_dataclass("RunConfig", extra, bases=(RunConfig,))


def field_default(f: dataclasses.Field) -> Any:
    """A schema field's default value (a fresh list for a list default)."""
    return f.default if f.default_factory is dataclasses.MISSING else f.default_factory()


def register(run_config: type = RunConfig) -> None:
    """Store ``run_config`` (:class:`RunConfig`, or :func:`run_config_type`'s with the backends'
    sections) in Hydra's ConfigStore as :data:`SCHEMA_NAME` (idempotent)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=SCHEMA_NAME, node=run_config)


def _walk(cls: type, prefix: str = ""):
    """(dotted key, dataclass field) of every key of the typed sections."""
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.default_factory if f.default_factory is not dataclasses.MISSING else None):
            yield from _walk(f.default_factory, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


def field_ranges(cls: type = RunConfig) -> dict[str, Range]:
    """Dotted key -> range of every numeric key of the typed sections of ``cls``."""
    return {key: f.metadata["range"] for key, f in _walk(cls) if "range" in f.metadata}


def field_item_ranges(cls: type = RunConfig) -> dict[str, Range]:
    """Dotted key -> range of each entry, for the list keys of the typed sections."""
    return {key: f.metadata["items"] for key, f in _walk(cls) if "items" in f.metadata}


def field_choices(cls: type = RunConfig) -> dict[str, tuple[str, ...]]:
    """Dotted key -> allowed values, for the string keys with a fixed choice list."""
    def names(choices: Any) -> tuple[str, ...]:
        return tuple(choices() if callable(choices) else choices)

    return {key: names(f.metadata["choices"]) for key, f in _walk(cls) if "choices" in f.metadata}


def bool_fields(cls: type = RunConfig) -> tuple[str, ...]:
    """The keys typed ``bool`` (a config edited on disk may hold anything there)."""
    return tuple(key for key, f in _walk(cls) if f.type in (bool, "bool"))


def nullable_lists(cls: type = RunConfig) -> tuple[str, ...]:
    """The list keys that may be null (a derived or sampled value)."""
    return tuple(key for key, f in _walk(cls) if "items" in f.metadata and f.default is None)


__all__ = ["EXECUTORS", "OPTIMIZERS", "SCHEMA_NAME", "WANDB_MODES", "RunConfig",
           "algo_setting", "run_config_type", "bool_fields", "field_choices", "field_default", "field_item_ranges", "field_ranges", "nullable_lists",
           "register", "setting"]
