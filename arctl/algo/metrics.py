"""Evaluation metrics and the variance diagnostics of the paper's Figure 4 (``fig:cov_variance``).

Score tables are ``[N, m]`` (N samples, m budgets, e.g. acc of sample n when cut at budget j) or
``[B, G, m]`` for the diagnostics, which need the thinking group structure.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from arctl.algo.advantages import baseline_v1, baseline_v2, budget_returns, thinking_baseline


def _flat(scores: torch.Tensor) -> torch.Tensor:
    if scores.dim() < 1 or scores.shape[-1] == 0:
        raise ValueError(f"scores must be [..., m] with m >= 1, got {tuple(scores.shape)}")
    return scores.reshape(-1, scores.shape[-1]).to(torch.float64)


def accuracy_per_budget(scores: torch.Tensor) -> torch.Tensor:
    """Mean score at every budget: [m]."""
    return _flat(scores).mean(0)


def anytime_accuracy(scores: torch.Tensor) -> torch.Tensor:
    """Anytime accuracy: mean of the per-budget accuracies over the evaluated grid (uniform prior)."""
    return accuracy_per_budget(scores).mean()


def final_accuracy(scores: torch.Tensor) -> torch.Tensor:
    """Accuracy at the largest evaluated budget."""
    return accuracy_per_budget(scores)[-1]


def score_curve_area(accuracy: torch.Tensor | Sequence[float], budgets: Sequence[int]) -> torch.Tensor:
    """Normalised area under the accuracy-vs-budget curve (trapezoids over ``budgets``, divided by
    ``b_m - b_1``); with a single budget, that budget's accuracy."""
    acc = torch.as_tensor(accuracy, dtype=torch.float64)
    b = torch.as_tensor(list(budgets), dtype=torch.float64)
    if acc.dim() != 1 or acc.shape != b.shape or acc.numel() == 0:
        raise ValueError(f"accuracy and budgets must both be [m], got {tuple(acc.shape)} and {tuple(b.shape)}")
    if acc.numel() == 1:
        return acc[0]
    return torch.trapezoid(acc, b) / (b[-1] - b[0])


def _pearson(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Column-wise Pearson correlation of [N, m] tensors: [m] (nan where a column is constant)."""
    xc, yc = x - x.mean(0), y - y.mean(0)
    denom = (xc.pow(2).sum(0) * yc.pow(2).sum(0)).sqrt()
    return torch.where(denom > 0, (xc * yc).sum(0) / denom.clamp_min(1e-300), torch.nan)


def baseline_correlations(
    scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float = 0.5
) -> dict[str, torch.Tensor]:
    """Pearson correlation, per budget, of V1 and V2 with the return R over all B*G samples
    (Figure 4 left): ``{"v1": [m], "v2": [m]}`` (nan where undefined, e.g. V1 at the first budget)."""
    s = scores.to(torch.float64)
    r = budget_returns(s, probs)
    m = s.shape[-1]
    flat = lambda t: t.reshape(-1, m)  # noqa: E731
    return {
        "v1": _pearson(flat(baseline_v1(s, probs, lam)), flat(r)),
        "v2": _pearson(flat(baseline_v2(r)), flat(r)),
    }


def normalized_variances(
    scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float = 0.5
) -> dict[str, torch.Tensor]:
    """``Var(R - V) / Var(R)`` per budget over all B*G samples (Figure 4 right), for
    ``V`` = BRPO, GRPO (V2) and V1: ``{"brpo": [m], "grpo": [m], "v1": [m]}`` (nan if Var(R) = 0)."""
    s = scores.to(torch.float64)
    m = s.shape[-1]
    r = budget_returns(s, probs)
    baselines = {"brpo": "brpo", "grpo": "v2", "v1": "v1"}
    var_r = r.reshape(-1, m).var(0, unbiased=False)

    def nvar(v: torch.Tensor) -> torch.Tensor:
        var = (r - v).reshape(-1, m).var(0, unbiased=False)
        return torch.where(var_r > 0, var / var_r.clamp_min(1e-300), torch.nan)

    return {key: nvar(thinking_baseline(s, probs, lam, name)) for key, name in baselines.items()}
