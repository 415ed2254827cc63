"""The compared methods as settings of one run (config section ``budget_control``,
:class:`arctl.algo.settings.BudgetControl`): what both backends call to apply them.

A method changes a GRPO arm in three places, each a function here:

- the prompt (L1: a target length per question, :func:`question_target`; at evaluation the target
  of each budget, :func:`eval_target_groups`; verl's text :func:`l1_instruction`);
- the rewards of a tree before its advantages (:func:`shape_rewards`: ThinkPrune's limit of the
  round in force, :func:`thinkprune_schedule`; L1's Eq. 1 or 2);
- the evaluation's decoding (s1 budget forcing, :func:`forcing_config` and
  :func:`arctl.algo.methods.budget_forcing.extends`).

Elastic Reasoning needs nothing here: it is GRPO at one thinking budget ``t`` with a solution budget
``s`` (``summary.max_tokens``), ``experiments/baselines-elastic.yaml``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from arctl.algo.methods.budget_forcing import BudgetForcing
from arctl.algo.methods.l1 import l1_reward, sample_l1_targets
from arctl.algo.methods.thinkprune import (
    Schedule,
    check_thinkprune_schedule,
    thinkprune_limit,
    thinkprune_reward,
)
from arctl.algo.settings import L1_TARGET_RANGE, BudgetControl

L1_INSTRUCTIONS = {"exact": "Think for {n} tokens.", "max": "Think for maximum {n} tokens."}
"""L1's prompt suffix per mode (Aggarwal & Welleck 2025, Sec. 3), appended to the question."""
L1_PROMPT_TOKENS = 32
"""Room the suffix may take in a prompt (about 10 tokens for R1's tokenizer): verl filters prompts
longer than ``data.max_prompt_length`` before the suffix exists, so the rollout's prompt length has
this much more under L1."""


