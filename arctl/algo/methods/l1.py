"""L1 / LCPO (Aggarwal & Welleck, 2025, arXiv 2503.04697): length-controlled policy optimisation.

Every training question gets a target length ``n_gold`` written into its prompt ("Think for
{n_gold} tokens." for L1-Exact, "Think for maximum {n_gold} tokens." for L1-Max); the trainer is
GRPO on these rewards (paper Sec. 3, Eqs. 1-2), with ``n_y`` the number of tokens the response used:

- L1-Exact (Eq. 1): ``r = 1[y = y_gold] - alpha * |n_gold - n_y|`` — the penalty applies to wrong
  answers too, so a reward can be negative;
- L1-Max (Eq. 2): ``r = 1[y = y_gold] * clip(alpha * (n_gold - n_y) + delta, 0, 1)`` — a correct
  answer exactly at the target gets ``delta``, wrong answers get 0.

Constants: the paper reports ``alpha = 0.0003`` and ``delta = 0.5`` and samples
``n_gold ~ U(n_min, n_max)`` with ``n_min = 100``, ``n_max = 4000`` (integers, both ends included, as
``random.randint(100, 4000)`` in the released data script). ``n_y`` is the whole response's token
count (thinking and answer), as the released reward uses the valid response length.

Known differences in released code (as read in a public copy of the L1 repository, not re-checked
against upstream): L1-Exact uses ``alpha = 1/3000``; L1-Max uses ``clip(0.5 + (n_gold - n_y)/1000, 0, 1)``,
i.e. ``alpha = 0.001``, and its data mixes the two prompt kinds 50/50. Defaults here follow the paper.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from arctl.algo.methods._checks import as_correct, as_int, as_lengths, reward_dtype
from arctl.algo.methods.registry import ControlMethod
from arctl.algo.settings import L1_ALPHA, L1_DELTA, L1_MODES, L1_TARGET_RANGE

if TYPE_CHECKING:  # torch is imported where a tensor is made: choosing the method imports none
    import torch

__all__ = ["L1", "L1_ALPHA", "L1_DELTA", "L1_INSTRUCTIONS", "L1_MODES", "L1_PROMPT_TOKENS", "L1_TARGET_RANGE", "METHOD",
           "l1_exact_reward", "l1_max_reward", "l1_reward",
           "sample_l1_targets"]

# L1_MODES, L1_ALPHA, L1_DELTA, L1_TARGET_RANGE: their one home is arctl.algo.settings (the run
# config section budget_control takes its defaults from there); re-exported here.


def _inputs(correct: Any, n_used: Any, n_target: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ok = as_correct(correct)
    n = ok.shape[0]
    return ok, as_lengths(n_used, n, "n_used"), as_lengths(n_target, n, "n_target")


def _check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not alpha >= 0 or alpha == float("inf"):
        raise ValueError(f"alpha must be finite and >= 0, got {alpha}")
    return alpha


def l1_exact_reward(correct: Any, n_used: Any, n_target: Any, alpha: float = L1_ALPHA) -> torch.Tensor:
    """L1-Exact reward (Eq. 1) [N]: ``1[correct] - alpha * |n_target - n_used|``.

    ``correct`` [N] bool or 0/1; ``n_used`` [N] response token counts; ``n_target`` [N] (or a
    scalar) the target in each response's prompt. Float ``correct`` keeps its dtype, else float32.
    """
    import torch

    ok, used, target = _inputs(correct, n_used, n_target)
    alpha = _check_alpha(alpha)
    return (ok.to(torch.float64) - alpha * (target - used).abs()).to(reward_dtype(correct))


def l1_max_reward(
    correct: Any, n_used: Any, n_target: Any, alpha: float = L1_ALPHA, delta: float = L1_DELTA
) -> torch.Tensor:
    """L1-Max reward (Eq. 2) [N]: ``1[correct] * clip(alpha * (n_target - n_used) + delta, 0, 1)``.

    Shapes and dtype as :func:`l1_exact_reward`.
    """
    import torch

    ok, used, target = _inputs(correct, n_used, n_target)
    alpha = _check_alpha(alpha)
    delta = float(delta)
    if not np.isfinite(delta):
        raise ValueError(f"delta must be finite, got {delta}")
    shaped = (alpha * (target - used) + delta).clamp(0.0, 1.0)
    return torch.where(ok, shaped, 0.0).to(reward_dtype(correct))


def l1_reward(
    correct: Any, n_used: Any, n_target: Any, mode: str, alpha: float = L1_ALPHA, delta: float = L1_DELTA
) -> torch.Tensor:
    """The L1 reward [N] of ``mode`` (one of :data:`L1_MODES`); ``delta`` is used by ``max`` only."""
    if mode == "exact":
        return l1_exact_reward(correct, n_used, n_target, alpha)
    if mode == "max":
        return l1_max_reward(correct, n_used, n_target, alpha, delta)
    raise ValueError(f"unknown L1 mode {mode!r}; choose one of {', '.join(L1_MODES)}")


def sample_l1_targets(
    rng: np.random.Generator,
    n_questions: int,
    low: int | None = None,
    high: int | None = None,
    choices: Sequence[int] | None = None,
) -> np.ndarray:
    """One target length per question, int64 [n_questions], drawn with ``rng``.

    Uniform over the integers ``low..high`` (both included; default :data:`L1_TARGET_RANGE`), or,
    with ``choices``, uniform over that list (then ``low``/``high`` must not be given). All samples
    of a question share its target (it is in the prompt): repeat the result per sample
    (``np.repeat(targets, G)``) before computing rewards.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    n = as_int(n_questions, "n_questions", 0)
    if choices is not None:
        if low is not None or high is not None:
            raise ValueError("give either choices or a range low..high for the L1 targets, not both")
        values = [as_int(c, "L1 target choice", 1) for c in choices]
        if not values:
            raise ValueError("choices is empty: give at least one target length")
        return np.asarray(values, dtype=np.int64)[rng.integers(0, len(values), size=n)]
    lo = as_int(L1_TARGET_RANGE[0] if low is None else low, "low", 1)
    hi = as_int(L1_TARGET_RANGE[1] if high is None else high, "high", 1)
    if hi < lo:
        raise ValueError(f"L1 target range is empty: low={lo} > high={hi}")
    return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)


