"""Advantages of AnytimeReasoner: BRPO for thinking (paper Eqs. 6-9), GRPO for summaries (Eq. 10).

Shapes: ``B`` questions, ``G`` thinking samples per question, ``m`` budgets ``b_1 < ... < b_m``.
``scores[b, g, j]`` is r_phi(x_b, z^g_{<=b_j}): the mean reward of the summaries sampled after
thinking sample ``g`` was cut at budget ``b_j``. Segment ``k`` (0-based) of a thinking is its tokens
``t`` with ``b_{k-1} < t <= b_k``; all of them share the nearest budget ``j_t = k``.
No std normalisation anywhere (Dr. GRPO), as in the authors' code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from arctl.algo.settings import BASELINES


def _check_scores_probs(scores: torch.Tensor, probs: torch.Tensor | Sequence[float]) -> torch.Tensor:
    if not torch.is_tensor(scores) or scores.dim() != 3:
        shape = tuple(scores.shape) if torch.is_tensor(scores) else type(scores).__name__
        raise ValueError(f"scores must be a [B, G, m] tensor, got {shape}")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be a floating tensor, got {scores.dtype}")
    p = torch.as_tensor(probs, dtype=scores.dtype, device=scores.device)
    if p.dim() != 1 or p.shape[0] != scores.shape[-1]:
        raise ValueError(f"probs must have shape [m] = [{scores.shape[-1]}] matching scores, got {tuple(p.shape)}")
    return p


def tail_mass(probs: torch.Tensor) -> torch.Tensor:
    """``sum_{j >= k} P_j`` for every k: shape [m]."""
    return probs.flip(-1).cumsum(-1).flip(-1)


def budget_returns(scores: torch.Tensor, probs: torch.Tensor | Sequence[float]) -> torch.Tensor:
    """Per-segment return ``R(x, z, k) = sum_{j >= k} P_j r_phi(x, z_{<=b_j})`` (Eq. 6): [B, G, m]."""
    p = _check_scores_probs(scores, probs)
    return (scores * p).flip(-1).cumsum(-1).flip(-1)


def baseline_v1(scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float) -> torch.Tensor:
    """Budget-relative baseline V1 (Eq. 7): [B, G, m].

    ``V1[b,g,k] = (sum_{j<k} lam^(k-j) scores[b,g,j] / sum_{j<k} lam^(k-j)) * sum_{j>=k} P_j``,
    and 0 for the first segment (no earlier budget).
    """
    p = _check_scores_probs(scores, probs)
    if not float(lam) > 0:
        raise ValueError(f"lam must be > 0 (discount of earlier budgets in V1), got {lam}")
    m = scores.shape[-1]
    k = torch.arange(m, device=scores.device)
    dist = (k[:, None] - k[None, :]).to(scores.dtype)  # dist[k, j] = k - j
    lam_t = torch.as_tensor(float(lam), dtype=scores.dtype)
    weights = torch.where(dist > 0, lam_t ** dist, 0.0)
    norm = weights.sum(-1)  # [m]; 0 for k = 0
    if bool((norm[1:] < torch.finfo(scores.dtype).tiny).any()):
        # a segment's weights underflowed below the dtype's normal range (float32 at lam < ~1e-38, float64 at lam <
        # ~1e-308; the division below clamps there): V1 was 0, not its limit, the nearest
        # earlier score. lam^(k-j-1) has the same ratios with the nearest at 1 (used only here: for any other lam
        # the sums are the ones runs were trained with, bit for bit)
        weights = torch.where(dist > 0, lam_t ** (dist - 1), 0.0)
        norm = weights.sum(-1)
    weighted = scores @ weights.T  # [B, G, m]
    mean_earlier = torch.where(norm > 0, weighted / norm.clamp_min(torch.finfo(scores.dtype).tiny), 0.0)
    return mean_earlier * tail_mass(p)


def baseline_v2(returns: torch.Tensor) -> torch.Tensor:
    """Group baseline V2 (Eq. 8): ``V2[b, k] = mean_g R[b, g, k]`` (sample itself included),
    broadcast back to [B, G, m]."""
    if returns.dim() != 3:
        raise ValueError(f"returns must be a [B, G, m] tensor, got {tuple(returns.shape)}")
    return returns.mean(dim=-2, keepdim=True).expand_as(returns)


def brpo_weights(m: int, dtype: torch.dtype = torch.float64, device: Any = None) -> torch.Tensor:
    """Mixing weight of V1 in the BRPO baseline (Eq. 9), ``k/m`` for 0-based segment k: [m]."""
    return torch.arange(m, dtype=dtype, device=device) / m


def thinking_baseline(
    scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float, baseline: str
) -> torch.Tensor:
    """Variance-reduction term V of the thinking gradient (Eq. 9 and its ablations): [B, G, m].

    ``brpo``: ``(k/m) V1 + ((m-k)/m) V2`` (k 0-based); ``v1``: V1; ``v2``: V2; ``none``: 0.
    """
    if baseline not in BASELINES:
        raise ValueError(f"unknown thinking baseline {baseline!r}; choose one of {', '.join(BASELINES)}")
    returns = budget_returns(scores, probs)
    if baseline == "none":
        return torch.zeros_like(returns)
    if baseline == "v2":
        return baseline_v2(returns)
    v1 = baseline_v1(scores, probs, lam)
    if baseline == "v1":
        return v1
    w = brpo_weights(scores.shape[-1], dtype=scores.dtype, device=scores.device)
    return w * v1 + (1 - w) * baseline_v2(returns)


def thinking_advantages(
    scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float, baseline: str
) -> torch.Tensor:
    """BRPO advantage ``A[b,g,k] = R[b,g,k] - V[b,g,k]`` of thinking segment k (Eqs. 6-9): [B, G, m]."""
    return budget_returns(scores, probs) - thinking_baseline(scores, probs, lam, baseline)


def token_advantages(
    segment_adv: torch.Tensor,
    think_len: torch.Tensor | Sequence[int],
    budgets: torch.Tensor | Sequence[int],
    max_len: int | None = None,
) -> torch.Tensor:
    """Spread segment advantages [N, m] onto thinking tokens [N, max_len] (the j_t of Eq. 6).

    Token t (1-based) gets segment ``j_t = min{j : b_j >= t}``; tokens past ``think_len`` get 0.
    ``max_len`` defaults to ``max(think_len)``.
    """
    if segment_adv.dim() != 2:
        raise ValueError(f"segment_adv must be [N, m], got {tuple(segment_adv.shape)}")
    device = segment_adv.device
    lens = torch.as_tensor(think_len, device=device).long()
    b = torch.as_tensor(budgets, device=device).long()
    n, m = segment_adv.shape
    if lens.shape != (n,):
        raise ValueError(f"think_len must have shape [N] = [{n}], got {tuple(lens.shape)}")
    if b.shape != (m,):
        raise ValueError(f"budgets must have shape [m] = [{m}] matching segment_adv, got {tuple(b.shape)}")
    if n and int(lens.max()) > int(b[-1]):
        raise ValueError(f"a thinking has {int(lens.max())} tokens, more than the largest budget {int(b[-1])}")
    if n and int(lens.min()) < 0:
        raise ValueError("think_len must be >= 0")
    length = int(lens.max()) if (max_len is None and n) else int(max_len or 0)
    t = torch.arange(1, length + 1, device=device)
    seg = torch.searchsorted(b, t).clamp_max(m - 1)  # first j with b_j >= t
    out = segment_adv[:, seg] if length else segment_adv.new_zeros(n, 0)
    return out * (t[None, :] <= lens[:, None])


def segments_reached(think_len: torch.Tensor | Sequence[int], budgets: torch.Tensor | Sequence[int]) -> torch.Tensor:
    """Whether a thinking has tokens in segment k, i.e. ``think_len > b_{k-1}`` (``b_0 = 0``):
    bool [..., m] for ``think_len`` [...]. A segment the thinking never reached has no tokens to
    train and no return of its own (its budgets share the full thinking's summaries)."""
    lens = torch.as_tensor(think_len)
    b = torch.as_tensor(budgets, device=lens.device).long()
    lower = torch.cat([b.new_zeros(1), b[:-1]])
    return lens[..., None] > lower


def group_inverse(index: Any, n: int, device: Any = None) -> torch.Tensor:
    """Map group labels (tensor, numpy array or sequence of hashables, e.g. verl ``uid`` strings)
    to contiguous group ids [n]."""
    if torch.is_tensor(index):
        if index.shape != (n,):
            raise ValueError(f"group index must have shape [{n}], got {tuple(index.shape)}")
        return torch.unique(index, return_inverse=True)[1].to(device)
    labels = list(index.tolist() if hasattr(index, "tolist") else index)
    if len(labels) != n:
        raise ValueError(f"group index has {len(labels)} entries, expected {n}")
    ids: dict[Any, int] = {}
    return torch.tensor([ids.setdefault(label, len(ids)) for label in labels], dtype=torch.long, device=device)


def _minus_group_mean(values: torch.Tensor, inverse: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``values[i] - mean of values over i's group``; values/weight [N, A], inverse [N]."""
    groups = int(inverse.max()) + 1 if inverse.numel() else 0
    sums = values.new_zeros(groups).index_add_(0, inverse, (values * weight).sum(-1))
    counts = values.new_zeros(groups).index_add_(0, inverse, weight.sum(-1))
    mean = sums / counts.clamp_min(1)
    return (values - mean[inverse][:, None]) * weight


def summary_advantages(
    rewards: torch.Tensor, group_ids: Any = None, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Decoupled summary advantages (Eq. 10 with GRPO, Dr. GRPO: minus group mean, no std): [N, A].

    Row n holds the A summaries sampled from one prefix. ``group_ids`` [N] merges rows that share a
    prefix (a thinking that finished before several budgets). ``mask`` [N, A] drops invalid
    summaries from the mean (their advantage is 0).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [N, A] (A summaries per prefix), got {tuple(rewards.shape)}")
    weight = torch.ones_like(rewards) if mask is None else mask.to(rewards.dtype)
    if weight.shape != rewards.shape:
        raise ValueError(f"mask must have the shape of rewards {tuple(rewards.shape)}, got {tuple(weight.shape)}")
    n = rewards.shape[0]
    inverse = (
        torch.arange(n, device=rewards.device)
        if group_ids is None
        else group_inverse(group_ids, n, rewards.device)
    )
    return _minus_group_mean(rewards, inverse, weight)


def grpo_advantages(rewards: torch.Tensor, index: Any) -> torch.Tensor:
    """Outcome GRPO advantage (Dr. GRPO: reward minus its group's mean, no std): [N].

    ``index`` [N] labels the group (question) of each response.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be [N], got {tuple(rewards.shape)}")
    inverse = group_inverse(index, rewards.shape[0], rewards.device)
    return _minus_group_mean(rewards[:, None], inverse, torch.ones_like(rewards)[:, None])[:, 0]
