"""Elastic Reasoning (Xu et al., 2025, arXiv 2505.05315): separate thinking and solution budgets.

Separate budgeting (paper Sec. 3): a total budget ``c = t + s`` is split into a thinking budget ``t``
and a solution budget ``s``. The thinking is generated for at most ``t`` tokens, stopping at the
end-of-thinking marker ``</think>``; if the marker came within ``t`` tokens the solution follows it,
otherwise the thinking is cut at ``t`` tokens and ``</think>`` is appended. The solution is then
generated for at most ``s`` tokens, so a solution always exists.

Budget-constrained rollout (training): the same two-phase generation with a fixed (t*, s*) (the
released E1-Math-1.5B script: t = s = 1024); the reward is plain correctness of the solution,
trained with GRPO. Here the advantage is :func:`arctl.algo.advantages.grpo_advantages` (Dr. GRPO: minus
the group mean, no std); the authors' verl GRPO also divides by the group std.

Conventions (as in the released rollout): ``t`` counts the sampled thinking tokens, the model's own
``</think>`` included; an inserted ``</think>`` is extra (a truncated thinking is ``t + 1`` tokens with
it). The released code trains on the inserted ``</think>`` like any response token; arctl never
trains inserted tokens (:mod:`arctl.algo.prompts`), so :func:`elastic_response` masks it unless
``train_inserted=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arctl.algo.advantages import grpo_advantages
from arctl.algo.methods._checks import as_correct, as_int


@dataclass(frozen=True)
class ElasticBudget:
    """Budgets of the two phases: ``thinking`` (t) and ``solution`` (s) tokens."""

    thinking: int
    solution: int

    def __post_init__(self) -> None:
        as_int(self.thinking, "thinking budget t", 0)
        as_int(self.solution, "solution budget s", 1)

    @property
    def total(self) -> int:
        """The total budget ``c = t + s``."""
        return int(self.thinking) + int(self.solution)

    @classmethod
    def from_total(cls, total: int, solution: int) -> ElasticBudget:
        """Split a total budget ``c`` with the solution budget ``s`` fixed (the paper's evaluation:
        ``c_i = t_i + s*``): ``t = c - s``."""
        total = as_int(total, "total budget c", 1)
        solution = as_int(solution, "solution budget s", 1)
        if solution > total:
            raise ValueError(f"solution budget s={solution} exceeds the total budget c={total}")
        return cls(thinking=total - solution, solution=solution)


@dataclass(frozen=True)
class ElasticCut:
    """The thinking phase of one rollout, decided by :func:`elastic_cut`.

    ``thinking``: the sampled thinking tokens kept (ending with the model's own ``</think>`` when it
    finished within the budget); ``inserted``: ``(</think>,)`` when the thinking was cut, else ``()``;
    ``solution_max_tokens``: the cap ``s`` of the solution phase.
    """

    thinking: tuple[int, ...]
    inserted: tuple[int, ...]
    solution_max_tokens: int

    @property
    def truncated(self) -> bool:
        """Whether the budget cut the thinking (and ``</think>`` was inserted)."""
        return bool(self.inserted)

    @property
    def prefix(self) -> tuple[int, ...]:
        """What the solution phase continues from (after the question): thinking + inserted."""
        return self.thinking + self.inserted


def elastic_cut(thinking_ids: Sequence[int], end_think_id: int, budget: ElasticBudget) -> ElasticCut:
    """Decide the thinking cut of a budget-constrained rollout.

    ``thinking_ids`` [T]: tokens the model generated after the question in the thinking phase (any
    length; generation normally stops at ``</think>`` or after ``t`` tokens). If ``</think>`` is
    among the first ``t`` tokens, the thinking is kept up to and including it (tokens after it are
    dropped); otherwise it is cut to its first ``t`` tokens and ``</think>`` is inserted.
    """
    end = as_int(end_think_id, "end_think_id", 0)
    t = int(budget.thinking)
    ids = [int(x) for x in thinking_ids]
    head = ids[:t]
    if end in head:
        return ElasticCut(tuple(head[: head.index(end) + 1]), (), int(budget.solution))
    return ElasticCut(tuple(head), (end,), int(budget.solution))


def elastic_response(
    cut: ElasticCut, solution_ids: Sequence[int], train_inserted: bool = False
) -> tuple[list[int], list[bool]]:
    """The trained response of one rollout: tokens [L] = thinking + inserted + solution, and its
    loss mask [L] (True on sampled tokens; the inserted ``</think>`` only if ``train_inserted``).

    ``solution_ids`` [S] must respect the solution cap (``S <= cut.solution_max_tokens``).
    """
    sol = [int(x) for x in solution_ids]
    if len(sol) > cut.solution_max_tokens:
        raise ValueError(f"solution has {len(sol)} tokens, more than its budget s={cut.solution_max_tokens}")
    tokens = list(cut.thinking) + list(cut.inserted) + sol
    mask = [True] * len(cut.thinking) + [bool(train_inserted)] * len(cut.inserted) + [True] * len(sol)
    return tokens, mask


def elastic_reward(correct: Any) -> torch.Tensor:
    """Elastic Reasoning reward [N]: plain correctness ``1[correct]`` of each solution (float32, or
    the dtype of a float ``correct``)."""
    c = torch.as_tensor(correct)
    ok = as_correct(c)
    return ok.to(c.dtype if c.is_floating_point() else torch.float32)


def elastic_advantages(correct: Any, index: Any) -> torch.Tensor:
    """GRPO advantage [N] of the correctness reward, grouped by question label ``index`` [N]
    (:func:`arctl.algo.advantages.grpo_advantages`, no std normalisation)."""
    return grpo_advantages(elastic_reward(correct), index)
