"""What both backends call to apply a run's compared method (config section ``budget_control``,
:class:`arctl.algo.settings.BudgetControl`): each function asks the method registered under
``control.method`` (:mod:`arctl.algo.methods.registry`); nothing here or in a backend tests a
method's name.

A method changes a GRPO arm in three places:

- the prompt (a target per question, :func:`question_target`, from a fixed list or not,
  :func:`target_choices`; at evaluation the target of each budget, :func:`eval_target_groups`;
  the text, :func:`instruction`, and the room it takes, :func:`prompt_tokens`);
- the rewards of a tree before its advantages (:func:`shape_rewards`, with the step's thinking
  limit :func:`step_limit`);
- its config (:func:`config_problem`, at validation).

s1 budget forcing is a decoding rule at evaluation, orthogonal to the method
(``budget_control.forcing_*``): :func:`forcing_config`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from arctl.algo.methods.budget_forcing import BudgetForcing
from arctl.algo.methods.registry import ControlMethod, method_of
from arctl.algo.settings import BudgetControl


def question_target(control: BudgetControl, key: str, max_budget: int) -> int | None:
    """The target in the prompt of training question ``key`` (a function of ``key`` only); None when
    the method writes none."""
    return method_of(control).question_target(control, key, int(max_budget))


def writes_target(control: BudgetControl) -> bool:
    """Whether the method writes a target into each question's prompt (:func:`question_target`)."""
    return bool(method_of(control).writes_target)


def target_choices(control: BudgetControl) -> tuple[int, ...] | None:
    """The fixed list of targets a prompt may carry (None: any integer, or no target)."""
    return method_of(control).target_choices(control)


def eval_target_groups(control: BudgetControl, budgets: Sequence[int]) -> list[tuple[int | None, list[int]]]:
    """Evaluation rollouts: ``[(target, budgets), ...]``, one thinking rollout per target cut at its
    budgets. Without a prompt target, one rollout with no target covers every budget."""
    return method_of(control).eval_target_groups(control, [int(b) for b in budgets])


def instruction(control: BudgetControl, target: int) -> str:
    """The prompt text for ``target`` (verl appends it to the question)."""
    return method_of(control).instruction(control, int(target))


def prompt_tokens(control: BudgetControl) -> int:
    """Tokens the method's prompt change may add (verl's rollout prompt length)."""
    return int(method_of(control).prompt_tokens)


def step_limit(control: BudgetControl, step: int, total_steps: int) -> int | None:
    """The thinking limit in force at ``step`` (None: the method sets none)."""
    return _tokens(control, "step_limit", method_of(control).step_limit(control, int(step), int(total_steps)))


def generation_limit(control: BudgetControl, step: int, total_steps: int) -> int | None:
    """The most thinking tokens a training rollout at ``step`` generates (None: up to the largest
    budget): ThinkPrune's round limit."""
    return _tokens(control, "generation_limit",
                   method_of(control).generation_limit(control, int(step), int(total_steps)))


def _tokens(control: BudgetControl, hook: str, value):
    """``value`` where it is None or a number of tokens >= 1; else ValueError naming the method's hook (from a
    hunt: a plugin's -5 failed inside torch, "negative dimension -5")."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
        return int(value)  # (a numpy integer is one too)
    raise ValueError(f"budget_control.method {control.method!r}: its {hook} gave {value!r}, not None or a number of "
                     "thinking tokens >= 1")


def limits_generation(control: BudgetControl) -> bool:
    """Whether the method overrides :meth:`~arctl.algo.methods.registry.ControlMethod.generation_limit`."""
    method = method_of(control)
    return type(method).generation_limit is not ControlMethod.generation_limit


def shapes_rewards(control: BudgetControl) -> bool:
    """Whether :func:`shape_rewards` changes anything (a backend may skip the work)."""
    return bool(method_of(control).shapes_rewards)


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
    thinking ended by itself; ``limit``: the step's :func:`step_limit`; ``target``: the question's
    :func:`question_target`. ``none`` leaves them; ThinkPrune and L1: their modules' ``METHOD``."""
    rows = [[float(r) for r in row] for row in rewards]
    shaped = method_of(control).shape_rewards(control, rows, [int(c) for c in cuts], summary_lens, int(think_len),
                                              bool(finished), limit, target)
    if len(shaped) != len(rows) or any(len(a) != len(b) for a, b in zip(shaped, rows)):
        raise ValueError(f"budget_control.method={control.method} changed the shape of a tree's rewards")
    return tuple(tuple(float(r) for r in row) for row in shaped)


def config_problem(control: BudgetControl, max_budget: int, total_steps: int | None) -> tuple[str, str, str] | None:
    """(what, key, hint) of a config the method cannot run (None: none)."""
    return method_of(control).config_problem(control, int(max_budget), total_steps)


def forcing_config(control: BudgetControl, budget: int, end_think_id: int, cue_ids: Sequence[int]) -> BudgetForcing | None:
    """s1 budget forcing at evaluation up to ``budget`` (None when ``forcing_extensions`` is 0)."""
    if int(control.forcing_extensions) <= 0:
        return None
    return BudgetForcing(int(budget), int(end_think_id), tuple(int(c) for c in cue_ids), int(control.forcing_extensions))
