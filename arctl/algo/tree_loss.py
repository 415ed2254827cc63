"""The tree objective: thinking trees -> every trained token's advantage, and the policy loss.

This module is the only place where the thinking baseline, coupled vs decoupled summary training,
the summary weighting, the length shaping and the loss normaliser are decided. Both backends turn
their rollouts into :class:`Tree` records, call :func:`tree_advantages` and :func:`policy_loss`
(or :func:`policy_loss_sum`), and only move the results onto their token layouts. Every convention
below follows the authors' code unless a setting says otherwise; ``docs/algorithm.md`` gives the
equation or the authors' line behind each.

A tree is one thinking sample ``z`` of a question ``x`` (G trees per question). Its thinking has
``think_len`` tokens; for every budget ``b_j`` of the support ``b_1 < ... < b_m`` it was cut at
``cut_j = min(b_j, think_len)`` and ``A`` summaries were sampled after the cut, with rewards
``rewards[j] = (r_{j,1}, ..., r_{j,A})`` from the verifier. Budgets with the same cut (the thinking
ended before them) share one prefix: one *summary group* of ``|J| * A`` summaries, ``A`` per budget
(the authors sample ``num * A`` summaries for a prefix that ``num`` budgets share).

- per-budget score ``r_j`` = mean of budget j's A (length-shaped) rewards;
- thinking: BRPO (or V1 / V2 / none) segment advantages on ``r [B, G, m]`` under p_B (paper Eqs.
  6-9, :func:`arctl.algo.advantages.thinking_advantages`), segment k on thinking tokens
  ``b_{k-1} < t <= b_k``;
- summaries, decoupled: ``w_j * (r_{j,a} - mean of its summary group)`` (GRPO inside each prefix's
  group, Dr. GRPO: no std); with ``A = 1``, the mean over the question's G thinking samples at that
  budget (the authors' fallback). ``w_j = 1`` (``summary.weighting=authors``) or ``P'_j``
  (``paper``, Eq. 10 literally);
- summaries, coupled: only the last budget's summaries are trained, with the outcome GRPO advantage
  ``r_{m,a} - mean over the question's G thinking samples of r_m``, no prior factor;
- length penalties shape each summary's reward (thinking length = its cut) before all of the above;
- loss: PPO clip (dual clip only with ``optim.dual_clip``), summed over trained tokens and divided by
  ``trees x loss_norm_len``, one constant per experiment (Dr. GRPO); with ``optim.kl_coef``, plus the
  KL to the reference model, summed and divided the same way (:func:`kl_loss`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from arctl.algo.advantages import (
    group_inverse,
    segments_reached,
    summary_advantages,
    thinking_advantages,
    token_advantages,
)
from arctl.algo.objective import anytime_objective
from arctl.algo.priors import budget_prior
from arctl.algo.rewards import length_penalty
from arctl.algo.settings import KL_TYPES, SUMMARY_WEIGHTINGS, Loss, Objective, loss_normaliser

F64 = torch.float64


# ------------------------------------------------------------------------------ trees
@dataclass(frozen=True)
class Tree:
    """One thinking sample as the objective sees it: ``think_len`` thinking tokens and the rewards
    ``rewards[j][a]`` of the A summaries sampled after its cut at budget j ([m][A]): the verifier's,
    or a compared method's (``arctl.algo.methods.control.shape_rewards``), which the advantages see;
    then ``verifier`` holds the verifier's 0/1 rewards [m][A], which the scores report."""

    think_len: int
    rewards: tuple[tuple[float, ...], ...]
    verifier: tuple[tuple[float, ...], ...] | None = None

    def cuts(self, budgets: Sequence[int]) -> list[int]:
        """``cut_j = min(b_j, think_len)``: thinking tokens each budget's summaries saw."""
        return [min(int(b), int(self.think_len)) for b in budgets]


def summary_groups(cuts: Sequence[int]) -> list[list[int]]:
    """Budgets that share one prefix (equal cuts), in increasing cut: ``[[j, ...], ...]``."""
    groups: dict[int, list[int]] = {}
    for j, c in enumerate(cuts):
        groups.setdefault(int(c), []).append(j)
    return [groups[c] for c in sorted(groups)]


def summary_trained(s: Objective) -> list[bool]:
    """Which budgets' summaries enter the loss ([m]): all when decoupled, the last one when coupled."""
    m = len(s.budgets)
    return [True] * m if s.summary.decoupled else [j == m - 1 for j in range(m)]


