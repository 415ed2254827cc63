"""Budget priors p_B over the budget support {b_1 < ... < b_m} (paper Eq. 3).

`P_j = p_B(b = b_j)`: the probability that thinking is cut at budget ``b_j``. The thinking policy
and (decoupled) summary policy may use different priors (paper Sec. 3.3, ``P'``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from arctl.algo.settings import PRIORS


def _check_budgets(budgets: Sequence[int]) -> list[int]:
    values = list(budgets)
    if not values:
        raise ValueError("budgets is empty: give at least one thinking budget, e.g. [2000, 4000, 6000, 8000]")
    for b in values:
        if isinstance(b, bool) or not float(b).is_integer() or b <= 0:
            raise ValueError(f"budgets must be positive integers, got {values}")
    values = [int(b) for b in values]
    if any(b2 <= b1 for b1, b2 in zip(values, values[1:])):
        raise ValueError(f"budgets must be strictly increasing, got {values}")
    return values


def budget_prior(name: str, budgets: Sequence[int], probs: Sequence[float] | None = None) -> torch.Tensor:
    """Return the prior ``P`` over ``budgets`` as a float64 tensor of shape [m].

    - ``base``: all mass on the largest budget, ``[0, ..., 0, 1]`` (standard reasoning, J_anytime = J);
    - ``uniform``: ``1/m``;
    - ``linear``: ``P_j = b_j / sum_i b_i``;
    - ``custom``: ``probs`` (non-negative, length m, summing to 1 within 1e-6; renormalised exactly).
    """
    values = _check_budgets(budgets)
    m = len(values)
    if name != "custom" and probs is not None:
        raise ValueError(f"prior {name!r} takes no probs (got {list(probs)}); use prior 'custom' to give probs")
    if name == "base":
        p = torch.zeros(m, dtype=torch.float64)
        p[-1] = 1.0
        return p
    if name == "uniform":
        return torch.full((m,), 1.0 / m, dtype=torch.float64)
    if name == "linear":
        b = torch.tensor(values, dtype=torch.float64)
        return b / b.sum()
    if name == "custom":
        if probs is None:
            raise ValueError("prior 'custom' needs probs: a list of m probabilities, one per budget")
        p_list = [float(x) for x in probs]
        if len(p_list) != m:
            raise ValueError(f"prior 'custom': probs has {len(p_list)} entries but there are {m} budgets {values}")
        if any(not math.isfinite(x) or x < 0 for x in p_list):
            raise ValueError(f"prior 'custom': probs must be finite and >= 0, got {p_list}")
        total = sum(p_list)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"prior 'custom': probs must sum to 1, got sum {total:.6g} for {p_list}")
        p = torch.tensor(p_list, dtype=torch.float64)
        return p / p.sum()
    raise ValueError(f"unknown budget prior {name!r}; choose one of {', '.join(PRIORS)}")