# ------------------------------------------------------------------------------ ThinkPrune
def thinkprune_schedule(limits: Sequence[int], total_steps: int) -> Schedule:
    """ThinkPrune's rounds as one schedule over ``total_steps`` training steps (1-based): round k of
    n covers an equal share, starting at step ``k * total_steps // n + 1`` (round 0 at step 0).
    E.g. limits (64, 48, 32) over 100 steps: ((0, 64), (34, 48), (67, 32))."""
    limits = [int(v) for v in limits]
    n, total = len(limits), int(total_steps)
    if n == 0:
        raise ValueError("budget_control.thinkprune_limits is empty: give the limits of the rounds, e.g. [4000, 3000, 2000]")
    if total < n:
        raise ValueError(f"{n} ThinkPrune rounds need at least {n} training steps, the run has {total}")
    return check_thinkprune_schedule([(0 if k == 0 else k * total // n + 1, lim) for k, lim in enumerate(limits)])


def step_limit(control: BudgetControl, step: int, total_steps: int) -> int | None:
    """The ThinkPrune thinking limit at ``step`` (None unless ``method=thinkprune``)."""
    if control.method != "thinkprune":
        return None
    return thinkprune_limit(int(step), thinkprune_schedule(control.thinkprune_limits, total_steps))


# ------------------------------------------------------------------------------ L1
def _key_rng(key: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(str(key).encode()).hexdigest()[:16], 16))


def question_target(control: BudgetControl, key: str, max_budget: int) -> int:
    """The L1 target length of one question, a function of ``key`` only (every thinking sample of a
    question sees the same target: the tiny backend keys it by (seed, step, question), verl by the
    question's uid): one of ``l1_targets``, or uniform over ``[L1_TARGET_RANGE[0], max_budget]``."""
    if control.l1_targets:
        return int(sample_l1_targets(_key_rng(key), 1, choices=list(control.l1_targets))[0])
    low = min(int(L1_TARGET_RANGE[0]), int(max_budget))
    return int(sample_l1_targets(_key_rng(key), 1, low=low, high=int(max_budget))[0])


def eval_target(control: BudgetControl, budget: int) -> int:
    """The target an L1 model is prompted with when evaluated at thinking budget ``budget``: the
    budget itself, or with a fixed choice list the largest choice <= budget (the smallest choice
    below all of them), so the model is asked for what fits and cut at the budget."""
    if not control.l1_targets:
        return int(budget)
    choices = sorted(int(c) for c in control.l1_targets)
    fits = [c for c in choices if c <= int(budget)]
    return fits[-1] if fits else choices[0]


def eval_target_groups(control: BudgetControl, budgets: Sequence[int]) -> list[tuple[int | None, list[int]]]:
    """Evaluation rollouts: ``[(target, budgets), ...]``, one thinking rollout per target cut at its
    budgets. Without L1 one rollout with no target covers every budget."""
    if control.method != "l1":
        return [(None, [int(b) for b in budgets])]
    groups: dict[int, list[int]] = {}
    for b in budgets:
        groups.setdefault(eval_target(control, int(b)), []).append(int(b))
    return sorted(groups.items())


def l1_instruction(control: BudgetControl, target: int) -> str:
    """L1's prompt text for ``target`` tokens (verl appends it to the question)."""
    return L1_INSTRUCTIONS[control.l1_mode].format(n=int(target))


# ------------------------------------------------------------------------------ rewards
def shape_rewards(
    control: BudgetControl,
    rewards: Sequence[Sequence[float]],
    cuts: Sequence[int],
    summary_lens: Sequence[Sequence[int]],
    think_len: int,
    finished: bool,
    limit: int | None = None,
    target: int | None = None,
) -> tuple[tuple[float, ...], ...]:
    """A tree's verifier rewards ``[m][A]`` (0/1) as the method scores them.

    ``cuts`` [m]: thinking tokens each budget's summaries saw; ``summary_lens`` [m][A]: tokens of
    each summary; ``think_len``: thinking tokens sampled (``</think>`` included); ``finished``: the
    thinking ended by itself.

    - ``none``: unchanged.
    - ``thinkprune`` (``limit`` of the round in force): every reward 0 when the thinking exceeds the
      limit, i.e. is longer than it or was cut unfinished at or past it (ThinkPrune counts the
      whole response; here the thinking, the summary being capped by ``summary.max_tokens``).
    - ``l1`` (``target``): Eq. 1 or 2 with ``n_used = cut_j + summary length`` (the response tokens
      the model generated: thinking up to the cut and the answer).
    """
    rows = [[float(r) for r in row] for row in rewards]
    if control.method == "none":
        return tuple(tuple(r) for r in rows)
    if control.method == "thinkprune":
        if limit is None:
            raise ValueError("ThinkPrune rewards need the step's limit")
        over = int(think_len) > int(limit) or (not finished and int(think_len) >= int(limit))
        length = int(limit) + 1 if over else int(think_len)
        return tuple(tuple(thinkprune_reward(torch.tensor(r, dtype=torch.float64), [length] * len(r), int(limit)).tolist())
                     if r else () for r in rows)
    if control.method == "l1":
        if target is None:
            raise ValueError("L1 rewards need the question's target length")
        out = []
        for row, cut, lens in zip(rows, cuts, summary_lens):
            if not row:
                out.append(())
                continue
            used = [int(cut) + int(n) for n in lens]
            r = l1_reward(torch.tensor(row, dtype=torch.float64), used, [int(target)] * len(row), control.l1_mode,
                          float(control.l1_alpha), float(control.l1_delta))
            out.append(tuple(float(x) for x in r.tolist()))
        return tuple(out)
    raise ValueError(f"unknown budget_control.method {control.method!r}")


# ------------------------------------------------------------------------------ budget forcing
def forcing_config(control: BudgetControl, budget: int, end_think_id: int, cue_ids: Sequence[int]) -> BudgetForcing | None:
    """s1 budget forcing at evaluation up to ``budget`` (None when ``forcing_extensions`` is 0)."""
    if int(control.forcing_extensions) <= 0:
        return None
    return BudgetForcing(int(budget), int(end_think_id), tuple(int(c) for c in cue_ids), int(control.forcing_extensions))
