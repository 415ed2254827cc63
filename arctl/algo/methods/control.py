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

The method's flags say which hooks the backends call (``shapes_rewards``: :func:`shape_rewards`;
``writes_target``: :func:`question_target`, :func:`instruction`); validation refuses flags that disagree with the
hooks a method overrides (:func:`flags_problem`) and calls a plugin's hooks once (:func:`hooks_problem`).

s1 budget forcing is a decoding rule at evaluation, orthogonal to the method
(``budget_control.forcing_*``): :func:`forcing_config`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from arctl.algo.methods.budget_forcing import BudgetForcing
from arctl.algo.methods.registry import ControlMethod, method_of
from arctl.algo.settings import BudgetControl


def question_target(control: BudgetControl, key: str, max_budget: int) -> int | None:
    """The target in the prompt of training question ``key`` (a function of ``key`` only); None when
    the method writes none: its ``writes_target`` is False (the one rule of both backends; from a hunt: the
    tiny backend read the flag and verl the hook, so a plugin that overrode the hook and forgot the flag trained
    without a target on one and failed in the job on the other)."""
    method = method_of(control)
    if not method.writes_target:
        return None
    return _tokens(control, "question_target", method.question_target(control, key, int(max_budget)))


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
    return overrides(method_of(control), "generation_limit")


def overrides(method: ControlMethod, hook: str) -> bool:
    """Whether ``method``'s class overrides :class:`~arctl.algo.methods.registry.ControlMethod`'s ``hook``."""
    return getattr(type(method), hook) is not getattr(ControlMethod, hook)


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
    who = f"budget_control.method {control.method!r}: its shape_rewards"
    try:
        out = tuple(tuple(float(r) for r in row) for row in shaped)
    except (TypeError, ValueError):
        raise ValueError(f"{who} gave {shaped!r:.120}, not rows of numbers [m][A]") from None
    if len(out) != len(rows) or any(len(a) != len(b) for a, b in zip(out, rows)):
        raise ValueError(f"{who} changed the shape of a tree's rewards ([m][A] = {len(rows)} rows of "
                         f"{[len(r) for r in rows]}, got {[len(r) for r in out]})")
    if not all(math.isfinite(r) for row in out for r in row):  # (from a hunt: a NaN reward trained nothing, and the
        # run ended COMPLETED)
        raise ValueError(f"{who} gave a reward that is not a finite number: {[list(r) for r in out]!r:.200}")
    return out


def config_problem(control: BudgetControl, max_budget: int, total_steps: int | None) -> tuple[str, str, str] | None:
    """(what, key, hint) of a config the method cannot run (None: none)."""
    return method_of(control).config_problem(control, int(max_budget), total_steps)


PROBE_TOTAL_STEPS = 100
"""The training steps :func:`hooks_problem` asks a method's step hooks about where the run's are its dataset's
(``trainer.total_steps`` null): a stand-in, known only to the job."""
PROBE_KEY = "arctl:probe"
"""The question key :func:`hooks_problem` asks ``question_target`` about."""


def flags_problem(method: ControlMethod) -> str | None:
    """Where ``method``'s flags and the hooks it overrides disagree, why, as one line (None: they agree). The flags
    are the one thing both backends read (``shapes_rewards`` before :func:`shape_rewards`, ``writes_target``
    before :func:`question_target`); a hook whose flag is unset is never called: from a hunt, a plugin that forgot
    ``shapes_rewards = True`` trained plain GRPO under its own name, and one that forgot ``writes_target = True``
    trained without its target on one backend and failed in the job on the other."""
    who = f"budget_control.method {method.name!r}"
    if overrides(method, "shape_rewards") and not method.shapes_rewards:
        return (f"{who} overrides shape_rewards but sets no shapes_rewards = True: neither backend would call it, and "
                "the run would train plain GRPO under the method's name (set shapes_rewards = True on the method)")
    if overrides(method, "question_target") and not method.writes_target:
        return (f"{who} overrides question_target but sets no writes_target = True: neither backend would write its "
                "target into a prompt (set writes_target = True on the method, and give it an instruction)")
    if method.writes_target:
        missing = [hook for hook in ("question_target", "instruction") if not overrides(method, hook)]
        if missing:
            return (f"{who} sets writes_target = True but does not override {' and '.join(missing)}: a prompt's "
                    "target is question_target's, its text instruction's (verl appends it to the question)")
    return None