@dataclass
class TreeAdvantages:
    """:func:`tree_advantages` of one tree (float64)."""

    thinking: torch.Tensor  # [think_len] per-token thinking advantage
    summaries: torch.Tensor  # [m, A] advantage of summary a of budget j (0 where not trained)
    trained: torch.Tensor  # [m] bool: budget j's summaries are in the loss
    scores: torch.Tensor  # [m] per-budget score r_j after length shaping
    raw_scores: torch.Tensor  # [m] per-budget mean of Tree.rewards (the compared method's, if any) before length shaping
    segments: torch.Tensor  # [m] segment advantages A_k
    reached: torch.Tensor  # [m] bool: the thinking has tokens in segment k


def _check(trees: Sequence[Tree], questions: Sequence[Hashable], s: Objective) -> tuple[int, int]:
    if len(trees) != len(questions):
        raise ValueError(f"{len(trees)} trees but {len(questions)} question labels")
    m, b_m = len(s.budgets), max(s.budgets)
    a = int(s.summary.group_size)
    for i, tree in enumerate(trees):
        if len(tree.rewards) != m:
            raise ValueError(f"tree {i} has rewards for {len(tree.rewards)} budgets, the settings have {m} {list(s.budgets)}")
        if any(len(r) != a for r in tree.rewards):
            sizes = sorted({len(r) for r in tree.rewards})
            raise ValueError(f"tree {i} has {sizes} summaries per budget, summary.group_size is {a}")
        if not 0 <= int(tree.think_len) <= b_m:
            raise ValueError(f"tree {i} has {tree.think_len} thinking tokens, outside 0..{b_m} (the largest budget)")
    return m, a


def shaped_rewards(trees: Sequence[Tree], questions: Sequence[Hashable], s: Objective) -> torch.Tensor:
    """Rewards [N, m, A] after ``reward.length_penalty`` (:func:`arctl.algo.rewards.length_penalty`):
    a summary after cut ``cut_j`` has thinking length ``cut_j``; v2's statistics are taken per
    (question, budget) over that budget's correct summaries."""
    m, a = _check(trees, questions, s)
    raw = torch.tensor([t.rewards for t in trees], dtype=F64).reshape(len(trees), m, a)
    mode = s.reward.length_penalty
    if mode == "none" or not trees:
        return raw
    cuts = torch.tensor([t.cuts(s.budgets) for t in trees], dtype=F64)  # [N, m]
    q = group_inverse(list(questions), len(trees))  # [N]
    index = (q[:, None, None] * m + torch.arange(m)[None, :, None]).expand(-1, -1, a)
    shaped = length_penalty((raw.reshape(-1) > 0).to(F64), cuts[:, :, None].expand(-1, -1, a).reshape(-1), max(s.budgets), mode,
                            float(s.reward.alpha), index=index.reshape(-1))
    return shaped.to(F64).reshape(raw.shape)


def _by_question(questions: Sequence[Hashable]) -> list[torch.Tensor]:
    """Tree indices of each question, in order of first appearance."""
    rows: dict[Hashable, list[int]] = {}
    for i, q in enumerate(questions):
        rows.setdefault(q, []).append(i)
    return [torch.tensor(v) for v in rows.values()]


def tree_advantages(trees: Sequence[Tree], questions: Sequence[Hashable], s: Objective) -> list[TreeAdvantages]:
    """Token and summary advantages of a batch of trees; ``questions`` [N] labels each tree's
    question (its thinking group). Questions may have different numbers of trees (failed samples)."""
    if s.summary.weighting not in SUMMARY_WEIGHTINGS:
        raise ValueError(f"unknown summary.weighting {s.summary.weighting!r}; choose one of {', '.join(SUMMARY_WEIGHTINGS)}")
    m, a = _check(trees, questions, s)
    n = len(trees)
    raw = torch.tensor([t.rewards for t in trees], dtype=F64).reshape(n, m, a)
    shaped = shaped_rewards(trees, questions, s)
    scores = shaped.mean(-1)  # [N, m]
    groups = _by_question(questions)

    # thinking: segment advantages per question [G, m], spread on tokens
    probs = budget_prior(s.thinking.prior, s.budgets, s.thinking.probs)
    segments = torch.zeros(n, m, dtype=F64)
    for rows in groups:
        segments[rows] = thinking_advantages(scores[rows][None], probs, float(s.thinking.lam), s.thinking.baseline)[0]
    lens = torch.tensor([int(t.think_len) for t in trees], dtype=torch.long)
    tokens = token_advantages(segments, lens, s.budgets) if n else torch.zeros(0, 0, dtype=F64)

    # summaries
    trained = torch.tensor(summary_trained(s))
    summ = torch.zeros(n, m, a, dtype=F64)
    if s.summary.decoupled:
        if a == 1:  # the authors' fallback: the budget's summaries across the question's thinking samples
            for j in range(m):
                summ[:, j] = summary_advantages(shaped[:, j], group_ids=list(questions))
        else:  # GRPO inside each prefix's summary group (budgets whose cut is one prefix share a group)
            labels = [(i, g) for i, tree in enumerate(trees)
                      for g, js in enumerate(summary_groups(tree.cuts(s.budgets))) for _ in js]
            order = [(i, j) for i, tree in enumerate(trees) for js in summary_groups(tree.cuts(s.budgets)) for j in js]
            if order:
                rows, cols = torch.tensor([i for i, _ in order]), torch.tensor([j for _, j in order])
                summ[rows, cols] = summary_advantages(shaped[rows, cols], group_ids=labels)
        if s.summary.weighting == "paper":
            summ = summ * budget_prior(s.summary.prior, s.budgets, s.summary.probs)[None, :, None]
    else:  # outcome GRPO on the final budget: r_{m,a} minus the question's mean score at b_m
        for rows in groups:
            summ[rows, m - 1] = shaped[rows, m - 1] - scores[rows, m - 1].mean()
    hit = segments_reached(lens, s.budgets)
    return [
        TreeAdvantages(
            thinking=tokens[i, : int(lens[i])].clone(), summaries=summ[i], trained=trained, scores=scores[i],
            raw_scores=raw[i].mean(-1), segments=segments[i], reached=hit[i],
        )
        for i in range(n)
    ]


