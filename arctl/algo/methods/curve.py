"""Summary metrics of a score curve (accuracy vs thinking budget), for comparing budget-control
methods on one footing.

The curve is known at the evaluated budgets ``b_1 < ... < b_m`` and is linear between them. Below
the first budget it is taken to be *flat*: it starts at ``(0, acc(b_1))``. (With ``b_1`` the smallest
budget evaluated, nothing is known below it; the flat start makes a constant curve score its
constant and is what ``np.interp`` does left of the grid.)

:func:`arctl.algo.metrics.score_curve_area` is the area over ``[b_1, b_m]`` divided by ``b_m - b_1``;
:func:`curve_auc` is the area over ``[0, b_m]`` divided by ``b_m`` and is built on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from arctl.algo.metrics import score_curve_area
from arctl.algo.priors import _check_budgets


def _curve(accuracy: torch.Tensor | Sequence[float], budgets: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    b = torch.tensor(_check_budgets(budgets), dtype=torch.float64)
    acc = torch.as_tensor(accuracy, dtype=torch.float64)
    if acc.shape != b.shape:
        raise ValueError(f"accuracy and budgets must both be [m], got {tuple(acc.shape)} and {tuple(b.shape)}")
    if not bool(torch.isfinite(acc).all()):
        raise ValueError("accuracy must be finite")
    return acc, b


def curve_auc(accuracy: torch.Tensor | Sequence[float], budgets: Sequence[int]) -> torch.Tensor:
    """Area under the accuracy-vs-budget curve over ``[0, b_m]``, divided by ``b_m``: a float64 scalar.

    ``accuracy`` [m] at the strictly increasing ``budgets`` [m]. Trapezoids between grid budgets;
    flat at ``acc(b_1)`` on ``[0, b_1]`` (the curve starts at ``(0, acc(b_1))``), so
    ``AUC = (b_1 acc_1 + sum_j (b_{j+1} - b_j)(acc_j + acc_{j+1}) / 2) / b_m``. A constant curve
    gives its constant; one budget gives its accuracy.
    """
    acc, b = _curve(accuracy, budgets)
    if acc.numel() == 1:
        return acc[0]
    inner = score_curve_area(acc, [int(x) for x in b.tolist()]) * (b[-1] - b[0])
    return (b[0] * acc[0] + inner) / b[-1]


def accuracy_at_fraction(
    accuracy: torch.Tensor | Sequence[float], budgets: Sequence[int], fraction: float
) -> torch.Tensor:
    """Accuracy at budget ``fraction * b_m`` (0 < fraction <= 1): a float64 scalar.

    Linear interpolation between the grid budgets around it; ``acc(b_1)`` below ``b_1`` (the same
    flat start as :func:`curve_auc`).
    """
    acc, b = _curve(accuracy, budgets)
    f = float(fraction)
    if not 0.0 < f <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    x = f * float(b[-1])
    return torch.tensor(float(np.interp(x, b.numpy(), acc.numpy())), dtype=torch.float64)