def hooks_problem(control: BudgetControl, budgets: Sequence[int], eval_budgets: Sequence[int],
                  total_steps: int | None, group_size: int) -> str | None:
    """The first problem of the run's method as one line (None: none): :func:`flags_problem`, its
    ``prompt_tokens``, then each hook it overrides called once as a backend calls it, through this module (so with
    the same checks), on synthetic arguments of the config: ``step_limit`` and ``generation_limit`` at step 1,
    ``question_target``, ``target_choices``, ``eval_target_groups`` of ``eval_budgets``, ``instruction`` of each
    target when targets are written, ``shape_rewards`` of a 0/1 tree [m][``group_size``] on ``budgets``. From a
    hunt: a hook with a wrong signature, rewards that dropped a column or a negative ``prompt_tokens`` passed
    ``--dry-run`` and failed in the job."""
    method = method_of(control)
    if problem := flags_problem(method):
        return problem
    who = f"budget_control.method {control.method!r}"
    room = method.prompt_tokens
    if not isinstance(room, numbers.Integral) or isinstance(room, bool) or room < 0:
        return (f"{who}: its prompt_tokens is {room!r}, not a number of tokens >= 0 (verl's rollout prompt length is "
                "data.max_prompt_length plus it)")
    budgets, eval_budgets = [int(b) for b in budgets], [int(b) for b in eval_budgets]
    total = PROBE_TOTAL_STEPS if total_steps is None else int(total_steps)
    found: dict[str, object] = {}

    def ask(hook: str, call) -> str | None:
        try:
            found[hook] = call()
        except Exception as err:  # noqa: BLE001 - a plugin's hook that fails is one line naming it
            text = " ".join(str(err).split())
            if text.startswith(f"{who}: its {hook} "):  # this module's own check of what it gave
                return text[:300]
            return f"{who}: its {hook} raised {type(err).__name__}: {text[:200]}"
        return None

    steps = [("step_limit", lambda: step_limit(control, 1, total)),
             ("generation_limit", lambda: generation_limit(control, 1, total)),
             ("question_target", lambda: question_target(control, PROBE_KEY, budgets[-1])),
             ("target_choices", lambda: _choices(control, target_choices(control))),
             ("eval_target_groups", lambda: _groups(control, eval_target_groups(control, eval_budgets), eval_budgets))]
    for hook, call in steps:
        if overrides(method, hook) and (problem := ask(hook, call)):
            return problem
    if method.writes_target:
        targets = {found.get("question_target"), *(t for t, _ in found.get("eval_target_groups") or [])} - {None}
        for target in sorted(targets):
            if problem := ask("instruction", lambda t=target: _text(control, instruction(control, t))):
                return problem
    if method.shapes_rewards and overrides(method, "shape_rewards"):
        rows = [[float((j + a) % 2) for a in range(int(group_size))] for j in range(len(budgets))]
        return ask("shape_rewards", lambda: shape_rewards(
            control, rows, budgets, [[1] * int(group_size) for _ in budgets], budgets[-1], False,
            limit=found.get("step_limit"), target=found.get("question_target")))
    return None


def _choices(control: BudgetControl, value):
    if value is None or (isinstance(value, (tuple, list)) and value
                         and all(_tokens(control, "target_choices", v) for v in value)):
        return value
    raise ValueError(f"budget_control.method {control.method!r}: its target_choices gave {value!r:.120}, not None or "
                     "a non-empty list of targets >= 1")


def _groups(control: BudgetControl, groups, budgets: list[int]):
    """``groups`` where it is ``[(target, budgets), ...]`` holding each of ``budgets`` once."""
    try:
        pairs = [(target, [int(b) for b in group]) for target, group in groups]
        ok = sorted(b for _, group in pairs for b in group) == sorted(budgets)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"budget_control.method {control.method!r}: its eval_target_groups gave {groups!r:.120}, not "
                         f"[(target, budgets), ...] holding each of the budgets {budgets} once")
    for target, _ in pairs:
        _tokens(control, "eval_target_groups", target)
    return pairs


def _text(control: BudgetControl, value):
    if isinstance(value, str):
        return value
    raise ValueError(f"budget_control.method {control.method!r}: its instruction gave {value!r:.120}, not a text")


def forcing_config(control: BudgetControl, budget: int, end_think_id: int, cue_ids: Sequence[int]) -> BudgetForcing | None:
    """s1 budget forcing at evaluation up to ``budget`` (None when ``forcing_extensions`` is 0)."""
    if int(control.forcing_extensions) <= 0:
        return None
    return BudgetForcing(int(budget), int(end_think_id), tuple(int(c) for c in cue_ids), int(control.forcing_extensions))
