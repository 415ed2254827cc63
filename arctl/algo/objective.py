"""The anytime objective (paper Eq. 3). The standard objective it bounds (Eqs. 4-5, App. B), the mean score at
the largest budget, is :func:`arctl.algo.metrics.final_accuracy`."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def anytime_objective(scores: torch.Tensor, probs: torch.Tensor | Sequence[float]) -> torch.Tensor:
    """``J_anytime = sum_j P_j * mean(scores[..., j])`` (Eq. 3), a scalar.

    ``scores`` [..., m]: r_phi(x, z_{<=b_j}) for every sample (any leading shape, e.g. [B, G, m]).
    """
    p = torch.as_tensor(probs, dtype=scores.dtype, device=scores.device)
    if scores.dim() < 1 or p.shape != scores.shape[-1:]:
        raise ValueError(f"probs must have shape [m] matching scores[..., m] {tuple(scores.shape)}, got {tuple(p.shape)}")
    return (scores.reshape(-1, scores.shape[-1]).mean(0) * p).sum()

