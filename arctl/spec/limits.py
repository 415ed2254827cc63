"""The range of every numeric key of a run config: limits that a machine could ever meet.

Validation (:mod:`arctl.spec.validate`) checks each numeric value of a resolved config against
:data:`RANGES` (lists: every element against :data:`LIST_RANGES`); a numeric key without a range is
refused, so a new key cannot slip in unchecked (``tests/spec`` walks every experiment's configs).
Keys that users add under the open sections (``+tiny.x=...``, ``+verl.x=...``) only need to be
finite and of a sane size (:data:`OPEN_RANGE`). The CLI's seed parsing takes its limits from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SEED_MAX = 2**31 - 1  # torch/numpy seeds, and SQLite's integer column, with room to spare
MAX_SEEDS = 1000  # seeds of one launch (`--seeds 0-100000000` is a typo, not a plan)
BUDGET_MAX = 10**6  # thinking tokens: far above any context window


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float
    integer: bool = True
    lo_open: bool = False
    hi_open: bool = False
    nullable: bool = False

    def contains(self, v: Any) -> bool:
        if v is None:
            return self.nullable
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not isinstance(v, int):
            return False
        if not math.isfinite(v):
            return False
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below

    def describe(self) -> str:
        what = "an integer" if self.integer else "a number"
        num = lambda x: str(int(x)) if float(x).is_integer() else f"{x:g}"  # noqa: E731
        lo = f"> {num(self.lo)}" if self.lo_open else f">= {num(self.lo)}"
        hi = f"< {num(self.hi)}" if self.hi_open else f"<= {num(self.hi)}"
        return f"{'null or ' if self.nullable else ''}{what} {lo} and {hi}"


def I(lo: float, hi: float, **kw) -> Range:  # noqa: E743 - short names keep the table readable
    return Range(lo, hi, integer=True, **kw)


def F(lo: float, hi: float, **kw) -> Range:
    return Range(lo, hi, integer=False, **kw)


COUNT = I(1, 10**7)
TOKENS = I(1, BUDGET_MAX)
PROB = F(0, 1)
CORES = I(1, 4096)

RANGES: dict[str, Range] = {
    "seed": I(0, SEED_MAX),
    # thinking / summary / reward / rollout
    "thinking.lam": F(0, 1, lo_open=True),
    "thinking.temperature": F(0, 100, lo_open=True),
    "summary.group_size": I(1, 1024),
    "summary.max_tokens": I(1, 10**5),
    "reward.alpha": PROB,
    "rollout.n": I(1, 1024),
    # budget_control (the compared methods)
    "budget_control.l1_alpha": F(0, 10),
    "budget_control.l1_delta": PROB,
    "budget_control.forcing_extensions": I(0, 1000),
    "rollout.temperature": F(0, 100, lo_open=True),
    # optimisation
    "optim.lr": F(0, 10, lo_open=True),
    "optim.weight_decay": F(0, 10),
    "optim.grad_clip": F(0, 10**6, lo_open=True),
    "optim.clip_ratio": F(0, 1, lo_open=True, hi_open=True),
    "optim.clip_ratio_high": F(0, 10, lo_open=True, hi_open=True),
    "optim.dual_clip": F(1, 10**6, lo_open=True, nullable=True),
    "optim.loss_norm_len": I(1, 10**8, nullable=True),  # null: the authors' constant (spec.resolve._finalize)
    "optim.ppo_epochs": I(1, 1000),
    "optim.warmup_steps": I(0, 10**7),
    # data / trainer / eval
    "data.train_batch_size": I(1, 10**6),
    "data.ppo_mini_batch_size": I(1, 10**6),
    "data.max_prompt_length": TOKENS,
    "trainer.total_epochs": I(1, 10**4),
    "trainer.total_steps": I(1, 10**7, nullable=True),
    "trainer.test_freq": COUNT,
    "trainer.save_freq": COUNT,
    "eval.n_samples": I(1, 10**4),
    "eval.num_problems": I(1, 10**7, nullable=True),
    "eval.temperature": F(0, 100),
    "eval.grid_size": I(1, 10**4),
    # model (null: the checkpoint's own value)
    "model.hidden_size": I(1, 10**6, nullable=True),
    "model.intermediate_size": I(1, 10**7, nullable=True),
    "model.num_layers": I(1, 1024, nullable=True),
    "model.num_heads": I(1, 1024, nullable=True),
    "model.num_kv_heads": I(1, 1024, nullable=True),
    "model.max_position_embeddings": I(1, 10**7, nullable=True),
    # cluster
    "cluster.nodes": I(1, 10**4),
    "cluster.gpus_per_node": I(0, 64),
    "cluster.cpus_per_task": CORES,
    "cluster.mem_gb": F(0, 10**5, lo_open=True),
    "cluster.time_min": I(1, 366 * 24 * 60),
    "cluster.array_parallelism": I(1, 10**5),
    "cluster.max_array_size": COUNT,
    "cluster.preempt_warning_s": I(1, 65535, nullable=True),  # null: the scale's warning (spec.resolve._finalize)
    # scale
    "scale.cpus_per_task": CORES,
    "scale.preempt_warning_s": I(1, 65535),
    "scale.rollout_n": I(1, 1024),
    "scale.summary_max_tokens": I(1, 10**5),
    # tiny backend
    "tiny.threads": CORES,
    "tiny.keep_checkpoints": I(1, 1000),
    "tiny.max_rows": COUNT,
    "tiny.update_micro_batch": I(1, 10**6),
    "tiny.diag_problems": I(0, 10**6),
    "tiny.eval_seed": I(0, SEED_MAX),
    "tiny.task.min_terms": I(1, 1000),
    "tiny.task.max_terms": I(1, 1000),
    "tiny.task.filler_prob": PROB,
    "tiny.task.summary_finish_steps": I(0, 1000),
    "tiny.task.summary_continue_prob": PROB,
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
    # verl backend
    "verl.tensor_model_parallel_size": I(1, 64),
    "verl.gpu_memory_utilization": F(0, 1, lo_open=True),
    "verl.n_gpus_per_node": I(1, 64),
    "verl.micro_batch_size_per_gpu": I(1, 10**5),
    "verl.max_token_len_per_gpu": I(1, 10**8),
    "verl.block_size": I(1, 65536),
    "verl.rehearsal_steps": I(0, 10**6),
    "verl.rehearsal_step_s": F(0, 86400),
}
LIST_RANGES: dict[str, Range] = {
    "thinking.budgets": TOKENS,
    "scale.budgets": TOKENS,
    "eval.budgets": TOKENS,
    "eval.grid": TOKENS,
    "optim.betas": F(0, 1, hi_open=True),
    "budget_control.thinkprune_limits": TOKENS,
    "budget_control.l1_targets": TOKENS,
}
NULLABLE_LISTS = ("eval.budgets", "eval.grid", "budget_control.l1_targets")
"""null: eval budgets derived from the thinking budgets (spec.resolve._finalize); L1 targets sampled."""
OPEN_SECTIONS = ("tiny.", "verl.")
OPEN_RANGE = F(-1e15, 1e15)  # a key a user added under an open section: finite and sane


def _leaves(node: Any, prefix: str = ""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], node


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_MISSING = object()


def _lookup(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def range_problem(cfg: dict) -> tuple[str, str] | None:
    """(key, problem) of the first value outside its range, or None. A declared key must hold its
    kind of value (a number, or a list of numbers: never a mapping, whose leaves would pass as keys
    of their own); every other numeric leaf needs a declared range, or an open section's."""
    for key, r in RANGES.items():
        value = _lookup(cfg, key)
        if value is not _MISSING and not r.contains(value):
            return key, f"{key}={value!r} is invalid: expected {r.describe()}"
    for key, r in LIST_RANGES.items():
        value = _lookup(cfg, key)
        if value is _MISSING or (value is None and key in NULLABLE_LISTS):
            continue
        if not isinstance(value, list):
            return key, f"{key}={value!r} is invalid: expected a list of numbers, each {r.describe()}"
        bad = [v for v in value if not r.contains(v)]
        if bad:
            return key, f"{key} holds {bad[0]!r}: each entry must be {r.describe()}"
    for key, value in _leaves(cfg):
        if key in RANGES or key in LIST_RANGES:
            continue
        if _numeric(value):
            if not key.startswith(OPEN_SECTIONS):
                return key, f"{key}={value!r} has no declared range (arctl/spec/limits.py)"
            if not OPEN_RANGE.contains(value):
                return key, f"{key}={value!r} is out of range: expected a finite number of magnitude <= 1e15"
    return None