# ------------------------------------------------------------------------------ the loss
def ppo_token_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, s: Loss) -> torch.Tensor:
    """Per-token PPO-clip loss ``max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))``, ``r =
    exp(logp - old_logp)`` (the authors' ``compute_policy_loss``, clip-higher as configured); with
    ``optim.dual_clip = c``, tokens with ``A < 0`` are also capped at ``-A c`` (dual-clip PPO).
    All inputs share one shape; returns that shape (in ``logp``'s dtype)."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages.to(logp.dtype)
    lo, hi = float(s.clip_ratio), float(s.clip_ratio_high)
    loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - lo, 1 + hi))
    if s.dual_clip is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * float(s.dual_clip)), loss)
    return loss


def policy_loss_sum(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                    s: Loss) -> torch.Tensor:
    """``sum over trained tokens`` of :func:`ppo_token_loss` (a scalar); ``mask`` selects them."""
    return (ppo_token_loss(logp, old_logp, advantages, s) * mask.to(logp.dtype)).sum()


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                n_trees: int, s: Objective) -> torch.Tensor:
    """The loss of a mini-batch of ``n_trees`` trees: :func:`policy_loss_sum` / :func:`loss_normaliser`.
    Micro-batches of one mini-batch pass the mini-batch's ``n_trees``; their losses add up. With
    ``optim.kl_coef > 0`` the trainer adds :func:`kl_loss` to it."""
    return policy_loss_sum(logp, old_logp, advantages, mask, s.loss) / loss_normaliser(n_trees, s)


def kl_token_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from the sampled token's log-prob under the
    policy (``logp``) and under the reference model (``ref_logp``), both of one shape; returns that
    shape. Schulman's estimators, named as verl's ``kl_loss_type`` names them (``optim.kl_type``):
    ``kl`` (k1) ``logp - ref``; ``abs`` ``|logp - ref|``; ``mse`` (k2) ``(logp - ref)^2 / 2``;
    ``low_var_kl`` (k3, L1's released scripts) ``exp(d) - d - 1`` with ``d = ref - logp`` clamped to
    [-20, 20] and the result to [-10, 10] (verl's clamps, for stability)."""
    if kind == "kl":
        return logp - ref_logp
    if kind == "abs":
        return (logp - ref_logp).abs()
    if kind == "mse":
        return 0.5 * (logp - ref_logp).square()
    if kind == "low_var_kl":
        d = (ref_logp - logp).clamp(-20, 20)
        return (torch.exp(d) - d - 1).clamp(-10, 10)
    raise ValueError(f"optim.kl_type={kind!r} is not one of {', '.join(KL_TYPES)}")


def kl_loss(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, n_trees: int, s: Objective) -> torch.Tensor:
    """The KL term of a mini-batch of ``n_trees`` trees: ``optim.kl_coef x`` the sum over trained
    tokens (``mask``) of :func:`kl_token_penalty` / :func:`loss_normaliser`, the constant the policy
    loss is divided by. L1's released scripts take a token mean of both the policy loss and the KL
    loss; aggregating both the same way keeps their ratio, so their coefficient (0.001) means here
    what it means there (``docs/algorithm.md``). A scalar in ``logp``'s dtype; 0 without a KL term."""
    if not s.loss.kl_coef:
        return logp.new_zeros(())
    total = (kl_token_penalty(logp, ref_logp, s.loss.kl_type) * mask.to(logp.dtype)).sum()
    return float(s.loss.kl_coef) * total / loss_normaliser(n_trees, s)


