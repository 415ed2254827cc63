"""The run config as the tiny backend reads it: typed once, read as attributes.

:meth:`TinyRun.from_config` takes every key the trainer and the evaluation use from a resolved run
config (typed by the schema, ``arctl/config/schema.py``, and validated by ``arctl.compose``) and casts it
once; no default lives here: the values come from the schema and ``arctl/conf`` (the tiny knobs, an
open section, from ``arctl/backends/tiny/conf/scale/tiny.yaml``), so a key missing from the config is an error
naming it. The algorithm's settings are :class:`arctl.algo.settings.Objective`
and :class:`~arctl.algo.settings.BudgetControl`; the warm-up reads its sections as they are, since
they are its cache key (:func:`arctl.backends.tiny.warmup.warmup_key`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arctl.backends.tiny.tasks import knob_ranges, toy_task
from arctl.config.ranges import CORES, COUNT, PROB, SEED_MAX, F, I, Range
from arctl.config.schema import MODEL_SIZE_KEYS

# The range of every numeric key of the tiny section (arctl/backends/tiny/conf/scale/tiny.yaml); validation derives
# its checks from this table (the backend's ``config_ranges``).
RANGES: dict[str, Range] = {
    "tiny.threads": CORES,
    "tiny.keep_checkpoints": I(1, 1000),
    "tiny.max_rows": COUNT,
    "tiny.update_micro_batch": I(1, 10**6),
    "tiny.diag_problems": I(0, 10**6),
    "tiny.eval_seed": I(0, SEED_MAX),
    **knob_ranges(),  # tiny.task.<name>.<knob>: each toy task declares its knobs' ranges
    "tiny.warmup.steps": COUNT,
    "tiny.warmup.batch_size": I(1, 10**6),
    "tiny.warmup.lr": F(0, 10, lo_open=True),
    "tiny.warmup.min_lr_ratio": PROB,
    "tiny.warmup.truncate_prob": PROB,
    "tiny.warmup.min_acc": PROB,
    "tiny.warmup.max_rounds": I(0, 100),
    "tiny.warmup.eval_problems": I(1, 10**6),
    "tiny.warmup.seed": I(0, SEED_MAX),
    "tiny.warmup.threads": I(0, 4096),
}
DATASET = "toy"  # the one dataset of the tiny backend: its generated task (eval/toy/... in every metric key)


def seeds_problem(config: dict) -> tuple[str, str, str] | None:
    """``tiny.eval_seed`` equal to ``tiny.warmup.seed``: the held-out problems (``default_rng([eval_seed, 0])``, which
    NumPy's SeedSequence reads as ``default_rng(eval_seed)``: it drops trailing zero words) would be the warm-up's
    own training problems, its first batches (from a hunt: 32 of the 1,024 held-out problems at the defaults'
    batch size, more with a longer warm-up)."""
    tiny = config.get("tiny") or {}
    warmup = tiny.get("warmup") or {}
    ev, wu = tiny.get("eval_seed"), warmup.get("seed")
    if isinstance(ev, int) and isinstance(wu, int) and ev == wu:
        return (f"tiny.eval_seed={ev} is also tiny.warmup.seed: the held-out evaluation problems would be drawn from "
                "the warm-up's training stream (its first batches are evaluation problems)", "tiny.eval_seed",
                "give the two other values")
    return None


def dataset_problem(config: dict) -> tuple[str, str, str] | None:
    """A dataset key naming another dataset than the generated task's: the tiny backend reads none of them
    (from a review: `data.train_dataset=nope eval.datasets=[nope]` was accepted, and renamed the run)."""
    data, ev = config.get("data") or {}, config.get("eval") or {}
    for key, value, ok in (("data.train_dataset", data.get("train_dataset"), (DATASET,)),
                           ("eval.datasets", ev.get("datasets"), ([DATASET],)),
                           ("eval.final_datasets", ev.get("final_datasets"), ([DATASET], []))):
        if value is not None and value not in ok:
            return (f"{key}={value!r}: the tiny backend trains and evaluates its generated task, {DATASET!r}, and reads "
                    "no dataset", key, f"leave it out (the tiny scale sets {DATASET}); datasets are the verl backend's "
                    "(--scale paper)")
    return None


# keys the schema lets be null (a dataset's size decides them) that the generated toy task needs
NEEDS_VALUE = {"trainer.total_steps": "e.g. trainer.total_steps=100",
               "eval.num_problems": "e.g. eval.num_problems=1024 (held-out problems are generated)"}

# where a run's warm-up comes from: "shipped" (the default, also when unset) takes the warm-start arctl
# ships for its key, if any (arctl.backends.tiny.warmup.install_shipped); "train" trains it on this machine
WARMUP_ENV = "ARCTL_TINY_WARMUP"
WARMUP_SOURCES = ("shipped", "train")


def warmup_source_problem() -> tuple[str, str, str] | None:
    """(what, where, hint) when ``$ARCTL_TINY_WARMUP`` holds something other than :data:`WARMUP_SOURCES`
    (checked at validation, so a typo stops the submission instead of being ignored by every job)."""
    raw = os.environ.get(WARMUP_ENV, "")
    if raw.strip().lower() in ("", *WARMUP_SOURCES):
        return None
    return (f"{raw!r} is not a warm-up source: choose one of {', '.join(WARMUP_SOURCES)}", f"${WARMUP_ENV}",
            f"unset it (or {WARMUP_ENV}=shipped) to start from the warm-start shipped with arctl, or "
            f"{WARMUP_ENV}=train to train the warm-up on this machine")


def warmup_source() -> str:
    """``$ARCTL_TINY_WARMUP`` read: one of :data:`WARMUP_SOURCES` ("shipped" when unset); ValueError
    (one line) for anything else."""
    problem = warmup_source_problem()
    if problem:
        raise ValueError(f"{problem[1]}: {problem[0]} — {problem[2]}")
    return os.environ.get(WARMUP_ENV, "").strip().lower() or "shipped"


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"tiny backend: the run config lacks {dotted}; resolve the run with --scale tiny "
                             "(arctl/backends/tiny/conf/scale/tiny.yaml defines the tiny keys)")
        node = node[part]
    return node


@dataclass(frozen=True)
class TinyRun:
    """One run's settings of the tiny loop (config key in each field's comment)."""

    experiment: str  # experiment
    arm: str  # arm
    seed: int  # seed
    # toy task and engine (tiny.*)
    task: Any  # tiny.task: the toy task it names, with its knobs (arctl.backends.tiny.tasks.ToyTask)
    threads: int  # tiny.threads
    eval_seed: int  # tiny.eval_seed
    diag_problems: int  # tiny.diag_problems
    max_rows: int  # tiny.max_rows
    update_micro_batch: int  # tiny.update_micro_batch
    keep_checkpoints: int  # tiny.keep_checkpoints
    warmup_eval_problems: int  # tiny.warmup.eval_problems
    # optimisation (optim.*, data.*, trainer.*)
    lr: float  # optim.lr
    betas: tuple[float, float]  # optim.betas
    weight_decay: float  # optim.weight_decay
    grad_clip: float  # optim.grad_clip
    ppo_epochs: int  # optim.ppo_epochs
    lr_warmup_steps: int  # optim.warmup_steps
    train_batch_size: int  # data.train_batch_size
    ppo_mini_batch_size: int  # data.ppo_mini_batch_size
    total_steps: int  # trainer.total_steps
    test_freq: int  # trainer.test_freq (evaluate every test_freq steps, and at step 0)
    save_freq: int  # trainer.save_freq (checkpoint every save_freq steps, and at the end)
    deterministic: bool  # trainer.deterministic
    # sampling (rollout.*, summary.*)
    rollout_n: int  # rollout.n (G)
    temperature: float  # rollout.temperature
    group_size: int  # summary.group_size (A)
    summary_max_tokens: int  # summary.max_tokens
    # evaluation (eval.*)
    eval_budgets: tuple[int, ...]  # eval.budgets
    eval_grid: tuple[int, ...]  # eval.grid (empty: none)
    eval_n_samples: int  # eval.n_samples
    eval_temperature: float  # eval.temperature
    eval_num_problems: int  # eval.num_problems (held-out problems generated for the evaluation)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TinyRun:
        g = lambda key: _get(config, key)  # noqa: E731
        return cls(
            experiment=str(config.get("experiment")), arm=str(config.get("arm")), seed=int(g("seed")),
            task=toy_task(g("tiny.task")),
            threads=int(g("tiny.threads")), eval_seed=int(g("tiny.eval_seed")),
            diag_problems=int(g("tiny.diag_problems")), max_rows=int(g("tiny.max_rows")),
            update_micro_batch=int(g("tiny.update_micro_batch")), keep_checkpoints=int(g("tiny.keep_checkpoints")),
            warmup_eval_problems=int(g("tiny.warmup.eval_problems")),
            lr=float(g("optim.lr")), betas=tuple(float(b) for b in g("optim.betas")),
            weight_decay=float(g("optim.weight_decay")), grad_clip=float(g("optim.grad_clip")),
            ppo_epochs=int(g("optim.ppo_epochs")), lr_warmup_steps=int(g("optim.warmup_steps")),
            train_batch_size=int(g("data.train_batch_size")), ppo_mini_batch_size=int(g("data.ppo_mini_batch_size")),
            total_steps=int(g("trainer.total_steps")), test_freq=int(g("trainer.test_freq")),
            save_freq=int(g("trainer.save_freq")), deterministic=bool(config["trainer"].get("deterministic")),
            rollout_n=int(g("rollout.n")), temperature=float(g("rollout.temperature")),
            group_size=int(g("summary.group_size")), summary_max_tokens=int(g("summary.max_tokens")),
            eval_budgets=tuple(int(b) for b in g("eval.budgets")),
            eval_grid=tuple(int(b) for b in (config["eval"].get("grid") or ())),
            eval_n_samples=int(g("eval.n_samples")), eval_temperature=float(g("eval.temperature")),
            eval_num_problems=int(g("eval.num_problems")),
        )


def model_problem(model: dict) -> tuple[str, str, str] | None:
    """(what, key, what to do) where the ``model`` section cannot build the tiny model: a size that is not
    a positive integer (a paper-scale model choice, whose sizes are its checkpoint's: null here), heads that
    do not divide the width, or key/value heads that do not divide the heads (the first forward pass fails), or a
    checkpoint (``model.path``), which it would not read."""
    for key in MODEL_SIZE_KEYS:
        value = model.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return (f"model.{key}={value!r}: the tiny backend builds its model from its sizes, and this is not a "
                    "positive integer (a paper-scale model choice names a checkpoint instead)", f"model.{key}",
                    "keep the tiny scale's model (leave model= out at --scale tiny) or give every size")
    if model.get("path"):
        return (f"model.path={model['path']!r}: the tiny backend builds its model from the model.* sizes and does not "
                "load a checkpoint", "model.path",
                "leave model.path out at --scale tiny, or train the checkpoint with the verl backend (--scale paper)")
    heads, kv, width = model["num_heads"], model["num_kv_heads"], model["hidden_size"]
    if width % heads:
        return (f"model.hidden_size={width} is not a multiple of model.num_heads={heads}", "model.num_heads",
                "choose heads that divide the width")
    if (width // heads) % 2:
        return (f"model.hidden_size={width} / model.num_heads={heads} is an odd head size ({width // heads}): rotary "
                "position embeddings need an even one", "model.num_heads", "choose heads that leave an even head size")
    if heads % kv:
        return (f"model.num_kv_heads={kv} does not divide model.num_heads={heads} (grouped-query attention)",
                "model.num_kv_heads", f"e.g. model.num_kv_heads={heads}")
    return None
