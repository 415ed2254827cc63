"""The run config's schema: one dataclass per section, registered in Hydra's ConfigStore.

Every key's **type, default, range and choice list** is written once, on its field (the metadata of
:func:`arctl.algo.ranges.checks`): the algorithm's keys on the settings classes of
:mod:`arctl.algo.settings`, from which :func:`from_settings` builds the ``thinking``, ``summary``,
``reward``, ``budget_control`` and ``optim`` sections (no mirror class), the other keys here.
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
import functools
import operator
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from arctl.algo import settings as algo
from arctl.algo.ranges import checks
from arctl.config.ranges import CORES, COUNT, MEM_GB, SEED_MAX, TOKENS, F, I, Range

SCHEMA_NAME = "arctl_schema"
"""The schema's name in Hydra's ConfigStore (the first entry of config.yaml's defaults list)."""

EXECUTORS = ("auto", "slurm", "local", "debug")
"""``cluster.executor``: ``auto`` is SLURM when a controller answers, else local (arctl.launch.executors)."""
WANDB_MODES = ("offline", "online", "disabled")
"""``wandb.mode``."""
OPTIMIZERS = ("adamw",)
"""``optim.name``: the one optimizer both backends build."""


def setting(default: Any = MISSING, *, range: Range | None = None, items: Range | None = None,
            choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None, added_later: bool = False) -> Any:
    """A config key: its default, and what validation checks (``range`` of a number, ``items``: the
    range of each entry of a list, ``choices`` of a string: a tuple, or a function returning the
    names registered when it is asked, e.g. the compared methods). A list default is copied per instance.
    ``added_later``: a plugin backend's key added in a later version of its package (runs written before keep
    their ids: :func:`arctl.algo.ranges.checks`)."""
    meta = checks(range=range, items=items, choices=choices, added_later=added_later)
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _listed(hint: Any) -> Any:
    """An algorithm setting's type as the config holds it: ``tuple[X, ...]`` -> ``list[X]`` (also
    inside ``| None``); other types as they are."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [_listed(a) for a in typing.get_args(hint)]
        return functools.reduce(operator.or_, args)
    if typing.get_origin(hint) is tuple:
        return list[typing.get_args(hint)[0]]
    return hint


def from_settings(name: str, settings: type, *, defaults: dict[str, Any] | None = None,
                  before: list[tuple] = (), after: list[tuple] = ()) -> type:
    """The schema class of a config section whose keys are an algorithm settings class's fields
    (:mod:`arctl.algo.settings`, where each field's default, range and choices are written once):
    the same fields, typed as the config holds them (lists for tuples), with their metadata; a
    ``defaults`` entry replaces a field's default (e.g. the scale's value, ``"${scale.budgets}"``);
    ``before``/``after``: the section's keys that are not the algorithm's (``(name, type, field)``)."""
    hints = typing.get_type_hints(settings)
    fields = list(before)
    for f in algo.section_fields(settings):  # not what the settings object holds beside its keys (BudgetControl.own)
        meta = dict(f.metadata)
        default = (defaults or {}).get(f.name, f.default)
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()  # a plugin's list default, written the usual way (from a hunt: it was lost)
        if isinstance(default, (list, tuple)):
            spec = field(default_factory=lambda d=default: list(d), metadata=meta)
        else:
            spec = field(default=MISSING if default is dataclasses.MISSING else default, metadata=meta)
        fields.append((f.name, _listed(hints[f.name]), spec))
    return dataclasses.make_dataclass(name, [*fields, *after])


UNREAD_THINKING_TEMPERATURE = 1.0
"""``thinking.temperature``: read by no backend (the sampling temperatures are ``rollout.temperature`` and
``eval.temperature``); it stays in the schema at this value because every run id hashes it, and
validation refuses any other value."""
ThinkingConfig = from_settings("ThinkingConfig", algo.Thinking, defaults={"budgets": "${scale.budgets}"}, after=[
    ("temperature", float, setting(UNREAD_THINKING_TEMPERATURE, range=F(0, 100, lo_open=True))),
])
"""``thinking``: the budget support {b_1 < ... < b_m} (the scale's), the prior p_B and the BRPO baseline."""
SummaryConfig = from_settings("SummaryConfig", algo.Summary, defaults={"max_tokens": "${scale.summary_max_tokens}"})
"""``summary``: how summaries are sampled and trained."""
RewardConfig = from_settings("RewardConfig", algo.Reward)
"""``reward``: the length-penalty shaping of the verifier's 0/1 reward."""
BudgetControlConfig = from_settings("BudgetControlConfig", algo.BudgetControl)
"""``budget_control``: the compared methods (docs/baselines.md). Inactive (method none, no budget
forcing) it changes nothing and is left out of a run's identity."""


@dataclass
class RolloutConfig:
    """``rollout``: sampling of the thinking traces."""

    n: int = setting("${scale.rollout_n}", range=I(1, 1024))  # thinking samples per prompt (G)
    temperature: float = setting(1.0, range=F(0, 100, lo_open=True))


OptimConfig = from_settings("OptimConfig", algo.Loss, before=[
    ("name", str, setting("adamw", choices=OPTIMIZERS)),
    ("lr", float, setting(1.0e-6, range=F(0, 10, lo_open=True))),
    ("betas", list[float], setting([0.9, 0.999], items=F(0, 1, hi_open=True))),
    ("weight_decay", float, setting(0.01, range=F(0, 10))),
    ("grad_clip", float, setting(1.0, range=F(0, 10**6, lo_open=True))),
], after=[
    ("ppo_epochs", int, setting(1, range=I(1, 1000))),
    ("warmup_steps", int, setting(0, range=I(0, 10**7))),
])
"""``optim``: the optimizer, and the loss keys of :class:`arctl.algo.settings.Loss` (PPO clip, the Dr.
GRPO constant: null is the authors' rule b_m + 16 x summary.max_tokens + 128, compose.resolve)."""


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
    # start from another run's final weights (a fresh optimizer, step 0): "ARM" of the same experiment or
    # "EXPERIMENT/ARM", the same seed, scale and command-line overrides (L1-Max from L1-Exact,
    # ThinkPrune's rounds). The launcher launches that run first (arctl.launch.depends); null: the warm-up
    init_from: str | None = None
    # set by the launcher from init_from, never by hand: the id of the run whose weights this one starts
    # from, so that run's identity is part of this one's
    init_run: str | None = None


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


MODEL_SIZE_KEYS = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size",
                   "max_position_embeddings")
"""The ``model`` sizes a model built without a checkpoint is made from (the tiny backend's); with ``tie_embeddings``
:data:`MODEL_BUILD_KEYS`, every key a checkpoint (``model.path``) decides instead."""
MODEL_BUILD_KEYS = (*MODEL_SIZE_KEYS, "tie_embeddings")


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
    mem_gb: float = setting("${oc.select:scale.mem_gb,8}", range=MEM_GB)  # the scale's need (tiny: 4 GB; a run peaks at ~2.9)
    time_min: int = setting(60, range=I(1, 366 * 24 * 60))
    constraint: str | None = None
    array_parallelism: int = setting(64, range=I(1, 10**5))
    max_array_size: int = setting(1000, range=COUNT)
    sbatch_extra: list[str] = setting([])  # extra "#SBATCH" lines, read as sbatch reads them, e.g. ["--exclusive", "-w node1"]
    setup: list[str] = setting([])  # shell lines run before the job (module load ..., source venv)
    # secrets of the launching shell (names arctl.track.identity.is_secret_name takes: HF_TOKEN, PGPASSWORD,
    # KAGGLE_KEY, GITHUB_PAT, ...) that a SLURM job receives, e.g. [HF_TOKEN]: sbatch stores the environment it
    # exports in SLURM's state, so every other one is left out; each must be set in the launching shell
    secrets: list[str] = setting([])
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
    notes: str | None = None  # the W&B run's notes: free text, e.g. what the run is for (WANDB_NOTES for verl)


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


def run_config_type(sections: dict[str, type | None], methods: dict[str, type] | None = None) -> type:
    """:class:`RunConfig` with the backends' sections after its own: section name -> its dataclass
    (typed like the core sections), or None (an open mapping ``{}``); and ``budget_control`` with a
    sub-section per compared method that brings its own settings (method name -> its dataclass,
    ``ControlMethod.settings``). ``arctl.compose.plugins`` builds it from the registered backends and
    methods, in name order."""
    if not sections and not methods:
        return RunConfig
    extra = []
    if methods:
        taken = {f.name for f in dataclasses.fields(BudgetControlConfig)}
        own = []
        for name, klass in methods.items():
            if name in taken or not dataclasses.is_dataclass(klass):
                raise TypeError(f"budget_control.method {name!r}: its settings type {klass!r} must be a dataclass "
                                f"and its name must not be a budget_control key ({', '.join(sorted(taken))})")
            section = from_settings(f"{klass.__name__}Config", klass)  # as the core sections: lists, not frozen
            own.append((name, section, field(default_factory=section)))
        control = dataclasses.make_dataclass("BudgetControlConfig", own, bases=(BudgetControlConfig,))
        extra.append(("budget_control", control, field(default_factory=control)))
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


def bool_fields(cls: type = RunConfig, nullable: bool = False) -> tuple[str, ...]:
    """The keys typed ``bool`` (a config edited on disk may hold anything there); ``nullable``: those typed
    ``bool | None`` (from a review: left out, ``model.tie_embeddings=2`` or ``=yes`` was taken for true)."""
    kinds = ("bool | None", "Optional[bool]", bool | None) if nullable else (bool, "bool")
    return tuple(key for key, f in _walk(cls) if f.type in kinds)


def number_fields(cls: type = RunConfig) -> tuple[str, ...]:
    """The keys typed a number (int or float, nullable or not), with or without a declared range."""
    kinds = ("int", "float", "int | None", "float | None", int, float)
    return tuple(key for key, f in _walk(cls) if f.type in kinds)


def str_list_fields(cls: type = RunConfig) -> tuple[str, ...]:
    """The keys typed ``list[str]`` (shell lines, flags, names: each entry must be text)."""
    return tuple(key for key, f in _walk(cls) if f.type in ("list[str]", list[str]))


def nullable_lists(cls: type = RunConfig) -> tuple[str, ...]:
    """The list keys that may be null (a derived or sampled value)."""
    return tuple(key for key, f in _walk(cls) if "items" in f.metadata and f.default is None)


__all__ = ["EXECUTORS", "OPTIMIZERS", "SCHEMA_NAME", "WANDB_MODES", "RunConfig",
           "run_config_type", "bool_fields", "str_list_fields", "field_choices", "field_default", "field_item_ranges", "field_ranges", "nullable_lists",
           "register", "setting"]