def kl_mean(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, kind: str) -> float:
    """Mean of :func:`kl_token_penalty` over the tokens of ``mask`` (``train/kl``: the rollout
    policy's log-probs against the reference's, over the step's trained tokens); 0 without tokens."""
    w = mask.to(torch.float64)
    return float((kl_token_penalty(logp.double(), ref_logp.double(), kind) * w).sum() / w.sum().clamp_min(1))


def clip_stats(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
               s: Loss) -> dict[str, float]:
    """Diagnostics of one micro-batch: ``clipfrac`` (tokens the clip holds back), ``clipfrac_lower``
    (tokens the dual clip caps), ``approx_kl`` (mean ``old_logp - logp``), over masked tokens."""
    w = mask.to(torch.float64)
    count = float(w.sum().clamp_min(1))
    ratio = torch.exp(logp - old_logp).detach().double()
    adv = advantages.double()
    lo, hi = float(s.clip_ratio), float(s.clip_ratio_high)
    clipped = torch.gt(-adv * ratio.clamp(1 - lo, 1 + hi), -adv * ratio)
    lower = torch.zeros_like(clipped)
    if s.dual_clip is not None:
        lower = (adv < 0) & (torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - lo, 1 + hi)) > -adv * float(s.dual_clip))
    return {
        "clipfrac": float((clipped * w).sum()) / count,
        "clipfrac_lower": float((lower * w).sum()) / count,
        "approx_kl": float(((old_logp - logp).detach().double() * w).sum()) / count,
    }


# ------------------------------------------------------------------------------ batch statistics
@dataclass(frozen=True)
class BatchStats:
    """What a training step logs about its trees (``arctl.track.metrics_schema.train_metrics``)."""

    budgets: tuple[int, ...]
    score: tuple[float, ...]  # [m] mean verifier reward of each budget's summaries
    anytime_score: float  # J_anytime under p_B of those scores (Eq. 3)
    final_score: float  # score at the largest budget
    # under a compared method that shapes rewards: the same three of the method's rewards (what the
    # advantages see); None otherwise
    method_score: tuple[float, ...] | None
    method_anytime_score: float | None
    method_final_score: float | None
    reward_mean: float  # mean reward of every summary after the length shaping
    think_len_mean: float
    adv_var: dict[str, float]  # variance of the thinking segment advantages per baseline, reached segments


def batch_stats(trees: Sequence[Tree], questions: Sequence[Hashable], advs: Sequence[TreeAdvantages],
                s: Objective, baselines: Sequence[str]) -> BatchStats:
    """:class:`BatchStats` of a batch (``advs`` from :func:`tree_advantages` on the same trees);
    ``adv_var`` for each of ``baselines`` (names of :data:`arctl.algo.settings.BASELINES`)."""
    if not trees:
        raise ValueError("batch_stats needs at least one tree")
    raw = torch.stack([a.raw_scores for a in advs])  # [N, m] the rewards the advantages saw
    shaped_by_method = any(t.verifier is not None for t in trees)
    verifier = torch.stack([torch.tensor(t.verifier if t.verifier is not None else t.rewards, dtype=F64).mean(-1)
                            for t in trees]) if shaped_by_method else raw  # [N, m] (raw_scores' rule)
    scores = torch.stack([a.scores for a in advs])
    hit = torch.stack([a.reached for a in advs])
    probs = budget_prior(s.thinking.prior, s.budgets, s.thinking.probs)
    shaped = shaped_rewards(trees, questions, s)
    var = {}
    for kind in baselines:
        seg = torch.zeros_like(scores)
        for rows in _by_question(questions):
            seg[rows] = thinking_advantages(scores[rows][None], probs, float(s.thinking.lam), kind)[0]
        var[kind] = float(seg[hit].var(unbiased=False)) if bool(hit.any()) else float("nan")
    return BatchStats(
        budgets=s.budgets,
        score=tuple(float(x) for x in verifier.mean(0)),
        anytime_score=float(anytime_objective(verifier, probs)),
        final_score=float(verifier[:, -1].mean()),
        method_score=tuple(float(x) for x in raw.mean(0)) if shaped_by_method else None,
        method_anytime_score=float(anytime_objective(raw, probs)) if shaped_by_method else None,
        method_final_score=float(raw[:, -1].mean()) if shaped_by_method else None,
        reward_mean=float(shaped.mean()),
        think_len_mean=float(torch.tensor([float(t.think_len) for t in trees], dtype=F64).mean()),
        adv_var=var,
    )
