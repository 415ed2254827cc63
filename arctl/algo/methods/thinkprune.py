"""ThinkPrune (Hou et al., 2025, arXiv 2504.01296): RL with a hard token limit, pruned in rounds.

Reward (the paper's length-limited reward): a response longer than the limit ``L`` is discarded,

    r(x, y) = 1[y correct]   if |y| <= L,
    r(x, y) = 0              otherwise.

In the paper ``|y|`` is the whole response, unfinished thoughts *and* answer ("any unfinished thoughts
and answers will be discarded"), i.e. the rollout's max response length is ``L``; pass the thinking
length instead for a thinking-only limit. The trainer is the paper's GRPO, unchanged.

Iterative pruning: several rounds of RL, each with a tighter limit (the paper's 1.5B schedule is
4000 -> 3000 -> 2000 tokens, each round starting from the previous round's checkpoint). A round is a
run (``thinkprune_round=k``: round k's limit at every step; the run of round k starts from round
k-1's with ``trainer.init_from``, experiments/baselines-thinkprune.yaml), or, all rounds in one run,
a *schedule*: a sequence of rounds ``(start_step, limit)``; round k is in force for
``start_k <= step < start_{k+1}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from arctl.algo.methods._checks import as_correct, as_int, as_lengths, reward_dtype
from arctl.algo.methods.registry import ControlMethod

if TYPE_CHECKING:  # torch is imported where a tensor is made: choosing the method imports none
    import torch

Schedule = tuple[tuple[int, int], ...]
"""Validated ThinkPrune schedule: ``((start_step, limit), ...)``, steps increasing, limits non-increasing."""


def check_thinkprune_schedule(schedule: Sequence[Sequence[int]]) -> Schedule:
    """Validate and normalise a schedule of rounds ``[(start_step, limit), ...]``.

    Raises ValueError unless: at least one round; every round is a pair of integers; start steps
    are >= 0 and strictly increasing; limits are >= 1 and non-increasing (a round never loosens the
    limit). Example: ``[(0, 4000), (300, 3000), (600, 2000)]``.
    """
    rounds = list(schedule)
    if not rounds:
        raise ValueError("ThinkPrune schedule is empty: give rounds (start_step, limit), e.g. [(0, 4000), (300, 3000)]")
    out: list[tuple[int, int]] = []
    for r in rounds:
        if isinstance(r, (str, bytes)) or not isinstance(r, Sequence) or len(r) != 2:
            raise ValueError(f"ThinkPrune schedule round {r!r} is not a pair (start_step, limit)")
        out.append((as_int(r[0], "ThinkPrune round start_step", 0), as_int(r[1], "ThinkPrune round limit", 1)))
    for (s1, l1), (s2, l2) in zip(out, out[1:]):
        if s2 <= s1:
            raise ValueError(f"ThinkPrune schedule start steps must be strictly increasing, got {[s for s, _ in out]}")
        if l2 > l1:
            raise ValueError(
                f"ThinkPrune schedule limits must be non-increasing (each round prunes further), got {[lim for _, lim in out]}"
            )
    return tuple(out)


def thinkprune_limit(step: int, schedule: Sequence[Sequence[int]]) -> int:
    """The token limit in force at training step ``step``: the limit of the last round whose
    ``start_step <= step``. Raises ValueError for a step before the first round."""
    rounds = check_thinkprune_schedule(schedule)
    step = as_int(step, "step", 0)
    if step < rounds[0][0]:
        raise ValueError(f"step {step} is before the first ThinkPrune round (starts at step {rounds[0][0]})")
    limit = rounds[0][1]
    for start, lim in rounds:
        if start > step:
            break
        limit = lim
    return limit


def thinkprune_reward(correct: Any, length: Any, limit: int) -> torch.Tensor:
    """ThinkPrune reward [N]: ``correct`` [N] (bool or 0/1) where ``length`` [N] <= ``limit``, else 0.

    ``length`` counts the tokens of each response (the paper: the whole response; a scalar is
    broadcast). Float ``correct`` keeps its dtype, otherwise float32.
    """
    ok = as_correct(correct)
    lens = as_lengths(length, ok.shape[0], "length")
    limit = as_int(limit, "limit", 1)
    return (ok & (lens <= limit)).to(reward_dtype(correct))


# ------------------------------------------------------------------------------ the method
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


def round_limit(limits: Sequence[int], round_k: int) -> int:
    """The limit of round ``round_k`` (1-based) of ``limits``, for a run that is that one round."""
    limits = [int(v) for v in limits]
    k = as_int(round_k, "ThinkPrune round", 1)
    if k > len(limits):
        raise ValueError(f"ThinkPrune round {k} of {len(limits)} rounds (limits {limits})")
    return limits[k - 1]


class ThinkPrune(ControlMethod):
    """``budget_control.method=thinkprune``: the rounds' limits (``thinkprune_limits``) over training,
    every reward 0 when the thinking exceeds the limit in force. With ``thinkprune_round=k`` the run
    is round k alone (its limit for every step), started from round k-1's run (``trainer.init_from``),
    as the paper runs its rounds."""

    name = "thinkprune"
    shapes_rewards = True

    def step_limit(self, control, step, total_steps):
        if control.thinkprune_round is not None:
            return round_limit(control.thinkprune_limits, control.thinkprune_round)
        return thinkprune_limit(int(step), thinkprune_schedule(control.thinkprune_limits, total_steps))

    def generation_limit(self, control, step, total_steps):
        """ThinkPrune stops generating at the round's limit (its rollout's max response length), so
        no token past it is sampled or trained."""
        return self.step_limit(control, step, total_steps)

    def shape_rewards(self, control, rows, cuts, summary_lens, think_len, finished, limit, target):
        """Over the limit: the thinking is longer than it, or was cut unfinished at or past it
        (ThinkPrune counts the whole response; here the thinking, the summary being capped by
        ``summary.max_tokens``)."""
        import torch

        if limit is None:
            raise ValueError("ThinkPrune rewards need the step's limit")
        over = int(think_len) > int(limit) or (not finished and int(think_len) >= int(limit))
        length = int(limit) + 1 if over else int(think_len)
        return [thinkprune_reward(torch.tensor(r, dtype=torch.float64), [length] * len(r), int(limit)).tolist()
                if r else [] for r in rows]

    def config_problem(self, control, max_budget, total_steps):
        limits = [int(v) for v in control.thinkprune_limits]
        rounds = len(limits)
        if control.thinkprune_round is not None:
            if int(control.thinkprune_round) > rounds:
                return (f"budget_control.thinkprune_round={control.thinkprune_round} but thinkprune_limits has {rounds} "
                        "round(s)", "budget_control.thinkprune_round", f"pick a round in 1..{rounds}")
        elif total_steps is not None and int(total_steps) < rounds:
            return (f"{rounds} ThinkPrune rounds need at least as many training steps, "
                    f"the run has {total_steps}", "trainer.total_steps", "give more steps or fewer rounds")
        return None

    def new_run_problem(self, control, max_budget, total_steps):
        limits = [int(v) for v in control.thinkprune_limits]
        if control.thinkprune_round is not None and int(control.thinkprune_round) <= len(limits):
            k = int(control.thinkprune_round)
            in_force = {k: limits[k - 1]}  # a round's run: that round's limit at every step
        else:
            in_force = dict(enumerate(limits, 1))  # a schedule: every round is in force for its share of the steps
        # a limit above the largest thinking budget never cuts a response (the rollout stops at that budget; a limit
        # equal to it still zeroes a thinking cut there unfinished): that round would be plain GRPO (from a hunt)
        loose = {k: lim for k, lim in in_force.items() if lim > int(max_budget)}
        if loose:
            which = ", ".join(f"round {k}'s {lim}" for k, lim in loose.items())
            shown = ",".join(map(str, limits))
            return (f"budget_control.thinkprune_limits=[{shown}] holds limits above the largest thinking budget "
                    f"({max_budget}) that never cut a response ({which}): those rounds would train plain GRPO",
                    "budget_control.thinkprune_limits",
                    f"keep the limits of the rounds run <= the largest thinking budget ({max_budget}), or raise "
                    "the thinking budgets")
        return None


METHOD = ThinkPrune()
