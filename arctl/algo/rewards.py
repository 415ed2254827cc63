"""Length-penalised outcome rewards for the dense-reward ablation (paper Sec. 4, length penalties).

- ``v1`` (L1-style): correct -> ``1 - alpha * |z| / b_m``; wrong -> 0.
- ``v2`` (Arora & Zanette): correct -> ``1 - alpha * sigmoid((|z| - mean_c) / std_c)`` where mean_c,
  std_c are over the *correct* responses of the same question; wrong -> 0.
- ``none``: correct -> 1, wrong -> 0.
"""

from __future__ import annotations

from typing import Any

import torch

from arctl.algo.advantages import group_inverse
from arctl.algo.settings import LENGTH_PENALTIES

STD_EPS = 1e-6


def length_penalty(
    correct: torch.Tensor,
    think_len: torch.Tensor,
    max_budget: int,
    mode: str,
    alpha: float,
    index: Any = None,
) -> torch.Tensor:
    """Reward [N] of N responses with thinking lengths ``think_len`` [N].

    ``correct`` [N] is boolean (or 0/1). For ``v2`` the statistics are taken within each group of
    ``index`` [N] (question label, e.g. verl ``uid``; None = one group) over correct responses only,
    with the population std plus 1e-6 (a lone correct response gets ``1 - alpha/2``).
    """
    if mode not in LENGTH_PENALTIES:
        raise ValueError(f"unknown length penalty {mode!r}; choose one of {', '.join(LENGTH_PENALTIES)}")
    correct = torch.as_tensor(correct)
    lens = torch.as_tensor(think_len, device=correct.device).to(torch.float64)
    if correct.dim() != 1 or lens.shape != correct.shape:
        raise ValueError(f"correct and think_len must both be [N], got {tuple(correct.shape)} and {tuple(lens.shape)}")
    ok = correct.bool()
    dtype = correct.dtype if correct.is_floating_point() else torch.float32
    if mode == "none":
        return ok.to(dtype)
    if mode == "v1":
        if not max_budget > 0:
            raise ValueError(f"length penalty v1 needs max_budget > 0, got {max_budget}")
        return torch.where(ok, 1.0 - alpha * lens / float(max_budget), 0.0).to(dtype)
    n = lens.shape[0]
    inverse = torch.zeros(n, dtype=torch.long, device=lens.device) if index is None else group_inverse(index, n, lens.device)
    groups = int(inverse.max()) + 1 if n else 0
    w = ok.to(torch.float64)
    count = lens.new_zeros(groups).index_add_(0, inverse, w).clamp_min(1)
    mean = lens.new_zeros(groups).index_add_(0, inverse, w * lens) / count
    var = lens.new_zeros(groups).index_add_(0, inverse, w * (lens - mean[inverse]) ** 2) / count
    z = (lens - mean[inverse]) / (var.sqrt()[inverse] + STD_EPS)
    return torch.where(ok, 1.0 - alpha * torch.sigmoid(z), 0.0).to(dtype)
