"""Evaluation metrics and the variance diagnostics of the paper's Fig. 2 (``fig:cov_variance``).

Score tables are ``[N, m]`` (N samples, m budgets, e.g. acc of sample n when cut at budget j) or
``[B, G, m]`` for the diagnostics, which need the thinking group structure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from arctl.algo.advantages import budget_returns, segments_reached, thinking_baseline
from arctl.algo.priors import budget_prior
from arctl.algo.settings import CORR_BASELINES, NVAR_BASELINES


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


ROUNDING = 1e-12
"""A column whose values spread less than this (relative to their size, at least 1) is constant: returns and
baselines are sums of a few rewards times prior masses, so such a spread is the rounding of two sums of
the same numbers in another order (two groups' means of 0.36 apart by an ulp), not a difference."""


def _constant(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[m] bool: column k of ``x`` [N, m] holds one value (to :data:`ROUNDING`) on the rows where ``w`` is 1,
    or none. Read from the values, not the centred sum: a constant column's mean can be off its value by an
    ulp (three 0.1s sum to 0.30000000000000004), which would leave a variance of ~1e-33 and a correlation of
    noise."""
    on = w > 0
    hi = torch.where(on, x, -torch.inf).amax(0)
    lo = torch.where(on, x, torch.inf).amin(0)
    size = torch.maximum(hi.abs(), lo.abs()).nan_to_num(0.0, posinf=0.0).clamp_min(1.0)
    return ~(hi - lo > ROUNDING * size)


def _pearson(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Column-wise Pearson correlation of [N, m] tensors over the rows where ``w`` [N, m] is 1:
    [m] (nan where a column has fewer than two rows or is constant)."""
    count = w.sum(0)
    mean = lambda t: (t * w).sum(0) / count.clamp_min(1)  # noqa: E731
    xc, yc = (x - mean(x)) * w, (y - mean(y)) * w
    denom = (xc.pow(2).sum(0) * yc.pow(2).sum(0)).sqrt()
    defined = (denom > 0) & (count > 1) & ~_constant(x, w) & ~_constant(y, w)
    return torch.where(defined, (xc * yc).sum(0) / denom.clamp_min(1e-300), torch.nan)


def _masked_var(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Column-wise population variance of [N, m] over the rows where ``w`` is 1: [m] (nan if none;
    exactly 0 for a constant column)."""
    count = w.sum(0)
    mean = (x * w).sum(0) / count.clamp_min(1)
    var = ((x - mean) ** 2 * w).sum(0) / count.clamp_min(1)
    return torch.where(count > 0, torch.where(_constant(x, w), 0.0, var), torch.nan)


def _reach_weights(scores: torch.Tensor, reached: torch.Tensor | None) -> torch.Tensor:
    if reached is None:
        return torch.ones(scores.shape, dtype=torch.float64)
    if reached.shape != scores.shape:
        raise ValueError(f"reached must have the shape of scores {tuple(scores.shape)}, got {tuple(reached.shape)}")
    return reached.to(torch.float64)


def baseline_correlations(
    scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float, reached: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Pearson correlation, per budget, of V1 and V2 (:data:`arctl.algo.settings.CORR_BASELINES`)
    with the return R over the B*G samples (Figure 2 left): ``{"v1": [m], "v2": [m]}`` (nan where
    undefined, e.g. V1 at the first budget).

    ``reached`` [B, G, m] (bool) keeps, at budget k, only the samples whose thinking has tokens in
    segment k (:func:`arctl.algo.advantages.segments_reached`), as the authors' ``cot_mask`` does; V2 still
    averages over every sample of the group (its definition, Eq. 8)."""
    s = scores.to(torch.float64)
    r = budget_returns(s, probs)
    m = s.shape[-1]
    w = _reach_weights(s, reached).reshape(-1, m)
    flat = lambda t: t.reshape(-1, m)  # noqa: E731
    return {kind: _pearson(flat(thinking_baseline(s, probs, lam, kind)), flat(r), w) for kind in CORR_BASELINES}


def normalized_variances(
    scores: torch.Tensor, probs: torch.Tensor | Sequence[float], lam: float, reached: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """``Var(R - V) / Var(R)`` per budget over the B*G samples (Figure 2 right), for ``V`` = BRPO,
    GRPO (V2) and V1 (:data:`arctl.algo.settings.NVAR_BASELINES`): ``{"brpo": [m], "grpo": [m],
    "v1": [m]}`` (nan if Var(R) = 0); ``reached`` as in :func:`baseline_correlations`."""
    s = scores.to(torch.float64)
    m = s.shape[-1]
    r = budget_returns(s, probs)
    w = _reach_weights(s, reached).reshape(-1, m)
    var_r = _masked_var(r.reshape(-1, m), w)

    def nvar(v: torch.Tensor) -> torch.Tensor:
        var = _masked_var((r - v).reshape(-1, m), w)
        return torch.where(var_r > 0, var / var_r.clamp_min(1e-300), torch.nan)

    return {key: nvar(thinking_baseline(s, probs, lam, name)) for key, name in NVAR_BASELINES.items()}


@dataclass(frozen=True)
class EvalDiagnostics:
    """The variance diagnostics of one evaluation (paper Fig. 2) at ``budgets``."""

    budgets: tuple[int, ...]
    corr: dict[str, list[float]]  # {"v1": [m], "v2": [m]}
    nvar: dict[str, list[float]]  # {"brpo": [m], "grpo": [m], "v1": [m]}


def eval_diagnostics(
    scores: torch.Tensor, think_len: torch.Tensor, budgets: Sequence[int], lam: float
) -> EvalDiagnostics:
    """Diagnostics of an evaluation with a group of thinking samples per question: ``scores``
    [B, G, m] at ``budgets`` [m], thinking lengths [B, G]. The prior is uniform over ``budgets``
    (the paper's Fig. 2 setting) and every budget k counts only samples that reached segment k."""
    probs = budget_prior("uniform", list(budgets))
    hit = segments_reached(torch.as_tensor(think_len), list(budgets))
    corr = baseline_correlations(scores, probs, lam, hit)
    nvar = normalized_variances(scores, probs, lam, hit)
    return EvalDiagnostics(
        budgets=tuple(int(b) for b in budgets),
        corr={k: [float(x) for x in v] for k, v in corr.items()},
        nvar={k: [float(x) for x in v] for k, v in nvar.items()},
    )