# ------------------------------------------------------------------------------ the method
L1_INSTRUCTIONS = {"exact": "Think for {n} tokens.", "max": "Think for maximum {n} tokens."}
"""L1's prompt suffix per mode (Aggarwal & Welleck 2025, Sec. 3), appended to the question."""
L1_PROMPT_TOKENS = 32
"""Room the suffix may take in a prompt (about 10 tokens for R1's tokenizer): verl filters prompts
longer than ``data.max_prompt_length`` before the suffix exists, so the rollout's prompt length has
this much more under L1."""


def _key_rng(key: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(str(key).encode()).hexdigest()[:16], 16))


class L1(ControlMethod):
    """``budget_control.method=l1``: a target length in each question's prompt (``l1_targets``, or
    uniform over :data:`L1_TARGET_RANGE`, at most b_m), the reward of Eq. 1 or 2 (``l1_mode``,
    ``l1_alpha``, ``l1_delta``)."""

    name = "l1"
    prompt_tokens = L1_PROMPT_TOKENS
    shapes_rewards = True
    writes_target = True
    targets_key = "budget_control.l1_targets"

    def question_target(self, control, key, max_budget):
        """A function of ``key`` only (the tiny backend keys it by (seed, step, question), verl by the
        question's uid): one of ``l1_targets``, or uniform over the paper's :data:`L1_TARGET_RANGE`
        (100..4000, ``random.randint(100, 4000)`` in the released data script), capped at
        ``max_budget``: an 8k run draws up to 4000, not up to b_m."""
        if control.l1_targets:
            return int(sample_l1_targets(_key_rng(key), 1, choices=list(control.l1_targets))[0])
        high = min(int(L1_TARGET_RANGE[1]), int(max_budget))
        low = min(int(L1_TARGET_RANGE[0]), high)
        return int(sample_l1_targets(_key_rng(key), 1, low=low, high=high)[0])

    def target_choices(self, control):
        return tuple(int(t) for t in control.l1_targets) if control.l1_targets else None

    def eval_target(self, control, budget: int) -> int:
        """The target an L1 model is prompted with when evaluated at thinking budget ``budget``: the
        budget itself, or with a fixed choice list the largest choice <= budget (the smallest choice
        below all of them), so the model is asked for what fits and cut at the budget."""
        if not control.l1_targets:
            return int(budget)
        choices = sorted(int(c) for c in control.l1_targets)
        fits = [c for c in choices if c <= int(budget)]
        return fits[-1] if fits else choices[0]

    def eval_target_groups(self, control, budgets):
        groups: dict[int, list[int]] = {}
        for b in budgets:
            groups.setdefault(self.eval_target(control, int(b)), []).append(int(b))
        return sorted(groups.items())

    def instruction(self, control, target):
        return L1_INSTRUCTIONS[control.l1_mode].format(n=int(target))

    def shape_rewards(self, control, rows, cuts, summary_lens, think_len, finished, limit, target):
        """Eq. 1 or 2 with ``n_used = cut_j + summary length`` (the response tokens the model
        generated: thinking up to the cut and the answer)."""
        import torch

        if target is None:
            raise ValueError("L1 rewards need the question's target length")
        out = []
        for row, cut, lens in zip(rows, cuts, summary_lens):
            if not row:
                out.append([])
                continue
            used = [int(cut) + int(n) for n in lens]
            r = l1_reward(torch.tensor(row, dtype=torch.float64), used, [int(target)] * len(row), control.l1_mode,
                          float(control.l1_alpha), float(control.l1_delta))
            out.append([float(x) for x in r.tolist()])
        return out

    def config_problem(self, control, max_budget, total_steps):
        targets = control.l1_targets
        if targets and max(targets) > int(max_budget):
            return (f"budget_control.l1_targets go up to {max(targets)} but thinking stops at {max_budget}",
                    "budget_control.l1_targets", f"keep targets <= the largest thinking budget ({max_budget})")
        return None


METHOD = L1()
